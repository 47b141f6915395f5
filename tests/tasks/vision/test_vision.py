"""The vision task: registration, data (synthetic arrangement, torchvision IDX from a data dir),
patches, the local-window ViT, attention rollout, the module and training of every model (the
ResNet against torchvision: test_resnet.py)."""

from __future__ import annotations

import gzip
import struct
from pathlib import Path

import numpy as np
import pytest
import torch

import attn_core
from benchmarks.report.domains.vision import decode_image
from tasks.common.patterns import PRESET_PATTERNS
from tasks.common.recurrence import CELLS
from tasks.common.registry import FAMILIES, UnknownNameError, builder_of, get_task
from tasks.vision.data import RING_VALUE, SyntheticArrangement, TorchvisionImages, make_arrangement
from tasks.vision.models import (ViT, grid_edges_batched, patchify, resolve_patch_size, rollout,
                                 unpatchify)
from tasks.vision.module import ImageClassifier, rollout_extras
from tests.helpers.domains import VISION_DATA as SMALL
from tests.helpers.threads import one_thread  # noqa: F401  (autouse: one torch thread)



@pytest.fixture(scope="module")
def task():
    return get_task("vision")


@pytest.fixture(scope="module")
def synth():
    dm = SyntheticArrangement(**SMALL)
    dm.setup()
    return dm


# --------------------------------------------------------------------------- registry
def test_task_registered(task):
    assert task.name == "vision" and task.metric == "acc" and task.mode == "max"
    assert set(task.datasets.names()) == {"mnist", "fashion_mnist", "cifar10", "synthetic"}
    assert task.datasets.get("synthetic").synthetic and not task.datasets.get("mnist").synthetic
    variants = {f"vit_{p}" for p in PRESET_PATTERNS}
    assert set(task.models.names()) == {"vit", "vit_local", "resnet", "cnn", "row_rnn", "patch_bag", "modern_rnn", *CELLS,
                                         *variants}
    assert {task.models.get(n).family for n in task.models.names()} == set(FAMILIES)
    assert task.models.get("vit").pattern == "full" and task.models.get("vit_local").pattern == "grid_window"  # not "graph" (issue 34)
    assert builder_of(task.models.get("vit")) is builder_of(task.models.get("vit_local"))  # one builder, two presets
    with pytest.raises(UnknownNameError, match="vit_local"):
        task.models.get("deit")


def test_bad_params_are_named(task, synth):
    spec = task.datasets.get("synthetic")
    with pytest.raises(ValueError, match="num_trian.*valid:.*num_train"):
        spec.build(None, None, 0, num_trian=10)
    with pytest.raises(ValueError, match="augment='jitter'; valid: auto, none, crop, crop_flip"):
        spec.build(None, None, 0, augment="jitter")
    with pytest.raises(ValueError, match="name='svhn'; valid: mnist, fashion_mnist, cifar10"):
        TorchvisionImages("svhn")
    with pytest.raises(ValueError, match="unknown parameter.*heads.*valid:.*num_heads"):
        task.models.get("vit").build(synth.info, heads=2)
    with pytest.raises(ValueError, match="patch_size=5 must divide the image size 12x12; valid: 1, 2, 3, 4, 6, 12"):
        task.models.get("vit").build(synth.info, patch_size=5)
    with pytest.raises(ValueError, match="pool='max'; valid"):
        task.models.get("vit").build(synth.info, pool="max")


# --------------------------------------------------------------------------- synthetic data
def _glyph_centres(img: torch.Tensor) -> tuple[tuple[int, int], tuple[int, int]]:
    """(row, col) of the plus (pixels 255) and of the ring (pixels RING_VALUE), by their 3x3 patterns."""
    plus = ring = None
    for value, pattern in ((255, "plus"), (RING_VALUE, "ring")):
        on = (img[0] == value).numpy()
        for r in range(1, on.shape[0] - 1):
            for c in range(1, on.shape[1] - 1):
                win = on[r - 1 : r + 2, c - 1 : c + 2]
                if pattern == "plus" and win.sum() == 5 and win[1].all() and win[:, 1].all():
                    plus = (r, c)
                if pattern == "ring" and win.sum() == 8 and not win[1, 1]:
                    ring = (r, c)
    assert plus is not None and ring is not None
    return plus, ring


