"""Launchers: how the driver's cells reach workers. The driver claims nothing and trains
nothing; a launcher hands each :class:`CellJob` to a worker that runs the unit
(:func:`benchmarks.run.worker.execute_cell`) and reports a :class:`~benchmarks.run.worker.UnitResult`.

* ``inline``: in the driver's own process, one after another (for pdb and profilers);
* ``local`` (default): a pool of worker processes on this machine (:mod:`.local`);
* ``slurm``: submitit job arrays (:mod:`.slurm_launcher`, ``pip install 'attnbench[slurm]'``);
* ``ray``: Ray tasks with per-cell resources (:mod:`.ray_launcher`, ``pip install 'attnbench[ray]'``).
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Protocol

from benchmarks.run.worker import UnitResult

__all__ = ["CellJob", "Launcher", "LAUNCHERS", "get_launcher", "InlineLauncher", "UnitResult"]


@dataclass
class CellJob:
    """One cell for a worker: where its suite lives and what it may use."""

    out: Path
    cell_id: str
    label: str
    data_dir: Path | None
    cache_dir: Path
    timeout_s: float | None = None
    cpus: int = 1
    gpus: float = 0.0
    force: bool = False
    retry_failed: bool = False


class Launcher(Protocol):
    name: str

    def launch(self, jobs: list[CellJob], log: Callable[[str], None]) -> list[UnitResult]:
        """Run (or submit) every job; returns the results of those it waited for."""


class InlineLauncher:
    """Every cell in the driver's own process, in order: no isolation, for debugging. A cell on
    several devices is the exception: it runs as its own ``attnbench cell`` process (Lightning
    starts its other ranks by re-running the command line, which here is the driver's)."""

    name = "inline"

    def __init__(self, opts: Any, args: Any = None) -> None:
        self.opts = opts

    def launch(self, jobs: list[CellJob], log: Callable[[str], None]) -> list[UnitResult]:
        import time

        from benchmarks.run.distributed import SLURM_TASK_ENV, cell_ranks
        from benchmarks.run.records import on_disk
        from benchmarks.run.worker import cells_from_manifest, execute_cell, manifest_suite, record_target, run_unit

        results = []
        if not jobs:
            return results
        cells = cells_from_manifest(jobs[0].out)
        suite = manifest_suite(jobs[0].out)
        for k, job in enumerate(jobs, 1):
            t0 = time.monotonic()
            cell = cells[job.cell_id]
            ranks = cell_ranks(cell.config)
            own = f" on {ranks} ranks, its own process" if ranks > 1 else ""
            log(f"[{k}/{len(jobs)}] {job.label} ({cell.family}){own}")
            if ranks > 1:
                results.append(run_unit(job.out, job.cell_id, data_dir=job.data_dir, cache_dir=job.cache_dir,
                                        timeout_s=job.timeout_s, env={"ATTNBENCH_LAUNCHER": "inline"},
                                        force=job.force, retry_failed=job.retry_failed, drop_env=SLURM_TASK_ENV))
                rec = on_disk(record_target(job.out, cell))
                log_result(log, job.label, results[-1], rec)
                continue
            status, rec, _ = execute_cell(cell, suite, self.opts)
            reason = rec.get("reason") if rec and status == "failed" else None
            results.append(UnitResult(job.cell_id, status, reason, time.monotonic() - t0))
            log_result(log, job.label, results[-1], rec)
        return results


def log_result(log: Callable[[str], None], label: str, res: UnitResult, rec: dict | None = None) -> None:
    """One line per finished cell, the same for every launcher."""
    if res.status == "ok" and rec is not None and rec.get("test"):
        m = rec["metric"]["name"]
        log(f"    -> {label}: test/{m}={rec['test'][m]:.4f} (best val {rec['best_val']['value']:.4f} at epoch "
            f"{rec['best_val']['epoch']}), {rec['cost']['train_time_s']:.1f}s")
    elif res.status == "ok":
        log(f"    -> {label}: ok ({res.seconds:.1f}s)")
    elif res.status == "failed":
        log(f"    -> {label}: FAILED: {res.reason}")
    elif res.status == "elsewhere":
        log(f"    -> {label}: another run is training it, left to that run")
    else:
        log(f"    -> {label}: finished by another run meanwhile, skipped")


#: ``--launcher NAME`` -> "module:Class"; a launcher is built as ``Class(opts, args)`` with the
#: driver's :class:`~benchmarks.run.runner.RunOptions` and the parsed command line (or ``None``).
LAUNCHERS: dict[str, str] = {
    "inline": "benchmarks.run.launchers:InlineLauncher",
    "local": "benchmarks.run.launchers.local:LocalLauncher",
    "slurm": "benchmarks.run.launchers.slurm_launcher:SlurmLauncher",
    "ray": "benchmarks.run.launchers.ray_launcher:RayLauncher",
}


def get_launcher(name: str) -> type:
    if name not in LAUNCHERS:
        raise ValueError(f"unknown launcher {name!r}; valid: {', '.join(LAUNCHERS)}")
    module, cls = LAUNCHERS[name].split(":")
    return getattr(importlib.import_module(module), cls)
