"""``--launcher slurm`` on a real single-node Slurm (``tests/helpers/local_slurm.sh``, started by
the ``local_slurm`` fixture, which skips with the reason where it cannot run): the same cell ids
and test metrics as ``inline``, a crashing cell becomes a failed record, ``--no-wait`` returns at
once and ``attnbench status`` follows, and a preempted cell is requeued and restarts."""

from __future__ import annotations

import re
import subprocess
import time
from pathlib import Path

import pytest

from benchmarks.run import records as R
from benchmarks.cli import main
from benchmarks.config.suite import expand, load_suite
from benchmarks.run.worker import PLUGINS_ENV
from tests.helpers.toy_task import register

PLUGIN = "tests.helpers.toy_task"
# Lightning's hint when a process sees srun on PATH but was not started by it (the inline runs)
pytestmark = pytest.mark.filterwarnings("ignore:The `srun` command is available:UserWarning")

SUITE = """
suite: slurm
seeds: 2
trainer: {{max_epochs: {epochs}, accelerator: cpu, deterministic: true}}
cells:
  - task: toy
    dataset: points
    models: [linear]
{extra}"""

BROKEN = """  - task: toy
    dataset: points
    models: [broken]
    seeds: 1
    model_params: {{broken: {{kind: {kind}}}}}
"""


@pytest.fixture(autouse=True)
def _plugin(monkeypatch):
    register()
    monkeypatch.setenv(PLUGINS_ENV, PLUGIN)


def _cfg(tmp_path: Path, name: str, epochs: int = 2, broken: str | None = None) -> Path:
    p = tmp_path / f"{name}.yaml"
    p.write_text(SUITE.format(epochs=epochs, extra=BROKEN.format(kind=broken) if broken else ""))
    return p


def _records(out: Path) -> dict[str, dict]:
    return {r["cell_id"]: r for r in R.load_records(out)}


def _run(cfg: Path, out: Path, *extra: str) -> int:
    return main(["run", str(cfg), "--out", str(out), "--no-report", "--cache-dir", str(out.parent / "cache"), *extra])


def _wait_for(predicate, timeout_s: float, what: str):
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.5)
    pytest.fail(f"timed out after {timeout_s:.0f} s waiting for {what}")


def test_slurm_gives_inline_cells_and_metrics_and_a_crash_is_a_failed_record(local_slurm, tmp_path, capsys):
    cfg = _cfg(tmp_path, "with_crash", broken="segfault")
    ref = _cfg(tmp_path, "ref")
    assert _run(ref, tmp_path / "inline", "--launcher", "inline") == 0
    code = _run(cfg, tmp_path / "slurm", "--launcher", "slurm", "--slurm-time", "10", "--slurm-cpus-per-cell", "1")
    text = capsys.readouterr().out
    assert code == 1, text
    assert "submitted 3 cells to Slurm as job array" in text
    slurm, inline = _records(tmp_path / "slurm"), _records(tmp_path / "inline")
    assert set(slurm) == {c.cell_id for c in expand(load_suite(cfg))}
    assert set(inline) < set(slurm)  # the linear cells: same ids under both launchers
    for cid, rec in inline.items():
        assert slurm[cid]["status"] == "ok" and slurm[cid]["test"] == rec["test"]
        assert slurm[cid]["resources"]["launcher"] == "slurm"
    (bad,) = [r for r in slurm.values() if r["model"] == "broken"]
    assert bad["status"] == "failed" and bad["reason"].startswith("crashed:") and "SIGSEGV" in bad["reason"]
    assert "FAILED: crashed" in text


def test_no_wait_returns_at_once_and_status_follows_the_cells(local_slurm, tmp_path, capsys):
    cfg, out = _cfg(tmp_path, "nowait"), tmp_path / "out"
    t0 = time.monotonic()
    # also asks for the fixture's fake GPU: Slurm hands the cell's job CUDA_VISIBLE_DEVICES
    assert _run(cfg, out, "--launcher", "slurm", "--no-wait", "--set", "seeds=1", "--slurm-gpus-per-cell", "1") == 0
    took = time.monotonic() - t0
    text = capsys.readouterr().out
    # the real check is "0 done" below (a run that waited would show the cell done); the bound only
    # catches a hang, generous for a starved CPU (34.7 s seen on a 2-core VM at load 11)
    assert took < 120, f"--no-wait took {took:.1f} s"
    assert f"attnbench status {out}" in text
    assert main(["status", str(out)]) == 0
    first = capsys.readouterr().out
    assert f"{out}: 1 cells: 0 done" in first, first

    def finished() -> str | None:
        main(["status", str(out)])
        now = capsys.readouterr().out
        return now if "1 done" in now else None

    _wait_for(finished, 120, "the cell to finish")
    (rec,) = _records(out).values()
    assert rec["status"] == "ok" and rec["resources"]["launcher"] == "slurm"
    assert rec["resources"]["cuda_visible_devices"] == "0"


