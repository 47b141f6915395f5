"""Image-classification data: uint8 tensors in memory, converted to float per batch.

* :class:`TorchvisionImages`: MNIST, Fashion-MNIST and CIFAR-10 through ``torchvision.datasets``
  (registered as three dataset names sharing this class, so a config switches dataset by name
  only). The raw files come from ``<data_dir>/<folder>`` (the IDX files may be gzipped, as in
  ``shared/data/MNIST/raw``; they are decompressed into the cache by
  :func:`tasks.common.data.materialize`), else from the cache, else torchvision downloads them
  into the cache. The validation split is carved from train with a fixed ``split_seed``.
* :class:`SyntheticArrangement`: generated in code from ``data_seed``. Two glyphs (a plus and a
  ring) lie far apart on a noisy canvas; the class is their relative arrangement (is the plus
  left or right of the ring, above or below it). Each glyph alone says little about the
  class: a model must relate distant parts of the image.

Every split is an :class:`ImageSplit`: ``images (N, C, H, W) uint8`` and ``labels (N,)``. Training
items pass through a light ``torchvision.transforms.v2`` augmentation (random crop with
zero padding, plus a horizontal flip where it preserves the class); :meth:`ImageDataModule.collate`
stacks a batch and normalises it with the training set's per-channel mean and std.
"""

from __future__ import annotations

import functools
import math
import os
from pathlib import Path
from typing import Any, Callable, Iterable

import torch
from torch import Tensor
from torch.utils.data import Dataset

from tasks.common.data import SplitDataModule, corrupt, materialize, origin, reading, require_classes

__all__ = [
    "AUGMENTS",
    "ImageSplit",
    "ImageDataModule",
    "TorchvisionImages",
    "SyntheticArrangement",
    "make_arrangement",
    "RING_VALUE",
    "make_augment",
    "TORCHVISION_SOURCES",
    "TORCHVISION_DEFAULTS",
    "SYNTHETIC_DEFAULTS",
    "build_torchvision",
    "build_synthetic",
]

#: Augmentations of training images (``"auto"``: the dataset's default).
AUGMENTS = ("auto", "none", "crop", "crop_flip")


