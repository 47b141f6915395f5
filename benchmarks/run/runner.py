"""Run a suite: each cell trains with ``lightning.Trainer``, keeps the best-on-validation
checkpoint, tests that checkpoint, is measured, and becomes one JSON record written
atomically. Finished cells are skipped on re-run, a failing cell (exception, NaN, out of
memory) is recorded as ``failed`` and the matrix goes on.

Several runs may share one output folder (two terminals, two GPUs): a run claims a cell
(:mod:`benchmarks.run.claims`) before training it and skips cells another live run holds; each run
keeps its checkpoints in a folder of its own; and a ``failed`` record never replaces an ``ok``
one that another run wrote meanwhile."""

from __future__ import annotations

import contextlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from benchmarks.run import fingerprint as F
from benchmarks.run.budget import cell_timeout
from benchmarks.run import records as R
from benchmarks.config.suite import Cell, expand, resolve_device

from benchmarks.run.cell import DEFAULT_CACHE, RunOptions, new_record, run_cell  # noqa: F401 (public here too)


@dataclass
class RunSummary:
    ran: int = 0
    skipped: int = 0
    failed: list[str] = field(default_factory=list)
    records: list[Path] = field(default_factory=list)
    elsewhere: int = 0  # cells another live run was training: left to it
    #: finished cells whose record is ``failed`` and that this run did not rerun (no --retry-failed)
    standing_failed: int = 0


# ----------------------------------------------------------------------------- the suite
def run_suite(cfg: dict[str, Any], opts: RunOptions, source: str = "", launcher: Any = None) -> RunSummary:
    """Run every cell of a validated suite config (of ``opts.only_tasks``, when given) that is
    not finished yet, through ``launcher`` (default: inline, in this process). The driver
    writes the manifest (every cell of the suite with its resolved config), decides what is
    unfinished, and hands those cells over."""
    from benchmarks.run.launchers import CellJob, InlineLauncher

    cells = expand(cfg)
    selected = run_cells(cells, opts)
    suite = cfg["suite"]
    opts.out.mkdir(parents=True, exist_ok=True)
    done = R.finished_records(opts.out)
    if opts.reuse and not opts.force:  # a tuning's trials at the chosen values are this run's cells
        from benchmarks.run.reuse import reuse_records

        if reuse_records(R.to_run(selected, done, retry_failed=opts.retry_failed), opts.reuse, opts.out, suite, opts.log):
            done = R.finished_records(opts.out)
    todo = R.to_run(selected, done, force=opts.force, retry_failed=opts.retry_failed)
    if todo:  # every real dataset the run needs, once, before any cell (one line, no records)
        from benchmarks.run.data_check import check_run_data

        check_run_data(todo, opts.data_dir, opts.cache_dir)
    # measured once per run, with the threads a cell will have; kept from the last run when none is left
    fingerprint = F.measure_for_run(resolve_device(opts.accelerator or cfg["trainer"]["accelerator"]),
                                    cfg["trainer"]["precision"], getattr(launcher, "threads", None)) \
        if todo else F.manifest_fingerprint(opts.out)
    R.write_json_atomic(
        opts.out / R.MANIFEST,
        {
            "suite": suite,
            "source": source,
            "written": R.now_iso(),
            "fingerprint": fingerprint,
            "config": cfg,
            "cells": [
                {"cell_id": c.cell_id, "task": c.task, "dataset": c.dataset, "model": c.model, "family": c.family,
                 "pattern": c.pattern, "seed": c.seed, "label": c.label,
                 **({"train_fraction": c.train_fraction} if c.train_fraction < 1 else {}), "config": c.config}
                for c in cells
            ],
        },
    )
    n_failed_prev = sum(1 for c in selected if c not in todo and done[c.cell_id].get("status") != "ok")
    summary = RunSummary(skipped=len(selected) - len(todo), standing_failed=n_failed_prev)
    log = opts.log
    launcher = launcher or InlineLauncher(opts)
    slices = [f"{what} {','.join(names)}" for what, names in (("tasks", opts.only_tasks), ("models", opts.only_models))
              if names is not None]
    sliced = f", {len(selected)} of {' and '.join(slices)}" if slices else ""
    log(f"suite {suite!r}: {len(cells)} cells{sliced}, {summary.skipped} already finished, {len(todo)} to run "
        f"-> {opts.out} (launcher: {launcher.name})")
    if todo:
        log(f"  speed fingerprint: {F.format_fingerprint(fingerprint)}")
    if n_failed_prev:
        log(f"  ({n_failed_prev} finished cells had failed; --retry-failed reruns them)")
    external = sum(1 for c in todo if c.cell_id in done and R.retried_by_default(done[c.cell_id])
                   and not (opts.force or opts.retry_failed))
    if external:
        log(f"  ({external} cells failed for a cause outside them (data, disk, signal): retried)")
    jobs = [CellJob(opts.out, c.cell_id, c.label, opts.data_dir, opts.cache_dir, opts.cell_timeout or cell_timeout(c.config, fingerprint),
                    gpus=1.0 if c.config.get("device") == "cuda" else 0.0,  # what Slurm/Ray reserve
                    force=opts.force, retry_failed=opts.retry_failed) for c in todo]
    by_id = {c.cell_id: c for c in todo}
    from benchmarks.run.plan import predicted_seconds
    from benchmarks.run.progress import SuiteProgress

    # done / running / failed / pending over every worker, read from the folder (any launcher);
    # the ETA weighs the cells by their predicted seconds
    with SuiteProgress(opts.out, todo, {c.cell_id: done.get(c.cell_id) for c in todo}, log,
                       every_s=opts.progress_every_s, weights=predicted_seconds(todo, suite, records=done.values()) if todo else None) \
            as progress:
        for res in launcher.launch(jobs, progress.log):
            if res.status in ("ok", "failed"):
                summary.ran += 1
                summary.records.append(R.record_path(opts.out, {**by_id[res.cell_id].__dict__}))
            if res.status == "failed":
                summary.failed.append(by_id[res.cell_id].label)
            elif res.status == "elsewhere":
                summary.elsewhere += 1
            elif res.status == "finished":
                summary.skipped += 1
    with contextlib.suppress(OSError):  # only when empty: another run may still be using it
        (opts.out / ".checkpoints").rmdir()
    return summary


