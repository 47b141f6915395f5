"""Launchers and cells on several devices (issue 16): what the Slurm launcher submits for them
(one job of a task per rank; task 0's result), a real 2-task job on the single-node test Slurm,
Ray refusing them in one line before anything starts, and the local pool's GPU slots for them."""

from __future__ import annotations

import argparse
import json
import re
from pathlib import Path
from typing import Any

import pytest

from benchmarks.run import records as R
from benchmarks.cli import main
from benchmarks.config.schema import CliError
from benchmarks.run.launchers import CellJob
from benchmarks.config.suite import expand, validate_suite
from benchmarks.run.worker import UnitResult, log_path
from tests.helpers.toy_task import register

SUITE = {
    "suite": "multi", "seeds": 1, "trainer": {"max_epochs": 1, "accelerator": "cpu"},
    "cells": [
        {"task": "toy", "dataset": "points", "models": ["linear"]},
        {"task": "toy", "dataset": "points", "models": ["linear"], "trainer": {"devices": 2}},
        {"task": "toy", "dataset": "points", "models": ["linear"], "trainer": {"devices": 2, "accelerator": "gpu"}},
    ],
}


def _jobs(out: Path) -> list[CellJob]:
    """The suite's manifest written to ``out``; one job per cell (a CUDA cell reserves a GPU, as
    the runner's jobs do): single CPU, 2 CPU ranks, 2 CUDA ranks."""
    register()
    cells = expand(validate_suite(SUITE, source="multi.yaml"))
    out.mkdir(parents=True, exist_ok=True)
    R.write_json_atomic(out / R.MANIFEST, {"suite": "multi", "cells": [
        {"cell_id": c.cell_id, "task": c.task, "dataset": c.dataset, "model": c.model, "family": c.family,
         "pattern": c.pattern, "seed": c.seed, "label": c.label, "config": c.config} for c in cells]})
    return [CellJob(out, c.cell_id, c.label, None, out / "cache",
                    gpus=1.0 if c.config.get("device") == "cuda" else 0.0) for c in cells]


# ----------------------------------------------------------------------------- slurm
class _FakeHandle:
    def __init__(self, job_id: str, tasks: int) -> None:
        self.job_id, self.num_tasks, self.state = job_id, tasks, "COMPLETED"

    def result(self) -> UnitResult:
        assert self.num_tasks == 1, "submitit: use results() for a job with subtasks"
        return UnitResult("single", "ok")

    def task(self, k: int) -> Any:
        sub = _FakeHandle(f"{self.job_id}.{k}", 1)
        sub.result = lambda: UnitResult(f"rank{k}", "ok")  # type: ignore[method-assign]
        return sub


class _FakeExecutor:
    submitted: list[tuple[dict[str, Any], list[CellJob]]] = []

    def __init__(self, folder: Path, cluster: str) -> None:
        self.params: dict[str, Any] = {}

    def update_parameters(self, **params: Any) -> None:
        self.params.update(params)

    def map_array(self, fn: Any, jobs: list[CellJob]) -> list[_FakeHandle]:
        self.submitted.append((self.params, list(jobs)))
        return [_FakeHandle(f"{len(self.submitted)}_{i}", self.params.get("tasks_per_node", 1)) for i in range(len(jobs))]


def test_slurm_submits_a_multi_device_cell_as_one_job_with_a_task_per_rank(tmp_path, monkeypatch) -> None:
    pytest.importorskip("submitit", reason="the slurm launcher needs submitit: pip install 'attnbench[slurm]'")
    import benchmarks.run.launchers.slurm_launcher as S

    monkeypatch.setattr(S.shutil, "which", lambda name, *a, **k: "/usr/bin/" + name)
    launcher = S.SlurmLauncher(None, argparse.Namespace(slurm_cpus_per_cell=3))
    monkeypatch.setattr(launcher.submitit, "AutoExecutor", _FakeExecutor)
    _FakeExecutor.submitted = []
    jobs = _jobs(tmp_path / "out")
    handles = launcher.submit(jobs)
    by_cell = {tuple(j.cell_id for j in group): params for params, group in _FakeExecutor.submitted}
    single, cpu2, cuda2 = (by_cell[(j.cell_id,)] for j in jobs)
    assert "tasks_per_node" not in single and "gpus_per_node" not in single and single["cpus_per_task"] == 3
    assert cpu2["tasks_per_node"] == 2 and cpu2["nodes"] == 1 and cpu2["cpus_per_task"] == 3  # per rank
    assert "gpus_per_node" not in cpu2
    assert cuda2["tasks_per_node"] == 2 and cuda2["gpus_per_node"] == 2 and cuda2["nodes"] == 1
    # the result of a job of several tasks is task 0's: rank 0 owns the record
    results = {job.cell_id: launcher._result(h, job, None) for h, job in handles}
    assert results[jobs[0].cell_id].cell_id == "single"
    assert results[jobs[1].cell_id].cell_id == results[jobs[2].cell_id].cell_id == "rank0"


