"""Node-classification data: one graph, full batch.

Every DataModule here holds a single PyG ``Data`` object (``x``, ``edge_index``, ``y`` and
boolean ``train_mask``/``val_mask``/``test_mask``); each dataloader yields that one object
once per epoch and the task module picks the stage's mask. ``info`` (read by the model
builders) and ``checksum()`` load the data on first use.

* :class:`PlanetoidDataModule`: Cora, CiteSeer, PubMed, the tensors of
  ``torch_geometric.datasets.Planetoid`` (:func:`read_planetoid`, whose restricted unpickler
  lets no data file run code) with row-normalised features (as in the GCN and GAT papers).
  The raw files come from ``<data_dir>/planetoid/<Name>/raw`` (copied into the cache, keyed
  by their size and mtime), else from the cache, else from upstream (download into the cache).
  ``homophily`` rewires the edges to that edge homophily (:mod:`tasks.graphs.rewire`): the
  real-data homophily axis, nodes, features, labels, split and degrees unchanged.
* :class:`SBMDataModule`: a synthetic stochastic-block-model graph generated in code from
  ``data_seed``: homophilous edges and noisy class-correlated features, so that a model
  that uses the graph clearly beats one that does not.
"""

from __future__ import annotations

import hashlib
import os
import urllib.request
import warnings
from pathlib import Path
from typing import Any

import lightning as L
import numpy as np
import torch
from torch.utils.data import DataLoader

from tasks.common.data import (corrupt, default_cache_dir, materialize, origin, reading, require_classes, safe_unpickle,
                               subset_indices, write_atomic)
from tasks.graphs.rewire import edge_homophily, rewire_homophily

__all__ = ["PlanetoidDataModule", "SBMDataModule", "PLANETOID_NAMES", "PLANETOID_SPLITS", "make_sbm",
           "default_cache_dir", "graph_checksum", "build_planetoid", "read_planetoid", "build_sbm",
           "PLANETOID_DEFAULTS", "SBM_DEFAULTS"]

PLANETOID_NAMES = ("Cora", "CiteSeer", "PubMed")
PLANETOID_SPLITS = ("public", "full", "random")
_RAW_SUFFIXES = ("x", "tx", "allx", "y", "ty", "ally", "graph", "test.index")
_STAGES = ("train", "val", "test")


def graph_checksum(data: Any, extra: str = "") -> str:
    """``sha256:<hex>`` over the exact tensors a model sees (features, edges, labels, masks),
    each with its name, dtype and shape, plus ``extra``."""
    h = hashlib.sha256(extra.encode())
    for key in ("x", "edge_index", "y", "train_mask", "val_mask", "test_mask"):
        t = getattr(data, key).detach().cpu().contiguous()
        h.update(f"|{key}:{t.dtype}:{tuple(t.shape)}|".encode())
        h.update(t.numpy().tobytes())
    return "sha256:" + h.hexdigest()


def _first(batch: list) -> Any:
    return batch[0]


