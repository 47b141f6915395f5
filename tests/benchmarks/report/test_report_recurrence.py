"""Modern recurrences (family rnn, kind modern) in the report: their own comparison and
section; the classic rnn comparison and its verdict never pick them."""

from __future__ import annotations

import pytest

from benchmarks import report
from benchmarks.report.analysis import group_of
from benchmarks.run.records import MANIFEST, record_path, write_json_atomic
from tests.helpers.records import cid as _cid
from tests.helpers.records import make_record as _record

# toy/synth, acc (max), seeds 0-2: the modern recurrence (s4d) beats everything, the LSTM loses
# (no pair of models differs by the same amount on every seed: identical differences decide nothing)
RUNS = {"transformer": (0.80, 0.81, 0.83), "lstm": (0.60, 0.62, 0.61), "tcn": (0.70, 0.72, 0.71),
        "s4d": (0.90, 0.92, 0.93), "mingru": (0.85, 0.86, 0.84)}


def _records(runs=RUNS) -> list[dict]:
    out = []
    for model, vals in runs.items():
        for seed, v in enumerate(vals):
            modern = model in ("s4d", "mingru")
            rec = _record("toy", "synth", "lstm" if modern else model, seed, "acc", "max", v)
            if modern:
                rec.update(model=model, kind="modern", cell_id=_cid("toy", "synth", model, seed))
            elif model == "lstm":
                rec["kind"] = "classic"
            out.append(rec)
    return out


def test_the_classic_rnn_comparison_ignores_modern_recurrences() -> None:
    g = group_of(_records(), "acc")
    by = {c.baseline_family: c for c in g.comparisons}
    assert list(by) == ["rnn", "cnn", "modern rnn"]
    assert by["rnn"].baseline.model == "lstm" and by["rnn"].verdict == "better"  # not s4d, which beats attention
    assert by["modern rnn"].baseline.model == "s4d" and by["modern rnn"].verdict == "worse"
    assert by["modern rnn"].difference.diff == pytest.approx((0.80 + 0.81 + 0.83 - 0.90 - 0.92 - 0.93) / 3)


def test_without_modern_recurrences_nothing_changes(tmp_path) -> None:
    recs = [r for r in _records() if r.get("kind") != "modern"]
    g = group_of(recs, "acc")
    assert [c.baseline_family for c in g.comparisons] == ["rnn", "cnn"]
    for r in recs:
        write_json_atomic(record_path(tmp_path / "res", r), r)
    report.write_report(tmp_path / "res")
    md = (tmp_path / "res" / "REPORT.md").read_text()
    assert "## Modern recurrence" not in md and "attention vs modern rnn" not in md


def test_section_compares_the_best_modern_recurrence_with_each_kind(tmp_path) -> None:
    for r in _records():
        write_json_atomic(record_path(tmp_path / "res", r), r)
    report.write_report(tmp_path / "res")
    md = (tmp_path / "res" / "REPORT.md").read_text()
    assert "| attention vs rnn | attention vs cnn | attention vs modern rnn |" in md  # the overview's columns
    sec = md[md.index("## Modern recurrence"):]
    rows = [ln for ln in sec.splitlines() if ln.startswith("| toy")]
    assert [r.split("|")[3].strip() for r in rows] == ["classic RNN", "attention", "CNN"]
    for r, other, mean in zip(rows, ("lstm", "transformer", "tcn"), (0.61, 0.8133, 0.71)):
        cells = [c.strip() for c in r.split("|")]
        assert cells[2].startswith("s4d: 0.9167 [")
        assert cells[4].startswith(f"{other}: {mean:.4g}")
        assert float(cells[5]) == pytest.approx(0.9167333 - mean, abs=1e-3)
        assert cells[7] == "better (n=3)"