def test_a_follower_slurm_task_never_writes_a_crash_record(tmp_path, monkeypatch) -> None:
    """Task 1 of a multi-device cell's job: its unit's exit is its own result, nothing on disk."""
    import benchmarks.run.worker as W

    jobs = _jobs(tmp_path / "out")

    class Done:
        pid, returncode = 123456789, 0

        def wait(self, timeout: float | None = None) -> int:
            return 0

    monkeypatch.setattr(W, "start_unit", lambda *a, **k: Done())
    monkeypatch.setenv("SLURM_PROCID", "1")
    monkeypatch.setenv("SLURM_NTASKS", "2")
    res = W.run_unit(tmp_path / "out", jobs[1].cell_id)
    assert (res.status, res.reason) == ("ok", None)
    assert not list(R.iter_record_files(tmp_path / "out"))  # rank 0 would write it, or its crash record


def test_a_two_rank_cell_on_a_real_slurm_is_one_job_of_two_tasks(local_slurm, tmp_path, capsys) -> None:
    """Slurm starts both ranks (SLURMEnvironment: task k is rank k); task 0 writes the record."""
    from tests.helpers.suites import DDP_SUITE as SUITE

    cfg, out = tmp_path / "ddp.yaml", tmp_path / "out"
    cfg.write_text(SUITE.format(devices=2))
    code = main(["run", str(cfg), "--out", str(out), "--no-report", "--cache-dir", str(tmp_path / "cache"),
                 "--launcher", "slurm", "--slurm-cpus-per-cell", "1", "--slurm-time", "10"])
    assert code == 0, capsys.readouterr().out
    (path,) = R.iter_record_files(out)
    rec = json.loads(path.read_text())
    assert rec["status"] == "ok" and rec["resources"]["launcher"] == "slurm" and rec["resources"]["ranks"] == 2
    assert rec["resources"]["cpu_threads"] == 1  # --slurm-cpus-per-cell 1: each task (rank) its CPU
    m = rec["extras"]["pos_confusion"]["matrix"]  # over both ranks' shards: every test word once
    assert sum(m[i][i] for i in range(len(m))) / sum(map(sum, m)) == pytest.approx(rec["test"]["acc"], abs=1e-7)
    log = log_path(out, rec).read_text()
    assert sorted(re.findall(r"pid \d+ rank (\d) of 2", log)) == ["0", "1"], log
    assert len(list((out / ".submitit").rglob("*_[01]_log.out"))) == 2  # one job, tasks 0 and 1


# ----------------------------------------------------------------------------- ray
def test_ray_refuses_a_multi_device_cell_in_one_line_before_starting(tmp_path) -> None:
    ray = pytest.importorskip("ray", reason="the ray launcher needs Ray: pip install 'attnbench[ray]'")
    from benchmarks.run.launchers.ray_launcher import RayLauncher

    jobs = _jobs(tmp_path / "out")
    with pytest.raises(CliError) as err:
        RayLauncher(None).launch(jobs, print)
    msg = str(err.value)
    assert "trainer.devices=2" in msg and "--launcher ray" in msg and "valid:" in msg and "\n" not in msg
    assert not ray.is_initialized()


# ----------------------------------------------------------------------------- local pool
def test_local_pool_gives_a_multi_device_cuda_cell_distinct_gpus_or_says_why_not(tmp_path) -> None:
    from benchmarks.run.launchers.local import LocalLauncher, _take_gpus

    free = ["0", "0", "1", "1"]  # --gpus 0,1 --cells-per-gpu 2
    assert _take_gpus(free, 2) == ["0", "1"] and free == ["0", "1"]
    assert _take_gpus(["0", "0"], 2) is None
    jobs = _jobs(tmp_path / "out")
    pool = LocalLauncher(None, argparse.Namespace(gpus="0", jobs=None, cells_per_gpu=2))
    with pytest.raises(CliError, match=r"trains on 2 GPUs \(trainer.devices=2\) but --gpus 0 gives 1"):
        pool.launch(jobs, print)