class _FullBatchDataModule(L.LightningDataModule):
    """Base: subclasses implement :meth:`_load` returning the ``Data`` object."""

    def __init__(self) -> None:
        super().__init__()
        self._data: Any = None
        self._checksum: str | None = None

    def _load(self) -> Any:  # pragma: no cover - abstract
        raise NotImplementedError

    def _label(self) -> str:
        name = getattr(self, "name", None)
        return f"{type(self).__name__.removesuffix('DataModule')} {name}" if isinstance(name, str) else type(self).__name__

    @property
    def data(self) -> Any:
        if self._data is None:
            data = self._load()
            for key in ("train_mask", "val_mask", "test_mask"):
                if getattr(data, key, None) is None or getattr(data, key).dtype != torch.bool:
                    raise ValueError(f"graph data lacks a boolean {key}")
            require_classes(data.y[data.train_mask], what=f"{self._label()}, training nodes")
            self._data = data
        return self._data

    @property
    def info(self) -> dict[str, Any]:
        d = self.data
        return {
            "num_features": int(d.num_features),
            "num_classes": int(d.y.max()) + 1,
            "num_nodes": int(d.num_nodes),
            "num_edges": int(d.edge_index.shape[1]),
            "num_train": int(d.train_mask.sum()),
            "num_val": int(d.val_mask.sum()),
            "num_test": int(d.test_mask.sum()),
        }

    def checksum(self) -> str:
        if self._checksum is None:
            self._checksum = graph_checksum(self.data, extra=type(self).__name__)
        return self._checksum

    def limit_train(self, fraction: float, seed: int = 0) -> int:
        """Keep a seeded random ``fraction`` of the training nodes (the runner's
        ``train_fraction``); the graph, features and val/test nodes are unchanged."""
        data = self.data
        nodes = data.train_mask.nonzero().flatten()
        keep = nodes[subset_indices(len(nodes), fraction, seed)]
        require_classes(data.y[keep], what=f"{self._label()}, training nodes kept by train_fraction={fraction} "
                                           f"(seed {seed}; raise train_fraction)")
        mask = torch.zeros_like(data.train_mask)
        mask[keep] = True
        data.train_mask = mask
        self._checksum = None
        return int(mask.sum())

    def prepare_data(self) -> None:
        _ = self.data

    def setup(self, stage: str | None = None) -> None:
        _ = self.data

    def _loader(self) -> DataLoader:
        # One full-batch step per epoch: the loader yields the single Data object.
        return DataLoader([self.data], batch_size=1, collate_fn=_first, shuffle=False)

    def train_dataloader(self) -> DataLoader:
        return self._loader()

    def val_dataloader(self) -> DataLoader:
        return self._loader()

    def test_dataloader(self) -> DataLoader:
        return self._loader()

    def predict_dataloader(self) -> DataLoader:
        return self._loader()


# --------------------------------------------------------------------------- Planetoid
PLANETOID_URL = "https://github.com/kimiyoung/planetoid/raw/master/data"  # PyG's Planetoid.url


def _download_planetoid(dest: Path, name: str) -> None:
    """Fetch ``name``'s raw files from upstream into ``dest`` (each written atomically, never
    unpickled here). Raises on failure."""
    for f in (f"ind.{name.lower()}.{s}" for s in _RAW_SUFFIXES):
        if not (dest / f).is_file():
            with urllib.request.urlopen(f"{PLANETOID_URL}/{f}", timeout=30) as resp:  # noqa: S310 - fixed https URL
                body = resp.read()
            write_atomic(dest / f, lambda tmp: tmp.write_bytes(body))


def _matrix(path: Path) -> torch.Tensor:
    """A pickled feature / one-hot label matrix (numpy or scipy sparse) as a float tensor."""
    out = safe_unpickle(path)
    with reading(path):
        out = np.asarray(out.todense() if hasattr(out, "todense") else out)
        if out.ndim != 2 or out.dtype == object:
            raise corrupt(path, f"expected a 2-D numeric matrix, got {out.dtype} of shape {out.shape}")
        return torch.from_numpy(out).to(torch.float)


def _test_index(path: Path) -> torch.Tensor:
    """``ind.<name>.test.index``: one node index per line."""
    with reading(path):
        lines = path.read_text(encoding="ascii").split("\n")[:-1]
    out = []
    for no, line in enumerate(lines, 1):
        try:
            out.append(int(line))
        except ValueError:
            raise corrupt(path, f"expected one integer node index, got {line[:40]!r}", line=no) from None
    return torch.tensor(out, dtype=torch.long)