def test_synthetic_labels_are_the_arrangement():
    imgs, labels = make_arrangement(60, size=16, min_gap=5, noise=60, generator=torch.Generator().manual_seed(3))
    assert imgs.shape == (60, 1, 16, 16) and imgs.dtype == torch.uint8
    assert set(labels.tolist()) == {0, 1, 2, 3}
    for img, y in zip(imgs, labels.tolist()):
        (pr, pc), (rr, rc) = _glyph_centres(img)
        assert abs(pr - rr) >= 5 and abs(pc - rc) >= 5
        assert y == 2 * int(pr > rr) + int(pc > rc)
    glyph = (imgs == 255) | (imgs == RING_VALUE)
    assert int(glyph.sum()) == 60 * (5 + 8) and int(imgs[~glyph].max()) < 60  # noise stays below 60


def test_synthetic_deterministic_from_data_seed_only(task):
    spec = task.datasets.get("synthetic")
    a = spec.build(None, None, 0, **SMALL)
    b = spec.build(None, None, 99, **SMALL)  # the run seed does not change the data
    c = spec.build(None, None, 0, **SMALL, data_seed=1)
    assert a.checksum() == b.checksum() != c.checksum()
    assert torch.equal(a.splits["train"].images, b.splits["train"].images)
    assert not torch.equal(a.splits["train"].images, c.splits["train"].images)
    assert a.info["num_train"] == 256 and a.info["augment"] == "none"
    assert (a.info["channels"], a.info["height"], a.info["width"], a.info["num_classes"]) == (1, 12, 12, 4)


def test_collate_normalises_with_train_statistics(synth):
    imgs = synth.splits["train"].images
    x = imgs.double() / 255
    assert synth.info["mean"][0] == pytest.approx(float(x.mean()), abs=1e-5)
    assert synth.info["std"][0] == pytest.approx(float(x.std()), abs=1e-5)
    xb, yb = synth.collate([synth.splits["val"][i] for i in range(5)])
    expected = (synth.splits["val"].images[:5].float() / 255 - synth.info["mean"][0]) / synth.info["std"][0]
    torch.testing.assert_close(xb, expected, atol=1e-4, rtol=1e-4)
    assert yb.tolist() == synth.splits["val"].labels[:5].tolist()


def test_augmentation_on_train_only_and_limit_train():
    dm = SyntheticArrangement(**SMALL, augment="crop")
    torch.manual_seed(0)
    train, val = dm.splits["train"], dm.splits["val"]
    changed = sum(not torch.equal(train[i][0], train.images[i]) for i in range(50))
    assert changed > 25  # a random shift by up to 1 pixel each way: most items move
    img, _ = train[0]
    assert img.dtype == torch.uint8 and img.shape == (1, 12, 12)
    assert all(torch.equal(val[i][0], val.images[i]) for i in range(20))
    before = dm.checksum()
    n = dm.limit_train(0.25, seed=1)
    assert n == 64 and len(dm.splits["train"]) == 64 and dm.info["num_train"] == 64
    assert dm.checksum() != before


# --------------------------------------------------------------------------- torchvision (fake IDX files)
def _write_idx(path: Path, arr: np.ndarray) -> None:
    magic = {1: 0x801, 3: 0x803}[arr.ndim]
    header = struct.pack(">I", magic) + b"".join(struct.pack(">I", d) for d in arr.shape)
    with gzip.open(path, "wb") as fh:
        fh.write(header + arr.astype(np.uint8).tobytes())


def _fake_mnist(root: Path, folder: str = "MNIST", n_train: int = 40, n_test: int = 20) -> tuple[np.ndarray, ...]:
    rng = np.random.default_rng(0)
    raw = root / folder / "raw"
    raw.mkdir(parents=True)
    tr_x, te_x = rng.integers(0, 256, (n_train, 28, 28)), rng.integers(0, 256, (n_test, 28, 28))
    tr_y, te_y = np.arange(n_train) % 10, np.arange(n_test) % 10
    for name, arr in (("train-images-idx3-ubyte", tr_x), ("train-labels-idx1-ubyte", tr_y),
                      ("t10k-images-idx3-ubyte", te_x), ("t10k-labels-idx1-ubyte", te_y)):
        _write_idx(raw / f"{name}.gz", arr)
    return tr_x, te_x


