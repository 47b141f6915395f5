"""The report's diagnostics: each expectation of a suite's ``diagnostics:`` tested on records
written with the record schema (no training): matched, not significant, contradicted, too few
seeds and not run, the overview table, ``diagnostics.json`` and the saturation warning."""

from __future__ import annotations

import json

import pytest

from benchmarks import report
from benchmarks.config.diagnostics import Expectation
from benchmarks.report import stats
from benchmarks.report.diagnostics import (CONTRADICTED, MATCHED, NOT_RUN, NOT_SIGNIFICANT, TOO_FEW, outcome_of)
from benchmarks.run.records import MANIFEST, record_path, write_json_atomic
from tests.helpers.records import SUITE, cid, make_record

VALUES = {  # toy/synth, acc (max), one diagnostic
    "transformer": [0.90, 0.92, 0.94],
    "lstm": [0.60, 0.62, 0.61],   # clearly below the transformer
    "tcn": [0.905, 0.915, 0.945],  # level with it (paired differences -0.005, +0.005, -0.005)
}
EXPECT = ["attention > rnn", "attention ~ cnn", "rnn > attention", "attention > cnn", "attention > other",
          "transformer > lstm"]


def _write(root, values, expect, *, diag="order", seeds=(0, 1, 2), margin=0.02):
    suite_dir = root / SUITE
    cells = []
    for model, vals in values.items():
        for seed, v in zip(seeds, vals):
            rec = make_record("toy", "synth", model, seed, "acc", "max", v)
            rec["config"]["diagnostic"] = diag
            write_json_atomic(record_path(suite_dir, rec), rec)
            cells.append({"cell_id": cid("toy", "synth", model, seed), "task": "toy", "dataset": "synth",
                          "model": model, "family": rec["family"], "seed": seed, "config": rec["config"]})
    definition = {"title": "Order", "tests": "what it tests.", "why": "why it follows.", "expect": expect,
                  "margin": margin}
    write_json_atomic(suite_dir / MANIFEST, {"suite": SUITE, "cells": cells,
                                             "config": {"suite": SUITE, "diagnostics": {diag: definition}}})
    return suite_dir


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    suite_dir = _write(tmp_path_factory.mktemp("diag"), VALUES, EXPECT)
    written = report.write_report(suite_dir)
    return {"written": written, "md": (suite_dir / "REPORT.md").read_text(encoding="utf-8"),
            "rows": json.loads((suite_dir / "diagnostics.json").read_text(encoding="utf-8"))}


def test_outcomes(built):
    got = {r["expect"]: r["outcome"] for r in built["rows"]}
    assert got == {"attention > rnn": MATCHED, "attention ~ cnn": MATCHED, "rnn > attention": CONTRADICTED,
                   "attention > cnn": NOT_SIGNIFICANT, "attention > other": NOT_RUN, "transformer > lstm": MATCHED}


def test_rows_carry_the_difference(built):
    row = next(r for r in built["rows"] if r["expect"] == "attention > rnn")
    assert (row["left"], row["right"], row["n"], row["verdict"]) == ("transformer", "lstm", 3, stats.BETTER)
    assert row["diff"] == pytest.approx(0.92 - 0.61)
    assert row["ci_low"] > 0 and row["time_ratio"] > 0 and row["memory_ratio"] > 0


def test_overview_table_and_group_title(built):
    md = built["md"]
    overview = md[md.index("## Overview"):md.index("## toy / synth")]
    assert "### Diagnostics: found vs expected" in overview
    assert "3 matched, 1 not significant, 1 contradicted, 1 not run" in overview
    assert "**contradicted**" in overview
    assert "what it tests. Expected: attention > rnn" in overview
    assert "## toy / synth · order" in md  # the diagnostic's own leaderboard


def test_too_few_seeds(tmp_path):
    d = _write(tmp_path, {m: v[:2] for m, v in VALUES.items()}, ["attention > rnn"], seeds=(0, 1))
    report.write_report(d)
    rows = json.loads((d / "diagnostics.json").read_text(encoding="utf-8"))
    assert [r["outcome"] for r in rows] == [TOO_FEW]


def test_saturated_data_is_a_warning(tmp_path):
    d = _write(tmp_path, {"transformer": [1.0, 1.0, 1.0], "lstm": [0.5, 0.6, 0.7]}, ["attention > rnn"])
    report.write_report(d)
    md = (d / "REPORT.md").read_text(encoding="utf-8")
    assert "the data saturates" in md


@pytest.mark.parametrize("rel, verdict, level, outcome", [
    (">", stats.BETTER, None, MATCHED), (">", stats.WORSE, None, CONTRADICTED),
    (">", stats.NO_DIFFERENCE, None, NOT_SIGNIFICANT), ("<", stats.WORSE, None, MATCHED),
    ("<", stats.BETTER, None, CONTRADICTED), (">", stats.TOO_FEW, None, TOO_FEW),
    # '~': level within the margin (TOST) matches, even with a significant difference inside it;
    # an interval that merely holds 0 decides nothing (the old rule matched any noisy pair)
    ("~", stats.NO_DIFFERENCE, True, MATCHED), ("~", stats.BETTER, True, MATCHED),
    ("~", stats.NO_DIFFERENCE, False, NOT_SIGNIFICANT), ("~", stats.BETTER, False, CONTRADICTED),
    ("~", stats.WORSE, False, CONTRADICTED),
])
def test_outcome_rule(rel, verdict, level, outcome):
    assert outcome_of(Expectation("a", rel, "b"), verdict, level) == outcome


def test_terminal_summary(built, tmp_path):
    from benchmarks.report.diagnostics import read_summary, summary_lines

    lines = summary_lines(built["rows"])
    assert len(lines) == len(EXPECT) + 2  # and the Holm-adjusted tally
    assert lines[0].split()[:3] == ["matched", "order:", "attention"] and "transformer 0.92 vs lstm 0.61" in lines[0]
    assert "time " in lines[0] and lines[-2] == "  6 expectations: 3 matched, 1 not significant, 1 contradicted, 1 not run"
    assert lines[-1].startswith("  Holm-adjusted over 5 tests: ")
    assert "attention ~ cnn (±0.02)" in "\n".join(lines)
    assert read_summary(tmp_path) == []  # no diagnostics.json: nothing to print
