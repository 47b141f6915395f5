"""``--launcher ray``: each cell is one Ray task with its own resources (``num_cpus``, fractional
``num_gpus``: ``--ray-cpus-per-cell``, ``--ray-gpus-per-cell``), which calls :func:`benchmarks.run.worker.run_unit`: the cell runs in a child process
of the task, so a crash of the cell still becomes a ``failed`` record.

``--ray-address auto`` (or ``host:port``, ``ray://host:10001``) joins an existing cluster, whose
nodes must have attnbench installed and see OUT (and the data and cache folders) at the same
paths; without it a local Ray instance is started for this run and shut down at the end. A Ray
already initialised in this process (a notebook, a test) is used as it is and left running.

A cell on several devices (``trainer.devices > 1``) is refused before anything is submitted: a
Ray task reserves resources for one process, and its ranks would run outside that reservation.
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path
from typing import Any, Callable

from benchmarks.run.launchers import CellJob, UnitResult, log_result
from benchmarks.run.launchers.remote import current_record, first_line, prepare_worker, record_lost_unit, usage_error
from benchmarks.run.sockets import SocketPathError, ray_temp_dir
from benchmarks.run.worker import run_unit

__all__ = ["RayLauncher", "add_arguments", "import_ray", "run_job"]

#: object store of a local instance (Ray's minimum is 75 MiB): cells pass only small results
LOCAL_OBJECT_STORE_BYTES = 128 * 2**20
#: environment for a Ray instance this launcher starts (no token file in ~/.ray, no usage stats)
LOCAL_RAY_ENV = {"RAY_AUTH_MODE": "disabled", "RAY_USAGE_STATS_ENABLED": "0"}
#: forwarded from the driver to each cell's process (Ray workers on other nodes lack them)
FORWARDED_ENV = ("ATTNBENCH_PLUGINS", "ATTNBENCH_DATA", "ATTNBENCH_CACHE")


def import_ray() -> Any:
    """The ``ray`` module, or a one-line usage error naming the extra to install."""
    try:
        import ray
    except ImportError:
        raise usage_error("the ray launcher needs Ray: pip install 'attnbench[ray]'") from None
    return ray


def add_arguments(parser: argparse.ArgumentParser | Any) -> None:
    """The ``--ray-*`` options of ``attnbench run`` (into ``parser``'s own group, or into the
    argument group given)."""
    g = parser.add_argument_group("ray launcher (--launcher ray; needs pip install 'attnbench[ray]')") \
        if isinstance(parser, argparse.ArgumentParser) else parser
    g.add_argument("--ray-address", metavar="ADDR",
                   help="an existing Ray cluster: 'auto' (found from this machine), host:port or "
                        "ray://host:10001 (default: start a local Ray instance for this run)")
    g.add_argument("--ray-cpus-per-cell", type=_number(int, minimum=1), metavar="N",
                   help="CPUs Ray reserves per cell (default: the launcher's per-cell CPUs)")
    g.add_argument("--ray-gpus-per-cell", type=_number(float, minimum=0), metavar="F",
                   help="GPUs per cell, fractions allowed: 0.5 packs two cells on a GPU (default: the "
                        "cell's GPU share from the driver; 0 on CPU)")


def _number(kind: type, minimum: float) -> Callable[[str], Any]:
    """An argparse type: a number of ``kind`` that is at least ``minimum``."""
    def parse(text: str) -> Any:
        try:
            value = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not a {'whole ' * (kind is int)}number") from None
        if not value >= minimum:
            raise argparse.ArgumentTypeError(f"{text} must be >= {minimum}")
        return value

    return parse


def run_job(job: CellJob, env: dict[str, str], cwd: str) -> UnitResult:
    """The body of a cell's Ray task: the unit, in a child process. The driver's working folder
    goes first on the import path (here and in the child), so that plug-ins named as modules
    relative to it import on any node that has it."""
    import sys

    from benchmarks.run.worker import PLUGINS_ENV

    env = dict(env)
    if os.path.isdir(cwd):
        if cwd not in sys.path:
            sys.path.insert(0, cwd)
        env["PYTHONPATH"] = os.pathsep.join(p for p in (cwd, os.environ.get("PYTHONPATH", "")) if p)
    prepare_worker([n.strip() for n in env.get(PLUGINS_ENV, "").split(",") if n.strip()])
    return run_unit(job.out, job.cell_id, data_dir=job.data_dir, cache_dir=job.cache_dir, timeout_s=job.timeout_s,
                    env=env, force=job.force, retry_failed=job.retry_failed)


def _check_reachable(address: str, timeout_s: float = 10.0) -> None:
    """Refuse an explicit ``host:port`` (or ``ray://host:port``) that does not accept a TCP
    connection: ``ray.init`` would retry it for ever. ``auto`` is Ray's own look-up, which fails fast."""
    import socket

    hostport = address.split("://", 1)[-1].rstrip("/")
    host, sep, port = hostport.rpartition(":")
    if address == "auto" or not sep or not port.isdigit():
        return
    try:
        socket.create_connection((host, int(port)), timeout=timeout_s).close()
    except OSError as err:
        raise usage_error(f"could not start or reach the Ray cluster at {address!r}: {host}:{port} does not "
                          f"answer ({err.strerror or err}); start it with ray start --head, or give its address") from None


def _refuse_multi_device(jobs: list[CellJob]) -> None:
    """One line for the first cell that trains on several devices: not a Ray task's shape."""
    from benchmarks.run.distributed import cell_ranks
    from benchmarks.run.worker import cells_from_manifest

    cells = cells_from_manifest(jobs[0].out)
    for job in jobs:
        n = cell_ranks(cells[job.cell_id].config)
        if n > 1:
            devices = cells[job.cell_id].config["trainer"].get("devices")
            raise usage_error(f"trainer.devices={devices!r} ({n} processes for cell {job.label}) is not supported by "
                              "--launcher ray (one process per Ray task); valid: trainer.devices=1 with ray, or "
                              "--launcher local or slurm for multi-device cells")


class RayLauncher:
    """One Ray task per cell, ``num_cpus=job.cpus`` and ``num_gpus=job.gpus``; results are
    gathered as they finish, one line per cell."""

    name = "ray"

    def __init__(self, opts: Any, args: Any = None) -> None:
        self.ray = import_ray()
        self.address: str | None = getattr(args, "ray_address", None)
        self.cpus: int | None = getattr(args, "ray_cpus_per_cell", None)
        self.gpus: float | None = getattr(args, "ray_gpus_per_cell", None)
        self.opts = opts

    def _start(self) -> bool:
        """Connect to or start Ray; returns whether this launcher started it (and must stop it)."""
        ray = self.ray
        if ray.is_initialized():
            return False
        try:
            if self.address:
                _check_reachable(self.address)
                ray.init(address=self.address, log_to_driver=False)
            else:
                for key, value in LOCAL_RAY_ENV.items():
                    os.environ.setdefault(key, value)
                short = ray_temp_dir()  # Ray's sockets under a long TMPDIR: a short folder instead
                ray.init(num_cpus=os.cpu_count() or 1, include_dashboard=False, log_to_driver=False,
                         object_store_memory=LOCAL_OBJECT_STORE_BYTES, **({"_temp_dir": short} if short else {}))
        except (ConnectionError, RuntimeError, ValueError, SocketPathError) as err:
            where = f"the Ray cluster at {self.address!r}" if self.address else "a local Ray instance"
            raise usage_error(f"could not start or reach {where}: {first_line(err, 300)}") from None
        return True

    def launch(self, jobs: list[CellJob], log: Callable[[str], None]) -> list[UnitResult]:
        if not jobs:
            return []
        _refuse_multi_device(jobs)
        ray = self.ray
        started = self._start()
        try:
            return self._run(jobs, log)
        finally:
            if started:
                ray.shutdown()

    def _run(self, jobs: list[CellJob], log: Callable[[str], None]) -> list[UnitResult]:
        from benchmarks.run.worker import cells_from_manifest

        ray = self.ray
        env = {"ATTNBENCH_LAUNCHER": "ray", **{k: os.environ[k] for k in FORWARDED_ENV if k in os.environ}}
        task = ray.remote(run_job)
        refs: dict[Any, CellJob] = {}
        for job in jobs:
            job.out = Path(job.out).resolve()
            opts = {"num_cpus": self.cpus or job.cpus, "num_gpus": job.gpus if self.gpus is None else self.gpus,
                    "name": f"attnbench {job.label}", "max_retries": 0}
            refs[task.options(**opts).remote(job, env, os.getcwd())] = job
        resources = ray.cluster_resources()
        log(f"submitted {len(jobs)} cells to Ray ({resources.get('CPU', 0):g} CPUs, {resources.get('GPU', 0):g} GPUs)")
        cells = cells_from_manifest(jobs[0].out)
        results = []
        while refs:
            ready, _ = ray.wait(list(refs), num_returns=1)
            for ref in ready:
                job = refs.pop(ref)
                res = self._result(ref, job, cells[job.cell_id])
                results.append(res)
                log_result(log, job.label, res, current_record(job.out, cells[job.cell_id]))
        return results

    def _result(self, ref: Any, job: CellJob, cell: Any) -> UnitResult:
        """The task's result; a task that died itself (its worker killed, its node lost) gets a
        ``failed`` record naming Ray's reason."""
        try:
            return self.ray.get(ref)
        except self.ray.exceptions.RayError as err:
            cause = f"ray task failed: {type(err).__name__}: {first_line(err)}"
        return record_lost_unit(job.out, cell, cause, {"launcher": "ray"})
