"""``--launcher slurm``: each cell is one task of a Slurm job array, submitted through submitit.

Every array task calls :func:`benchmarks.run.worker.run_unit`, which runs ``attnbench cell OUT ID``
in a child process: the Slurm job outlives a crash of the cell and writes its ``failed`` record.
Cells with the same resources share one array (``--slurm-array-parallelism`` at a time).

Preemption and time limits: submitit asks Slurm for ``USR2`` shortly before the job is ended
and then calls :meth:`CellTask.checkpoint`, which stops the cell's process (its claim is
released, or removed when it had to be killed) and hands submitit the same task again; submitit
requeues the job and the cell starts over from scratch in the restarted job. A cell that keeps
running into ``--slurm-time`` is given up after submitit's three requeues, as a failed record.

Without ``--no-wait`` the driver waits and logs each cell as it finishes; with it, the driver
prints the job ids and returns, and ``attnbench status OUT`` follows the cells.

A cell on several devices (``trainer.devices = N > 1``) is one job of ``N`` tasks on one node
(``--ntasks-per-node N``, ``--cpus-per-task`` each, and ``N`` GPUs for a CUDA cell): every task
runs the unit, Lightning's ``SLURMEnvironment`` makes task ``k`` rank ``k``, and only task 0
writes the record (:mod:`benchmarks.run.distributed`). Its result is task 0's.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import os
import shutil
import signal
import socket
import time
from pathlib import Path
from typing import Any, Callable, Iterator

from benchmarks.run.launchers import CellJob, UnitResult, log_result
from benchmarks.run.launchers.remote import current_record, first_line, prepare_worker, record_lost_unit, usage_error
from benchmarks.run.worker import run_unit

__all__ = ["SlurmLauncher", "CellTask", "add_arguments", "import_submitit"]

#: seconds a preempted cell gets to stop after SIGTERM before it is killed
STOP_GRACE_S = 10.0
#: how often the driver looks at the array while it waits
POLL_S = 1.0
#: after a SIGTERM killed the cell, how long the job waits for submitit's requeue signal
PREEMPT_WAIT_S = 60.0


def import_submitit() -> Any:
    """The ``submitit`` module, or a one-line usage error naming the extra to install."""
    try:
        import submitit
    except ImportError:
        raise usage_error("the slurm launcher needs submitit: pip install 'attnbench[slurm]'") from None
    return submitit


def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"{value} must be >= 1")
    return value


def _count(text: str) -> int:
    return 0 if text.strip() == "0" else _positive_int(text)


def add_arguments(parser: argparse.ArgumentParser | Any) -> None:
    """The ``--slurm-*`` options and ``--no-wait`` of ``attnbench run`` (into ``parser``'s own
    group, or into the argument group given)."""
    g = parser.add_argument_group("slurm launcher (--launcher slurm; needs pip install 'attnbench[slurm]')") \
        if isinstance(parser, argparse.ArgumentParser) else parser
    g.add_argument("--slurm-partition", metavar="NAME", help="partition to submit to (default: the cluster's default)")
    g.add_argument("--slurm-time", type=_positive_int, default=60, metavar="MIN",
                   help="time limit of one cell's job in minutes (default 60); a cell that reaches it is "
                        "requeued and restarted, at most 3 times")
    g.add_argument("--slurm-gpus-per-cell", type=_count, metavar="N",
                   help="GPUs per cell (default: the cell's GPU share from the driver, rounded up; 0 on CPU)")
    g.add_argument("--slurm-cpus-per-cell", type=_positive_int, metavar="N",
                   help="CPU cores per cell (default: the launcher's per-cell CPUs)")
    g.add_argument("--slurm-array-parallelism", type=_positive_int, default=256, metavar="N",
                   help="at most N cells of the array run at once (default 256)")
    g.add_argument("--no-wait", action="store_true",
                   help="submit and return at once (slurm); follow with: attnbench status OUT")


# --------------------------------------------------------------------------- in the Slurm job
def _children() -> list[int]:
    """PIDs of this process's children (the cell's ``attnbench cell`` process), from /proc."""
    me, kids = os.getpid(), []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        with contextlib.suppress(OSError, ValueError, IndexError):
            stat = Path(f"/proc/{entry}/stat").read_text()
            if int(stat.rsplit(")", 1)[1].split()[1]) == me:  # field 4: ppid (after "(comm)")
                kids.append(int(entry))
    return kids


def _stop_children(grace_s: float = STOP_GRACE_S) -> list[int]:
    """SIGTERM each child's process group (the cell releases its claim and writes no record),
    SIGKILL after ``grace_s``; returns the PIDs that had to be killed."""
    kids = _children()
    for pid in kids:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(pid, signal.SIGTERM)
    deadline, alive = time.monotonic() + grace_s, set(kids)
    while alive and time.monotonic() < deadline:
        for pid in list(alive):
            with contextlib.suppress(ChildProcessError):
                if os.waitpid(pid, os.WNOHANG)[0] == 0:
                    continue
            alive.discard(pid)
        time.sleep(0.1)
    for pid in alive:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(pid, signal.SIGKILL)
        with contextlib.suppress(ChildProcessError):
            os.waitpid(pid, 0)
    return sorted(alive)


def _drop_claim_of(killed: list[int], job: CellJob) -> None:
    """Remove the cell's claim if one of the processes just killed held it: the restarted job may
    run on another node, where a dead holder's claim would only go stale after minutes."""
    from benchmarks.run import claims as C
    from benchmarks.run.worker import cells_from_manifest, record_target

    with contextlib.suppress(OSError, ValueError, KeyError):
        path = C.claim_path(record_target(job.out, cells_from_manifest(job.out)[job.cell_id]))
        info = json.loads(path.read_text(encoding="utf-8"))
        if info.get("host") == socket.gethostname() and info.get("pid") in killed:
            path.unlink()


