"""CUDA MPS for packed cells (issue 46 item 2), without CUDA: the daemon's lifecycle with a fake
``nvidia-cuda-mps-control`` on PATH (:mod:`tests.benchmarks.run.mps_fake`): started once per GPU
with its folders under the run's output, stopped on every way out, a foreign daemon used and never
stopped, a missing binary said once; then the local pool under it: the env each worker gets and
``mps`` in the records, and the daemons stopped when the launcher fails or is interrupted."""

from __future__ import annotations

import argparse
import json
import os
import socket
from pathlib import Path

import pytest

from benchmarks.cli import main
from benchmarks.run import records as R
from benchmarks.run.launchers import mps
from benchmarks.run.worker import PLUGINS_ENV
from tests.benchmarks.run.mps_fake import PROBE_ENV, calls, install_fake, register, serve


@pytest.fixture
def tmp_path():
    """A short folder: pytest's own (under xdist: .../popen-gw1/<test name>/) makes the pipe folders
    under ``out`` too long for a socket, so they would go to the short fallback these tests do not test."""
    import shutil
    import tempfile

    d = Path(tempfile.mkdtemp(prefix="mps-"))
    yield d
    shutil.rmtree(d, ignore_errors=True)


def _cmds(log: Path) -> list[tuple[str, str]]:
    return [(c["cmd"], c["gpu"]) for c in calls(log) if c["cmd"] != "get_server_list"]


# ----------------------------------------------------------------------------- the daemons
def test_a_daemon_per_gpu_started_once_with_its_folders_and_stopped_at_the_end(tmp_path, monkeypatch):
    log = install_fake(tmp_path, monkeypatch)
    out = tmp_path / "out"
    lines: list[str] = []
    with mps.mps_daemons(["0", "1"], out, lines.append) as envs:
        assert _cmds(log) == [("start", "0"), ("start", "1")]
        for g in ("0", "1"):
            assert envs[g] == {mps.PIPE_ENV: str(out / "mps" / f"gpu{g}" / "pipe"),
                               mps.LOG_ENV: str(out / "mps" / f"gpu{g}" / "log")}
            assert (out / "mps" / f"gpu{g}" / "pipe" / "control").exists()
        started = calls(log)
        assert [(c["pipe"], c["log"]) for c in started if c["cmd"] == "start"] == \
            [(envs[g][mps.PIPE_ENV], envs[g][mps.LOG_ENV]) for g in ("0", "1")]
    assert _cmds(log) == [("start", "0"), ("start", "1"), ("quit", "0"), ("quit", "1")]
    quits = [c for c in calls(log) if c["cmd"] == "quit"]
    assert [c["pipe"] for c in quits] == [envs[g][mps.PIPE_ENV] for g in ("0", "1")]  # the same env as its start
    assert not list((out / "mps").rglob("control")) and not list((out / "mps").rglob("driver"))
    assert len([m for m in lines if m.startswith("MPS:")]) == 1


@pytest.mark.parametrize("exc", [RuntimeError, KeyboardInterrupt])
def test_the_daemons_are_stopped_when_the_run_raises_or_is_interrupted(exc, tmp_path, monkeypatch):
    log = install_fake(tmp_path, monkeypatch)
    with pytest.raises(exc):
        with mps.mps_daemons(["0", "1"], tmp_path / "out", lambda m: None):
            raise exc("stopped")
    assert _cmds(log) == [("start", "0"), ("start", "1"), ("quit", "0"), ("quit", "1")]


def test_an_interrupt_while_stopping_still_stops_every_daemon(tmp_path, monkeypatch):
    log = install_fake(tmp_path, monkeypatch)
    real = mps._control

    def ctrl_c_on_first_quit(binary, env, command, *a, **k):
        code = real(binary, env, command, *a, **k)
        if command == "quit" and env["CUDA_VISIBLE_DEVICES"] == "0":
            raise KeyboardInterrupt
        return code

    monkeypatch.setattr(mps, "_control", ctrl_c_on_first_quit)
    with pytest.raises(KeyboardInterrupt):
        with mps.mps_daemons(["0", "1"], tmp_path / "out", lambda m: None):
            pass
    assert _cmds(log)[-2:] == [("quit", "0"), ("quit", "1")]


