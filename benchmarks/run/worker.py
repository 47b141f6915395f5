"""The unit of work: one resolved cell, run once, in a process of its own.

* :func:`execute_cell` claims a cell, trains it (:func:`benchmarks.run.cell.run_cell`), stores its
  record and releases the claim. Every launcher ends here: ``inline`` in the driver's process,
  the local pool in a child forked from a warm parent, Slurm and Ray through ``attnbench cell``.
* :func:`cells_from_manifest` reads the cells (with their full resolved configs) from
  ``OUT/suite.json``, so a worker on another node runs exactly what the driver expanded.
* :func:`run_unit` runs ``attnbench cell OUT ID`` as a child process with its log beside the
  record, and turns a death without a record (segfault, SIGKILL, ``os._exit``, time limit) into
  a ``failed`` record naming the cause: what a Slurm job or a Ray task calls.

Exit codes of a unit (``attnbench cell``): 0 ok, 1 the cell failed (record written),
3 another live worker holds the cell, 4 already finished.

A cell on several devices (:mod:`benchmarks.run.distributed`) is one unit whose process is rank 0;
the other ranks run the same command (started by Lightning, or as Slurm tasks) and
:func:`execute_cell` lets them train without a claim and without a record.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from benchmarks.run import claims as C
from benchmarks.run import distributed as D
from benchmarks.run import records as R
from benchmarks.config.plugins import PLUGINS_ENV
from benchmarks.config.suite import Cell

__all__ = ["EXIT", "UnitResult", "execute_cell", "train_cell", "cells_from_manifest", "record_target", "log_path",
           "run_unit", "start_unit", "end_unit", "unit_result", "write_crash_record", "describe_exit", "load_plugins",
           "RESOURCES_ENV", "PLUGINS_ENV"]

EXIT = {"ok": 0, "failed": 1, "elsewhere": 3, "finished": 4}
RESOURCES_ENV = "ATTNBENCH_RESOURCES"  # JSON: what the launcher gave this cell (stored in its record)
LOG_TAIL_LINES = 20


@dataclass
class UnitResult:
    cell_id: str
    status: str  # ok | failed | elsewhere | finished
    reason: str | None = None
    seconds: float = 0.0


def load_plugins(extra: list[str] | tuple[str, ...] = ()) -> list[str]:
    """:func:`benchmarks.config.plugins.load_plugins`: the installed ``attnbench.plugins`` entry points,
    the modules named in ``$ATTNBENCH_PLUGINS`` and ``extra``, each once per process; a broken
    one raises :class:`benchmarks.config.plugins.PluginError` (a ``RuntimeError``), one line naming it."""
    from benchmarks.config.plugins import load_plugins as load

    return load(extra)


def record_target(out: Path, cell: Cell | dict[str, Any]) -> Path:
    get = (lambda k: getattr(cell, k)) if isinstance(cell, Cell) else cell.__getitem__
    return R.record_path(out, {k: get(k) for k in ("task", "dataset", "model", "seed", "cell_id")})


def log_path(out: Path, cell: Cell | dict[str, Any]) -> Path:
    """Each cell's own log, beside its record."""
    return record_target(out, cell).with_suffix(".log")


def cells_from_manifest(out: Path) -> dict[str, Cell]:
    """``cell_id -> Cell`` from ``OUT/suite.json``, as the driver expanded them."""
    path = Path(out) / R.MANIFEST
    try:
        manifest = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise FileNotFoundError(f"{path}: no suite manifest (run the driver, attnbench run, first)") from None
    except ValueError as err:
        raise ValueError(f"{path}: not a readable suite manifest: {err}") from None
    cells = {}
    for c in manifest.get("cells", []):
        if "config" not in c:
            raise ValueError(f"{path}: written by an older attnbench (no cell configs); rerun attnbench run once")
        cells[c["cell_id"]] = Cell(c["cell_id"], c["task"], c["dataset"], c["model"], c["family"],
                                   c.get("pattern"), c["seed"], c["config"])
    return cells


