"""Node-classification data: one graph, full batch.

Every DataModule here holds a single PyG ``Data`` object (``x``, ``edge_index``, ``y`` and
boolean ``train_mask``/``val_mask``/``test_mask``); each dataloader yields that one object
once per epoch and the task module picks the stage's mask. ``info`` (read by the model
builders) and ``checksum()`` load the data on first use.

* :class:`PlanetoidDataModule`: Cora, CiteSeer, PubMed through
  ``torch_geometric.datasets.Planetoid`` with row-normalised features (as in the GCN and GAT
  papers). The raw files come from ``<data_dir>/planetoid/<Name>/raw`` (copied into the
  cache, because Planetoid writes ``processed/`` next to ``raw/`` and ``data_dir`` is
  read-only), else from the cache, else from upstream (download into the cache).
* :class:`SBMDataModule`: a synthetic stochastic-block-model graph generated in code from
  ``data_seed``: homophilous edges and noisy class-correlated features, so that a model
  that uses the graph clearly beats one that does not.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import tempfile
from pathlib import Path
from typing import Any

import lightning as L
import torch
from torch.utils.data import DataLoader

from tasks.common.data import default_cache_dir, file_lock, subset_indices

__all__ = [
    "PlanetoidDataModule",
    "SBMDataModule",
    "PLANETOID_NAMES",
    "PLANETOID_SPLITS",
    "make_sbm",
    "default_cache_dir",
    "graph_checksum",
    "build_planetoid",
    "build_sbm",
    "PLANETOID_DEFAULTS",
    "SBM_DEFAULTS",
]

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

    @property
    def data(self) -> Any:
        if self._data is None:
            data = self._load()
            for key in ("train_mask", "val_mask", "test_mask"):
                if getattr(data, key, None) is None or getattr(data, key).dtype != torch.bool:
                    raise ValueError(f"graph data lacks a boolean {key}")
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
def _same_bytes(a: Path, b: Path) -> bool:
    return a.stat().st_size == b.stat().st_size and a.read_bytes() == b.read_bytes()


def _download_planetoid(root: Path, name: str) -> None:
    """Fetch ``name``'s raw files from upstream into ``root/<name>/raw`` (through a temporary
    folder, so that a failed download never leaves partial files behind). Raises on failure."""
    from torch_geometric.datasets import Planetoid

    with tempfile.TemporaryDirectory(dir=root, prefix=".download-") as tmp:
        Planetoid(tmp, name)  # downloads (and processes) into tmp
        raw = root / name / "raw"
        raw.mkdir(parents=True, exist_ok=True)
        for f in (Path(tmp) / name / "raw").iterdir():
            os.replace(f, raw / f.name)


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
            cache. Missing data raises :class:`FileNotFoundError` naming the expected file.
        normalize_features: row-normalise features (GCN/GAT papers); default True.
        split_seed: seeds the ``"random"`` split (never the run seed: all runs see one split).
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

    @property
    def raw_file_names(self) -> list[str]:
        return [f"ind.{self.name.lower()}.{s}" for s in _RAW_SUFFIXES]

    @property
    def root(self) -> Path:
        """The writable Planetoid root: ``<cache_dir>/planetoid``."""
        return self.cache_dir / "planetoid"

    def _source_raw(self) -> Path | None:
        return self.data_dir / "planetoid" / self.name / "raw" if self.data_dir is not None else None

    def _missing(self, raw: Path) -> list[Path]:
        return [raw / f for f in self.raw_file_names if not (raw / f).is_file()]

    def _ensure_raw(self) -> None:
        """Make ``<cache>/planetoid/<Name>/raw`` complete (copy, cache or download)."""
        raw = self.root / self.name / "raw"
        src = self._source_raw()
        if src is not None and not self._missing(src):
            raw.mkdir(parents=True, exist_ok=True)
            changed = False
            for f in self.raw_file_names:
                if (raw / f).is_file() and _same_bytes(src / f, raw / f):
                    continue
                tmp = raw / f".{f}.tmp"
                shutil.copyfile(src / f, tmp)  # copyfile: the copy is writable, unlike data_dir
                os.replace(tmp, raw / f)
                changed = True
            if changed:  # processed/ was built from other raw files: rebuild it
                shutil.rmtree(self.root / self.name / "processed", ignore_errors=True)
            return
        if not self._missing(raw):
            return
        expected = (src if src is not None else raw) / self._missing(src if src is not None else raw)[0].name
        where = f"{expected}" + (f" (nor in the cache {raw})" if src is not None else "")
        if not self.download:
            raise FileNotFoundError(f"Planetoid {self.name}: missing {where}; download is disabled")
        try:
            _download_planetoid(self.root, self.name)
        except Exception as err:  # no network, HTTP error, ...
            raise FileNotFoundError(
                f"Planetoid {self.name}: missing {where} and the download failed "
                f"({type(err).__name__}: {err}). Put the files {', '.join(self.raw_file_names)} there."
            ) from err
        still = self._missing(raw)
        if still:
            raise FileNotFoundError(f"Planetoid {self.name}: missing {still[0]} after download")

    def _load(self) -> Any:
        from torch_geometric.datasets import Planetoid
        from torch_geometric.transforms import NormalizeFeatures

        self.root.mkdir(parents=True, exist_ok=True)
        with file_lock(self.root / f".{self.name}.lock"):
            self._ensure_raw()
            # Planetoid's "random" split draws from the global RNG: fork it so that the split
            # depends on split_seed only and the caller's RNG state is left untouched.
            with torch.random.fork_rng(devices=[]):
                torch.manual_seed(self.split_seed)
                ds = Planetoid(str(self.root), self.name, split=self.split)
        data = ds[0]
        if self.normalize_features:
            data = NormalizeFeatures()(data)
        return data

    def checksum(self) -> str:
        if self._checksum is None:
            self._checksum = graph_checksum(
                self.data, extra=f"planetoid/{self.name}/{self.split}/norm={self.normalize_features}"
            )
        return self._checksum


PLANETOID_DEFAULTS: dict[str, Any] = {"name": "Cora", "split": "public"}


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
) -> Any:
    """A stochastic-block-model graph with class-correlated node features.

    Nodes get balanced classes (in random order). An undirected edge joins ``i`` and ``j``
    with probability ``p_in`` (same class) or ``p_out`` (different classes), so the expected
    edge homophily is ``p_in (n/C - 1) / (p_in (n/C - 1) + p_out n (C-1)/C)``. Features are
    ``mu[y] + feature_noise * N(0, I)`` with random unit-norm class means ``mu``: alone they
    classify poorly, averaged over neighbours they classify well. The split takes
    ``train_per_class`` labelled nodes per class, then ``num_val`` and ``num_test`` others.
    Everything is drawn from one generator seeded with ``data_seed``.
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


SBM_DEFAULTS: dict[str, Any] = {
    "num_nodes": 600,
    "num_classes": 4,
    "p_in": 0.03,
    "p_out": 0.002,
    "feature_dim": 32,
    "feature_noise": 1.0,
    "train_per_class": 20,
    "num_val": 120,
    "num_test": 400,
    "data_seed": 0,
}


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
            extra = "sbm/" + ",".join(f"{k}={self.params[k]!r}" for k in sorted(self.params))
            self._checksum = graph_checksum(self.data, extra=extra)
        return self._checksum


def build_sbm(data_dir=None, cache_dir=None, seed: int = 0, **params: Any) -> SBMDataModule:
    """DatasetSpec builder. ``seed`` (the run seed) is unused on purpose: the graph depends on
    ``data_seed`` only, so every model and run seed sees the same graph."""
    del data_dir, cache_dir, seed
    return SBMDataModule(**params)
