"""``attnbench run`` end to end on a tiny synthetic graphs suite, as a user runs it."""

from __future__ import annotations

import csv

import pytest

from benchmarks.run import records as R
from benchmarks.cli import main
from tests.helpers.suites import config_text, run_config

TINY = config_text("tiny_graphs.yaml")


@pytest.fixture(scope="module")
def tiny_run(tmp_path_factory):
    return run_config(tmp_path_factory.mktemp("run"), TINY)


def test_run_writes_records_and_a_report_with_their_numbers(tiny_run):
    code, out, _ = tiny_run
    assert code == 0
    recs = R.load_records(out)
    assert len(recs) == 8 and all(r["status"] == "ok" for r in recs), [r.get("reason") for r in recs]
    assert {r["family"] for r in recs} == {"attention", "cnn", "rnn", "other"}
    report = (out / "REPORT.md").read_text()
    rows = {row["model"]: row for row in csv.DictReader((out / "summary.csv").open())}
    for model in ("graph_attention", "gcn", "ggnn", "mlp"):
        accs = [r["test"]["acc"] for r in recs if r["model"] == model]
        mean = sum(accs) / len(accs)
        assert float(rows[model]["mean"]) == pytest.approx(mean, abs=1e-12)
        assert f"{mean:.4g}" in report
    assert "attention vs rnn" in report and "attention vs cnn" in report
    html = (out / "report.html").read_text()
    assert "data:image/png;base64," in html


def test_rerun_skips_everything(tiny_run, capsys):
    _, out, cfg = tiny_run
    assert main(["run", str(cfg), "--out", str(out), "--no-report"]) == 0
    assert "ran 0 cells (0 failed), skipped 8 finished ones" in capsys.readouterr().out


@pytest.mark.parametrize(
    "argv,message",
    [
        (["run", "no_such_config"], "config file not found: no_such_config (shipped configs:"),
        (["run", "quick", "--set", "trainer.max_epoch=1"], "unknown key 'trainer.max_epoch'"),
        (["run", "quick", "--set", "cells=[{task: chess, dataset: x}]"], "unknown task 'chess'; valid: graphs"),
        (["run", "quick", "--data-dir", "/no/such/dir"], "--data-dir /no/such/dir: no such directory"),
        (["report", "/no/such/results"], "results folder not found"),
        (["run", "quick", "--devices", "gpu0"], "--devices 'gpu0': expected a count"),
    ],
)
def test_bad_input_is_one_clear_line(argv, message, capsys):
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err


def test_dry_run_lists_cells(capsys):
    assert main(["run", "graphs", "--dry-run"]) == 0
    out = capsys.readouterr().out
    assert "valid; 50 cells" in out and "graphs/planetoid/gcn seed=9" in out


def test_list_shows_tasks_models_and_families(capsys):
    assert main(["list"]) == 0
    out = capsys.readouterr().out
    assert "graph_attention" in out and "attention, pattern graph" in out and "\n  quick " in out


def test_models_slice_is_checked_in_one_line(capsys):
    from benchmarks.cli import main

    assert main(["run", "quick", "--models", "nosuch", "--dry-run"]) == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and "--models 'nosuch': nosuch not in suite 'quick'; its models:" in err and "transformer" in err
    assert main(["run", "quick", "--models", "gcn", "--dry-run"]) == 0
    out = capsys.readouterr().out
    assert "valid; 3 cells" in out and "sbm/gcn seed=0" in out