def manifest_suite(out: Path) -> str:
    return json.loads((Path(out) / R.MANIFEST).read_text(encoding="utf-8"))["suite"]


def execute_cell(cell: Cell, suite: str, opts, *, seen: dict[str, Any] | None = None,
                 seen_known: bool = False) -> tuple[str, dict[str, Any] | None, Path | None]:
    """Claim, train, store, release. Returns ``(status, record, path)`` with status ``ok``,
    ``failed``, ``elsewhere`` (another live worker holds it) or ``finished`` (already done).

    ``seen``: the record the caller saw when it decided to run the cell (``seen_known``);
    otherwise the record on disk now. A record written by another worker since then is kept.

    A rank > 0 of a multi-device cell (:func:`benchmarks.run.distributed.launch_rank`) only trains:
    rank 0 holds the claim and writes the record; it returns ``(status, record, None)``."""
    if D.launch_rank() > 0:  # decided before any check: rank 0 already decided to run it
        rec = train_cell(cell, suite, opts)
        return rec["status"], rec, None
    target = record_target(opts.out, cell)
    if not seen_known:
        seen = R.on_disk(target)
        if seen is not None and not R.should_run(seen, opts, seen):
            return "finished", seen, target
    held = C.claim(C.claim_path(target))
    if held is None:
        return "elsewhere", None, None
    with held:
        prev = R.on_disk(target)
        if prev is not None and not R.should_run(prev, opts, seen):
            return "finished", prev, target
        rec = train_cell(cell, suite, opts)
        path = R.store(target, rec, opts, seen, opts.log)
    return rec["status"], rec, path


def train_cell(cell: Cell, suite: str, opts, *, callbacks: tuple = ()) -> dict[str, Any]:
    """:func:`benchmarks.run.cell.run_cell` with the worker's options of a cell: with
    ``trainer.compile`` (true, a mode) its network is compiled (:mod:`benchmarks.run.callbacks`) and the
    compile time is stored apart (``cost.compile_s`` and ``cost.compile``; ``train_time_s`` and
    ``train_compute_s`` exclude it, their totals with it kept as ``*_with_compile_s``); a network
    that cannot compile is a failed record with a one-line reason. ``callbacks``: more Lightning
    callbacks attached to this cell's trainer (``attnbench profile``, ``bench train``)."""
    from benchmarks.config.trainer import bucket_spec
    from benchmarks.run.callbacks import attach_callbacks, compile_callback, compile_failure, compile_mode
    from benchmarks.run.cell import run_cell

    trainer = cell.config.get("trainer") or {}
    mode, buckets = compile_mode(trainer.get("compile")), bucket_spec(trainer)
    count = len(buckets) if isinstance(buckets, list) else buckets or 1
    compiler = compile_callback()(mode, count) if mode else None
    try:
        with attach_callbacks(*([compiler] if compiler else []), *callbacks):
            rec = run_cell(cell, suite, opts)
    finally:
        if compiler is not None:
            compiler.restore()
    if compiler is None:
        return rec
    if rec["status"] != "ok" and compiler.failed_compiling:
        rec["reason"] = compile_failure(cell.model, compiler.error or rec["reason"], mode)
        return rec
    cost = rec["cost"]
    info = compiler.summary()
    cost["compile"], cost["compile_s"] = info, info["compile_s"]
    if cost.get("train_time_s") is not None:
        cost["train_time_with_compile_s"] = cost["train_time_s"]
        cost["train_time_s"] = round(max(cost["train_time_s"] - info["compile_s"], 0.0), 3)
    compute, train_c = cost.get("train_compute_s"), (info.get("train") or {}).get("compile_s", 0.0)
    if compute and compute > train_c:
        cost["train_compute_with_compile_s"] = compute
        cost["train_compute_s"] = round(compute - train_c, 3)
        for key in ("train_samples_per_s", "train_tokens_per_s"):  # the same count over the compile-free time
            if cost.get(key):
                cost[key] = cost[key] * compute / (compute - train_c)
    return rec