def test_one_model_with_other_params_is_its_own_row() -> None:
    """vision's mamba2 over rows and over patches in one group: two rows labelled by the params
    that differ, not one model pooling six seeds of two configurations."""
    recs = []
    for mode, vals in (("rows", (0.90, 0.91, 0.92)), ("patches", (0.70, 0.71, 0.72))):
        for seed, v in enumerate(vals):
            rec = _record("toy", "synth", "lstm", seed, "acc", "max", v)
            rec.update(model="mamba2", kind="modern", cell_id=_cid("toy", "synth", mode, seed),
                       config={"model_params": {"mode": mode, "d_model": 64}})
            recs.append(rec)
    g = group_of(recs, "acc")
    assert sorted(m.model for m in g.models) == ["mamba2 (mode=patches)", "mamba2 (mode=rows)"]
    assert {m.model: len(m.values) for m in g.models} == {"mamba2 (mode=patches)": 3, "mamba2 (mode=rows)": 3}
    same = [dict(r, config={"model_params": {"mode": "rows", "d_model": 64}}) for r in recs]
    assert [m.model for m in group_of(same, "acc").models] == ["mamba2"]  # one configuration: its plain name


def _suite_folder(root, suite: str, runs: dict) -> None:
    """A results folder of ``suite``: its manifest and the records of ``runs`` (see RUNS)."""
    recs = [dict(r, suite=suite, cell_id=_cid(suite, r["cell_id"])) for r in _records(runs)]
    write_json_atomic(root / MANIFEST, {"suite": suite, "description": f"{suite} runs", "cells": [
        {k: r[k] for k in ("cell_id", "task", "dataset", "model", "seed")} for r in recs]})
    for r in recs:
        write_json_atomic(record_path(root, r), r)


def test_merged_suites_share_one_leaderboard(tmp_path) -> None:
    """Peers run from another config (speech.yaml's classic models beside modern_recurrence.yaml's
    recurrences): --merge-suites groups by task and dataset across the suites, so the modern
    recurrence is compared with them; a model both suites ran keeps a row per suite."""
    modern = {k: RUNS[k] for k in ("s4d", "mingru", "transformer")}
    peers = {k: RUNS[k] for k in ("lstm", "tcn")} | {"transformer": (0.95, 0.96, 0.97)}
    _suite_folder(tmp_path / "modern", "modern_recurrence", modern)
    _suite_folder(tmp_path / "peers", "speech", peers)
    apart = report.analyse([tmp_path / "modern", tmp_path / "peers"])
    assert len(apart.groups) == 2 and apart.multi_suite  # without the option: one group per suite
    an = report.analyse([tmp_path / "modern", tmp_path / "peers"], merge="speech_all")
    (g,) = an.groups
    assert (g.suite, not an.multi_suite) == ("speech_all", True) and not an.warnings.get("missing")
    assert {m.model: len(m.values) for m in g.models} == {
        "s4d": 3, "mingru": 3, "lstm": 3, "tcn": 3, "transformer [modern_recurrence]": 3, "transformer [speech]": 3}
    by = {c.baseline_family: c for c in g.comparisons}
    assert by["rnn"].attention.model == "transformer [speech]" and by["rnn"].baseline.model == "lstm"
    written = report.write_report([tmp_path / "modern", tmp_path / "peers"], tmp_path / "out", merge="speech_all")
    md = written["REPORT.md"].read_text()
    assert "suites modern_recurrence, speech merged as speech_all" in md
    sec = md[md.index("## Modern recurrence"):]
    rows = [ln for ln in sec.splitlines() if ln.startswith("| toy")]
    assert [r.split("|")[4].split(":")[0].strip() for r in rows] == ["lstm", "transformer [speech]", "tcn"]


def test_merge_suites_on_the_command_line(tmp_path, capsys) -> None:
    from benchmarks.cli import main

    _suite_folder(tmp_path / "res" / "modern", "modern_recurrence", {k: RUNS[k] for k in ("s4d", "transformer")})
    _suite_folder(tmp_path / "res" / "peers", "speech", {k: RUNS[k] for k in ("lstm", "tcn")})
    assert main(["report", str(tmp_path / "res"), "--merge-suites", "speech_all"]) == 0  # a folder of suites
    md = (tmp_path / "res" / "REPORT.md").read_text()
    assert "| s4d: 0.9167" in md[md.index("## Modern recurrence"):]
    capsys.readouterr()
    assert main(["report", str(tmp_path / "res"), "--merge-suites", "a b"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "--merge-suites 'a b'" in err[0] and "letters, digits" in err[0]
