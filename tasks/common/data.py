"""Data helpers shared by every domain: the cache, fetching files into it, length-bucketed
batches, padding, a split-based DataModule base and the training-set fraction.

Conventions (every task's DataModule follows them, the runner relies on them):

* ``info``: a dict the model builders read (vocabulary sizes, classes, ...).
* ``checksum()``: ``sha256:<hex>`` identifying the exact data the models see.
* ``limit_train(fraction, seed)``: keep a seeded random ``fraction`` of the training set
  (the runner's ``train_fraction`` option, the same for every task); returns the new size.
* Real data comes from ``data_dir`` (read-only, the layout of ``shared/data``; files are
  copied or gunzipped into the cache, never written in place), else from the cache, else from
  upstream (download into the cache). Loaders raise :class:`DataMissing` for an absent file and
  :class:`DataCorrupt` for an unreadable one, each naming the data-dir file.
"""

from __future__ import annotations

import contextlib
import gzip
import hashlib
import json
import os
import pickle
import shutil
import struct
import warnings
import zlib
from pathlib import Path
from typing import Any, Callable, Iterable, Iterator, Sequence

import lightning as L
import torch
from torch import Tensor
from torch.utils.data import BatchSampler, DataLoader, Dataset, RandomSampler, SequentialSampler, Subset

from tasks.common.io import write_atomic
from tasks.common.padding import pad_fields, pad_sequences
from tasks.common.buckets import DEFAULT_COUNT, LengthBuckets, padding_cost
from tasks.common.sampling import BucketBatchSampler, ShardedBatchSampler, rank_and_world
from tasks.common.unpickle import SAFE_PICKLE_GLOBALS, RestrictedUnpickler

__all__ = [
    "DataMissing", "DataCorrupt", "corrupt", "reading", "origin", "read_text", "require_classes", "safe_unpickle",
    "SAFE_PICKLE_GLOBALS",
    "inside", "file_stamp", "write_atomic", "default_cache_dir", "file_lock", "materialize",
    "tensor_checksum", "pad_fields", "pad_sequences", "BucketBatchSampler", "SplitDataModule", "subset_indices",
]


# ----------------------------------------------------------------------------- data errors
class DataMissing(FileNotFoundError):
    """An expected data file is absent; the message names it and where it was expected."""


class DataCorrupt(ValueError):
    """A data file is present but unreadable. The one-line message names the data-dir source
    (not only its cache copy), the line where the format has lines, and the reason."""

    def __init__(self, file: str | os.PathLike, reason: str, *, line: int | None = None,
                 cached: str | os.PathLike | None = None) -> None:
        self.file, self.reason, self.line = str(file), " ".join(str(reason).split()), line
        self.cached = str(cached) if cached is not None and str(cached) != self.file else None
        where = self.file + (f", line {line}" if line is not None else "")
        super().__init__(f"{where}: {self.reason}" + (f" (cache copy: {self.cached})" if self.cached else ""))


_ORIGINS: dict[str, str] = {}  # cache copy -> the data-dir file it was made from (filled by materialize)


def origin(path: str | os.PathLike) -> str:
    """The data-dir file a cached copy was made from (``path`` itself when it was not copied)."""
    return _ORIGINS.get(str(path), str(path))


def corrupt(path: str | os.PathLike, reason: str | BaseException, line: int | None = None) -> DataCorrupt:
    """A :class:`DataCorrupt` for ``path`` (a cache copy or a source) naming its data-dir origin."""
    why = f"{type(reason).__name__}: {reason}" if isinstance(reason, BaseException) else reason
    return DataCorrupt(origin(path), why, line=line, cached=path)


#: What :func:`reading` turns into :class:`DataCorrupt`: the errors parsers raise on bad bytes.
_READ_ERRORS = (OSError, EOFError, ValueError, TypeError, KeyError, IndexError, AssertionError, RuntimeError,
                pickle.UnpicklingError, zlib.error, struct.error)


