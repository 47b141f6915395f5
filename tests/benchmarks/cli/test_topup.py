"""More seeds where a diagnostic is undecided (issue 51 item 1): a run with ``max_seeds`` adds seeds
to the two models of an undecided expectation, round by round, until the test decides it or the
cap is reached; the original cells keep their ids, the added ones are ordinary records."""

from __future__ import annotations

import json

import pytest
from torch import nn

from benchmarks.cli import main
from benchmarks.config.suite import expand, validate_suite
from benchmarks.run import records as R
from benchmarks.cli.topup import STEP, Need, extended_config
from benchmarks.run.worker import PLUGINS_ENV
from tasks.common.registry import ModelSpec
from tests.helpers.toy_task import register

SUITE = """
suite: topup
seeds: 3
trainer: {{max_epochs: 1, accelerator: cpu, deterministic: true}}
diagnostics:
  twins:
    tests: two copies of one model
    why: the same initialisation and data give the same accuracy on every seed
    expect: ["linear ~ twin"]
    margin: 0.05
    {cap}
cells:
  - task: toy
    dataset: points
    diagnostic: twins
    models: [linear, twin]
    model_params: {{linear: {{hidden: 0}}}}
"""


@pytest.fixture(autouse=True)
def _twin(monkeypatch):
    task = register()
    if "twin" not in task.models.names():
        task.models.register("twin", ModelSpec("twin", "rnn", lambda info, hidden=0: nn.Linear(info["dim"], 2), {"hidden": 0}))
    monkeypatch.setenv(PLUGINS_ENV, "tests.helpers.toy_task")


def _seeds(out) -> dict[str, list[int]]:
    got: dict[str, list[int]] = {}
    for r in R.load_records(out):
        got.setdefault(r["model"], []).append(r["seed"])
    return {k: sorted(v) for k, v in got.items()}


def test_an_undecided_level_gets_more_seeds_until_the_test_decides(tmp_path, capsys):
    """Identical seeds: TOST's exact tests give p = 1/2^n: 0.125 at 3 seeds (undecided), 1/64 at 6
    (level). The run stops at 6 although the cap is 12."""
    cfg = tmp_path / "s.yaml"
    cfg.write_text(SUITE.format(cap="max_seeds: 12"))
    assert main(["run", str(cfg), "--out", str(tmp_path / "out"), "--launcher", "inline"]) == 0
    text = capsys.readouterr().out
    assert "undecided: twins: linear ~ twin (linear vs twin): seeds 3, 4, 5 more (max_seeds 12)" in text
    assert _seeds(tmp_path / "out") == {"linear": list(range(6)), "twin": list(range(6))}
    rows = json.loads((tmp_path / "out" / "diagnostics.json").read_text())
    assert [(r["outcome"], r["n"]) for r in rows] == [("matched", 6)]
    # a second run skips every finished cell and adds none
    assert main(["run", str(cfg), "--out", str(tmp_path / "out"), "--launcher", "inline"]) == 0
    assert "ran 0 cells" in capsys.readouterr().out


def test_without_a_cap_or_at_the_cap_nothing_is_added(tmp_path, capsys):
    for cap, want in (("", 3), ("max_seeds: 3", 3), ("max_seeds: 4", 4)):
        cfg = tmp_path / f"s{want}{len(cap)}.yaml"
        cfg.write_text(SUITE.format(cap=cap))
        out = tmp_path / f"out{want}{len(cap)}"
        assert main(["run", str(cfg), "--out", str(out), "--launcher", "inline", "--no-report"]) == 0
        assert _seeds(out) == {"linear": list(range(want)), "twin": list(range(want))}, cap


def test_the_extended_config_keeps_every_original_cell_id():
    raw = {"suite": "t", "seeds": 3, "trainer": {"max_epochs": 1, "accelerator": "cpu"},
           "diagnostics": {"d": {"tests": "t", "why": "w", "expect": ["linear ~ twin"], "margin": 0.1, "max_seeds": 9}},
           "cells": [{"task": "toy", "dataset": "points", "diagnostic": "d", "models": ["linear", "twin"],
                      "model_params": {"linear": {"hidden": 0}}}]}
    cfg = validate_suite(raw, source="t.yaml")
    before = {c.cell_id for c in expand(cfg)}
    need = Need("d", "linear ~ twin", ("linear", "twin"), "toy", "points", tuple(range(3, 3 + STEP)))
    after = expand(validate_suite(extended_config(cfg, [need]), source="t.yaml"))
    assert before < {c.cell_id for c in after} and len(after) == 12
    assert sorted((c.model, c.seed) for c in after) == sorted((m, s) for m in ("linear", "twin") for s in range(6))


def test_seeds_that_fail_stop_the_top_up_after_one_round(tmp_path, capsys, monkeypatch):
    """A killed or failing added seed: the run says so once and ends, it does not ask again and again."""
    import benchmarks.cli.topup as T

    calls = []

    def run(cfg):
        calls.append(cfg)  # runs nothing: the added seeds never finish

    monkeypatch.setattr(T, "undecided", lambda cfg, out: [Need("d", "linear ~ twin", ("linear", "twin"), "toy", "points", (3, 4, 5))])
    monkeypatch.setattr(T, "extended_config", lambda cfg, needs: cfg)
    monkeypatch.setattr("benchmarks.config.suite.validate_suite", lambda cfg, source="": cfg)
    lines: list[str] = []
    T.top_up({"suite": "s", "diagnostics": {"d": {"max_seeds": 9}}}, tmp_path, run, lines.append)
    assert len(calls) == 1 and lines[-1].startswith("undecided: the added seeds did not finish")
