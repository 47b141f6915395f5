"""The modern-recurrence speech model (issue 31): every cell builds and trains a step in both
task forms, padded frames never reach real ones (values and gradients, float64), and a bad
``cell`` is refused by config validation in one line."""

from __future__ import annotations

import math

import pytest
import torch

from tasks.common.recurrence import CELLS
from tasks.common.registry import get_task
from tests.helpers.domains import SPEECH_DATA, SPEECH_FRAMES
from tests.helpers.threads import one_thread  # noqa: F401  (autouse: one torch thread)
from tests.helpers.training import train_loop

SMALL = {"d_model": 32, "d_state": 8, "num_layers": 2, "dropout": 0.0}


@pytest.fixture(scope="module")
def task():
    return get_task("speech")


def _dm(task, name, **params):
    spec = task.datasets.get(name)
    dm = spec.build(None, None, 0, **{**spec.params, **params})
    dm.prepare_data()
    dm.setup("fit")
    return dm


@pytest.fixture(scope="module")
def data(task):
    return {"classify": _dm(task, "synthetic", **SPEECH_DATA), "tag": _dm(task, "synthetic_frames", **SPEECH_FRAMES)}


def _net(task, info, cell, **extra):
    torch.manual_seed(0)
    spec = task.models.get("modern_rnn")
    return spec.build(info, **{**spec.params, **SMALL, "cell": cell, **extra})


def test_registered_as_modern_rnn(task):
    spec = task.models.get("modern_rnn")
    assert (spec.family, spec.kind, spec.in_all) == ("rnn", "modern", False)
    assert task.models.get("lstm").kind == "classic"


@pytest.mark.parametrize("cell", list(CELLS))
@pytest.mark.parametrize("form", ["classify", "tag"])
def test_every_cell_trains_one_step_in_both_forms(task, data, cell, form):
    dm = data[form]
    assert dm.info["form"] == form
    net = _net(task, dm.info, cell)
    module = task.make_module(net, dm.info, **{**task.module_params, "warmup_steps": 0, "scheduler": "none"})
    batch = {k: v[:3] for k, v in next(iter(dm.train_dataloader())).items()}
    logits = net(batch["x"], batch["mask"])
    c = dm.info["num_classes"]
    assert logits.shape == ((batch["x"].shape[0], c) if form == "classify" else (*batch["mask"].shape, c))
    assert torch.isfinite(logits).all()
    before = [p.detach().clone() for p in net.parameters()]
    losses = train_loop(module, torch.optim.AdamW(module.parameters(), lr=1e-2), 1, lambda: [batch])
    assert all(math.isfinite(v) for v in losses)
    assert any(not torch.equal(a, b) for a, b in zip(before, net.parameters()))


@pytest.mark.parametrize("cell", list(CELLS))
@pytest.mark.parametrize("form", ["classify", "tag"])
def test_padding_exact_values_and_gradients(task, cell, form):
    """A right-padded batch (padding filled with large random values) equals each utterance run
    alone: outputs, the input gradients of the real frames (zero on padding) and the parameter
    gradients of the summed output, in float64."""
    info = {"num_features": 5, "num_classes": 3, "form": form}
    net = _net(task, info, cell).double().eval()
    lengths = [11, 4, 7]
    g = torch.Generator().manual_seed(1)
    x = 100 * torch.randn(len(lengths), max(lengths), 5, generator=g, dtype=torch.float64)
    mask = torch.arange(max(lengths))[None] < torch.tensor(lengths)[:, None]  # (B, L) True = real
    for i, n in enumerate(lengths):
        x[i, :n] /= 100  # real frames of ordinary size, padding huge
    w = torch.randn(*((len(lengths), 3) if form == "classify" else (len(lengths), max(lengths), 3)), generator=g,
                    dtype=torch.float64)  # a random weighting of the outputs to differentiate
    if form == "tag":
        w = w * mask[..., None]  # the loss sees real frames only (padded ones are the head's bias)

    x.requires_grad_(True)
    out = net(x, mask)
    (out * w).sum().backward()
    got_x, got_p = x.grad.clone(), [p.grad.clone() for p in net.parameters()]
    net.zero_grad()

    want_p = [torch.zeros_like(p) for p in net.parameters()]
    for i, n in enumerate(lengths):
        xi = x.detach()[i:i + 1, :n].clone().requires_grad_(True)
        oi = net(xi)  # no mask: every frame real
        wi = w[i:i + 1] if form == "classify" else w[i:i + 1, :n]
        torch.testing.assert_close(out[i:i + 1] if form == "classify" else out[i:i + 1, :n], oi)
        if form == "tag":
            assert torch.equal(out[i, n:], net.head.bias.expand(max(lengths) - n, 3).to(out.dtype))  # zeros -> bias
        (oi * wi).sum().backward()
        torch.testing.assert_close(got_x[i, :n], xi.grad[0])
        assert torch.all(got_x[i, n:] == 0)
        want_p = [a + p.grad for a, p in zip(want_p, net.parameters())]
        net.zero_grad()
    for a, b in zip(got_p, want_p):
        torch.testing.assert_close(a, b)


def test_a_bad_cell_is_refused_by_the_config_in_one_line(tmp_path, capsys):
    from benchmarks.cli import main

    cfg = tmp_path / "bad.yaml"
    cfg.write_text("suite: t\nseeds: 1\ncells:\n  - task: speech\n    dataset: synthetic\n    models: [modern_rnn]\n"
                   "    model_params:\n      modern_rnn: {cell: lstm}\n")
    assert main(["run", str(cfg), "--dry-run", "--out", str(tmp_path / "out")]) == 2
    out, err = capsys.readouterr()
    lines = [ln for ln in err.splitlines() if ln.startswith("attnbench: error:")]
    assert len(lines) == 1 and "Traceback" not in out + err, err
    assert "model_params.modern_rnn: cell='lstm'; valid: mingru, minlstm, s4d, mamba2, lru" in lines[0]