@contextlib.contextmanager
def reading(path: str | os.PathLike) -> Iterator[None]:
    """Around a parser of ``path``: absent -> :class:`DataMissing`, unreadable -> :class:`DataCorrupt`."""
    try:
        yield
    except (DataMissing, DataCorrupt):
        raise
    except FileNotFoundError as err:
        raise DataMissing(f"{origin(path)}: missing (expected at {err.filename or path})") from err
    except _READ_ERRORS as err:
        raise corrupt(path, err) from err


def read_text(path: str | os.PathLike) -> str:
    """The UTF-8 text of a plain or ``.gz`` file, ``\\r\\n`` and ``\\r`` read as ``\\n`` (Python's
    universal newlines). An absent file is
    :class:`DataMissing`; bad gzip is :class:`DataCorrupt`, and so are bytes that are not UTF-8,
    naming the data-dir file and the line of the first bad byte."""
    p = Path(path)
    if not p.is_file():
        raise DataMissing(f"{origin(p)}: missing (expected at {p})")
    with reading(p):
        data = gzip.decompress(p.read_bytes()) if p.suffix == ".gz" else p.read_bytes()
    try:
        return data.decode("utf-8").replace("\r\n", "\n").replace("\r", "\n")
    except UnicodeDecodeError as err:
        raise corrupt(p, f"not UTF-8 text ({err.reason} at byte {err.start}); the file must be UTF-8",
                      data.count(b"\n", 0, err.start) + 1) from None


def require_classes(labels: Tensor, *, what: str, names: Sequence[str] | None = None,
                    source: str | os.PathLike | None = None) -> None:
    """Refuse a classification split whose ``labels`` hold fewer than two classes (a damaged
    label file, a tiny ``train_fraction``): nothing can be learnt or measured from it. The
    error names ``what`` (the dataset and split) and, when given, the ``source`` label file
    (:class:`DataCorrupt`; else :class:`ValueError`)."""
    values = torch.unique(labels.flatten())
    if values.numel() >= 2:
        return
    one = ", ".join(repr(names[int(v)]) if names is not None and 0 <= int(v) < len(names) else str(int(v))
                    for v in values) or "none"
    why = (f"{what}: {labels.numel()} label(s), all of one class ({one}); a classifier needs at least 2 classes"
           + (f" (the dataset has {len(names)})" if names is not None else ""))
    if source is not None:
        raise corrupt(source, why)
    raise ValueError(why)


# ----------------------------------------------------------------------------- restricted unpickling
def safe_unpickle(path: str | os.PathLike) -> Any:
    """Unpickle a data file (latin1 strings, as Python 2 pickles need) allowing only
    :data:`SAFE_PICKLE_GLOBALS`, so a crafted file cannot run code; errors are :class:`DataCorrupt`."""
    with reading(path), open(path, "rb") as fh, warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)  # numpy.core -> numpy._core
        return RestrictedUnpickler(fh, encoding="latin1").load()


# ----------------------------------------------------------------------------- the cache
def default_cache_dir() -> Path:
    """``$ATTNBENCH_CACHE`` or ``~/.cache/attnbench``."""
    env = os.environ.get("ATTNBENCH_CACHE")
    return Path(env) if env else Path.home() / ".cache" / "attnbench"


def inside(root: str | os.PathLike, *parts: str | os.PathLike, what: str,
           data_dir: str | os.PathLike | None = None) -> Path:
    """``root/parts``, refused (``ValueError`` naming ``what``) unless it resolves inside ``root``
    and, when ``data_dir`` is given, outside that read-only folder. Every cache destination and
    every dataset parameter that names a folder or file goes through here."""
    base = Path(root).expanduser()
    target = base.joinpath(*parts).resolve()
    if not target.is_relative_to(base.resolve()):
        raise ValueError(f"{what}={'/'.join(map(str, parts))!r} leaves {base}; give a plain relative name "
                         f"inside it (no '..', no absolute path)")
    if data_dir is not None and target.is_relative_to(Path(data_dir).expanduser().resolve()):
        raise ValueError(f"{what}: {target} lies inside the read-only data dir {data_dir}; nothing is written "
                         f"there (pass a --cache-dir outside it)")
    return base / target.relative_to(base.resolve())