@pytest.mark.slow  # Slurm holds a requeued job ~12 s (cred_expire=10) before it may start again
def test_a_preempted_cell_is_requeued_and_restarts(local_slurm, tmp_path, capsys, monkeypatch):
    starts = tmp_path / "starts.txt"
    monkeypatch.setenv("ATTNBENCH_TOY_STARTS", str(starts))  # the toy model notes each training start
    p = tmp_path / "slow.yaml"
    p.write_text("suite: preempt\nseeds: 1\ntrainer: {max_epochs: 10000, max_time_s: 3, accelerator: cpu}\n"
                 "cells:\n  - {task: toy, dataset: points, models: [broken], model_params: {broken: {kind: slow}}}\n")
    out = tmp_path / "out"
    assert _run(p, out, "--launcher", "slurm", "--no-wait") == 0
    job_id = re.search(r"to Slurm as job (\d+)", capsys.readouterr().out).group(1)
    _wait_for(lambda: starts.exists() and starts.read_text().strip(), 90, "the cell to start training")
    # what Slurm does to a preempted job (submitit's job._interrupt()): SIGTERM, then the USR2 it asked for
    for sig in ("SIGTERM", "USR2"):
        subprocess.run(["scancel", "--signal", sig, job_id], check=True, timeout=30)
    recs = _wait_for(lambda: [r for r in R.load_records(out) if r["status"] == "ok"] or None, 150,
                     "the requeued cell to finish")
    assert len(starts.read_text().split()) >= 2  # trained again after the requeue
    assert recs[0]["model"] == "broken" and recs[0]["resources"]["launcher"] == "slurm"
    log = next((out / ".submitit").glob("*/*_log.out")).read_text()
    assert "Calling checkpoint method" in log


def test_missing_submitit_is_one_line(monkeypatch, tmp_path, capsys):
    import builtins

    real_import = builtins.__import__

    def no_submitit(name, *args, **kwargs):
        if name == "submitit" or name.startswith("submitit."):
            raise ImportError("No module named 'submitit'")
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_submitit)
    assert _run(_cfg(tmp_path, "x"), tmp_path / "out", "--launcher", "slurm") == 2
    err = capsys.readouterr().err
    assert "the slurm launcher needs submitit: pip install 'attnbench[slurm]'" in err and "Traceback" not in err


def test_no_sbatch_is_one_line(monkeypatch, tmp_path, capsys):
    pytest.importorskip("submitit", reason="the slurm launcher needs submitit: pip install 'attnbench[slurm]'")
    import shutil

    real_which = shutil.which
    monkeypatch.setattr(shutil, "which", lambda name, *a, **k: None if name == "sbatch" else real_which(name, *a, **k))
    assert _run(_cfg(tmp_path, "x"), tmp_path / "out", "--launcher", "slurm") == 2
    err = capsys.readouterr().err
    assert "the slurm launcher needs Slurm's sbatch on PATH" in err and "Traceback" not in err


def test_checkpoint_stops_a_cell_that_ignores_sigterm(tmp_path):
    """What a job does on preemption before it is requeued: SIGTERM to the cell's process group,
    SIGKILL after the grace time (run in a process of its own: it stops that process's children)."""
    import sys

    script = (
        "import os, signal, subprocess, sys, time\n"
        "from benchmarks.run.launchers.slurm_launcher import _stop_children\n"
        "cmd = 'import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); print(1, flush=True); time.sleep(60)'\n"
        "p = subprocess.Popen([sys.executable, '-c', cmd], stdout=subprocess.PIPE, start_new_session=True)\n"
        "p.stdout.readline()\n"
        "t = time.monotonic(); killed = _stop_children(grace_s=0.5)\n"
        "print(killed == [p.pid], time.monotonic() - t < 5, not os.path.exists(f'/proc/{p.pid}'))\n"
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60)
    assert done.stdout.split() == ["True", "True", "True"], done.stdout + done.stderr


@pytest.mark.parametrize("argv,message", [
    (["--slurm-time", "0"], "--slurm-time: 0 must be >= 1"),
    (["--slurm-gpus-per-cell", "one"], "--slurm-gpus-per-cell: 'one' is not a whole number"),
    (["--slurm-array-parallelism", "-2"], "--slurm-array-parallelism: -2 must be >= 1"),
])
def test_bad_slurm_options_are_one_line(argv, message, tmp_path, capsys):
    assert _run(_cfg(tmp_path, "x"), tmp_path / "out", "--launcher", "slurm", *argv) == 2
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err


def test_the_local_slurm_fixture_says_why_it_cannot_start(monkeypatch):
    import os
    import shutil

    from tests.helpers import slurm as S

    monkeypatch.setattr(os, "geteuid", lambda: 1000)
    assert "local Slurm needs root" in S._why_not()
    monkeypatch.setattr(os, "geteuid", lambda: 0)
    monkeypatch.setattr(shutil, "which", lambda name, *a, **k: None)
    assert S._why_not() == "slurm-wlm and munge are not installed and apt-get is not available to install them"
