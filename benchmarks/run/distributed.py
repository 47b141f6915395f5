"""One cell on several devices (``trainer.devices > 1``): how many processes (ranks) it trains
with, which rank this process is, and the Trainer strategy that joins them.

A cell's ranks are started in one of two ways, and this module tells them apart *before*
Lightning starts (from the environment the starter set):

* Lightning's own launcher (one node; the local pool, ``inline``): rank 0 is the ``attnbench
  cell OUT ID`` process; its Trainer re-runs that same command line for ranks 1.. with
  ``LOCAL_RANK``/``NODE_RANK``/``WORLD_SIZE`` set (``_SubprocessScriptLauncher``). So a
  multi-rank cell must run as its own ``python -m benchmarks cell`` process, never inside a
  forked pool worker (whose command line is the driver's).
* Slurm (``--launcher slurm``): one job with ``devices`` tasks; every task runs the unit and
  Lightning's ``SLURMEnvironment`` takes the rank from ``SLURM_PROCID``.

Only rank 0 claims the cell and writes its record (or its crash record); the other ranks
train, join every collective operation, write nothing and exit 0 (1 if their own run failed).
"""

from __future__ import annotations

import os
from typing import Any, Mapping

__all__ = ["device_count", "cell_ranks", "launch_rank", "launch_world", "rank_threads", "unit_threads",
           "strategy_kwargs", "without_slurm_tasks", "SLURM_TASK_ENV"]

#: what makes Lightning treat a process as one task of a multi-task Slurm step; dropped for a
#: cell whose ranks Lightning starts itself (the local pool inside a Slurm allocation)
SLURM_TASK_ENV = ("SLURM_NTASKS", "SLURM_PROCID", "SLURM_LOCALID", "SLURM_NTASKS_PER_NODE")


def _int(env: Mapping[str, str], key: str, default: int = 0) -> int:
    try:
        return int(env.get(key, default))
    except ValueError:
        return default


def device_count(devices: Any, device: str, visible_gpus: int | None = None) -> int:
    """Processes that Lightning starts for ``trainer.devices`` on ``device`` (``cpu``/``cuda``):
    an int is itself, a list its length, ``'auto'`` 1 on CPU and every visible GPU on CUDA
    (``visible_gpus``, else what torch sees here)."""
    if isinstance(devices, bool):
        return 1
    if isinstance(devices, int):
        return max(devices, 1)
    if isinstance(devices, (list, tuple)):
        return max(len(devices), 1)
    if isinstance(devices, str) and devices.strip().lstrip("-").isdigit():  # Lightning accepts "2"
        return max(int(devices), 1)
    if devices == "auto" and device == "cuda":
        if visible_gpus is None:
            import torch

            visible_gpus = torch.cuda.device_count()
        return max(int(visible_gpus), 1)
    return 1


def cell_ranks(config: Mapping[str, Any], visible_gpus: int | None = None) -> int:
    """How many processes a resolved cell config trains with (1 for an ordinary cell)."""
    trainer = config.get("trainer") or {}
    return device_count(trainer.get("devices", 1), str(config.get("device", "cpu")), visible_gpus)


def launch_rank(env: Mapping[str, str] | None = None) -> int:
    """The global rank this process was started as, read from the environment before any
    Trainer exists: ``> 0`` for a rank that Lightning re-ran (``LOCAL_RANK``/``NODE_RANK``), a
    Slurm task of a multi-task job (``SLURM_PROCID``) or torchrun (``RANK``); 0 otherwise."""
    env = os.environ if env is None else env
    if _int(env, "SLURM_NTASKS", 1) > 1 and _int(env, "SLURM_PROCID") > 0:
        return _int(env, "SLURM_PROCID")
    world = _int(env, "WORLD_SIZE", 1)
    if world > 1:
        if "RANK" in env:
            return _int(env, "RANK")
        return _int(env, "LOCAL_RANK") + _int(env, "NODE_RANK") * _int(env, "LOCAL_WORLD_SIZE", world)
    return 0


def launch_world(env: Mapping[str, str] | None = None) -> int:
    """How many ranks the starter said there are (``WORLD_SIZE`` or Slurm's task count), else 1."""
    env = os.environ if env is None else env
    return max(_int(env, "WORLD_SIZE", 1), _int(env, "SLURM_NTASKS", 1) if "SLURM_PROCID" in env else 1, 1)


def rank_threads(threads: int, ranks: int) -> int:
    """Torch threads per rank when a cell's ``threads`` are split between its ``ranks`` (>= 1)."""
    return max(1, int(threads) // max(int(ranks), 1))


def unit_threads(env: Mapping[str, str], ranks: int) -> int:
    """Torch threads for each rank of a multi-rank unit started from a process with ``env``: a
    Slurm task is one rank with its ``SLURM_CPUS_PER_TASK``; otherwise (Lightning starts the
    ranks) this process's cores split between them."""
    if launch_world(env) > 1 and _int(env, "SLURM_CPUS_PER_TASK") > 0:
        return _int(env, "SLURM_CPUS_PER_TASK")
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    return rank_threads(cores, ranks)


def strategy_kwargs(accelerator: str, devices: Any) -> dict[str, Any]:
    """Trainer keyword arguments for a cell with ``accelerator`` and ``devices``: nothing for one
    process (Lightning's defaults, so single-process runs are unchanged); for several, DDP over
    gloo on CPU and NCCL on CUDA, stated rather than left to Lightning's ``'auto'``. Every
    registered model uses all of its parameters in every step, so DDP's search for unused ones
    (an extra pass over the graph each step) stays off."""
    from benchmarks.config.suite import resolve_device

    device = resolve_device(str(accelerator))
    if device_count(devices, device) <= 1:
        return {}
    from lightning.pytorch.strategies import DDPStrategy

    return {"strategy": DDPStrategy(process_group_backend="gloo" if device == "cpu" else "nccl")}


def without_slurm_tasks(env: Mapping[str, str]) -> dict[str, str]:
    """``env`` without Slurm's per-task variables (:data:`SLURM_TASK_ENV`): for a multi-rank cell
    whose ranks Lightning starts itself even inside a Slurm allocation (the local pool there),
    which Lightning would otherwise take for ranks that srun starts."""
    return {k: v for k, v in env.items() if k not in SLURM_TASK_ENV}