def _check_planetoid(path: dict[str, Path], m: dict[str, torch.Tensor], graph: dict, test_index: torch.Tensor,
                     citeseer: bool) -> None:
    """The raw files agree with each other (PyG checks none of this): row counts, feature and
    class columns, one-hot labels, test indices and adjacency lists within the graph's nodes.
    A disagreement is :class:`~tasks.common.data.DataCorrupt` naming the file (and line)."""
    def name(s: str) -> str:
        return path[s].name

    for a, b, what in (("x", "y", "rows"), ("allx", "ally", "rows"), ("tx", "ty", "rows"), ("tx", "x", "columns"),
                       ("allx", "x", "columns"), ("ty", "y", "columns"), ("ally", "y", "columns")):
        dim = 0 if what == "rows" else 1
        if m[a].shape[dim] != m[b].shape[dim]:
            raise corrupt(path[a], f"{m[a].shape[dim]} {what}, but {name(b)} has {m[b].shape[dim]} "
                                   f"({'one row per node' if what == 'rows' else 'they must agree'})")
    if m["y"].shape[0] > m["ally"].shape[0]:
        raise corrupt(path["y"], f"{m['y'].shape[0]} labelled nodes, more than the {m['ally'].shape[0]} rows of "
                                 f"{name('ally')}")
    for s in ("y", "ty", "ally"):
        t = m[s]
        bad = ((t != 0) & (t != 1)).any(1) | (t.sum(1) > 1)
        if s == "y":
            bad |= t.sum(1) == 0  # the labelled training nodes
        if bad.any():
            i = int(bad.nonzero()[0])
            raise corrupt(path[s], f"row {i} is not a one-hot label over {t.shape[1]} classes "
                                  f"({int(bad.sum())} such row(s)): {t[i].tolist()[:12]}")
        if (t.sum(1) == 0).any():
            warnings.warn(f"{origin(path[s])}: {int((t.sum(1) == 0).sum())} label row(s) are all zero, first row "
                          f"{int((t.sum(1) == 0).nonzero()[0])}; those nodes get class 0 (as in PyG)", stacklevel=3)
    n_test, first = m["tx"].shape[0], m["allx"].shape[0]
    if test_index.numel() != n_test:
        raise corrupt(path["test.index"], f"{test_index.numel()} test node indices, but {name('tx')} has {n_test} rows "
                                          f"(one index per line, one line per row)")
    high = 2**62 if citeseer else first + n_test  # CiteSeer's test range has isolated nodes (PyG pads them)
    seen: set[int] = set()
    for no, i in enumerate(test_index.tolist(), 1):
        if i in seen:
            raise corrupt(path["test.index"], f"node index {i} appears twice", line=no)
        if not first <= i < high:
            raise corrupt(path["test.index"], f"node index {i} is not a test node: test nodes follow the "
                          f"{first} rows of {name('allx')}" + ("" if citeseer else f" (valid: {first}..{high - 1})"),
                          line=no)
        seen.add(i)
    n = first + (int(test_index.max() - test_index.min()) + 1 if citeseer else n_test)  # as read_planetoid
    for node, nbrs in graph.items():
        for j in (node, *nbrs):
            if not isinstance(j, (int, np.integer)) or not 0 <= j < n:
                raise corrupt(path["graph"], f"node {node!r} lists {j!r}: node ids must be integers in 0..{n - 1} "
                                             f"(the graph has {n} nodes)")


def read_planetoid(raw: Path, name: str) -> Any:
    """PyG's ``read_planetoid_data`` for Cora, CiteSeer and PubMed (the same tensors), with the
    pickles read by :func:`tasks.common.data.safe_unpickle`: a crafted file cannot run code, and
    a bad one raises :class:`~tasks.common.data.DataCorrupt` naming the data-dir file."""
    from torch_geometric.data import Data
    from torch_geometric.io.planetoid import edge_index_from_dict
    from torch_geometric.utils import index_to_mask

    path = {s: raw / f"ind.{name.lower()}.{s}" for s in _RAW_SUFFIXES}
    x, tx, allx, y, ty, ally = (_matrix(path[s]) for s in ("x", "tx", "allx", "y", "ty", "ally"))
    graph = safe_unpickle(path["graph"])
    if not isinstance(graph, dict):
        raise corrupt(path["graph"], f"expected a dict of adjacency lists, got {type(graph).__name__}")
    test_index = _test_index(path["test.index"])
    _check_planetoid(path, {"x": x, "tx": tx, "allx": allx, "y": y, "ty": ty, "ally": ally}, graph, test_index,
                     name.lower() == "citeseer")
    require_classes(y.argmax(1), what=f"Planetoid {name}, labelled training nodes", source=path["y"])
    num_train = y.size(0)  # the labelled training nodes come first
    with reading(path["test.index"]):  # indices out of range, sizes that do not fit together
        sorted_test_index = test_index.sort()[0]
        if name.lower() == "citeseer":  # isolated test nodes: zero rows, as PyG does
            n = int(test_index.max() - test_index.min()) + 1
            tx_ext = torch.zeros(n, tx.size(1), dtype=tx.dtype)
            tx_ext[sorted_test_index - test_index.min(), :] = tx
            ty_ext = torch.zeros(n, ty.size(1), dtype=ty.dtype)
            ty_ext[sorted_test_index - test_index.min(), :] = ty
            tx, ty = tx_ext, ty_ext
        x = torch.cat([allx, tx], dim=0)
        x[test_index] = x[sorted_test_index]
        y = torch.cat([ally, ty], dim=0).max(dim=1)[1]
        y[test_index] = y[sorted_test_index]
        n = y.size(0)
        masks = {"train_mask": index_to_mask(torch.arange(num_train, dtype=torch.long), size=n),
                 "val_mask": index_to_mask(torch.arange(num_train, num_train + 500, dtype=torch.long), size=n),
                 "test_mask": index_to_mask(test_index, size=n)}
    with reading(path["graph"]):
        edge_index = edge_index_from_dict(graph_dict=graph, num_nodes=n)
    return Data(x=x, edge_index=edge_index, y=y, **masks)


