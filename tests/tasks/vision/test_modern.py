"""The modern-recurrence image classifier (issue 31): every cell builds and trains a step in
each mode; pixel mode reads 784 steps of a 28x28 image in raster order, or in a fixed random
permutation per seed (psMNIST); causal reading classifies from the last step; a bad ``cell``
or ``mode`` is refused by config validation in one line."""

from __future__ import annotations

import math

import pytest
import torch

from tasks.common.recurrence import CELLS
from tasks.common.registry import get_task
from tasks.vision.data import SyntheticArrangement
from tasks.vision.modern import MODES, pixel_permutation
from tests.helpers.training import train_loop
from tests.helpers.threads import one_thread  # noqa: F401  (autouse: one torch thread)

SMALL = {"d_model": 32, "d_state": 8, "num_layers": 1, "dropout": 0.0}
MNIST = {"channels": 1, "height": 28, "width": 28, "num_classes": 10}


@pytest.fixture(scope="module")
def task():
    return get_task("vision")


@pytest.fixture(scope="module")
def synth():
    dm = SyntheticArrangement(num_train=16, num_val=8, num_test=8, batch_size=8)
    dm.setup()
    return dm


def _net(task, info, **params):
    torch.manual_seed(0)
    spec = task.models.get("modern_rnn")
    return spec.build(info, **{**spec.params, **SMALL, **params})


def test_registered_as_modern_rnn(task):
    spec = task.models.get("modern_rnn")
    assert (spec.family, spec.kind, spec.in_all) == ("rnn", "modern", False)
    assert task.models.get("row_rnn").kind == "classic"


@pytest.mark.parametrize("cell", list(CELLS))
@pytest.mark.parametrize("mode", list(MODES))
def test_every_cell_trains_one_step_in_each_mode(task, synth, cell, mode):
    net = _net(task, synth.info, cell=cell, mode=mode, permute=mode == "pixel")
    assert net.bidirectional == (mode != "pixel")  # sMNIST is causal; rows and patches read both ways
    module = task.make_module(net, synth.info, **{**task.module_params, "warmup_steps": 0, "scheduler": "none"})
    batch = next(iter(synth.train_dataloader()))
    logits = net(batch[0])  # (x (B, C, H, W), y (B,))
    assert logits.shape == (8, synth.info["num_classes"]) and torch.isfinite(logits).all()
    before = [p.detach().clone() for p in net.parameters()]
    losses = train_loop(module, torch.optim.AdamW(module.parameters(), lr=1e-2), 1, lambda: [batch])
    assert all(math.isfinite(v) for v in losses)
    assert any(not torch.equal(a, b) for a, b in zip(before, net.parameters()))


def test_sequence_shapes_on_mnist(task):
    x = torch.randn(2, 1, 28, 28)
    assert _net(task, MNIST, mode="rows").sequence(x).shape == (2, 28, 28)
    assert _net(task, MNIST, mode="patches", patch_size=4).sequence(x).shape == (2, 49, 16)
    assert _net(task, MNIST, mode="patches", patch_size=None, patch_grid=4).sequence(x).shape == (2, 16, 49)
    seq = _net(task, MNIST, mode="pixel").sequence(x)
    assert seq.shape == (2, 784, 1)
    assert torch.equal(seq[:, :, 0], x.flatten(1))  # sMNIST: raster order, row by row
    cifar = {**MNIST, "channels": 3, "height": 32, "width": 32}
    y = torch.randn(2, 3, 32, 32)
    seq = _net(task, cifar, mode="pixel").sequence(y)
    assert seq.shape == (2, 1024, 3) and torch.equal(seq[:, 33], y[:, :, 1, 1])  # a pixel's channels together


def test_the_pixel_permutation_is_fixed_per_seed_and_a_permutation(task):
    x = torch.randn(2, 1, 28, 28)
    a, b = _net(task, MNIST, mode="pixel", permute=True, perm_seed=3), _net(task, MNIST, mode="pixel", permute=True,
                                                                             perm_seed=3)
    assert torch.equal(a.perm, b.perm) and torch.equal(a.perm, pixel_permutation(784, 3))
    assert torch.equal(a.perm.sort().values, torch.arange(784))  # every pixel exactly once
    assert not torch.equal(a.perm, torch.arange(784))
    other = _net(task, MNIST, mode="pixel", permute=True, perm_seed=4).perm
    assert not torch.equal(a.perm, other) and torch.equal(other.sort().values, torch.arange(784))
    torch.manual_seed(123)  # the global RNG does not move the order
    assert torch.equal(pixel_permutation(784, 3), a.perm)
    seq = a.sequence(x)
    assert seq.shape == (2, 784, 1) and torch.equal(seq[:, :, 0], x.flatten(1)[:, a.perm])
    assert "perm" in a.state_dict()  # it travels with a checkpoint
    assert _net(task, MNIST, mode="pixel").perm is None and _net(task, MNIST, mode="rows", permute=True).perm is None


@pytest.mark.parametrize("cell", list(CELLS))
def test_causal_reading_classifies_from_the_last_step(task, cell):
    """Causal: the logits are the head on the encoder's last output (the state after every
    pixel: an earlier pixel reaches them); bidirectional: on its mean."""
    net = _net(task, {**MNIST, "height": 8, "width": 8}, cell=cell, mode="pixel").double().eval()
    x = torch.randn(2, 1, 8, 8, dtype=torch.float64)
    with torch.no_grad():
        h = net.encoder(net.embed(net.sequence(x)))  # (B, 64, d)
        torch.testing.assert_close(net(x), net.head(h[:, -1]))
        x2 = x.clone()
        x2[:, :, 7, 0] += 1.0  # an earlier pixel (8 steps before the end) reaches the prediction
        assert not torch.allclose(net(x2), net(x))
    bi = _net(task, {**MNIST, "height": 8, "width": 8}, cell=cell, mode="pixel", bidirectional=True).double().eval()
    with torch.no_grad():
        torch.testing.assert_close(bi(x), bi.head(bi.encoder(bi.embed(bi.sequence(x))).mean(1)))


@pytest.mark.parametrize("params,needle", [
    ({"cell": "gru"}, "model_params.modern_rnn: cell='gru'; valid: mingru, minlstm, s4d, mamba2, lru"),
    ({"mode": "columns"}, "model_params.modern_rnn: mode='columns'; valid: rows, patches, pixel"),
    ({"bidirectional": "both"}, "model_params.modern_rnn: bidirectional='both'; valid: true, false, null"),
])
def test_a_bad_cell_or_mode_is_refused_by_the_config_in_one_line(tmp_path, capsys, params, needle):
    from benchmarks.cli import main

    key, value = next(iter(params.items()))
    cfg = tmp_path / "bad.yaml"
    cfg.write_text("suite: t\nseeds: 1\ncells:\n  - task: vision\n    dataset: synthetic\n    models: [modern_rnn]\n"
                   f"    model_params:\n      modern_rnn: {{{key}: {value}}}\n")
    assert main(["run", str(cfg), "--dry-run", "--out", str(tmp_path / "out")]) == 2
    out, err = capsys.readouterr()
    lines = [ln for ln in err.splitlines() if ln.startswith("attnbench: error:")]
    assert len(lines) == 1 and "Traceback" not in out + err, err
    assert needle in lines[0], err