def test_a_daemon_someone_else_runs_is_used_and_never_stopped(tmp_path, monkeypatch):
    theirs = tmp_path / "theirs"
    log = install_fake(tmp_path, monkeypatch, default_pipe=theirs)
    serve(theirs)  # their daemon, serving the default folder
    lines: list[str] = []
    with mps.mps_daemons(["0", "1"], tmp_path / "out", lines.append) as envs:
        assert envs == {"0": {mps.PIPE_ENV: str(theirs)}, "1": {mps.PIPE_ENV: str(theirs)}}
    assert _cmds(log) == [] and (theirs / "control").exists()
    assert len(lines) == 1 and "already serving" in lines[0] and "not started or stopped" in lines[0]
    # named by $CUDA_MPS_PIPE_DIRECTORY, with its log folder
    monkeypatch.setenv(mps.PIPE_ENV, str(theirs))
    monkeypatch.setenv(mps.LOG_ENV, str(tmp_path / "their-log"))
    monkeypatch.setattr(mps, "DEFAULT_PIPE", str(tmp_path / "nothing-here"))
    with mps.mps_daemons(["0"], tmp_path / "out", lambda m: None) as envs:
        assert envs == {"0": {mps.PIPE_ENV: str(theirs), mps.LOG_ENV: str(tmp_path / "their-log")}}
    assert _cmds(log) == [] and (theirs / "control").exists()


def test_a_stale_control_pipe_is_not_a_daemon(tmp_path, monkeypatch):
    theirs = tmp_path / "theirs"
    log = install_fake(tmp_path, monkeypatch, default_pipe=theirs)
    theirs.mkdir()
    (theirs / "control").touch()  # left by a daemon that is gone: nobody answers
    with mps.mps_daemons(["0"], tmp_path / "out", lambda m: None) as envs:
        assert envs["0"][mps.PIPE_ENV] == str(tmp_path / "out" / "mps" / "gpu0" / "pipe")
    assert _cmds(log) == [("start", "0"), ("quit", "0")]


def test_a_daemon_of_another_run_in_the_same_folder_is_used_one_a_killed_run_left_is_adopted(tmp_path, monkeypatch):
    log = install_fake(tmp_path, monkeypatch)
    folder = tmp_path / "out" / "mps" / "gpu0"
    serve(folder / "pipe")
    (folder / "driver").write_text(f"{socket.gethostname()}:{os.getpid()}\n")  # alive: another run's
    with mps.mps_daemons(["0"], tmp_path / "out", lambda m: None) as envs:
        assert envs["0"][mps.PIPE_ENV] == str(folder / "pipe")
    assert _cmds(log) == []
    dead = 2 ** 22 + 12345  # above pid_max's default: no such process
    (folder / "driver").write_text(f"{socket.gethostname()}:{dead}\n")
    lines: list[str] = []
    with mps.mps_daemons(["0"], tmp_path / "out", lines.append):
        pass
    assert _cmds(log) == [("quit", "0")] and any("adopted" in m for m in lines)