def file_stamp(paths: Iterable[str | os.PathLike]) -> str:
    """Hex digest of each file's name, size and ``mtime_ns``: it changes whenever a file is
    replaced or edited, so caches derived from the files are keyed by it."""
    h = hashlib.sha256()
    for p in paths:
        st = os.stat(p)
        h.update(f"{p}|{st.st_size}|{st.st_mtime_ns}\n".encode())
    return h.hexdigest()[:24]


@contextlib.contextmanager
def file_lock(path: Path) -> Iterator[None]:
    """An exclusive advisory lock (POSIX ``flock``), so that parallel runs sharing a cache
    do not copy or process the same dataset at the same time. No-op where unsupported."""
    path.parent.mkdir(parents=True, exist_ok=True)
    try:
        import fcntl
    except ImportError:  # pragma: no cover - Windows
        yield
        return
    with open(path, "a+") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def _copy_atomic(src: Path, dst: Path) -> None:
    """Copy (gunzip when ``src`` ends in ``.gz``); a bad ``.gz`` is :class:`DataCorrupt`."""
    def write(tmp: Path) -> None:
        if src.suffix == ".gz" and dst.suffix != ".gz":
            with reading(src), gzip.open(src, "rb") as fin, open(tmp, "wb") as fout:
                shutil.copyfileobj(fin, fout, 1 << 20)
        else:
            shutil.copyfile(src, tmp)  # copyfile: the copy is writable, unlike data_dir

    write_atomic(dst, write)


def materialize(
    files: Sequence[str],
    *,
    subdir: str,
    data_dir: str | os.PathLike | None,
    cache_dir: str | os.PathLike | None,
    dataset: str,
    download: Callable[[Path], None] | None = None,
) -> Path:
    """Make ``<cache_dir>/<subdir>/<f>`` exist for every ``f`` in ``files`` and return that folder.

    Per file: ``<data_dir>/<subdir>/<f>`` or ``<f>.gz`` (gunzipped) is copied into the cache
    unless the copy was made from that very source (size + ``mtime_ns``, recorded in
    ``<cache_dir>/.<subdir>.sources.json``: fixing the data dir heals the cache); else the cached
    copy is used; else ``download(folder)`` fetches the missing files into the cache. ``files``
    may be sub-paths; none may leave the folder and nothing is written under ``data_dir``.
    A bad ``.gz`` raises :class:`DataCorrupt` (its stale copy is dropped), a file found nowhere
    :class:`DataMissing` naming where it was expected and why the download did not help."""
    cache = Path(cache_dir) if cache_dir is not None else default_cache_dir()
    dest = inside(cache, subdir, what=f"{dataset}: folder", data_dir=data_dir)
    src_root = inside(data_dir, subdir, what=f"{dataset}: folder") if data_dir is not None else None
    flat = subdir.replace("/", "_")
    manifest_path = inside(cache, f".{flat}.sources.json", what=f"{dataset}: manifest", data_dir=data_dir)
    targets = {f: inside(dest, f, what=f"{dataset}: file", data_dir=data_dir) for f in files}  # before any write
    with file_lock(inside(cache, f".{flat}.lock", what=f"{dataset}: lock", data_dir=data_dir)):
        try:
            manifest: dict[str, dict[str, str]] = json.loads(manifest_path.read_text())
        except (OSError, ValueError):
            manifest = {}
        missing, changed = [], False  # files found nowhere; whether the manifest changed
        try:
            for f in files:
                target = targets[f]
                cands = [inside(src_root, n, what=f"{dataset}: file") for n in (f, f"{f}.gz")] if src_root else []
                src = next((c for c in cands if c.is_file()), None)
                if src is not None:
                    rec = {"source": str(src), "stamp": file_stamp([src])}
                    if not target.is_file() or manifest.get(f) != {**rec, "copy": file_stamp([target])}:
                        changed = True
                        target.unlink(missing_ok=True)  # never keep a copy of an older source
                        _copy_atomic(src, target)
                        manifest[f] = {**rec, "copy": file_stamp([target])}
                    _ORIGINS[str(target)] = str(src)
                elif not target.is_file():
                    missing.append(f)
                elif f in manifest:
                    _ORIGINS[str(target)] = manifest[f]["source"]
        finally:
            if changed:
                write_atomic(manifest_path, lambda tmp: tmp.write_text(json.dumps(manifest)))
        if missing:
            where = (f"{src_root / missing[0]}[.gz]" if src_root is not None else f"{dest / missing[0]}")
            if download is None:
                raise DataMissing(f"{dataset}: missing {where}; no download source is known "
                                  f"(pass --data-dir with the files)")
            try:
                dest.mkdir(parents=True, exist_ok=True)
                download(dest)
            except Exception as err:  # no network, HTTP error, ...
                raise DataMissing(f"{dataset}: missing {where} and the download into {dest} failed ({type(err).__name__}: "
                                  f"{err}). Pass --data-dir pointing at a folder with {subdir}/{missing[0]}[.gz].") from err
            still = [f for f in missing if not (dest / f).is_file()]
            if still:
                raise DataMissing(f"{dataset}: {dest / still[0]} is still missing after the download")
    return dest


