"""``attnbench run``'s exit code tells the truth about the run (issue 44 item 3): a missed
micro-benchmark target is a finding about the machine, listed first in the closing summary, and
fails the run only with ``--strict``; an inconclusive time check never does; a micro-benchmark
that crashes fails the run as before. The benchmark's results are a fake JSON (nothing timed)."""

from __future__ import annotations

from pathlib import Path

import pytest

from benchmarks.cli import main
from benchmarks.run.records import write_json_atomic
from tests.helpers.toy_task import register

SUITE = """
suite: toy
seeds: 1
trainer: {max_epochs: 1, accelerator: cpu}
micro_benchmarks: [attention]
cells:
  - task: toy
    dataset: points
    models: [linear]
"""
MISSED = "time ours_graph / pyg_transformerconv @ N=5000 E=50000"


@pytest.fixture(autouse=True)
def _toy_plugin(monkeypatch):
    """Worker processes of the local pool import the toy task too."""
    from benchmarks.run.worker import PLUGINS_ENV

    monkeypatch.setenv(PLUGINS_ENV, "tests.helpers.toy_task")


def _bench_json(out: Path) -> Path:
    """A finished attention benchmark (so the run skips it) with one missed target, one
    inconclusive time check and one pass."""
    path = out / "bench" / "attention" / "bench_attention.json"
    write_json_atomic(path, {"benchmark": "attention", "status": "done", "points": [], "checks": [
        {"name": MISSED, "value": 1.2, "target": "<= 1", "pass": False, "decision": "fail", "ci_low": 1.15,
         "ci_high": 1.25, "confidence": 0.95, "repeats": 10},
        {"name": "time ours_full / sdpa @ L=1024", "value": 1.03, "target": "<= 1.1", "pass": None,
         "decision": "inconclusive", "ci_low": 0.97, "ci_high": 1.12, "confidence": 0.95, "repeats": 10},
        {"name": "peak mem ours_graph / pyg_transformerconv @ N=5000 E=50000", "value": 0.4, "target": "<= 0.6",
         "pass": True},
    ]})
    return path


def _run(argv: list, capsys) -> tuple[int, str, str]:
    code = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return code, out, err


def test_a_missed_target_is_listed_first_and_fails_only_with_strict(tmp_path, capsys):
    register()
    cfg = tmp_path / "toy.yaml"
    cfg.write_text(SUITE)
    out = tmp_path / "out"
    _bench_json(out)
    code, stdout, err = _run(["run", cfg, "--out", out, "--no-report", "--launcher", "inline"], capsys)
    assert code == 0, (stdout, err)
    lines = stdout.splitlines()
    head = next(i for i, line in enumerate(lines) if line.startswith("micro-benchmark targets missed (1;"))
    cells = next(i for i, line in enumerate(lines) if line.startswith("ran 1 cells (0 failed)"))
    assert head < cells and "not failures of the run; --strict makes them fail it" in lines[head]
    assert lines[head + 1].startswith(f"  missed: bench attention: FAIL {MISSED}: 1.2 (target <= 1); 95% CI 1.150-1.250")
    assert "ours_full / sdpa" not in stdout  # inconclusive: not a miss
    assert "failed in this run" not in err

    # --strict: the same finding fails the run (the finished cell is skipped)
    code, stdout, err = _run(["run", cfg, "--out", out, "--no-report", "--strict"], capsys)
    assert code == 1
    assert "they fail this run (--strict)" in stdout and stdout.index("missed:") < stdout.index("ran 0 cells")
    assert "attnbench: 1 failed in this run (exit code 1; --strict counts the missed targets)" in err

    # both options: one clear line, exit 2, nothing run
    code, _, err = _run(["run", cfg, "--out", out, "--strict", "--allow-failures"], capsys)
    assert code == 2 and "--strict and --allow-failures contradict" in err and "Traceback" not in err


def test_a_crashed_micro_benchmark_still_fails_the_run(tmp_path, capsys, monkeypatch):
    from benchmarks.micro import attention

    def crash(**kwargs):
        raise RuntimeError("sweep fell over")

    monkeypatch.setattr(attention, "main", crash)
    register()
    cfg = tmp_path / "toy.yaml"
    cfg.write_text(SUITE)
    code, stdout, err = _run(["run", cfg, "--out", tmp_path / "out", "--no-report", "--launcher", "inline"], capsys)
    assert code == 1
    assert "failed: micro-benchmark attention (crashed)" in stdout and "missed" not in stdout
    assert "attnbench: 1 failed in this run (exit code 1; --allow-failures makes it 0)" in err
