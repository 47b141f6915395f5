"""``attnbench buckets CONFIG``: the length buckets' padded lengths, shapes and padding for each
sequence dataset of a config, without training; bad options are one line."""

from __future__ import annotations

import json

import pytest

from benchmarks.cli import main


def test_quick_buckets_table_and_json(tmp_path, capsys):
    out = tmp_path / "b.json"
    assert main(["buckets", "quick", "--counts", "1,4", "--cache-dir", str(tmp_path / "cache"), "--out", str(out)]) == 0
    text = capsys.readouterr().out
    rows = [r for r in json.loads(out.read_text())["rows"] if r["kind"] == "buckets"]
    names = {r["dataset"].split(" ")[0] for r in rows}
    assert names == {"pos_tagging/synthetic_far", "translation/synthetic", "speech/synthetic"}  # not vision, graphs
    for r in rows:
        assert 1 <= len(r["lengths"]) <= r["count"] and all(n % 8 == 0 for n in r["lengths"])
        assert r["train_shapes"] <= len(r["lengths"]) and r["eval_shapes"] <= 4 * len(r["lengths"])
        assert r["padded"] >= r["positions"] + r["repeated"] and r["overhead"] >= 0
        assert f"{r['overhead']:+.1%}" in text
    one = {r["dataset"]: r for r in rows if r["count"] == 1}
    four = {r["dataset"]: r for r in rows if r["count"] == 4}
    assert all(four[k]["padded"] <= one[k]["padded"] for k in one)  # more buckets never pad more


@pytest.mark.parametrize("counts", ["0", "a,b", ""])
def test_bad_counts_one_line(counts, capsys):
    assert main(["buckets", "quick", "--counts", counts]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "--counts" in err[0] and "integers >= 1" in err[0]


def test_a_capture_that_crashes_costs_its_own_line(monkeypatch):
    """A trace that kills the interpreter (a long LSTM unrolled overflows the stack) is one
    model's 'NOT captured' line, not the end of the command."""
    import os
    import signal

    from benchmarks.cli import buckets as B

    monkeypatch.setattr(B, "capture_here", lambda cell, dm: os.kill(os.getpid(), signal.SIGSEGV))
    assert B.capture(None, None) == "the tracing process crashed (killed by SIGSEGV)"
    monkeypatch.setattr(B, "capture_here", lambda cell, dm: "Unsupported: a reason")
    assert B.capture(None, None) == "Unsupported: a reason"


def test_a_bad_out_is_one_line_before_any_work(tmp_path, capsys):
    (tmp_path / "afile").write_text("")
    for out, says in ((tmp_path / "afile" / "x.json", "is not a writable folder"), (tmp_path, "is a folder")):
        assert main(["buckets", "quick", "--out", str(out)]) == 2
        captured = capsys.readouterr()
        err = captured.err.strip().splitlines()
        assert len(err) == 1 and says in err[0] and "dataset" not in captured.out  # no table computed first
