"""The bare PyTorch loop ``bench train`` compares the cell path with: the cell's own task module
(network and loss, ``module.step``) and optimiser (``module.configure_optimizers``, its
per-step schedule too), gradient clipping as the cell's trainer does it, over the batches of
the cell's timed steps (:attr:`StepProbe.batches`, on the device already), cycled; no Lightning, no callbacks, no logging,
no data loading. Measured in the same phases as :class:`~.probe.StepProbe` (warm-up, timed,
sync-counted, profiled on CUDA)."""

from __future__ import annotations

import contextlib
import time
from typing import Any, Callable

import torch

from benchmarks.micro.train.probe import busy_fraction, profiled_window
from benchmarks.micro.train.syncs import SyncCounter

__all__ = ["bare_step", "bare_loop"]

#: what the trainer's ``precision`` means in a loop without Lightning (autocast dtype or None)
AUTOCAST = {"32-true": None, "32": None, "64-true": None, "bf16-mixed": torch.bfloat16, "16-mixed": torch.float16,
            "bf16-true": None}


def bare_step(module: Any, *, precision: str, clip: float | None,
              compiled: bool = False) -> tuple[Callable[[Any], None], Any]:
    """``(step(batch), optimizer)``: one optimisation step of ``module`` without Lightning;
    ``compiled``: its network is the cell's compiled one (``trainer.compile``), so each step
    begins a new CUDA-graph step."""
    conf = module.configure_optimizers()
    sched = None
    if isinstance(conf, dict):
        opt, sched = conf["optimizer"], conf.get("lr_scheduler", {}).get("scheduler")
    else:
        opt = conf
    params = [p for p in module.parameters() if p.requires_grad]
    if precision == "16-mixed":
        raise ValueError("precision 16-mixed (gradient scaling) has no bare loop here; use bf16-mixed or 32-true")
    dtype = AUTOCAST.get(precision)
    dev_type = next(module.parameters()).device.type

    def step(batch: Any) -> None:
        if compiled:
            torch.compiler.cudagraph_mark_step_begin()
        opt.zero_grad(set_to_none=True)
        with torch.autocast(dev_type, dtype=dtype) if dtype is not None else contextlib.nullcontext():
            out = module.step(batch, "train")
        out.loss.backward()
        if clip:
            torch.nn.utils.clip_grad_norm_(params, clip)
        opt.step()
        if sched is not None:
            sched.step()

    return step, opt


def bare_loop(module: Any, batches: list, *, device: str, precision: str, clip: float | None, warmup: int,
              steps: int, sync_steps: int, profile_steps: int = 0, compiled: bool = False) -> dict[str, Any]:
    """Time ``steps`` bare steps after ``warmup`` (one synchronisation at each end), count the
    syncs of ``sync_steps`` more and, on CUDA, profile ``profile_steps`` for the GPU busy
    fraction (``compiled``: as :func:`bare_step`). Same keys as :meth:`StepProbe.summary`."""
    dev = torch.device(device)
    module.to(dev).train()
    if not batches:
        raise ValueError("no batches to train on")
    batches = [module.transfer_batch_to_device(b, dev, 0) for b in batches]  # a no-op where they are already
    step, _ = bare_step(module, precision=precision, clip=clip, compiled=compiled)
    cuda = dev.type == "cuda"
    sync = torch.cuda.synchronize if cuda else (lambda: None)
    k = 0

    def run(n: int) -> None:
        nonlocal k
        for _ in range(n):
            step(batches[k % len(batches)])
            k += 1

    run(warmup)
    sync()
    t0 = time.perf_counter()
    run(steps)
    sync()
    secs = time.perf_counter() - t0
    counter = SyncCounter(host_ops=not cuda)
    with counter:
        run(sync_steps)
    out: dict[str, Any] = {"steps": steps, "time_s": secs, "steps_per_s": steps / secs if secs else None,
                           "sync_steps": sync_steps, "syncs_per_step": counter.total / sync_steps if sync_steps else None,
                           "syncs_by_op": dict(counter.by_op), "batches": len(batches),
                           "ops_per_step": counter.ops / sync_steps if sync_steps else None}
    if cuda and profile_steps:
        with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU,
                                                torch.profiler.ProfilerActivity.CUDA]) as prof:
            with profiled_window(sync):
                run(profile_steps)
        out["gpu_busy_fraction"] = busy_fraction(prof)
    return out