def make_augment(kind: str, size: tuple[int, int]) -> Callable[[Tensor], Tensor] | None:
    """A ``transforms.v2`` pipeline on one ``(C, H, W)`` uint8 image, or None for ``"none"``.
    ``crop``: pad by ``max(1, H // 8)`` zeros (2-4 pixels at these sizes) and crop back at a
    random offset (a small translation); ``crop_flip``: also a random horizontal flip."""
    from torchvision.transforms import v2

    if kind not in AUGMENTS or kind == "auto":
        raise ValueError(f"augment={kind!r}; valid: {', '.join(a for a in AUGMENTS if a != 'auto')} (or 'auto')")
    if kind == "none":
        return None
    ops: list[Any] = [v2.RandomCrop(size, padding=max(1, size[0] // 8))]
    if kind == "crop_flip":
        ops.append(v2.RandomHorizontalFlip())
    return v2.Compose(ops)


class ImageSplit(Dataset):
    """``images (N, C, H, W) uint8`` and ``labels (N,) int64``; item ``i`` is ``(image, label)``,
    the image passed through ``transform`` (training only)."""

    def __init__(self, images: Tensor, labels: Tensor, transform: Callable[[Tensor], Tensor] | None = None) -> None:
        if images.dtype != torch.uint8 or images.ndim != 4:
            raise ValueError(f"images must be (N, C, H, W) uint8, got {tuple(images.shape)} {images.dtype}")
        if labels.shape != (images.shape[0],):
            raise ValueError(f"labels {tuple(labels.shape)} do not match {images.shape[0]} images")
        self.images, self.labels, self.transform = images, labels.long(), transform

    def __len__(self) -> int:
        return self.images.shape[0]

    def __getitem__(self, i: int) -> tuple[Tensor, int]:
        img = self.images[i]  # (C, H, W) uint8
        if self.transform is not None:
            img = self.transform(img)
        return img, int(self.labels[i])


class ImageDataModule(SplitDataModule):
    """Base of the image datasets: subclasses implement :meth:`load_arrays` returning
    ``{"train": (images, labels), "val": ..., "test": ...}`` (uint8 images, int labels) and set
    ``classes`` (names) and ``augment`` (a resolved :data:`AUGMENTS` value).

    ``info``: ``channels``, ``height``, ``width``, ``num_classes``, ``classes``, ``mean``/``std``
    (per channel, of the training images in ``[0, 1]``) and the split sizes.
    Batches are ``(x (B, C, H, W) float, normalised, y (B,) int64)``.
    """

    name = "images"
    classes: list[str] = []

    def __init__(self, *, augment: str = "auto", batch_size: int = 128, eval_batch_size: int | None = 512,
                 num_workers: int = 0) -> None:
        super().__init__(batch_size=batch_size, eval_batch_size=eval_batch_size, num_workers=num_workers)
        if augment not in AUGMENTS:
            raise ValueError(f"augment={augment!r}; valid: {', '.join(AUGMENTS)}")
        self.augment = augment
        self._mean: Tensor | None = None
        self._std: Tensor | None = None

    # -- to implement ------------------------------------------------------------------
    def load_arrays(self) -> dict[str, tuple[Tensor, Tensor]]:  # pragma: no cover - abstract
        raise NotImplementedError

    def default_augment(self) -> str:
        return "none"

    # -- SplitDataModule ---------------------------------------------------------------
    def load(self) -> dict[str, Dataset]:
        arrays = self.load_arrays()
        train_images = arrays["train"][0]
        x = train_images.float().div_(255)  # (N, C, H, W)
        self._mean = x.mean(dim=(0, 2, 3))  # (C,)
        self._std = x.std(dim=(0, 2, 3)).clamp_min(1e-3)  # (C,)
        kind = self.default_augment() if self.augment == "auto" else self.augment
        self.resolved_augment = kind
        aug = make_augment(kind, tuple(train_images.shape[-2:]))
        return {
            "train": ImageSplit(*arrays["train"], transform=aug),
            "val": ImageSplit(*arrays["val"]),
            "test": ImageSplit(*arrays["test"]),
        }

    def make_info(self, splits: dict[str, Dataset]) -> dict[str, Any]:
        imgs = getattr(splits["train"], "dataset", splits["train"]).images  # (N, C, H, W); a Subset's base
        assert self._mean is not None and self._std is not None
        return {
            "name": self.name,
            "channels": int(imgs.shape[1]),
            "height": int(imgs.shape[2]),
            "width": int(imgs.shape[3]),
            "num_classes": len(self.classes),
            "classes": list(self.classes),
            "mean": [round(float(m), 6) for m in self._mean],
            "std": [round(float(s), 6) for s in self._std],
            "augment": self.resolved_augment,
            **{f"num_{k}": len(v) for k, v in splits.items()},
        }

    def collate(self, items: list[tuple[Tensor, int]]) -> tuple[Tensor, Tensor]:
        """Stack uint8 images and normalise: ``(x (B, C, H, W) float32, y (B,) int64)``."""
        imgs = torch.stack([it[0] for it in items])  # (B, C, H, W) uint8
        y = torch.tensor([it[1] for it in items], dtype=torch.long)  # (B,)
        return self.normalize(imgs), y

    def normalize(self, imgs: Tensor) -> Tensor:
        """uint8 ``(B, C, H, W)`` -> float ``(x / 255 - mean) / std`` with the training statistics."""
        _ = self.splits  # statistics come with the data
        assert self._mean is not None and self._std is not None
        return (imgs.float().div_(255) - self._mean[:, None, None]) / self._std[:, None, None]

    def class_labels(self, ds: Dataset) -> tuple[Tensor, list[str]] | None:
        return (ds.labels, self.classes) if isinstance(ds, ImageSplit) else None

    def checksum_parts(self) -> Iterable[Any]:
        for name in ("train", "val", "test"):
            ds = self.splits[name]
            base = getattr(ds, "dataset", ds)  # a limit_train Subset hashes its indices too
            yield name, base.images, base.labels, list(getattr(ds, "indices", []))
        yield "augment", self.resolved_augment


def _carve_val(images: Tensor, labels: Tensor, val_size: int, split_seed: int, dataset: str):
    """Split ``val_size`` random examples (seeded by ``split_seed``) off a training set."""
    n = images.shape[0]
    if not isinstance(val_size, int) or isinstance(val_size, bool) or not 0 < val_size < n:
        raise ValueError(f"{dataset}: val_size={val_size!r}; must be an int in [1, {n - 1}]")
    perm = torch.randperm(n, generator=torch.Generator().manual_seed(int(split_seed)))
    val, train = perm[:val_size].sort().values, perm[val_size:].sort().values
    return (images[train], labels[train]), (images[val], labels[val])


# ----------------------------------------------------------------------------- torchvision
#: dataset name -> (torchvision class, folder under data_dir/cache, files that must exist there,
#: default augmentation, class names)
_IDX = ["raw/train-images-idx3-ubyte", "raw/train-labels-idx1-ubyte", "raw/t10k-images-idx3-ubyte",
        "raw/t10k-labels-idx1-ubyte"]
TORCHVISION_SOURCES: dict[str, tuple[str, str, list[str], str, list[str]]] = {
    "mnist": ("MNIST", "MNIST", _IDX, "crop", [str(i) for i in range(10)]),
    "fashion_mnist": ("FashionMNIST", "FashionMNIST", _IDX, "crop_flip",
                      ["T-shirt/top", "Trouser", "Pullover", "Dress", "Coat", "Sandal", "Shirt", "Sneaker", "Bag",
                       "Ankle boot"]),
    "cifar10": ("CIFAR10", "cifar-10-batches-py",
                [f"data_batch_{i}" for i in range(1, 6)] + ["test_batch", "batches.meta"], "crop_flip",
                ["airplane", "automobile", "bird", "cat", "deer", "dog", "frog", "horse", "ship", "truck"]),
}


_IDX_ITEM_BYTES = {0x08: 1, 0x09: 1, 0x0B: 2, 0x0C: 4, 0x0D: 4, 0x0E: 8}  # IDX type code -> bytes per item


def _check_idx(path: Path, ndim: int) -> int:
    """Check an IDX file's header against its size and ``ndim`` (3 for images, 1 for labels)
    before torchvision reads it; returns its item count. A bad file is
    :class:`~tasks.common.data.DataCorrupt` naming the data-dir file."""
    with reading(path), open(path, "rb") as fh:
        head = fh.read(4)
        size = os.fstat(fh.fileno()).st_size
        if len(head) < 4 or head[:2] != b"\0\0" or head[2] not in _IDX_ITEM_BYTES or not 1 <= head[3] <= 3:
            raise corrupt(path, f"not an IDX file (magic bytes {head.hex() or 'missing'})")
        raw = fh.read(4 * head[3])
    if len(raw) < 4 * head[3]:
        raise corrupt(path, "IDX header is truncated")
    dims = [int.from_bytes(raw[4 * i:4 * i + 4], "big") for i in range(head[3])]
    if len(dims) != ndim:
        raise corrupt(path, f"IDX header has {len(dims)} dimension(s) {tuple(dims)}; expected {ndim} "
                            f"({'images x height x width' if ndim == 3 else 'one label per image'})")
    want = 4 + 4 * len(dims) + math.prod(dims) * _IDX_ITEM_BYTES[head[2]]
    if size != want:
        raise corrupt(path, f"IDX header says shape {tuple(dims)} ({want} bytes) but the file has {size} bytes")
    return dims[0]


def _check_files(cls: type, dest: Path, files: list[str]) -> None:
    """Before torchvision parses ``files`` in ``dest``: IDX sizes (and equal image/label counts),
    and the release MD5 of CIFAR's pickles (so that a crafted pickle is never loaded)."""
    from torchvision.datasets.utils import check_integrity

    for name, md5 in [*getattr(cls, "train_list", []), *getattr(cls, "test_list", [])] + (
            [(cls.meta["filename"], cls.meta["md5"])] if hasattr(cls, "meta") else []):
        if not check_integrity(str(dest / name), md5):
            raise corrupt(dest / name, "MD5 differs from the release file (damaged or modified; this pickle "
                                       "is only loaded after the check)")
    idx = [f for f in files if "idx" in f]
    for images, labels in zip(idx[0::2], idx[1::2]):
        n_img, n_lab = _check_idx(dest / images, 3), _check_idx(dest / labels, 1)
        if n_img != n_lab:
            raise corrupt(dest / labels, f"{n_lab} labels for {n_img} images in {origin(dest / images)}")


class TorchvisionImages(ImageDataModule):
    """MNIST / Fashion-MNIST / CIFAR-10 via ``torchvision.datasets`` (``download=False`` on a
    cache filled from ``data_dir``; with no copy anywhere, torchvision downloads into the cache).

    Args:
        name: ``"mnist"``, ``"fashion_mnist"`` or ``"cifar10"``.
        data_dir: read-only folder in torchvision's layout (``MNIST/raw/*[.gz]``,
            ``FashionMNIST/raw/*[.gz]``, ``cifar-10-batches-py/*``).
        cache_dir: writable root handed to torchvision.
        val_size: validation examples carved from train with ``split_seed`` (never the run seed).
        augment: training augmentation (:data:`AUGMENTS`); ``"auto"``: crop for MNIST,
            crop + horizontal flip for Fashion-MNIST and CIFAR-10.
        download: allow torchvision to download when the files are in neither place.
    """

    def __init__(self, name: str = "mnist", *, data_dir: str | os.PathLike | None = None,
                 cache_dir: str | os.PathLike | None = None, val_size: int = 5000, split_seed: int = 0,
                 download: bool = True, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        if name not in TORCHVISION_SOURCES:
            raise ValueError(f"torchvision dataset name={name!r}; valid: {', '.join(TORCHVISION_SOURCES)}")
        self.name, self.data_dir, self.cache_dir = name, data_dir, cache_dir
        self.val_size, self.split_seed, self.download = val_size, split_seed, download
        self.classes = TORCHVISION_SOURCES[name][4]

    def default_augment(self) -> str:
        return TORCHVISION_SOURCES[self.name][3]

    def load_arrays(self) -> dict[str, tuple[Tensor, Tensor]]:
        import torchvision.datasets as tvd

        cls_name, folder, files, _, _ = TORCHVISION_SOURCES[self.name]
        cls = getattr(tvd, cls_name)

        def fetch(dest: Path) -> None:  # torchvision downloads into <root>/<folder>
            cls(str(dest.parent), train=True, download=True)

        dest = materialize(files, subdir=folder, data_dir=self.data_dir, cache_dir=self.cache_dir,
                           dataset=self.name, download=fetch if self.download else None)
        _check_files(cls, dest, files)
        root = str(dest.parent)
        out = {}
        for split, train in (("train", True), ("test", False)):
            with reading(dest):
                ds = cls(root, train=train, download=False)
            data = torch.as_tensor(ds.data)  # (N, H, W) MNIST-like, (N, H, W, C) CIFAR
            images = data[:, None] if data.ndim == 3 else data.permute(0, 3, 1, 2)  # (N, C, H, W)
            out[split] = (images.contiguous().to(torch.uint8), torch.as_tensor(ds.targets, dtype=torch.long))
            self._check_labels(out[split][1], dest / files[1 if train else 3] if "idx" in files[1] else dest, split)
        out["train"], out["val"] = _carve_val(*out["train"], self.val_size, self.split_seed, self.name)
        return out

    def _check_labels(self, labels: Tensor, source: Path, split: str) -> None:
        """Every label is a class of the dataset, and train holds at least two (so a damaged
        label file is refused here, naming it, not by a failed training cell)."""
        n = len(self.classes)
        bad = ((labels < 0) | (labels >= n)).nonzero().flatten()
        if bad.numel():
            i = int(bad[0])
            raise corrupt(source, f"label {int(labels[i])} of item {i} is not a class of {self.name} (valid labels: "
                                  f"0-{n - 1}, {n} classes); {bad.numel()} label(s) out of range")
        if split == "train":
            require_classes(labels, what=f"{self.name}, training split", names=self.classes, source=source)


# ----------------------------------------------------------------------------- synthetic
_PLUS = torch.tensor([[0, 1, 0], [1, 1, 1], [0, 1, 0]], dtype=torch.bool)
_RING = torch.tensor([[1, 1, 1], [1, 0, 1], [1, 1, 1]], dtype=torch.bool)
#: The ring is drawn at this intensity, the plus at 255: which glyph is which is easy to see,
#: where each lies relative to the other is the task.
RING_VALUE = 150
#: class = 2 * (plus below ring) + (plus right of ring)
SYNTHETIC_CLASSES = ["plus above-left", "plus above-right", "plus below-left", "plus below-right"]


def make_arrangement(n: int, *, size: int = 12, min_gap: int = 4, noise: int = 60, generator: torch.Generator
                     ) -> tuple[Tensor, Tensor]:
    """``n`` images ``(n, 1, size, size)`` uint8 and labels in ``0..3``.

    A 3x3 plus (intensity 255) and a 3x3 ring (:data:`RING_VALUE`) on uniform noise in
    ``[0, noise)``. Their centres differ by at least ``min_gap`` pixels both across and down,
    so they are far apart and the arrangement is never ambiguous; the label is ``2 * (plus below ring) + (plus right of
    ring)``. Both glyphs appear in every image and neither's shape depends on the class: the
    class is their relation. (A glyph's absolute position hints at it, since near a border the
    other glyph can only be on one side; a model without positions gets nothing, see the
    ``patch_bag`` floor, which still picks up a little from how patches cut the glyphs.)
    """
    if size < min_gap + 3:
        raise ValueError(f"synthetic: size={size} too small for min_gap={min_gap} (need size >= min_gap + 3)")
    if not 0 <= noise <= RING_VALUE - 20:
        raise ValueError(f"synthetic: noise={noise}; must be in [0, {RING_VALUE - 20}] "
                         f"(glyphs are {RING_VALUE} and 255)")
    g = generator
    imgs = torch.randint(0, max(noise, 1), (n, size, size), generator=g, dtype=torch.uint8)
    labels = torch.randint(0, 4, (n,), generator=g)
    lo, hi = 1, size - 2  # glyph centres keep the 3x3 glyph inside the canvas

    def pair(sign: Tensor) -> tuple[Tensor, Tensor]:
        """Centres (a, b) along one axis with ``sign * (a - b) >= min_gap``."""
        gap = torch.randint(0, hi - lo - min_gap + 1, (n,), generator=g) + min_gap  # |a - b|
        first = lo + (torch.rand(n, generator=g) * (hi - lo - gap + 1)).long()  # smaller centre
        a = torch.where(sign > 0, first + gap, first)
        b = torch.where(sign > 0, first, first + gap)
        return a, b

    pr, rr = pair(labels // 2 * 2 - 1)  # rows: plus below ring iff label >= 2
    pc, rc = pair(labels % 2 * 2 - 1)  # cols: plus right of ring iff label is odd
    d = torch.arange(-1, 2)
    for glyph, r, c, val in ((_PLUS, pr, pc, 255), (_RING, rr, rc, RING_VALUE)):
        rows = (r[:, None, None] + d[None, :, None]).expand(n, 3, 3)
        cols = (c[:, None, None] + d[None, None, :]).expand(n, 3, 3)
        batch = torch.arange(n)[:, None, None].expand(n, 3, 3)
        sel = glyph[None].expand(n, 3, 3)
        imgs[batch[sel], rows[sel], cols[sel]] = val
    return imgs[:, None], labels


class SyntheticArrangement(ImageDataModule):
    """The synthetic arrangement task (:func:`make_arrangement`), deterministic from ``data_seed``."""

    name = "synthetic"
    classes = SYNTHETIC_CLASSES

    def __init__(self, *, num_train: int = 3000, num_val: int = 500, num_test: int = 500, size: int = 12,
                 min_gap: int = 4, noise: int = 60, data_seed: int = 0, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        for key, val in (("num_train", num_train), ("num_val", num_val), ("num_test", num_test)):
            if isinstance(val, bool) or not isinstance(val, int) or val < 1:
                raise ValueError(f"synthetic: {key}={val!r}; must be a positive int")
        self.sizes = {"train": num_train, "val": num_val, "test": num_test}
        self.kw = dict(size=size, min_gap=min_gap, noise=noise)
        make_arrangement(1, generator=torch.Generator(), **self.kw)  # validate the parameters now
        self.data_seed = data_seed

    def load_arrays(self) -> dict[str, tuple[Tensor, Tensor]]:
        g = torch.Generator().manual_seed(int(self.data_seed))
        return {split: make_arrangement(n, generator=g, **self.kw) for split, n in self.sizes.items()}


# ----------------------------------------------------------------------------- builders
_LOADER_DEFAULTS: dict[str, Any] = {"batch_size": 128, "eval_batch_size": 512, "augment": "auto"}
TORCHVISION_DEFAULTS: dict[str, Any] = {**_LOADER_DEFAULTS, "val_size": 5000, "split_seed": 0, "download": True}
SYNTHETIC_DEFAULTS: dict[str, Any] = {**_LOADER_DEFAULTS, "batch_size": 64, "num_train": 3000, "num_val": 500,
                                      "num_test": 500, "size": 12, "min_gap": 4, "noise": 60, "data_seed": 0}


def _check_params(dataset: str, params: dict[str, Any], defaults: dict[str, Any]) -> None:
    unknown = sorted(set(params) - set(defaults))
    if unknown:
        raise ValueError(f"dataset {dataset!r}: unknown parameter(s) {', '.join(unknown)}; "
                         f"valid: {', '.join(sorted(defaults))}")


def build_torchvision(name: str, data_dir=None, cache_dir=None, seed: int = 0, **params: Any) -> TorchvisionImages:
    """DatasetSpec builder for ``name`` (bound with :func:`functools.partial`). ``seed`` (the run
    seed) is unused: the validation split is fixed by ``split_seed`` for every run."""
    del seed
    _check_params(name, params, TORCHVISION_DEFAULTS)
    return TorchvisionImages(name, data_dir=data_dir, cache_dir=cache_dir, **params)


def build_synthetic(data_dir=None, cache_dir=None, seed: int = 0, **params: Any) -> SyntheticArrangement:
    """DatasetSpec builder: the images depend on ``data_seed`` only, never on the run seed."""
    del data_dir, cache_dir, seed
    _check_params("synthetic", params, SYNTHETIC_DEFAULTS)
    return SyntheticArrangement(**params)


def torchvision_builder(name: str) -> Callable[..., TorchvisionImages]:
    return functools.partial(build_torchvision, name)