def test_a_missing_binary_is_said_once_and_the_run_goes_on(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    lines: list[str] = []
    with mps.mps_daemons(["0", "1"], tmp_path / "out", lines.append) as envs:
        assert envs == {}
    assert len(lines) == 1 and mps.MPS_CONTROL in lines[0] and "mps: false" in lines[0]
    assert not (tmp_path / "out").exists()


def test_a_daemon_that_does_not_start_is_one_line_and_its_gpu_goes_on_without(tmp_path, monkeypatch):
    log = install_fake(tmp_path, monkeypatch)
    monkeypatch.setenv("FAKE_MPS_FAIL", "1")
    lines: list[str] = []
    with mps.mps_daemons(["0"], tmp_path / "out", lines.append) as envs:
        assert envs == {}
    assert _cmds(log) == [("start", "0")]  # nothing of ours to stop
    assert len(lines) == 1 and "did not start (exit code 3: fake: cannot start)" in lines[0]


def test_a_pipe_folder_too_long_for_sockets_goes_to_a_short_one_removed_at_the_end(tmp_path, monkeypatch):
    log = install_fake(tmp_path, monkeypatch)
    out = tmp_path / ("o" * 90)
    with mps.mps_daemons(["0"], out, lambda m: None) as envs:
        pipe = Path(envs["0"][mps.PIPE_ENV])
        assert len(str(pipe)) <= mps.MAX_PIPE_CHARS and (pipe / "control").exists()
        assert (out / "mps" / "gpu0" / "pipe.path").read_text().strip() == str(pipe)
    assert _cmds(log) == [("start", "0"), ("quit", "0")] and not pipe.exists()


# ----------------------------------------------------------------------------- the local pool under MPS
SUITE = """
suite: mps
seeds: 2
trainer: {max_epochs: 1, accelerator: cpu}
cells:
  - task: toy
    dataset: points
    models: [mps_probe, broken]
"""


@pytest.fixture
def _probe(monkeypatch):
    """The probe model in the workers, and 4 cores for the pool (at most one packed worker per
    core: on fewer real cores the tests would not pack)."""
    from benchmarks.run.launchers import local

    register()
    monkeypatch.setenv(PLUGINS_ENV, "tests.helpers.toy_task,tests.benchmarks.run.mps_fake")
    monkeypatch.setattr(local.os, "sched_getaffinity", lambda pid: set(range(4)))


def test_packed_workers_run_under_their_gpus_daemon_and_records_say_mps(tmp_path, monkeypatch, capsys, _probe):
    log = install_fake(tmp_path, monkeypatch)
    probe = tmp_path / "env.jsonl"
    monkeypatch.setenv(PROBE_ENV, str(probe))
    cfg = tmp_path / "suite.yaml"
    cfg.write_text(SUITE)
    out = tmp_path / "out"
    code = main(["run", str(cfg), "--out", str(out), "--gpus", "0,1", "--cells-per-gpu", "2", "--no-report"])
    assert code == 1  # the broken cells fail (they raise), the run goes on
    assert _cmds(log) == [("start", "0"), ("start", "1"), ("quit", "0"), ("quit", "1")]
    seen = [json.loads(line) for line in probe.read_text().splitlines()]
    assert len(seen) == 2  # one per mps_probe cell, in its worker
    for env in seen:
        gpu = env["CUDA_VISIBLE_DEVICES"]
        assert env["CUDA_MPS_PIPE_DIRECTORY"] == str(out / "mps" / f"gpu{gpu}" / "pipe")
        assert env["CUDA_MPS_LOG_DIRECTORY"] == str(out / "mps" / f"gpu{gpu}" / "log")
    recs = R.load_records(out)
    assert len(recs) == 4 and {r["status"] for r in recs} == {"ok", "failed"}
    assert all(r["resources"]["mps"] is True and r["resources"]["cells_sharing_device"] == 2 for r in recs)
    assert all(r["resources"]["cpu_threads"] == 1 for r in recs)  # 4 workers on 4 cores


def test_without_mps_the_run_says_so_once_and_records_say_false(tmp_path, monkeypatch, capsys, _probe):
    which = mps.shutil.which
    monkeypatch.setattr(mps.shutil, "which", lambda name, *a, **k: None if name == mps.MPS_CONTROL else which(name, *a, **k))
    cfg = tmp_path / "suite.yaml"
    cfg.write_text(SUITE.replace("seeds: 2", "seeds: 1").replace("mps_probe, broken", "mps_probe"))
    out = tmp_path / "out"
    assert main(["run", str(cfg), "--out", str(out), "--gpus", "0", "--cells-per-gpu", "2", "--no-report"]) == 0
    said = capsys.readouterr()
    assert (said.out + said.err).count("not found on PATH") == 1
    (rec,) = R.load_records(out)
    assert rec["resources"]["mps"] is False


@pytest.mark.parametrize("exc", [RuntimeError, KeyboardInterrupt])
def test_the_pool_stops_its_daemons_when_it_fails_or_is_interrupted(exc, tmp_path, monkeypatch, _probe):
    from benchmarks.config.suite import expand, validate_suite
    from benchmarks.run.launchers import CellJob
    from benchmarks.run.launchers.local import LocalLauncher

    log = install_fake(tmp_path, monkeypatch)
    out = tmp_path / "out"
    out.mkdir()
    cells = expand(validate_suite({"suite": "mps", "seeds": 1, "trainer": {"max_epochs": 1, "accelerator": "cpu"},
                                   "cells": [{"task": "toy", "dataset": "points", "models": ["mps_probe"]}]},
                                  source="mps.yaml"))
    R.write_json_atomic(out / R.MANIFEST, {"suite": "mps", "cells": [
        {"cell_id": c.cell_id, "task": c.task, "dataset": c.dataset, "model": c.model, "family": c.family,
         "pattern": c.pattern, "seed": c.seed, "label": c.label, "config": c.config} for c in cells]})

    def fail(self, *args, **kwargs):
        raise exc("the launcher broke")

    monkeypatch.setattr(LocalLauncher, "_start", fail)
    monkeypatch.setattr("multiprocessing.forkserver.ensure_running", lambda: None)  # no worker starts here
    pool = LocalLauncher(None, argparse.Namespace(gpus="0", jobs=None, cells_per_gpu=2))
    with pytest.raises(exc):
        pool.launch([CellJob(out, c.cell_id, c.label, None, out / "cache") for c in cells], lambda m: None)
    assert _cmds(log) == [("start", "0"), ("quit", "0")]
