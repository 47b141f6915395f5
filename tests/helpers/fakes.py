"""Measurement targets for the tests of benchmarks.run.measure: run in isolated workers
(``tests.helpers.fakes:NAME``), so they must be importable and cheap."""

import os
import signal
import time


def ok_point(value: float = 1.0) -> dict:
    return {"time_ms": value}


def oom_point() -> dict:
    raise RuntimeError("[enforce fail at alloc_cpu.cpp:117] DefaultCPUAllocator: not enough memory: you tried to allocate 1 TB")


def error_point() -> dict:
    raise ValueError("boom")


def alloc_bytes_point(nbytes: int) -> dict:
    buf = bytearray(nbytes)  # MemoryError under the address-space cap
    return {"allocated": len(buf)}


def alloc_torch_point(nbytes: int) -> dict:
    import torch

    t = torch.ones(nbytes, dtype=torch.uint8)  # RuntimeError from the CPU allocator under the cap
    return {"allocated": int(t.numel())}


def sleep_point(seconds: float) -> dict:
    time.sleep(seconds)
    return {}


def sigkill_point() -> dict:
    os.kill(os.getpid(), signal.SIGKILL)  # what the kernel OOM killer does
    return {}