@contextlib.contextmanager
def _watch_sigterm() -> Iterator[list[int]]:
    """Within the block, SIGTERM is noted (the list gets the signal) and passed on to the Python
    handler that was there (submitit's, which only logs it: Slurm ends the job by SIGKILL later).
    Without such a handler (not in a submitit job) SIGTERM keeps its default and nothing is noted."""
    seen: list[int] = []
    previous = signal.getsignal(signal.SIGTERM)

    def note(signum: int, frame: Any) -> None:
        seen.append(signum)
        previous(signum, frame)

    try:
        if not callable(previous):
            raise ValueError("no Python handler to pass SIGTERM on to")
        signal.signal(signal.SIGTERM, note)
    except ValueError:  # not in a submitit job, or not the main thread
        yield seen
        return
    try:
        yield seen
    finally:
        signal.signal(signal.SIGTERM, previous)


class CellTask:
    """What one array task runs: the cell as a unit (:func:`run_unit`). Picklable, and
    checkpointable for submitit: on preemption or time-out it is requeued as it is."""

    def __init__(self, attempt: int = 0) -> None:
        self.attempt = attempt

    def __call__(self, job: CellJob) -> UnitResult:
        prepare_worker()
        restarted = self.attempt > 0 or int(os.environ.get("SLURM_RESTART_COUNT") or 0) > 0
        # A restart reruns the cell the interrupted attempt left (a failed record it may have
        # written is its own), but keeps an ok record the attempt managed to write.
        with _watch_sigterm() as term:
            res = run_unit(job.out, job.cell_id, data_dir=job.data_dir, cache_dir=job.cache_dir,
                           timeout_s=job.timeout_s, env={"ATTNBENCH_LAUNCHER": "slurm"},
                           force=job.force and not restarted, retry_failed=job.retry_failed or restarted)
            if term and res.status == "failed":
                # Preemption: Slurm sends SIGTERM to every process of the job, so the cell died
                # of it; submitit's USR2 follows and requeues this task (or Slurm kills the job).
                # Wait for that instead of returning the cell as failed.
                deadline = time.monotonic() + PREEMPT_WAIT_S
                while time.monotonic() < deadline:
                    time.sleep(0.5)
        return res

    def checkpoint(self, job: CellJob) -> Any:
        """Called by submitit in the job when Slurm signals preemption or the time limit: stop
        the cell and resubmit this task (the cell restarts from the beginning)."""
        from submitit.helpers import DelayedSubmission

        _drop_claim_of(_stop_children(), job)
        return DelayedSubmission(CellTask(self.attempt + 1), job)