# --------------------------------------------------------------------------- crashes
def describe_exit(code: int | None) -> str:
    """``-11`` -> ``killed by signal SIGSEGV``; ``137`` -> ``exit code 137 (SIGKILL?)``."""
    if code is None:
        return "still running"
    if code < 0:
        try:
            name = signal.Signals(-code).name
        except ValueError:
            name = f"signal {-code}"
        return f"killed by {name}" + (" (the kernel's out-of-memory killer sends it)" if -code == signal.SIGKILL else "")
    if code > 128:
        with contextlib.suppress(ValueError):
            return f"exit code {code} ({signal.Signals(code - 128).name}?)"
    return f"exit code {code}"


def _tail(path: Path, lines: int = LOG_TAIL_LINES) -> str:
    try:
        with open(path, "rb") as f:
            f.seek(0, os.SEEK_END)
            f.seek(max(0, f.tell() - 16384))
            text = f.read().decode("utf-8", "replace")
    except OSError:
        return ""
    all_lines = text.splitlines()
    tail = all_lines[-lines:]
    fatal = [ln for ln in all_lines[:-lines] if ln.startswith("Fatal Python error")]
    return "\n".join(fatal[-1:] + tail)  # a crash's headline first, however deep its stack


def write_crash_record(out: Path, cell: Cell, suite: str, cause: str, *, peak_rss: int | None = None,
                       seconds: float | None = None, resources: dict | None = None,
                       failure: str = "cell") -> Path | None:
    """The ``failed`` record of a cell whose process died before writing one (never over an
    ``ok`` record). Holds the cause, the last lines of the cell's log and the peak memory seen."""
    from benchmarks.run.cell import new_record

    target = record_target(out, cell)
    prev = R.on_disk(target)
    if prev is not None and prev.get("status") == "ok":
        return None
    rec = new_record(cell, suite)
    log = log_path(out, cell)
    rec.update(reason=f"crashed: {cause}", failure=failure, finished=R.now_iso(), log_tail=_tail(log),
               env=R.environment("cpu"))
    rec["cost"] = {"peak_mem_bytes": peak_rss, "peak_mem_kind": "cpu_rss_peak_seen_by_driver", "wall_s": seconds}
    rec["resources"] = resources or {}
    with contextlib.suppress(OSError):  # the dead worker's claim: nobody holds it any more
        C.claim_path(target).unlink()
    return R.write_json_atomic(target, rec)


# --------------------------------------------------------------------------- a unit as a child process
def start_unit(out: Path, cell: Cell, *, data_dir: Path | None = None, cache_dir: Path | None = None,
               env: dict[str, str] | None = None, force: bool = False, retry_failed: bool = False,
               drop_env: tuple[str, ...] = ()) -> subprocess.Popen:
    """Start ``python -m benchmarks cell OUT CELL_ID`` in a session of its own (so that the
    ranks Lightning starts from it can be ended together), its output appended to the cell's
    log; ``env`` is added to this process's environment, ``drop_env`` removed from it."""
    log = log_path(out, cell)
    log.parent.mkdir(parents=True, exist_ok=True)
    argv = [sys.executable, "-m", "benchmarks", "cell", str(out), cell.cell_id]
    if data_dir is not None:
        argv += ["--data-dir", str(data_dir)]
    if cache_dir is not None:
        argv += ["--cache-dir", str(cache_dir)]
    argv += ["--force"] * force + ["--retry-failed"] * retry_failed
    child_env = {k: v for k, v in {**os.environ, **(env or {})}.items() if k not in drop_env}
    child_env["PYTHONFAULTHANDLER"] = "1"
    with open(log, "ab") as f:
        return subprocess.Popen(argv, stdout=f, stderr=subprocess.STDOUT, env=child_env, start_new_session=True)


