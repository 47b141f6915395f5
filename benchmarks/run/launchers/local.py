"""The local pool: up to ``--jobs`` cells at once on this machine, each in a process of its own.

Workers are forked from a warm parent (``multiprocessing``'s forkserver with torch, Lightning and
the task packages preloaded), so a short cell does not pay for importing torch, and each cell
still starts from a fresh process state. A cell's process writes its own record; when it dies
without one (segfault, SIGKILL by the OOM killer, ``os._exit``, or the per-cell time limit),
the pool writes a ``failed`` record with the cause, the tail of the cell's log and the peak
memory it saw, and the matrix goes on.

Resources: on CPU each worker gets ``cores // jobs`` torch threads; with ``--gpus 0,1`` each
worker gets one ``CUDA_VISIBLE_DEVICES`` slot (the least busy GPU), and ``--cells-per-gpu K`` packs
K cells onto one GPU (recorded in each record as ``cells_sharing_device``), at most one worker per
core (a GPU cell trains on the host too), so the workers' threads never add up to more than the
cores (:func:`benchmarks.run.plan.pool_size`). Packed cells run under CUDA MPS where the machine has
it (:mod:`.mps`: a daemon per GPU for the run, stopped on every way out; records say ``mps``).

Cells start longest first by their measured cost on this machine
(:func:`benchmarks.run.plan.longest_first`: ``results/reference/<device>/costs.json`` and the
records already in the output), cells of unknown cost before all others, so that the run does not
end on one long cell started last.

A cell on several devices (``trainer.devices > 1``, :mod:`benchmarks.run.distributed`) is not forked:
Lightning starts its other ranks by re-running the command line, so it runs as its own
``python -m benchmarks cell`` process (:func:`benchmarks.run.worker.start_unit`). It takes as many
of the pool's places as it has ranks (all of them when there are fewer), their threads split
between its ranks, and on ``--gpus`` one slot on each of that many distinct GPUs.
"""

from __future__ import annotations

import contextlib
import json
import multiprocessing as mp
from multiprocessing import forkserver
import os
import socket
import time
from typing import Any, Callable, Iterator

from benchmarks.run import distributed as D
from benchmarks.run.launchers import CellJob, log_result
from benchmarks.run.launchers.mps import mps_daemons
from benchmarks.run.plan import cell_seconds, load_costs, longest_first, pool_size, this_device
from benchmarks.run.records import CODE_GIT_ENV, git_state, on_disk
from benchmarks.run.sockets import POOL_TEMPDIR_ENV, SocketPathError, pool_tempdir, use_pool_tempdir
from benchmarks.run.worker import (EXIT, PLUGINS_ENV, RESOURCES_ENV, UnitResult, cells_from_manifest, end_unit, log_path,
                               manifest_suite, record_target, start_unit, unit_result)

from tasks.common.registry import TASK_PACKAGES, TASK_WARM_MODULES  # noqa: E402 - beside PRELOAD, their one use

PRELOAD = ["torch", "lightning", "benchmarks.run.runner", "benchmarks.run.worker", "tasks.common.registry",
           *TASK_PACKAGES.values()]  # the registry's one list of domains
#: the forkserver's last preload: freezes what it imported (gc.freeze), so a forked cell's collections skip it
FREEZE = "benchmarks.run.launchers._freeze"
POLL_S = 0.2