@pytest.mark.parametrize("name,folder,augment",
                         [("mnist", "MNIST", "crop"), ("fashion_mnist", "FashionMNIST", "crop_flip")])
def test_idx_datasets_from_gzipped_data_dir(tmp_path, task, name, folder, augment):
    tr_x, te_x = _fake_mnist(tmp_path / "data", folder)
    spec = task.datasets.get(name)
    dm = spec.build(tmp_path / "data", tmp_path / "cache", 0, val_size=10, download=False)
    assert (dm.info["num_train"], dm.info["num_val"], dm.info["num_test"]) == (30, 10, 20)
    assert len(dm.info["classes"]) == 10 and dm.info["augment"] == augment
    assert (tmp_path / "cache" / folder / "raw" / "train-images-idx3-ubyte").is_file()  # gunzipped into the cache
    assert torch.equal(dm.splits["test"].images[:, 0], torch.as_tensor(te_x, dtype=torch.uint8))
    # train + val is the original train set, split by the fixed split_seed
    both = torch.cat([dm.splits["train"].images, dm.splits["val"].images])[:, 0]
    assert sorted(map(bytes, both.numpy())) == sorted(map(bytes, tr_x.astype(np.uint8)))
    again = spec.build(tmp_path / "data", tmp_path / "cache2", 5, val_size=10, download=False)
    assert again.checksum() == dm.checksum()


def test_missing_mnist_names_the_file(tmp_path, task):
    (tmp_path / "data").mkdir()
    dm = task.datasets.get("mnist").build(tmp_path / "data", tmp_path / "cache", 0, download=False)
    with pytest.raises(FileNotFoundError, match=r"MNIST/raw/train-images-idx3-ubyte"):
        dm.setup()


@pytest.mark.data
def test_real_mnist(shared_data, tmp_path, task):
    dm = task.datasets.get("mnist").build(shared_data, tmp_path, 0, download=False)
    info = dm.info
    assert (info["num_train"], info["num_val"], info["num_test"]) == (55000, 5000, 10000)
    assert (info["channels"], info["height"], info["width"], info["num_classes"]) == (1, 28, 28, 10)
    counts = torch.bincount(dm.splits["test"].labels).tolist()
    assert counts == [980, 1135, 1032, 1010, 982, 892, 958, 1028, 974, 1009]  # shared/data/README.md
    all_train = torch.bincount(torch.cat([dm.splits["train"].labels, dm.splits["val"].labels])).tolist()
    assert all_train == [5923, 6742, 5958, 6131, 5842, 5421, 5918, 6265, 5851, 5949]


# --------------------------------------------------------------------------- patches
def test_patchify_values_and_round_trip():
    torch.manual_seed(0)
    x = torch.randn(2, 3, 8, 12)
    p = 4
    patches = patchify(x, p)  # (B, 6, 48)
    assert patches.shape == (2, 6, 3 * 16)
    for b in range(2):
        for r in range(2):
            for c in range(3):
                want = x[b, :, r * p : r * p + p, c * p : c * p + p].reshape(-1)  # channel-major
                torch.testing.assert_close(patches[b, r * 3 + c], want)
    assert torch.equal(unpatchify(patches, p, 3, 8, 12), x)
    assert torch.equal(unpatchify(patchify(x, 1), 1, 3, 8, 12), x)


def test_patch_grid_resolves_per_image_size():
    assert resolve_patch_size(None, 4, 28, 28) == 7 and resolve_patch_size(None, 4, 32, 32) == 8
    assert resolve_patch_size(7, None, 28, 28) == 7
    with pytest.raises(ValueError, match="exactly one of patch_size.*patch_size=4, patch_grid=4.*patch_size: null"):
        resolve_patch_size(4, 4, 28, 28)
    with pytest.raises(ValueError, match="exactly one"):
        resolve_patch_size(None, None, 28, 28)
    with pytest.raises(ValueError, match="patch_grid=5 must divide the image size 28x28.*valid: 1, 2, 4, 7, 14, 28"):
        resolve_patch_size(None, 5, 28, 28)
    with pytest.raises(ValueError, match="patch_grid=2 .* 8x12 .*valid: \\(none"):
        resolve_patch_size(None, 2, 8, 12)