def _random_split(data: Any, *, num_train_per_class: int, num_val: int, num_test: int) -> None:
    """torch_geometric.datasets.Planetoid's ``split="random"``, in place, from the global RNG."""
    data.train_mask.fill_(False)
    for c in range(int(data.y.max()) + 1):
        idx = (data.y == c).nonzero(as_tuple=False).view(-1)
        idx = idx[torch.randperm(idx.size(0))[:num_train_per_class]]
        data.train_mask[idx] = True
    remaining = (~data.train_mask).nonzero(as_tuple=False).view(-1)
    remaining = remaining[torch.randperm(remaining.size(0))]
    data.val_mask.fill_(False)
    data.val_mask[remaining[:num_val]] = True
    data.test_mask.fill_(False)
    data.test_mask[remaining[num_val:num_val + num_test]] = True


class PlanetoidDataModule(_FullBatchDataModule):
    """Planetoid citation graphs (Cora, CiteSeer, PubMed), full batch.

    Args:
        name: ``"Cora"``, ``"CiteSeer"`` or ``"PubMed"`` (any case).
        split: ``"public"`` (the fixed Planetoid split: 20 labels per class, 500 validation,
            1000 test), ``"full"`` (every node not in val/test trains) or ``"random"``
            (20 per class / 500 / 1000 drawn with ``split_seed``).
        data_dir: read-only folder holding ``planetoid/<Name>/raw/ind.<name>.*`` (the layout
            of ``shared/data``); its raw folder is copied into the cache.
        cache_dir: writable root; the dataset lives in ``<cache_dir>/planetoid/<Name>``.
        download: fetch from upstream when the files are neither in ``data_dir`` nor in the
            cache. Missing data raises :class:`~tasks.common.data.DataMissing` naming the expected
            file; an unreadable file :class:`~tasks.common.data.DataCorrupt`.
        normalize_features: row-normalise features (GCN/GAT papers); default True.
        split_seed: seeds the ``"random"`` split (never the run seed: all runs see one split).
        homophily: the edges rewired to this edge homophily (None: as read) by degree-preserving swaps
            drawn from ``data_seed`` (:mod:`tasks.graphs.rewire`); ``info`` shows what it reached.
    """

    def __init__(
        self,
        name: str = "Cora",
        split: str = "public",
        *,
        data_dir: str | os.PathLike | None = None,
        cache_dir: str | os.PathLike | None = None,
        download: bool = True,
        normalize_features: bool = True,
        split_seed: int = 0,
        homophily: float | None = None,
        data_seed: int = 0,
    ) -> None:
        super().__init__()
        canon = {n.lower(): n for n in PLANETOID_NAMES}
        if not isinstance(name, str) or name.lower() not in canon:
            raise ValueError(f"planetoid name={name!r}; valid: {', '.join(PLANETOID_NAMES)}")
        if split not in PLANETOID_SPLITS:
            raise ValueError(f"planetoid split={split!r}; valid: {', '.join(PLANETOID_SPLITS)}")
        self.name = canon[name.lower()]
        self.split = split
        self.data_dir = Path(data_dir) if data_dir is not None else None
        self.cache_dir = Path(cache_dir) if cache_dir is not None else default_cache_dir()
        self.download = download
        self.normalize_features = normalize_features
        self.split_seed = split_seed
        self.homophily, self.data_seed = homophily, data_seed

    @property
    def raw_file_names(self) -> list[str]:
        return [f"ind.{self.name.lower()}.{s}" for s in _RAW_SUFFIXES]

    @property
    def root(self) -> Path:
        """The writable Planetoid root: ``<cache_dir>/planetoid``."""
        return self.cache_dir / "planetoid"

    def _load(self) -> Any:
        from torch_geometric.transforms import NormalizeFeatures

        raw = materialize(self.raw_file_names, subdir=f"planetoid/{self.name}/raw", data_dir=self.data_dir,
                          cache_dir=self.cache_dir, dataset=f"Planetoid {self.name}",
                          download=(lambda dest: _download_planetoid(dest, self.name)) if self.download else None)
        data = read_planetoid(raw, self.name)
        if self.split == "full":  # as torch_geometric.datasets.Planetoid does
            data.train_mask.fill_(True)
            data.train_mask[data.val_mask | data.test_mask] = False
        elif self.split == "random":
            # Planetoid draws this split from the global RNG: fork it so that the split depends on
            # split_seed only and the caller's RNG state is left untouched.
            with torch.random.fork_rng(devices=[]):
                torch.manual_seed(self.split_seed)
                _random_split(data, num_train_per_class=20, num_val=500, num_test=1000)
        if self.homophily is not None:
            data.edge_index = rewire_homophily(data.edge_index, data.y, self.homophily, seed=self.data_seed)
        if self.normalize_features:
            data = NormalizeFeatures()(data)
        return data

    @property
    def info(self) -> dict[str, Any]:  # rewired: the edge homophily reached (the record's data block shows it)
        h = None if self.homophily is None else round(edge_homophily(self.data.edge_index, self.data.y), 4)
        return {**super().info, **({} if h is None else {"edge_homophily": h})}

    def checksum(self) -> str:
        if self._checksum is None:
            self._checksum = graph_checksum(
                self.data, extra=f"planetoid/{self.name}/{self.split}/norm={self.normalize_features}"
                + ("" if self.homophily is None else f"/homophily={self.homophily!r}/data_seed={self.data_seed}"))
        return self._checksum