def _child(job: CellJob, env: dict[str, str], threads: int | None) -> None:
    """A forked worker: its own log, threads and GPU slot, then the unit."""
    import faulthandler
    import signal
    import sys

    signal.signal(signal.SIGTERM, _interrupt)  # stop cleanly: the claim is released on the way out
    signal.signal(signal.SIGINT, _interrupt)
    for key in [k for k in os.environ if k.startswith("ATTNBENCH_") and k not in env]:
        del os.environ[key]  # unset in the driver since the forkserver started
    os.environ.update(env)
    use_pool_tempdir(env.get(POOL_TEMPDIR_ENV))  # the driver's socket folder, short whatever TMPDIR is
    log = log_path(job.out, cells_from_manifest(job.out)[job.cell_id])
    log.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(log, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    sys.stdout.flush()
    sys.stderr.flush()
    os.dup2(fd, 1)
    os.dup2(fd, 2)
    faulthandler.enable(file=sys.stderr)  # a segfault leaves its Python stack in the log
    if threads:
        import torch

        torch.set_num_threads(threads)
    from benchmarks.run.runner import RunOptions
    from benchmarks.run.worker import execute_cell, load_plugins

    load_plugins()
    opts = RunOptions(out=job.out, data_dir=job.data_dir, cache_dir=job.cache_dir, force=job.force,
                      retry_failed=job.retry_failed, log=lambda m: print(m, flush=True))
    cell = cells_from_manifest(job.out)[job.cell_id]
    try:
        status, _, _ = execute_cell(cell, manifest_suite(job.out), opts)
    except (KeyboardInterrupt, SystemExit):  # stopped by the driver: no record, the cell stays pending
        print(f"cell {job.cell_id}: interrupted", flush=True)
        os._exit(130)
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(EXIT[status])  # no atexit handlers of the forked parent's modules


def _stop_all(procs: list, grace_s: float = 10.0) -> None:
    """Ctrl-C or an error in the driver: ask the workers to stop (SIGTERM: they release their
    claims and write no record, so the cells stay pending), then kill what is left."""
    for proc in procs:
        with contextlib.suppress(Exception):
            proc.terminate()
    deadline = time.monotonic() + grace_s
    for proc in procs:
        with contextlib.suppress(Exception):
            proc.join(timeout=max(0.0, deadline - time.monotonic()))
            if proc.is_alive():
                proc.kill()
                proc.join(timeout=5)


def _interrupt(signum, frame) -> None:
    raise KeyboardInterrupt


@contextlib.contextmanager
def _signals_held() -> Iterator[None]:
    """Hold SIGINT/SIGTERM while a worker is started and entered in the running set, then act
    on one that came. A Ctrl-C while the forkserver forks a worker (the driver waiting for its
    pid) would otherwise leave a worker the driver never knew of: it trained on after the run
    said "interrupted". Held, the signal is raised once the worker can be stopped with the rest."""
    import signal
    import threading

    if threading.current_thread() is not threading.main_thread():  # only the main thread has handlers
        yield
        return
    came: list[int] = []
    old = {sig: signal.signal(sig, lambda signum, frame: came.append(signum)) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield
    finally:
        for sig, handler in old.items():
            signal.signal(sig, handler)
        if came:
            handler = old[came[0]]
            if callable(handler):
                handler(came[0], None)
            elif handler == signal.SIG_DFL:
                os.kill(os.getpid(), came[0])  # the default action, now that the worker can be stopped


class _UnitProcess:
    """A multi-device cell's own ``attnbench cell`` process (rank 0, its other ranks in its
    session), with what the pool uses of ``multiprocessing.Process``."""

    def __init__(self, popen) -> None:
        self.popen, self.pid = popen, popen.pid

    def is_alive(self) -> bool:
        return self.popen.poll() is None

    @property
    def exitcode(self) -> int | None:
        return self.popen.poll()

    def terminate(self) -> None:
        """SIGTERM to rank 0 only: it releases the claim, and Lightning stops the other ranks."""
        with contextlib.suppress(ProcessLookupError):
            self.popen.terminate()

    def kill(self) -> None:
        end_unit(self.popen)

    def join(self, timeout: float | None = None) -> None:
        import subprocess

        try:
            self.popen.wait(timeout)
        except subprocess.TimeoutExpired:
            return
        end_unit(self.popen)  # rank 0 has ended: so do the others


def _take_gpus(free: list[str], n: int) -> list[str] | None:
    """``n`` free slots on ``n`` distinct GPUs (removed from ``free``), those with the most free
    slots first (ties in ``--gpus`` order), or None if not free now."""
    distinct = sorted(dict.fromkeys(free), key=lambda g: -free.count(g))  # stable: ties keep their order
    if len(distinct) < n:
        return None
    picked = distinct[:n]
    for g in picked:
        free.remove(g)
    return picked


def _rss(pid: int) -> int | None:
    try:
        import psutil

        return psutil.Process(pid).memory_info().rss
    except Exception:  # noqa: BLE001 - gone, or psutil missing: no sample
        return None


class LocalLauncher:
    """``--jobs N`` worker processes on this machine (``--gpus``, ``--cells-per-gpu``)."""

    name = "local"

    def __init__(self, opts: Any, args: Any = None) -> None:
        self.opts = opts
        gpus = getattr(args, "gpus", None)
        self.gpus: list[str] = [g.strip() for g in gpus.split(",")] if gpus else []
        self.asked_per_gpu = int(getattr(args, "cells_per_gpu", None) or 1)
        self.cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
        self.jobs, self.threads, self.per_gpu = pool_size(getattr(args, "jobs", None), len(self.gpus),
                                                          self.asked_per_gpu, self.cores)

    def _context(self, tasks: set[str] | frozenset[str] = frozenset()):
        try:  # the forkserver's socket goes there: short enough whatever the length of TMPDIR
            self.pool_tmp = pool_tempdir()
        except SocketPathError as err:
            from benchmarks.run.launchers.remote import usage_error

            raise usage_error(str(err)) from None
        ctx = mp.get_context("forkserver")
        warm = [m for t in sorted(tasks) for m in TASK_WARM_MODULES.get(t, ())]  # the run's domains' heavy imports
        plugins = [m for m in os.environ.get(PLUGINS_ENV, "").split(",") if m]
        ctx.set_forkserver_preload(PRELOAD + warm + plugins + [FREEZE])
        # the code the forked cells run is what the forkserver imports now, whatever the checkout
        # holds when a cell starts later: their records name this commit (records.environment)
        self.code_git = json.dumps(git_state())
        return ctx

    def _ranks(self, cell: Any) -> int:
        """Processes the cell trains with; ``devices: auto`` on a GPU slot is that one GPU."""
        return D.cell_ranks(cell.config, visible_gpus=1 if self.gpus else None)

    def _check(self, jobs: list[CellJob], cells: dict[str, Any]) -> None:
        """Refuse, in one line, a multi-device cell that ``--gpus`` cannot give its GPUs."""
        for job in jobs:
            n = self._ranks(cells[job.cell_id])
            cuda = cells[job.cell_id].config.get("device") == "cuda"
            if n > 1 and cuda and self.gpus and len(set(self.gpus)) < n:
                from benchmarks.run.launchers.remote import usage_error

                raise usage_error(f"cell {job.label} trains on {n} GPUs (trainer.devices="
                                  f"{cells[job.cell_id].config['trainer'].get('devices')!r}) but --gpus "
                                  f"{','.join(self.gpus)} gives {len(set(self.gpus))}: give at least {n} GPU indices")

    def _order(self, jobs: list[CellJob], cells: dict[str, Any], suite: str, log: Callable[[str], None]) -> list[CellJob]:
        """The jobs in the order to start them: longest first by this machine's measured costs."""
        try:
            device = this_device(any(cells[j.cell_id].config.get("device") == "cuda" for j in jobs))
            costs = load_costs(device, jobs[0].out)
        except (ValueError, OSError) as err:
            log(f"local pool: cells start in the config's order, no costs to order them by ({err})")
            return list(jobs)
        seconds = {j.cell_id: cell_seconds(cells[j.cell_id], costs, suite)[0] for j in jobs}
        known = sum(1 for s in seconds.values() if s is not None)
        if known:
            log(f"local pool: cells start longest first ({known} of {len(jobs)} measured on {device}, the "
                "others first)")
        by_id = {j.cell_id: j for j in jobs}
        return [by_id[c.cell_id] for c in longest_first([cells[j.cell_id] for j in jobs], seconds)]

    def _start(self, ctx: Any, job: CellJob, cell: Any, gpus: list[str], places: int, ranks: int,
               resources: dict[str, Any], mps_env: dict[str, str] | None = None) -> Any:
        """Start the cell: forked from the warm parent, or (several ranks) as its own process;
        ``mps_env``: its GPU's MPS daemon (:func:`.mps.mps_daemons`)."""
        threads = D.rank_threads(places * self.threads, ranks)
        # the driver's ATTNBENCH_* settings as they are now (plug-ins, loggers, ...), not
        # those of the forkserver, which may have started earlier
        env = {**{k: v for k, v in os.environ.items() if k.startswith("ATTNBENCH_")}, **(mps_env or {}),
               RESOURCES_ENV: json.dumps({**resources, "cpu_threads": threads}), "OMP_NUM_THREADS": str(threads),
               POOL_TEMPDIR_ENV: self.pool_tmp}
        if gpus:
            env["CUDA_VISIBLE_DEVICES"] = ",".join(gpus)
        if ranks > 1:  # its own process imports the checkout as it is now
            return _UnitProcess(start_unit(job.out, cell, data_dir=job.data_dir, cache_dir=job.cache_dir, env=env,
                                           force=job.force, retry_failed=job.retry_failed,
                                           drop_env=D.SLURM_TASK_ENV))
        env[CODE_GIT_ENV] = self.code_git
        proc = ctx.Process(target=_child, args=(job, env, threads), name=f"cell-{job.cell_id}")
        proc.start()
        return proc

    def launch(self, jobs: list[CellJob], log: Callable[[str], None]) -> list[UnitResult]:
        if not jobs:
            return []
        cells = cells_from_manifest(jobs[0].out)
        suite = manifest_suite(jobs[0].out)
        self._check(jobs, cells)
        ctx = self._context({cells[j.cell_id].task for j in jobs if j.cell_id in cells})
        free = [g for g in self.gpus for _ in range(self.per_gpu)]
        pending = self._order(jobs, cells, suite, log)
        log(f"local pool: {self.jobs} worker(s), {self.threads} torch thread(s) each"
            + (f", GPUs {','.join(self.gpus)} x {self.per_gpu} cell(s) each" if self.gpus else ""))
        if self.per_gpu < self.asked_per_gpu:
            log(f"local pool: --cells-per-gpu {self.asked_per_gpu} on {len(self.gpus)} GPU(s) asks for more workers "
                f"than the {self.cores} cores: {self.jobs} at once (a packed GPU cell trains on the host too)")
        packed = bool(self.gpus) and self.per_gpu > 1
        with mps_daemons(self.gpus, jobs[0].out, log) if packed else contextlib.nullcontext({}) as mps:
            results = self._run(ctx, pending, cells, suite, free, mps, log)
        return results

    def _run(self, ctx: Any, pending: list[CellJob], cells: dict[str, Any], suite: str, free: list[str],
             mps: dict[str, dict[str, str]], log: Callable[[str], None]) -> list[UnitResult]:
        """Start the pending cells as places free up and collect their results; on any way out
        (Ctrl-C, an error) the workers still running are stopped."""
        running: dict[Any, tuple[CellJob, float, list[str], dict, Any, int]] = {}
        peaks: dict[str, int] = {}
        results: list[UnitResult] = []
        total, started = len(pending), 0
        try:
            while pending or running:
                while pending:
                    job = pending[0]
                    cell = cells[job.cell_id]
                    ranks = self._ranks(cell)
                    places = min(ranks, self.jobs)  # a multi-device cell takes a place per rank
                    if sum(r[5] for r in running.values()) + places > self.jobs:
                        break
                    gpus: list[str] = []
                    if self.gpus:
                        got = _take_gpus(free, ranks if cell.config.get("device") == "cuda" else 1)
                        if got is None:
                            break
                        gpus = got
                    pending.pop(0)
                    # one MPS daemon's env for all its GPUs (a multi-GPU cell under per-GPU daemons gets none)
                    envs = [mps.get(g) for g in gpus]
                    mps_env = envs[0] if envs and envs[0] and all(e == envs[0] for e in envs) else None
                    resources = {"launcher": "local", "node": socket.gethostname(), "jobs": self.jobs,
                                 "cells_sharing_device": self.per_gpu if gpus else 1,
                                 "gpu_index": ",".join(gpus) if gpus else None, "mps": mps_env is not None}
                    if ranks > 1:
                        resources["ranks"] = ranks
                    before = on_disk(record_target(job.out, cell))
                    if ranks == 1:
                        forkserver.ensure_running()  # its start (imports) stays interruptible
                    with _signals_held():
                        proc = self._start(ctx, job, cell, gpus, places, ranks, resources, mps_env)
                        running[proc] = (job, time.monotonic(), gpus, resources, before, places)
                    started += 1
                    log(f"[{started}/{total}] {job.label} ({cell.family})"
                        + (f" on {ranks} ranks, its own process" if ranks > 1 else ""))
                time.sleep(POLL_S)
                for proc in list(running):
                    job, t0, gpus, resources, before, _ = running[proc]
                    rss = _rss(proc.pid) if proc.pid else None
                    if rss:
                        peaks[job.cell_id] = max(peaks.get(job.cell_id, 0), rss)
                    timed_out = job.timeout_s is not None and time.monotonic() - t0 > job.timeout_s
                    if proc.is_alive() and not timed_out:
                        continue
                    if timed_out and proc.is_alive():
                        proc.kill()
                    proc.join()
                    del running[proc]
                    free.extend(gpus)
                    res = unit_result(job.out, cells[job.cell_id], suite, proc.exitcode,
                                      f"timed out after {job.timeout_s:.0f} s (killed)" if timed_out else None,
                                      time.monotonic() - t0, before, peak_rss=peaks.get(job.cell_id),
                                      resources={**resources, "cpu_threads": self.threads})
                    results.append(res)
                    rec = None
                    if res.status == "ok":
                        rec = on_disk(record_target(job.out, cells[job.cell_id]))
                    log_result(log, job.label, res, rec)
                # progress over all workers (and other drivers): the driver's SuiteProgress
        finally:
            _stop_all(list(running))
        return results
