"""When, not only who (issue 52 item 2): a swept diagnostic's expectations tested at every point,
the crossover placed where the difference changes sign with its interval, 'no crossover' said
when there is none, each point its own group, the plot and sweeps.json written."""

from __future__ import annotations

import json

import pytest

from benchmarks import report
from benchmarks.report.analysis import analyse
from benchmarks.report.sweeps import crossover, read_summary, sweep_results
from benchmarks.run.records import MANIFEST, record_path, write_json_atomic
from tests.helpers.records import SUITE, make_record

XS = [0.1, 0.3, 0.5, 0.7, 0.9]


def _write(root, values: dict[str, list[list[float]]], expect: list[str], xs=XS):
    """values: model -> per axis value, its three seeds' accuracies."""
    suite_dir = root / SUITE
    cells = []
    for model, per_x in values.items():
        for x, vals in zip(xs, per_x):
            for seed, v in enumerate(vals):
                rec = make_record("toy", "synth", model, seed, "acc", "max", v)
                rec["config"].update(diagnostic="h", dataset_params={"homophily": x, "num_nodes": 600})
                rec["cell_id"] = f"{model}-{x}-{seed}"
                write_json_atomic(record_path(suite_dir, rec), rec)
                cells.append({"cell_id": rec["cell_id"], "task": "toy", "dataset": "synth", "model": model,
                              "family": rec["family"], "seed": seed, "config": rec["config"]})
    body = {"title": "H", "tests": "t.", "why": "w.", "expect": expect, "sweep": "homophily"}
    write_json_atomic(suite_dir / MANIFEST, {"suite": SUITE, "cells": cells,
                                             "config": {"suite": SUITE, "diagnostics": {"h": body}}})
    return suite_dir


def _pts(center: list[float], spread=(-0.01, 0.0, 0.012)) -> list[list[float]]:
    return [[c + s for s in spread] for c in center]


def test_each_point_is_its_own_group_and_the_crossover_lies_between_the_sign_change(tmp_path):
    # the transformer loses at 0.1 and 0.3, wins from 0.5 on: the difference crosses 0 near 0.4
    d = _write(tmp_path, {"transformer": _pts([0.40, 0.45, 0.60, 0.75, 0.90]),
                          "lstm": _pts([0.50, 0.50, 0.50, 0.50, 0.50], (0.004, -0.006, 0.0))}, ["attention > rnn"])
    an = analyse(d)
    assert sorted(g.point["homophily"] for g in an.groups) == XS and all(len(g.models) == 2 for g in an.groups)
    (res,) = sweep_results(an)
    c = res.crossovers["attention > rnn"]
    assert c.worse_at == [0.1, 0.3] and c.better_at == [0.5, 0.7, 0.9]
    assert 0.3 < c.at < 0.5 and c.low is not None and c.high is not None and c.low <= c.at <= c.high
    # the mean difference -0.05 at 0.3 and +0.10 at 0.5 crosses 0 one third of the way
    assert c.at == pytest.approx(0.3 + 0.2 * 0.05 / 0.15, abs=0.01)
    assert "goes from significantly worse than rnn" in c.statement and "crossover is at ≈ 0.36" in c.statement


def test_no_crossover_is_said_with_what_holds(tmp_path):
    d = _write(tmp_path, {"transformer": _pts([0.6, 0.65, 0.7, 0.75, 0.8]), "lstm": _pts([0.5] * 5, (0.004, -0.006, 0.0))},
               ["attention > rnn"])
    written = report.write_report(d)
    rows = json.loads((d / "sweeps.json").read_text())
    assert rows[0]["at"] is None and rows[0]["statement"].startswith("no crossover between 0.1 and 0.9: attention is "
                                                                      "significantly better than rnn at 0.1, 0.3, 0.5, 0.7, 0.9")
    assert "plots/when__h.png" in written and "plots/when__h__cost.png" in written
    md = (d / "REPORT.md").read_text()
    assert "## When: H, along homophily" in md and "where it flips" in md
    assert read_summary(d)[0].startswith("  h along homophily (0.1, 0.3, 0.5, 0.7, 0.9): attention > rnn: no crossover")
    assert not (d / "diagnostics.json").exists() or all(r["diagnostic"] != "h" for r in json.loads((d / "diagnostics.json").read_text()))


def test_crossover_in_log_x_when_the_axis_spans_decades(tmp_path):
    xs = [100, 300, 1000, 3000, 10000]
    d = _write(tmp_path, {"transformer": _pts([0.40, 0.45, 0.60, 0.75, 0.90]),
                          "lstm": _pts([0.50] * 5, (0.004, -0.006, 0.0))}, ["attention > rnn"], xs=xs)
    (res,) = sweep_results(analyse(d))
    c = res.crossovers["attention > rnn"]
    assert 300 < c.at < 1000 and "log-interpolated" in c.statement
    assert c.at == pytest.approx(10 ** (2.4771 + (3 - 2.4771) / 3), rel=0.02)


def test_too_few_points_or_no_difference():
    assert "too few points" in crossover([0.5], [], "max", "a", "b").statement


def test_the_training_fraction_is_an_axis_too(tmp_path):
    """sweep: train_fraction (the suite's list): each fraction its own point, the crossover between."""
    suite_dir = tmp_path / SUITE
    cells = []
    fracs = [0.01, 0.1, 1.0]
    for model, per_x in {"transformer": _pts([0.80, 0.98, 0.99]), "tcn": _pts([0.90, 0.94, 0.95], (0.004, -0.006, 0.0))}.items():
        for x, vals in zip(fracs, per_x):
            for seed, v in enumerate(vals):
                rec = make_record("toy", "synth", model, seed, "acc", "max", v)
                rec["config"].update(diagnostic="d", train_fraction=x)
                rec["cell_id"] = f"{model}-{x}-{seed}"
                write_json_atomic(record_path(suite_dir, rec), rec)
                cells.append({"cell_id": rec["cell_id"], "task": "toy", "dataset": "synth", "model": model,
                              "family": rec["family"], "seed": seed, "config": rec["config"]})
    body = {"title": "D", "tests": "t.", "why": "w.", "expect": ["attention > cnn"], "sweep": "train_fraction"}
    write_json_atomic(suite_dir / MANIFEST, {"suite": SUITE, "cells": cells,
                                             "config": {"suite": SUITE, "diagnostics": {"d": body}}})
    (res,) = sweep_results(analyse(suite_dir))
    assert res.values == fracs
    c = res.crossovers["attention > cnn"]
    assert c.worse_at == [0.01] and c.better_at == [0.1, 1.0] and 0.01 < c.at < 0.1
