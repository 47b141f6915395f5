"""Issue 32 point 3, one name per concept: every builder follows the rule of
:mod:`tasks.common.params` ("Parameter names"), every shipped config spells only the current names
(no rename notice when it loads), and an old name still loads, with a note naming the new one, into
the same cell id as the new name."""

from __future__ import annotations

import warnings
from pathlib import Path

import pytest
import yaml

from benchmarks.config.suite import expand, load_suite_with_notices
from tasks.common.registry import TASK_PACKAGES, get_task

CONFIGS = Path(__file__).resolve().parents[3] / "benchmarks" / "configs"

#: the names the rule retired (each now has one current name per concept)
RETIRED = {"hidden", "emb_dim", "channels", "kernel", "steps", "num_blocks", "convs", "attention", "heads", "ff",
           "layers"}
#: where a retired spelling is the current name of another concept (see the rule)
KEPT = {("vision", "resnet"): {"layers"}}  # torchvision's blocks per stage, a list

#: (task, dataset, model, params under the old names, the same under the new names): every renamed builder
OLD_AND_NEW = [
    ("graphs", "sbm", "graph_attention", {"hidden": 8, "heads": 2, "layers": 3},
     {"head_dim": 8, "num_heads": 2, "num_layers": 3}),
    ("graphs", "sbm", "gcn", {"hidden": 16, "layers": 3}, {"d_model": 16, "num_layers": 3}),
    ("graphs", "sbm", "ggnn", {"hidden": 16, "steps": 3}, {"hidden_size": 16, "num_layers": 3}),
    ("graphs", "sbm", "mlp", {"hidden": 16}, {"d_model": 16}),
    ("pos_tagging", "synthetic", "transformer", {"heads": 2, "ff": 64}, {"num_heads": 2, "dim_feedforward": 64}),
    ("pos_tagging", "synthetic", "bilstm", {"hidden": 16}, {"hidden_size": 16}),
    ("pos_tagging", "synthetic", "cnn", {"channels": 16, "kernel": 5}, {"d_model": 16, "kernel_size": 5}),
    ("pos_tagging", "synthetic", "mlp", {"hidden": 16}, {"d_model": 16}),
    ("translation", "synthetic", "rnn_bahdanau", {"emb_dim": 16, "hidden": 24, "attention": "luong_dot"},
     {"embedding_dim": 16, "hidden_size": 24, "score": "luong_dot"}),
    ("translation", "synthetic", "rnn_noattn", {"emb_dim": 16, "hidden": 24},
     {"embedding_dim": 16, "hidden_size": 24}),
    ("translation", "synthetic", "convs2s", {"emb_dim": 16, "hidden": 32}, {"embedding_dim": 16, "d_model": 32}),
    ("speech", "synthetic", "cnn", {"num_blocks": 2, "kernel": 5}, {"num_layers": 2, "kernel_size": 5}),
    ("vision", "synthetic", "vit", {"attention": "local"}, {"pattern": "local"}),
    ("vision", "synthetic", "vit_performer", {"attention": "full"}, {"pattern": "full"}),
    ("vision", "synthetic", "cnn", {"convs": 2}, {"num_layers": 2}),
    ("vision", "synthetic", "row_rnn", {"hidden": 16}, {"hidden_size": 16}),
    ("vision", "synthetic", "patch_bag", {"hidden": 16}, {"d_model": 16}),
]


def _load(tmp_path: Path, task: str, dataset: str, model: str, params: dict) -> tuple[list[str], list[str]]:
    """The cell ids and the notices of a one-cell suite running ``model`` with ``params``."""
    path = tmp_path / f"{model}.yaml"
    path.write_text(yaml.safe_dump({"suite": "names", "seeds": 1, "cells": [
        {"task": task, "dataset": dataset, "models": [model], "model_params": {model: params}}]}))
    cfg, notices = load_suite_with_notices(path)
    return [c.cell_id for c in expand(cfg, path.name)], notices


def test_every_builder_follows_the_rule():
    """No shipped model has a retired name among its parameters (bar the kept exceptions); the
    test tasks other tests register (tests/helpers/toy_task.py) are not the project's models."""
    bad = {}
    for task in TASK_PACKAGES:
        for name, spec in get_task(task).models.items():
            left = (set(spec.params) & RETIRED) - KEPT.get((task, name), set())
            if left:
                bad[f"{task}/{name}"] = sorted(left)
    assert not bad, f"retired parameter names still in use: {bad}"


@pytest.mark.parametrize("path", sorted(p for p in CONFIGS.glob("*.yaml") if not p.name.startswith("bench_")),
                         ids=lambda p: p.name)
def test_every_shipped_config_uses_the_current_names(path):
    with warnings.catch_warnings():
        warnings.simplefilter("error", FutureWarning)
        _, notices = load_suite_with_notices(path)
    assert not [n for n in notices if "deprecated" in n]


@pytest.mark.parametrize("task, dataset, model, old, new", OLD_AND_NEW, ids=[f"{t}-{m}" for t, _, m, _, _ in OLD_AND_NEW])
def test_an_old_name_loads_with_a_note_and_the_same_cell_id(tmp_path, task, dataset, model, old, new):
    ids_old, notices_old = _load(tmp_path, task, dataset, model, old)
    ids_new, notices_new = _load(tmp_path, task, dataset, model, new)
    assert ids_old == ids_new and len(ids_new) == 1
    assert not notices_new
    for o, n in zip(old, new):
        assert any(f"model parameter {o!r} is deprecated, use {n!r} (same cell ids)" in line for line in notices_old), \
            (o, n, notices_old)