def tensor_checksum(*parts: Any, extra: str = "") -> str:
    """``sha256:<hex>`` over tensors, numbers, strings and (nested) lists of them, with their
    dtype and shape; the same data gives the same checksum in every process."""
    h = hashlib.sha256(extra.encode())

    def feed(x: Any) -> None:
        if isinstance(x, Tensor):
            t = x.detach().cpu().contiguous()
            h.update(f"|T{t.dtype}{tuple(t.shape)}|".encode())
            h.update(t.numpy().tobytes() if t.dtype != torch.bfloat16 else t.float().numpy().tobytes())
        elif isinstance(x, (list, tuple)):
            h.update(f"|L{len(x)}|".encode())
            for y in x:
                feed(y)
        elif isinstance(x, dict):
            h.update(f"|D{len(x)}|".encode())
            for k in sorted(x):
                h.update(str(k).encode())
                feed(x[k])
        else:
            h.update(f"|{type(x).__name__}:{x}|".encode())

    for p in parts:
        feed(p)
    return "sha256:" + h.hexdigest()


def subset_indices(n: int, fraction: float, seed: int) -> list[int]:
    """A seeded random ``fraction`` of ``range(n)`` (at least one item), in ascending order."""
    if not (isinstance(fraction, (int, float)) and 0 < fraction <= 1):
        raise ValueError(f"train_fraction={fraction!r}; must be in (0, 1]")
    if fraction >= 1:
        return list(range(n))
    k = max(1, int(round(n * fraction)))
    g = torch.Generator().manual_seed(int(seed))
    return sorted(torch.randperm(n, generator=g)[:k].tolist())