def run_cells(cells: list, opts: RunOptions) -> list:
    """The cells this run is for: all, or those of ``opts.only_tasks`` and ``opts.only_models``."""
    return [c for c in cells if (opts.only_tasks is None or c.task in opts.only_tasks)
            and (opts.only_models is None or c.model in opts.only_models)]


def run_micro_benchmarks(cfg: dict[str, Any], opts: RunOptions) -> list[str]:
    """The suite's ``micro_benchmarks`` (default configs) into ``<out>/bench/<name>``; a finished
    one is skipped unless ``force``; a failure is reported and the rest goes on. Returns the
    names of those that failed (an exception or a non-zero exit code)."""
    from benchmarks.config import CONFIG_DIR
    from benchmarks.config.micro import MICRO_BENCHMARKS

    failed: list[str] = []
    for name in cfg.get("micro_benchmarks", []):
        bench = MICRO_BENCHMARKS[name]
        out = opts.out / "bench" / name
        if (out / f"bench_{name}.json").exists() and not opts.force:
            opts.log(f"micro-benchmark {name!r}: already done ({out}), skipped")
            continue
        opts.log(f"micro-benchmark {name!r} -> {out}")
        try:
            code = bench.run(config=CONFIG_DIR / bench.default_config, out=out, device=None, dtype=None, sets=[])
            if code:
                opts.log(f"micro-benchmark {name!r} exited with code {code}")
                failed.append(name)
        except Exception as err:  # noqa: BLE001 - the suite's results stand without it
            opts.log(f"micro-benchmark {name!r} FAILED: {type(err).__name__}: {err}")
            failed.append(name)
    return failed