PLANETOID_DEFAULTS: dict[str, Any] = {"name": "Cora", "split": "public", "homophily": None, "data_seed": 0}


def build_planetoid(data_dir=None, cache_dir=None, seed: int = 0, **params: Any) -> PlanetoidDataModule:
    """DatasetSpec builder. ``seed`` (the run seed) is unused: the public split is fixed and a
    ``"random"`` split is drawn from ``split_seed``, so every model and seed sees the same data."""
    del seed
    return PlanetoidDataModule(data_dir=data_dir, cache_dir=cache_dir, **params)


# --------------------------------------------------------------------------- SBM
def make_sbm(
    *,
    num_nodes: int = 600,
    num_classes: int = 4,
    p_in: float = 0.03,
    p_out: float = 0.002,
    feature_dim: int = 32,
    feature_noise: float = 1.0,
    train_per_class: int = 20,
    num_val: int = 120,
    num_test: int = 400,
    data_seed: int = 0,
    homophily: float | None = None,
) -> Any:
    """A stochastic-block-model graph with class-correlated node features.

    Nodes get balanced classes (in random order). An undirected edge joins ``i`` and ``j``
    with probability ``p_in`` (same class) or ``p_out`` (different classes), so the expected
    edge homophily is ``p_in (n/C - 1) / (p_in (n/C - 1) + p_out n (C-1)/C)``. Features are
    ``mu[y] + feature_noise * N(0, I)`` with random unit-norm class means ``mu``: alone they
    classify poorly, averaged over neighbours they classify well. The split takes
    ``train_per_class`` labelled nodes per class, then ``num_val`` and ``num_test`` others.
    Everything is drawn from one generator seeded with ``data_seed``. ``homophily`` (a sweep's
    axis): that expected edge homophily at the expected degree ``p_in`` and ``p_out`` give, which
    then set only that degree (0.25 with 4 classes: edges ignore the classes; 0: all across).
    """
    from torch_geometric.data import Data

    n, c = num_nodes, num_classes
    if c < 2 or n < c * (train_per_class + 1):
        raise ValueError(f"sbm: num_nodes={n} too small for num_classes={c}, train_per_class={train_per_class}")
    if not (0 <= p_out <= 1 and 0 <= p_in <= 1):
        raise ValueError(f"sbm: p_in={p_in}, p_out={p_out} must be probabilities")
    if c * train_per_class + num_val + num_test > n:
        raise ValueError(
            f"sbm: {c}*{train_per_class} train + {num_val} val + {num_test} test > num_nodes={n}"
        )
    if homophily is not None:  # same expected degree, that share of it inside the class
        if not 0 <= homophily <= 1:
            raise ValueError(f"sbm: homophily={homophily} must be in [0, 1]")
        inside, across = n / c - 1, n * (c - 1) / c  # same-class and other-class nodes per node
        degree = p_in * inside + p_out * across
        p_in, p_out = min(1.0, homophily * degree / inside), min(1.0, (1 - homophily) * degree / across)
    g = torch.Generator().manual_seed(int(data_seed))
    y = (torch.arange(n) % c)[torch.randperm(n, generator=g)]

    same = y[:, None] == y[None, :]
    prob = torch.where(same, torch.tensor(p_in), torch.tensor(p_out))
    upper = (torch.rand(n, n, generator=g) < prob).triu(diagonal=1)
    adj = upper | upper.T
    edge_index = adj.nonzero().T.contiguous()  # (2, E), both directions, sorted by row

    means = torch.randn(c, feature_dim, generator=g)
    means = means / means.norm(dim=1, keepdim=True)
    x = means[y] + feature_noise * torch.randn(n, feature_dim, generator=g)

    train = torch.zeros(n, dtype=torch.bool)
    perm = torch.randperm(n, generator=g)
    for k in range(c):
        train[perm[y[perm] == k][:train_per_class]] = True
    rest = perm[~train[perm]]
    val = torch.zeros(n, dtype=torch.bool)
    test = torch.zeros(n, dtype=torch.bool)
    val[rest[:num_val]] = True
    test[rest[num_val : num_val + num_test]] = True
    return Data(x=x, edge_index=edge_index, y=y, train_mask=train, val_mask=val, test_mask=test)


