"""The modern-recurrence tagger (issue 31): every cell builds, trains, keeps padding out, and
its state/step parameters get no weight decay; classic models' optimiser groups are unchanged."""

from __future__ import annotations

import pytest
import torch

from tasks.common.recurrence import CELLS
from tests.helpers.domains import POS_EMB
from tests.helpers.training import train_loop

SMALL = {**POS_EMB, "d_model": 32, "d_state": 16, "num_layers": 1}




def _net(task, info, cell, seed=0, name="modern_rnn", **extra):
    torch.manual_seed(seed)
    spec = task.models.get(name)
    return spec.build(info, **{**spec.params, **SMALL, "cell": cell, **extra})


def test_registered_as_modern_rnn(task):
    spec = task.models.get("modern_rnn")
    assert (spec.family, spec.kind) == ("rnn", "modern")
    assert task.models.get("bilstm").kind == "classic"


@pytest.mark.parametrize("cell", list(CELLS))
def test_builds_shapes_and_trains_one_step(task, syn, cell):
    net = _net(task, syn.info, cell)
    module = task.make_module(net, syn.info, **{**task.module_params, "warmup_steps": 0})
    batch = syn.collate(syn.splits["val"][:3])
    logits = net(batch)
    assert logits.shape == (*batch["words"].shape, syn.info["num_tags"]) and torch.isfinite(logits).all()
    before = [p.detach().clone() for p in net.parameters()]
    losses = train_loop(module, torch.optim.AdamW(module.parameters(), lr=1e-2), 1,
                        lambda: [syn.collate(syn.splits["train"][:16])])
    assert all(v == v for v in losses)
    assert any(not torch.equal(a, b) for a, b in zip(before, net.parameters()))


@pytest.mark.parametrize("cell", list(CELLS))
def test_padding_exact(task, syn, cell):
    """A sentence's logits alone equal its logits in a batch with a longer sentence (the backward
    pass is reversed within the length, so padding never reaches it)."""
    net = _net(task, syn.info, cell).eval()
    items = sorted(syn.splits["val"], key=lambda it: len(it[0]))
    short, long = items[0], items[-1]
    n = len(short[0])
    with torch.no_grad():
        ref = net(syn.collate([short]))[0]
        got = net(syn.collate([short, long]))[0, :n]
    torch.testing.assert_close(got, ref, atol=1e-5, rtol=1e-5)


def test_bad_cell_names_the_choices(task, syn):
    with pytest.raises(ValueError, match="cell='gru'; valid: mingru, minlstm, s4d, mamba2, lru"):
        _net(task, syn.info, "gru")


def _groups(task, syn, name, **params):
    torch.manual_seed(0)
    spec = task.models.get(name)
    net = spec.build(syn.info, **{**spec.params, **params})
    module = task.make_module(net, syn.info, **{**task.module_params, "warmup_steps": 0, "scheduler": "none",
                                                "weight_decay": 0.05, "lr": 3e-3})
    opt = module.configure_optimizers()
    opt = opt["optimizer"] if isinstance(opt, dict) else opt
    return module, opt.param_groups


@pytest.mark.parametrize("cell", ["s4d", "mamba2", "lru"])
def test_state_params_get_no_weight_decay(task, syn, cell):
    module, groups = _groups(task, syn, "modern_rnn", **SMALL, cell=cell)
    hinted = {id(p) for p in module.parameters() if getattr(p, "_optim", None)}
    assert hinted  # A / Lambda / Delta carry a hint
    for g in groups:
        ids = {id(p) for p in g["params"]}
        assert ids <= hinted or not ids & hinted
        assert g["weight_decay"] == (0.0 if ids <= hinted else 0.05)
    assert sum(len(g["params"]) for g in groups) == sum(1 for p in module.parameters() if p.requires_grad)


@pytest.mark.parametrize("name", ["bilstm", "transformer", "cnn", "mlp"])
def test_classic_models_keep_one_group(task, syn, name):
    module, groups = _groups(task, syn, name)
    assert len(groups) == 1
    assert [id(p) for p in groups[0]["params"]] == [id(p) for p in module.parameters() if p.requires_grad]
    assert (groups[0]["lr"], groups[0]["weight_decay"]) == (3e-3, 0.05)


def test_a_bad_cell_is_refused_by_the_suite_config_before_any_cell():
    from benchmarks.config.schema import ConfigError
    from benchmarks.config.suite import validate_suite

    cfg = {"suite": "t", "seeds": 1, "cells": [{"task": "pos_tagging", "dataset": "synthetic", "models": ["modern_rnn"],
                                                "model_params": {"modern_rnn": {"cell": "gru"}}}]}
    with pytest.raises(ConfigError, match=r"model_params\.modern_rnn: cell='gru'; valid: mingru, minlstm, s4d"):
        validate_suite(cfg)


def test_a_width_the_recurrence_refuses_is_refused_by_the_suite_config():
    """Mamba-2's heads (headdim 64) must divide expand * d_model: d_model=16 failed the cell at
    build time after passing --dry-run."""
    from benchmarks.config.schema import ConfigError
    from benchmarks.config.suite import validate_suite

    cfg = {"suite": "t", "seeds": 1, "cells": [{"task": "pos_tagging", "dataset": "synthetic", "models": ["mamba2"],
                                                "model_params": {"mamba2": {"d_model": 16}}}]}
    with pytest.raises(ConfigError, match=r"model_params\.mamba2: headdim=64 is invalid: expected a divisor"):
        validate_suite(cfg)
    validate_suite({**cfg, "cells": [{**cfg["cells"][0], "model_params": {"mamba2": {"d_model": 64}}}]})