def test_vit_patch_grid_is_the_same_network_as_its_patch_size():
    kw = dict(d_model=16, num_heads=2, num_layers=1, dropout=0.0)
    torch.manual_seed(0)
    by_size = ViT(1, 28, 28, 10, patch_size=7, **kw).eval()
    torch.manual_seed(0)
    by_grid = ViT(1, 28, 28, 10, patch_size=None, patch_grid=4, **kw).eval()
    x = torch.randn(3, 1, 28, 28)
    torch.testing.assert_close(by_grid(x), by_size(x), rtol=0, atol=0)
    assert by_grid.grid == (4, 4) and by_grid.patch_size == 7


@pytest.mark.parametrize("dataset,shape", [("mnist", (1, 28, 28)), ("fashion_mnist", (1, 28, 28)),
                                           ("cifar10", (3, 32, 32))])
@pytest.mark.parametrize("config", ["vision", "vision_datasize"])
def test_vision_configs_run_with_only_the_dataset_name_changed(task, config, dataset, shape):
    """The issue: the MNIST config must run on Fashion-MNIST or CIFAR-10 with only the name
    changed (and, since vision.yaml names MNIST's tuned rates, ``tuning: null``, which the error
    asks for). Every cell validates and every model builds on that dataset's image size; the ViT
    keeps its 4x4 patch grid."""
    from benchmarks.config.schema import ConfigError
    from benchmarks.config.suite import expand, load_yaml, validate_suite

    raw = load_yaml(Path(__file__).parents[3] / "benchmarks" / "configs" / f"{config}.yaml")
    for entry in raw["cells"]:
        entry["dataset"] = dataset
    if raw.get("tuning") and dataset != "mnist":  # its tuned rates are MNIST's: one clear line says so
        with pytest.raises(ConfigError, match=r"covers none of this config's cells .* or set tuning: null"):
            validate_suite(raw, source=config)
        raw["tuning"] = None  # what the line asks: the hand-set rates (or `attnbench tune` on that dataset)
    cfg = validate_suite(raw, source=config)
    c, h, w = shape
    info = {"channels": c, "height": h, "width": w, "num_classes": 10}
    torch.manual_seed(0)
    x = torch.randn(2, c, h, w)
    for cell in expand(cfg):
        net = task.models.get(cell.model).build(info, **cell.config["model_params"]).eval()
        logits = net(x)
        assert logits.shape == (2, 10) and torch.isfinite(logits).all(), cell.model
        if cell.model.startswith("vit"):
            assert net.grid == (4, 4)


def test_batched_grid_edges_are_block_diagonal():
    gh, gw, r, b = 3, 4, 1, 3
    n = gh * gw
    dense = graph_mask = attn_core.graph_mask(grid_edges_batched(gh, gw, r, b), b * n)
    expected = torch.block_diag(*[attn_core.grid_window_mask(gh, gw, r)] * b)
    assert torch.equal(dense, expected)
    # with a class token per image: node 0 of each block sees and is seen by every node of its image
    m = attn_core.graph_mask(grid_edges_batched(gh, gw, r, b, cls_token=True), b * (n + 1))
    block = torch.zeros(n + 1, n + 1, dtype=torch.bool)
    block[1:, 1:] = attn_core.grid_window_mask(gh, gw, r)
    block[0, :] = block[:, 0] = True
    assert torch.equal(m, torch.block_diag(*[block] * b))
    del graph_mask


@pytest.mark.parametrize("pool", ["mean", "cls"])
def test_vit_local_with_a_covering_window_equals_full_vit(pool):
    torch.manual_seed(0)
    kw = dict(patch_size=4, d_model=16, num_heads=2, num_layers=2, dropout=0.0, pool=pool)
    full = ViT(1, 12, 16, 5, pattern="full", **kw).eval()
    local = ViT(1, 12, 16, 5, pattern="local", radius=3, **kw).eval()  # 3x4 grid: radius 3 covers it
    local.load_state_dict(full.state_dict())
    x = torch.randn(3, 1, 12, 16)
    torch.testing.assert_close(local(x), full(x), atol=1e-5, rtol=1e-5)
    narrow = ViT(1, 12, 16, 5, pattern="local", radius=1, **kw).eval()
    narrow.load_state_dict(full.state_dict())
    assert (narrow(x) - full(x)).abs().max() > 1e-3  # a real window changes the output