SBM_DEFAULTS: dict[str, Any] = {"num_nodes": 600, "num_classes": 4, "p_in": 0.03, "p_out": 0.002, "feature_dim": 32,
                                "feature_noise": 1.0, "train_per_class": 20, "num_val": 120, "num_test": 400,
                                "data_seed": 0, "homophily": None}


class SBMDataModule(_FullBatchDataModule):
    """Synthetic SBM node classification (see :func:`make_sbm` for the parameters)."""

    def __init__(self, **params: Any) -> None:
        super().__init__()
        unknown = sorted(set(params) - set(SBM_DEFAULTS))
        if unknown:
            raise ValueError(f"sbm: unknown params {unknown}; valid: {', '.join(SBM_DEFAULTS)}")
        self.params = {**SBM_DEFAULTS, **params}

    def _load(self) -> Any:
        return make_sbm(**self.params)

    def homophily(self) -> float:
        """Edge homophily: the fraction of edges joining nodes of the same class."""
        d = self.data
        return float((d.y[d.edge_index[0]] == d.y[d.edge_index[1]]).float().mean())

    def checksum(self) -> str:
        if self._checksum is None:
            extra = "sbm/" + ",".join(f"{k}={self.params[k]!r}" for k in sorted(self.params)
                                      if k != "homophily" or self.params[k] is not None)  # as before it existed
            self._checksum = graph_checksum(self.data, extra=extra)
        return self._checksum


def build_sbm(data_dir=None, cache_dir=None, seed: int = 0, **params: Any) -> SBMDataModule:
    """DatasetSpec builder. ``seed`` (the run seed) is unused on purpose: the graph depends on
    ``data_seed`` only, so every model and run seed sees the same graph."""
    del data_dir, cache_dir, seed
    return SBMDataModule(**params)