# --------------------------------------------------------------------------- in the driver
class SlurmLauncher:
    """Submit the cells as Slurm job arrays (one per distinct resource request) and, unless
    ``--no-wait``, wait for them, logging each as it finishes."""

    name = "slurm"

    def __init__(self, opts: Any, args: Any = None) -> None:
        self.submitit = import_submitit()
        if shutil.which("sbatch") is None:
            raise usage_error("the slurm launcher needs Slurm's sbatch on PATH (run it on a Slurm login node)")
        self.partition: str | None = getattr(args, "slurm_partition", None)
        self.time_min: int = getattr(args, "slurm_time", None) or 60
        self.gpus: int | None = getattr(args, "slurm_gpus_per_cell", None)
        self.cpus: int | None = getattr(args, "slurm_cpus_per_cell", None)
        self.parallelism: int = getattr(args, "slurm_array_parallelism", None) or 256
        self.wait: bool = not getattr(args, "no_wait", False)
        self.opts = opts

    def _executor(self, folder: Path, cpus: int, gpus: int, name: str, ranks: int = 1) -> Any:
        """An executor for cells of ``ranks`` tasks (one per rank, on one node), ``cpus`` per task
        and ``gpus`` on the node."""
        ex = self.submitit.AutoExecutor(folder=folder, cluster="slurm")
        # submitit's warning signal comes 90 s before the limit; short limits get it at 3/4 of theirs
        params: dict[str, Any] = {"timeout_min": self.time_min, "cpus_per_task": cpus,
                                  "slurm_array_parallelism": self.parallelism, "name": name,
                                  "slurm_signal_delay_s": min(90, max(15, self.time_min * 15)),
                                  "stderr_to_stdout": True}
        if ranks > 1:  # Lightning's SLURMEnvironment wants devices == tasks per node
            params.update(nodes=1, tasks_per_node=ranks)
        if gpus:
            params["gpus_per_node"] = gpus
        if self.partition:
            params["slurm_partition"] = self.partition
        ex.update_parameters(**params)
        return ex

    def submit(self, jobs: list[CellJob]) -> list[tuple[Any, CellJob]]:
        """Submit every job; returns ``(submitit job, cell job)`` pairs."""
        from benchmarks.run.distributed import cell_ranks
        from benchmarks.run.worker import cells_from_manifest, manifest_suite

        out = Path(jobs[0].out).resolve()
        name = f"attnbench-{manifest_suite(out)}"
        folder = out / ".submitit" / f"{time.strftime('%Y%m%d-%H%M%S')}-{os.getpid()}"
        cells = cells_from_manifest(out)
        groups: dict[tuple[int, int, int], list[CellJob]] = {}
        for job in jobs:
            job.out = Path(job.out).resolve()
            ranks = cell_ranks(cells[job.cell_id].config)
            cpus = self.cpus or max(1, int(job.cpus))  # per task, so per rank
            gpus = self.gpus if self.gpus is not None else math.ceil(job.gpus) * ranks
            groups.setdefault((cpus, gpus, ranks), []).append(job)
        submitted = []
        for (cpus, gpus, ranks), group in groups.items():
            ex = self._executor(folder, cpus, gpus, name, ranks)
            try:
                handles = ex.map_array(CellTask(), group)
            except Exception as err:  # noqa: BLE001 - sbatch's own message, on one line
                text = " ".join(str(getattr(err, "stderr", None) or err).split())
                per = f"{ranks} tasks of {cpus} CPUs" if ranks > 1 else f"{cpus} CPUs"
                raise usage_error(f"sbatch refused the job array ({per}, {gpus} GPUs per cell"
                                   f"{', partition ' + self.partition if self.partition else ''}): {text[:300]}") from None
            submitted += list(zip(handles, group))
        return submitted

    def launch(self, jobs: list[CellJob], log: Callable[[str], None]) -> list[UnitResult]:
        if not jobs:
            return []
        submitted = self.submit(jobs)
        arrays = sorted({h.job_id.split("_")[0] for h, _ in submitted})
        out = Path(jobs[0].out)
        kind = "job" if len(submitted) == 1 else "job arrays" if len(arrays) > 1 else "job array"
        log(f"submitted {len(submitted)} cell{'s' * (len(submitted) > 1)} to Slurm as {kind} {', '.join(arrays)} "
            f"(submitit folder {submitted[0][0].paths.folder})")
        if not self.wait:
            log(f"not waiting (--no-wait): follow with  attnbench status {out}  (squeue -j {','.join(arrays)})")
            return []
        try:
            return self.gather(submitted, log)
        except KeyboardInterrupt:
            log(f"stopped waiting: the Slurm jobs go on (scancel {' '.join(arrays)} ends them); "
                f"follow with  attnbench status {out}")
            raise

    def gather(self, submitted: list[tuple[Any, CellJob]], log: Callable[[str], None]) -> list[UnitResult]:
        """Wait for every array task; a task that ended without a result (cancelled, node
        failure, too many time-outs) gets a ``failed`` record naming the Slurm cause."""
        from benchmarks.run.worker import cells_from_manifest

        cells = cells_from_manifest(submitted[0][1].out)
        pending, results = dict(submitted), []
        while pending:
            for handle in [h for h in pending if h.done()]:
                job = pending.pop(handle)
                res = self._result(handle, job, cells[job.cell_id])
                results.append(res)
                log_result(log, job.label, res, current_record(job.out, cells[job.cell_id]))
            if pending:
                time.sleep(POLL_S)
        return results

    def _result(self, handle: Any, job: CellJob, cell: Any) -> UnitResult:
        try:  # a multi-device cell's job has a task per rank: task 0 owns the record
            return handle.task(0).result() if handle.num_tasks > 1 else handle.result()
        except Exception as err:  # noqa: BLE001 - the job died without a result: recorded as failed
            state = handle.state  # still RUNNING when the job's own Python reported the end
            where = f"slurm job {handle.job_id}" + (f" ({state})" if state not in ("RUNNING", "UNKNOWN") else "")
            cause = f"{where}: {first_line(err)}"
        return record_lost_unit(job.out, cell, cause, {"launcher": "slurm", "slurm_job": handle.job_id})