def test_vit_local_weights_stay_in_the_window():
    torch.manual_seed(1)
    net = ViT(1, 16, 16, 4, patch_size=4, d_model=16, num_heads=2, num_layers=2, pattern="local", radius=1).eval()
    _, weights = net.encode(torch.randn(2, 1, 16, 16), need_weights=True)
    allowed = attn_core.grid_window_mask(4, 4, 1)
    for w in weights:  # (B, H, 16, 16)
        assert w.shape == (2, 2, 16, 16)
        assert (w[..., ~allowed] == 0).all()
        torch.testing.assert_close(w.sum(-1), torch.ones(2, 2, 16))


# --------------------------------------------------------------------------- rollout
def _reference_rollout(weights: list[np.ndarray]) -> np.ndarray:
    """Abnar & Zuidema, written out per image: mean heads, 0.5 A + 0.5 I, R = A_L ... A_1."""
    b, _, n, _ = weights[0].shape
    out = np.zeros((b, n, n))
    for i in range(b):
        r = np.eye(n)
        for w in weights:
            a = w[i].mean(0)
            a = (a + np.eye(n)) / (a + np.eye(n)).sum(1, keepdims=True)
            r = a @ r
        out[i] = r
    return out


def test_rollout_matches_reference():
    torch.manual_seed(0)
    ws = [torch.softmax(torch.randn(2, 3, 5, 5), -1) for _ in range(3)]
    ref = _reference_rollout([w.numpy().astype(np.float64) for w in ws])
    got_mean = rollout(ws, "mean")
    np.testing.assert_allclose(got_mean.numpy(), ref.mean(1), atol=1e-5)
    cls = ref[:, 0, 1:] / ref[:, 0, 1:].sum(1, keepdims=True)
    np.testing.assert_allclose(rollout(ws, "cls").numpy(), cls, atol=1e-5)
    # attention only to oneself: every patch flows equally into the mean
    eye = [torch.eye(4).expand(1, 2, 4, 4)]
    torch.testing.assert_close(rollout(eye, "mean"), torch.full((1, 4), 0.25))


@pytest.mark.parametrize("name", ["vit", "vit_local"])
def test_rollout_maps_have_the_grid_shape_and_sum_to_one(task, synth, name):
    torch.manual_seed(0)
    net = task.models.get(name).build(synth.info, d_model=16, num_heads=2, num_layers=2)
    ex = rollout_extras(net, synth, k=5)
    assert ex["grid"] == [3, 3] and ex["patch_size"] == 4 and len(ex["images"]) == 4  # 4 classes
    test_labels = synth.splits["test"].labels.tolist()
    assert [im["label"] for im in ex["images"]] == [0, 1, 2, 3]
    assert [im["index"] for im in ex["images"]] == [test_labels.index(c) for c in range(4)]  # first of each class
    for im in ex["images"]:
        m = np.array(im["map"])
        assert m.shape == (3, 3) and (m >= 0).all() and m.sum() == pytest.approx(1.0, abs=1e-3)
        img = decode_image(im["image"])
        assert img.shape == (1, 12, 12)
        assert (img == synth.splits["test"].images[im["index"]].numpy()).all()
    x = synth.normalize(synth.splits["test"].images[[im["index"] for im in ex["images"]]])
    direct = net.eval().attention_rollout(x)
    np.testing.assert_allclose(np.array([im["map"] for im in ex["images"]]), direct.numpy(), atol=1e-4)


def test_report_extras_only_for_vits(task, synth):
    for name, has in (("vit", True), ("cnn", False)):
        net = task.models.get(name).build(synth.info)
        ex = task.make_module(net, synth.info).report_extras(None, synth)
        assert ("rollout" in ex) == has


def test_report_extras_of_every_vit_variant(task, synth):
    """Every ViT the task registers gets rollout maps when its attention forms weights, and none
    (never an error after training) when it does not: linear, performer, linformer, nystrom."""
    vits = [m for m in task.models.names() if m.startswith("vit")]
    assert {"vit_linear", "vit_performer", "vit_linformer", "vit_nystrom", "vit_local_global"} <= set(vits)
    with_maps = set()
    for name in vits:
        net = task.models.get(name).build(synth.info, d_model=16, num_heads=2, num_layers=1)
        if "rollout" in task.make_module(net, synth.info).report_extras(None, synth):
            with_maps.add(name)
    assert with_maps == {"vit", "vit_local", "vit_local_global"}