# ----------------------------------------------------------------------------- DataModule
class SplitDataModule(L.LightningDataModule):
    """Base for datasets with train/val/test splits held in memory.

    Subclasses implement :meth:`load` -> ``{"train": Dataset, "val": ..., "test": ...}``,
    :meth:`collate` (a list of items -> a batch) and :meth:`make_info`, and may implement
    :meth:`length` (an item's length; then batches are length-bucketed with
    :class:`BucketBatchSampler`) and :meth:`checksum_parts`. Loading happens once, on first use
    of :attr:`splits`, :attr:`info` or :meth:`checksum`.
    """

    def __init__(self, *, batch_size: int = 32, max_tokens: int | None = None, eval_batch_size: int | None = None,
                 num_workers: int = 0, shuffle_seed: int = 0) -> None:
        super().__init__()
        if not isinstance(batch_size, int) or batch_size < 1:
            raise ValueError(f"batch_size={batch_size!r}; must be a positive integer")
        self.batch_size = batch_size
        self.eval_batch_size = eval_batch_size or batch_size
        self.max_tokens = max_tokens
        self.num_workers = num_workers
        self.shuffle_seed = shuffle_seed
        self._splits: dict[str, Dataset] | None = None
        self._info: dict[str, Any] | None = None
        self._checksum: str | None = None
        self.train_fraction = 1.0
        self.buckets: LengthBuckets | None = None  # fixed padded lengths (use_length_buckets)

    # -- to implement ------------------------------------------------------------------
    def load(self) -> dict[str, Dataset]:  # pragma: no cover - abstract
        raise NotImplementedError

    def collate(self, items: list[Any]) -> Any:  # pragma: no cover - abstract
        raise NotImplementedError

    def make_info(self, splits: dict[str, Dataset]) -> dict[str, Any]:
        return {f"num_{k}": len(v) for k, v in splits.items()}

    def length(self, item: Any) -> int | None:
        """An item's sequence length for bucketing; None = no bucketing (plain batches)."""
        return None

    def input_length(self, item: Any) -> int | None:
        """An item's length in the positions its model's attention sees (for
        :meth:`longest_input`); by default :meth:`length`. Override where they differ."""
        return self.length(item)

    def longest_input(self) -> int | None:
        """The longest input, in attention positions (:meth:`input_length`), over the splits a
        model is trained and validated on (train, after any :meth:`limit_train`, and val): a
        window at least this long attends to everything. None before setup or without lengths."""
        if self._splits is None:
            return None
        lengths = [self.input_length(ds[i]) for ds in (self._splits["train"], self._splits["val"])
                   for i in range(len(ds))]
        known = [n for n in lengths if n is not None]
        return max(known) if known else None

    def class_labels(self, ds: Dataset) -> tuple[Tensor, Sequence[str] | None] | None:
        """For a classification dataset: the label of every item of ``ds`` ``(N,)`` and the class
        names (or None); a training split with fewer than two classes is then refused at load
        and by :meth:`limit_train`. None (the default): not a classification dataset."""
        return None

    def checksum_parts(self) -> Iterable[Any]:
        """What :meth:`checksum` hashes; by default every item of every split (keep it cheap)."""
        for name in ("train", "val", "test"):
            ds = self.splits[name]
            yield name
            yield [ds[i] for i in range(len(ds))]

    # -- shared ------------------------------------------------------------------------
    @property
    def splits(self) -> dict[str, Dataset]:
        if self._splits is None:
            splits = self.load()
            for name in ("train", "val", "test"):
                if name not in splits:
                    raise ValueError(f"{type(self).__name__}.load() returned no {name!r} split")
                if len(splits[name]) == 0:
                    raise ValueError(f"{type(self).__name__}: the {name!r} split is empty")
            labelled = self.class_labels(splits["train"])
            if labelled is not None:
                require_classes(labelled[0], what=f"{self._dataset_name()}, training split", names=labelled[1])
            self._splits = splits
        return self._splits

    @property
    def info(self) -> dict[str, Any]:
        if self._info is None:
            self._info = self.make_info(self.splits)
        return self._info

    def checksum(self) -> str:
        if self._checksum is None:
            self._checksum = tensor_checksum(*self.checksum_parts(), extra=type(self).__name__)
        return self._checksum

    def limit_train(self, fraction: float, seed: int = 0) -> int:
        """Keep a seeded random ``fraction`` of the training split (the same subset for every
        model with the same ``seed``); returns the new training-set size. ``info`` is kept
        (vocabularies etc. stay those of the full data) except ``num_train``."""
        info = self.info  # built from the full data before the swap (vocabularies, sizes)
        ds = self.splits["train"]
        base = ds.dataset if isinstance(ds, Subset) else ds
        idx = subset_indices(len(base), fraction, seed)
        labelled = self.class_labels(base)
        if labelled is not None and len(idx) < len(base):
            require_classes(labelled[0][idx], names=labelled[1], what=f"{self._dataset_name()}, training subset "
                            f"of train_fraction={fraction} (seed {seed}; raise train_fraction)")
        self._splits["train"] = Subset(base, idx) if len(idx) < len(base) else base
        self.train_fraction = float(fraction)
        self._checksum = None
        if "num_train" in info:
            info["num_train"] = len(idx)
        return len(idx)

    def use_length_buckets(self, spec: int | list[int] | None = None) -> LengthBuckets | None:
        """Pad every batch to a fixed length bucket from now on (:mod:`tasks.common.buckets`):
        ``spec`` a count (the lengths that pad a training epoch least; None: the default count) or the
        padded lengths. Call it after :meth:`limit_train`. None (nothing changes) where items have
        no length: their batches have one shape already."""
        ds = self.splits["train"]
        if self.length(ds[0]) is None:
            return None
        every = [self.length(d[i]) for d in self.splits.values() for i in range(len(d))]
        if isinstance(spec, list):
            self.buckets = LengthBuckets.given(spec, max(every))
        else:
            train = [self.length(ds[i]) for i in range(len(ds))]
            self.buckets = LengthBuckets.from_lengths(train, spec or DEFAULT_COUNT, max(every), self.batch_size,
                                                      self.max_tokens)
        self.info["padded_length"] = self.buckets.bounds[-1]  # what a length-sized model must hold
        return self.buckets

    def pad_length(self, items: list[Any]) -> int | None:
        """The length a collate pads ``items`` to: their bucket's (None without buckets: the longest)."""
        return self.buckets.pad_length(max(self.length(it) for it in items)) if self.buckets else None

    def padding_report(self) -> dict[str, Any] | None:
        """Real and padded positions of the first training epoch as batched (``padded``,
        ``overhead``), and without buckets (``batch_longest``) with the buckets and the distinct
        batch shapes; None where items have no length. The record's ``cost.padding``."""
        sampler = self.train_dataloader().batch_sampler
        if not isinstance(sampler, BucketBatchSampler):
            return None
        batches, lengths = sampler.all_batches(0), sampler.lengths
        out: dict[str, Any] = padding_cost(batches, lengths, self.buckets)
        if self.buckets is not None:
            plain = BucketBatchSampler(lengths, sampler.batch_size, max_tokens=self.max_tokens, seed=self.shuffle_seed)
            out.update(batch_longest=padding_cost(plain.all_batches(0), lengths, None), buckets=list(
                self.buckets.bounds), buckets_how=self.buckets.how,
                shapes_per_epoch=len(self.buckets.batch_shapes(batches, lengths)))
        return out

    def _dataset_name(self) -> str:
        name = getattr(self, "name", None) or getattr(self, "cache_name", None)
        return name if isinstance(name, str) else type(self).__name__

    def prepare_data(self) -> None:
        _ = self.splits

    def setup(self, stage: str | None = None) -> None:
        _ = self.splits

    def _loader(self, split: str, train: bool) -> DataLoader:
        ds = self.splits[split]
        bs = self.batch_size if train else self.eval_batch_size
        first = ds[0]
        if self.length(first) is not None:
            lengths = [self.length(ds[i]) for i in range(len(ds))]
            sampler = BucketBatchSampler(lengths, bs, max_tokens=self.max_tokens, shuffle=train,
                                         seed=self.shuffle_seed, even=train, buckets=self.buckets, fill=train)
            return DataLoader(ds, batch_sampler=sampler, collate_fn=self.collate, num_workers=self.num_workers)
        g = torch.Generator().manual_seed(self.shuffle_seed)
        if rank_and_world()[1] > 1:  # the same batches as one process, this rank's shard (tasks.common.sampling)
            order = RandomSampler(ds, generator=g) if train else SequentialSampler(ds)
            sharded = ShardedBatchSampler(BatchSampler(order, bs, drop_last=False), even=train)
            return DataLoader(ds, batch_sampler=sharded, collate_fn=self.collate, num_workers=self.num_workers)
        return DataLoader(ds, batch_size=bs, shuffle=train, generator=g if train else None,
                          collate_fn=self.collate, num_workers=self.num_workers)

    def train_dataloader(self) -> DataLoader:
        return self._loader("train", True)

    def val_dataloader(self) -> DataLoader:
        return self._loader("val", False)

    def test_dataloader(self) -> DataLoader:
        return self._loader("test", False)