def end_unit(proc: subprocess.Popen, sig: int = signal.SIGKILL) -> None:
    """Send ``sig`` to the unit's whole session: after rank 0 has ended, the other ranks of a
    multi-device cell have nothing left to do (and one blocked on a dead peer would hang)."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, sig)


def run_unit(out: Path, cell_id: str, *, data_dir: Path | None = None, cache_dir: Path | None = None,
             timeout_s: float | None = None, env: dict[str, str] | None = None, force: bool = False,
             retry_failed: bool = False, drop_env: tuple[str, ...] = ()) -> UnitResult:
    """Run ``attnbench cell OUT CELL_ID`` in a child process and wait; a death without a record
    becomes a ``failed`` record here. For launchers whose job outlives the cell (Slurm, Ray), and
    for cells on several devices. In a rank > 0 of a multi-task Slurm job the result is only
    that rank's exit: rank 0's job owns the record and any crash record."""
    out = Path(out)
    load_plugins()  # the crash record below needs the cell's task registered
    cells = cells_from_manifest(out)
    cell = cells[cell_id]
    child_env = {**os.environ, **(env or {})}
    resources = {"launcher": child_env.get("ATTNBENCH_LAUNCHER", "unit"), "node": socket.gethostname(),
                 "cuda_visible_devices": child_env.get("CUDA_VISIBLE_DEVICES")}
    ranks = D.cell_ranks(cell.config)
    if ranks > 1:
        resources["ranks"] = ranks
        if "OMP_NUM_THREADS" not in child_env:  # else Lightning picks, after the record has read them
            env = {**(env or {}), "OMP_NUM_THREADS": str(D.unit_threads(child_env, ranks))}
    env = {**(env or {}), RESOURCES_ENV: child_env.get(RESOURCES_ENV) or json.dumps(resources)}
    before = R.on_disk(record_target(out, cell))
    t0 = time.monotonic()
    proc = start_unit(out, cell, data_dir=data_dir, cache_dir=cache_dir, env=env, force=force,
                      retry_failed=retry_failed, drop_env=drop_env)
    try:
        code = proc.wait(timeout=timeout_s)
        cause = describe_exit(code)
    except subprocess.TimeoutExpired:
        end_unit(proc)
        proc.wait()
        code, cause = None, f"timed out after {timeout_s:.0f} s (killed)"
    finally:
        if ranks > 1:
            end_unit(proc)
    if D.launch_rank() > 0:
        status = "ok" if code == 0 else "failed"
        return UnitResult(cell.cell_id, status, None if code == 0 else f"rank {D.launch_rank()}: {cause}",
                          time.monotonic() - t0)
    return unit_result(out, cell, manifest_suite(out), code, None if code is not None else cause,
                       time.monotonic() - t0, before, resources=resources)


def unit_result(out: Path, cell: Cell, suite: str, code: int | None, killed_because: str | None, seconds: float,
                before: dict[str, Any] | None, *, peak_rss: int | None = None,
                resources: dict | None = None) -> UnitResult:
    """What a unit's exit means. ``ok``/``failed`` count only if the unit really wrote a record
    (one that differs from ``before``, the record on disk when it started); any other ending
    (a signal, an unexpected exit code, an exception before the record, ``killed_because``)
    becomes a ``failed`` record written here."""
    status = next((s for s, c in EXIT.items() if c == code), None) if killed_because is None else None
    now = R.on_disk(record_target(out, cell))
    wrote = now is not None and not R.same_record(now, before)
    if status in ("elsewhere", "finished") or (status in ("ok", "failed") and wrote):
        reason = now.get("reason") if status == "failed" and now else None
        return UnitResult(cell.cell_id, status, reason, seconds)
    cause = killed_because or describe_exit(code) + (" without a record" if status else "")
    write_crash_record(out, cell, suite, cause, peak_rss=peak_rss, seconds=seconds, resources=resources,
                       failure="cell" if killed_because else R.exit_failure_kind(code))
    return UnitResult(cell.cell_id, "failed", f"crashed: {cause}", seconds)