# --------------------------------------------------------------------------- module and training
def test_step_metrics(synth):
    class Fixed(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.w = torch.nn.Parameter(torch.zeros(()))

        def forward(self, x):
            logits = torch.zeros(x.shape[0], 4)
            logits[:, 1] = 1.0
            return logits + self.w

    mod = ImageClassifier(Fixed())
    x, y = synth.collate([synth.splits["val"][i] for i in range(32)])
    out = mod.step((x, y), "val")
    assert out.samples == 32
    assert float(out.metrics["acc"]) == pytest.approx(float((y == 1).float().mean()))
    expected = torch.nn.functional.cross_entropy(torch.tensor([[0.0, 1.0, 0.0, 0.0]]).expand(32, 4), y)
    assert float(out.loss.detach()) == pytest.approx(float(expected), rel=1e-5)


def _fit(task, name, dm, epochs, seed=0, lr=None, **params):
    """A plain loop with the task's optimiser (constant lr); returns (module, per-epoch mean losses)."""
    torch.manual_seed(seed)
    net = task.models.get(name).build(dm.info, **params)
    mod = task.make_module(net, dm.info, **{**task.module_params, "scheduler": "none", "warmup_steps": 0,
                                            **({"lr": lr} if lr else {})})
    opt = mod.configure_optimizers()
    g = torch.Generator().manual_seed(seed)
    train = dm.splits["train"]
    losses = []
    mod.train()
    for _ in range(epochs):
        perm = torch.randperm(len(train), generator=g)
        tot = 0.0
        for s in range(0, len(train), dm.batch_size):
            x, y = dm.collate([train[int(i)] for i in perm[s : s + dm.batch_size]])
            loss = mod.step((x, y), "train").loss
            opt.zero_grad()
            loss.backward()
            opt.step()
            tot += float(loss.detach())
        losses.append(tot)
    mod.eval()
    return mod, losses


def _acc(mod, dm, split="test") -> float:
    ds = dm.splits[split]
    with torch.no_grad():
        x, y = dm.collate([ds[i] for i in range(len(ds))])
        return float((mod.net(x).argmax(-1) == y).float().mean())


_SMALL_PARAMS = {"resnet": {"base_channels": 4, "layers": [1, 1, 1, 1]}, "vit": {"d_model": 32, "num_layers": 2},
                 "vit_local": {"d_model": 32, "num_layers": 2}, "row_rnn": {"hidden_size": 32}}


@pytest.mark.parametrize("name", ["vit", "vit_local", "resnet", "cnn", "row_rnn", "patch_bag"])
def test_every_model_learns(task, synth, name):
    """A few optimiser steps on one synthetic batch: the loss falls well below its start."""
    torch.manual_seed(0)
    net = task.models.get(name).build(synth.info, **_SMALL_PARAMS.get(name, {}))
    mod = task.make_module(net, synth.info, **{**task.module_params, "scheduler": "none", "warmup_steps": 0})
    opt = mod.configure_optimizers()
    x, y = synth.collate([synth.splits["train"][i] for i in range(16)])
    losses = []
    mod.train()
    for _ in range(40):
        loss = mod.step((x, y), "train").loss
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(float(loss.detach()))
    assert losses[-1] < 0.5 * losses[0], losses


def test_synthetic_needs_context(task):
    """The position-free floor stays far below models that relate distant parts of the image."""
    dm = SyntheticArrangement(num_train=3000, num_val=100, num_test=400, batch_size=64)
    floor, _ = _fit(task, "patch_bag", dm, 4)
    cnn, _ = _fit(task, "cnn", dm, 3)
    vit, _ = _fit(task, "vit", dm, 8, lr=1e-3)
    a_floor, a_cnn, a_vit = _acc(floor, dm), _acc(cnn, dm), _acc(vit, dm)
    assert a_floor < 0.5, a_floor
    assert a_cnn > a_floor + 0.3 and a_vit > a_floor + 0.25, (a_floor, a_cnn, a_vit)
