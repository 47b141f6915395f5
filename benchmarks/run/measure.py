"""Measurement helpers shared by every benchmark: timing, peak memory, isolation.

* :func:`time_callable`: warm-up calls, then ``repeats`` timed calls, each followed by a
  device synchronisation (``torch.cuda.synchronize`` on CUDA); median / min / IQR.
* :class:`PeakMemory`: peak memory of a region. CUDA: ``torch.cuda.reset_peak_memory_stats``
  and ``max_memory_allocated`` (growth over what was allocated at the start). CPU: growth
  of the process resident set: the kernel's high-water mark ``VmHWM`` is reset by writing
  ``5`` to ``/proc/self/clear_refs`` and read back from ``/proc/self/status`` afterwards
  (without that reset it is only meaningful in a fresh process, which
  :func:`run_isolated` provides).
* :func:`measure_step`: both for a training step (forward + backward): timed calls, then
  one more call for the peak (after ``malloc_trim`` so cached free pages hide nothing).
* :func:`run_isolated`: run one measurement point in a fresh Python process with a time
  limit and (CPU) an address-space cap, so a point that runs out of memory, is killed by
  the kernel or hangs becomes a record with ``status`` ``"oom"``/``"timeout"``/``"error"``
  and the sweep goes on. :func:`run_inline` gives the same records without a subprocess.
* :func:`collect_environment` and :func:`atomic_write_json` for result files.

Torch is imported lazily: this module is safe to import anywhere.
"""

from __future__ import annotations

import importlib
import json
import os
import resource
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import traceback
from pathlib import Path
from typing import Any, Callable

from benchmarks.run import records as R
__all__ = [
    "summarize",
    "time_callable",
    "device_sync",
    "PeakMemory",
    "measure_step",
    "is_oom_error",
    "run_isolated",
    "run_inline",
    "execute",
    "collect_environment",
    "atomic_write_json",
    "available_memory_bytes",
    "current_rss_bytes",
    "peak_rss_bytes",
    "reset_peak_rss",
    "release_free_memory",
    "STATUSES",
]

#: Every record has one of these. ``skipped`` = not run because a smaller size already failed.
STATUSES = ("ok", "oom", "timeout", "error", "skipped")

REPO_ROOT = Path(__file__).resolve().parents[2]


# --------------------------------------------------------------------------- timing
def summarize(times_ms: list[float]) -> dict:
    """Median, min, max, mean and inter-quartile range of a list of times (ms)."""
    if not times_ms:
        raise ValueError("summarize() needs at least one time")
    xs = sorted(float(t) for t in times_ms)
    if len(xs) >= 2:
        q1, _, q3 = statistics.quantiles(xs, n=4, method="inclusive")
        iqr = q3 - q1
    else:
        iqr = 0.0
    return {
        "median_ms": statistics.median(xs),
        "min_ms": xs[0],
        "max_ms": xs[-1],
        "mean_ms": statistics.fmean(xs),
        "iqr_ms": iqr,
        "times_ms": [float(t) for t in times_ms],
        "repeats": len(xs),
    }


def device_sync(device: Any = None) -> Callable[[], None]:
    """A function that waits for queued work on ``device`` (no-op on CPU)."""
    dev = str(device) if device is not None else "cpu"
    if dev.startswith("cuda"):
        import torch

        return lambda: torch.cuda.synchronize(device)
    return lambda: None


def time_callable(
    fn: Callable[[], Any],
    *,
    warmup: int = 1,
    repeats: int = 5,
    sync: Callable[[], None] | None = None,
    min_repeats: int | None = None,
    target_s: float | None = None,
    timer: Callable[[], float] = time.perf_counter,
) -> dict:
    """Call ``fn`` ``warmup`` times untimed, then time ``repeats`` calls (each followed by
    ``sync()``). With ``target_s``, slow points get fewer calls: warm-up stops (after at
    least one call) once it has taken ``target_s``, and timing stops (after at least
    ``min_repeats`` calls) once the timed calls have taken ``target_s``. A slow first call
    (compilation, lazy initialisation) thus never cuts the repeats of a fast function. Returns :func:`summarize` output (wall clock) plus ``warmup`` (calls made),
    ``warmup_ms`` and the process CPU time of the timed calls (``cpu_times_ms``,
    ``cpu_median_ms``)."""
    if warmup < 0 or repeats < 1:
        raise ValueError(f"need warmup >= 0 and repeats >= 1, got warmup={warmup}, repeats={repeats}")
    sync = sync or (lambda: None)
    warm_ms: list[float] = []
    for _ in range(warmup):
        t0 = timer()
        fn()
        sync()
        warm_ms.append((timer() - t0) * 1e3)
        if target_s is not None and sum(warm_ms) >= target_s * 1e3:
            break  # slow calls: one-time costs are already small next to one call
    lo = min(min_repeats or 1, repeats)
    times: list[float] = []
    cpu: list[float] = []
    while len(times) < repeats:
        c0 = time.process_time()
        t0 = timer()
        fn()
        sync()
        times.append((timer() - t0) * 1e3)
        cpu.append((time.process_time() - c0) * 1e3)
        if target_s is not None and len(times) >= lo and sum(times) >= target_s * 1e3:
            break
    out = summarize(times)
    # CPU time of this process (all threads): next to the wall time it shows how much other
    # processes slowed a CPU point (with one thread, cpu ~ wall on a quiet machine)
    out.update(warmup=len(warm_ms), warmup_ms=warm_ms, cpu_times_ms=cpu, cpu_median_ms=statistics.median(cpu))
    return out


# --------------------------------------------------------------------------- memory
def _status_kib(field: str) -> int | None:
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith(field + ":"):
                    return int(line.split()[1])
    except OSError:
        return None
    return None


def current_rss_bytes() -> int | None:
    """Resident set size of this process now (Linux ``VmRSS``)."""
    kib = _status_kib("VmRSS")
    return None if kib is None else kib * 1024


def peak_rss_bytes() -> int:
    """High-water mark of the resident set (``VmHWM``; falls back to ``ru_maxrss``)."""
    kib = _status_kib("VmHWM")
    if kib is None:
        kib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        if sys.platform == "darwin":  # bytes there
            return int(kib)
    return int(kib) * 1024


def reset_peak_rss() -> bool:
    """Reset ``VmHWM`` to the current RSS (Linux >= 4.0: ``echo 5 > /proc/self/clear_refs``).
    Returns whether it worked (checked: the high-water mark must not exceed the RSS after)."""
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
    except OSError:
        return False
    hwm, rss = _status_kib("VmHWM"), _status_kib("VmRSS")
    return hwm is not None and rss is not None and hwm <= rss + 64  # a few pages of slack


def available_memory_bytes() -> int | None:
    """``MemAvailable`` from ``/proc/meminfo`` (None where unknown)."""
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return None


def _libc():
    try:
        import ctypes
        import ctypes.util

        name = ctypes.util.find_library("c")
        if not name:
            return None
        libc = ctypes.CDLL(name)
        return libc if hasattr(libc, "malloc_trim") else None
    except (OSError, AttributeError):  # pragma: no cover - not glibc
        return None


def release_free_memory() -> bool:
    """glibc only: hand free heap pages back to the OS (``malloc_trim(0)``), so that the
    resident set tracks live allocations and a later peak is not hidden by reuse of pages
    malloc kept. No lasting effect on the allocator. Returns whether it ran."""
    libc = _libc()
    if libc is None:
        return False
    libc.malloc_trim(0)
    return True


class PeakMemory:
    """Peak memory growth of a region, in bytes::

        pm = PeakMemory(device); pm.start(); work(); peak = pm.stop()

    CUDA: ``max_memory_allocated - memory_allocated at start`` (the caching allocator's view,
    i.e. tensors, not the cache). CPU: ``VmHWM - VmRSS at start`` after resetting the
    high-water mark; ``method`` says how it was obtained (``cuda``, ``rss_hwm_reset`` or
    ``rss_hwm_since_start`` when the reset is unavailable: then the value is right only in a
    fresh process whose earlier peak was below the start RSS)."""

    def __init__(self, device: Any = "cpu") -> None:
        self.device = str(device)
        self.cuda = self.device.startswith("cuda")
        self.method = "cuda" if self.cuda else "rss_hwm_reset"
        self.baseline = 0

    def start(self) -> None:
        if self.cuda:
            import torch

            torch.cuda.synchronize(self.device)
            torch.cuda.reset_peak_memory_stats(self.device)
            self.baseline = torch.cuda.memory_allocated(self.device)
            return
        released = release_free_memory()
        if not reset_peak_rss():
            self.method = "rss_hwm_since_start"
        if released:
            self.method += "+malloc_trim"
        self.baseline = current_rss_bytes() or 0

    def stop(self) -> int:
        if self.cuda:
            import torch

            torch.cuda.synchronize(self.device)
            return int(torch.cuda.max_memory_allocated(self.device) - self.baseline)
        return max(0, peak_rss_bytes() - self.baseline)


def measure_step(
    step: Callable[[], Any],
    *,
    device: Any = "cpu",
    warmup: int = 1,
    repeats: int = 5,
    min_repeats: int | None = None,
    target_s: float | None = None,
    memory: bool = True,
    timing: bool = True,
) -> dict:
    """Time ``step`` (see :func:`time_callable`), then run it once more to record its peak
    memory growth. Timing runs with the allocator as users get it; the memory call runs
    after :func:`release_free_memory` (CPU), so freed buffers cached by malloc neither hide
    nor inflate the peak. Everything allocated before the call (inputs, parameters) is the
    baseline, not part of the peak. ``timing=False``: only the warm-up calls, then memory."""
    sync = device_sync(device)
    res: dict = {}
    if timing:
        res = time_callable(step, warmup=warmup, repeats=repeats, sync=sync, min_repeats=min_repeats, target_s=target_s)
        res["time_ms"] = res["median_ms"]
    for _ in range(0 if timing else warmup):
        step()
    if memory:
        pm = PeakMemory(device)
        pm.start()
        step()
        sync()
        res["peak_mem_bytes"] = pm.stop()
        res["mem_method"] = pm.method
    return res


# --------------------------------------------------------------------------- failure handling
_OOM_MARKERS = (
    "out of memory",
    "not enough memory",
    "can't allocate memory",
    "cannot allocate memory",
    "defaultcpuallocator",
    "std::bad_alloc",
)


def is_oom_error(exc: BaseException) -> bool:
    """Whether an exception means "ran out of memory" (CPU or GPU)."""
    if isinstance(exc, MemoryError):
        return True
    oom_cls = None
    try:
        import torch

        oom_cls = getattr(torch.cuda, "OutOfMemoryError", None)
        oom_cls = getattr(torch, "OutOfMemoryError", oom_cls)
    except Exception:  # pragma: no cover - torch missing
        pass
    if oom_cls is not None and isinstance(exc, oom_cls):
        return True
    msg = str(exc).lower()
    return any(m in msg for m in _OOM_MARKERS)


def _short(msg: str, limit: int = 400) -> str:
    msg = " ".join(str(msg).split())
    return msg if len(msg) <= limit else msg[: limit - 3] + "..."


def _failure_record(exc: BaseException) -> dict:
    status = "oom" if is_oom_error(exc) else "error"
    rec = {"status": status, "reason": _short(f"{type(exc).__name__}: {exc}")}
    if status == "error":
        rec["traceback"] = traceback.format_exc(limit=8)[-3000:]
    return rec


def _resolve_target(target: str | Callable) -> Callable:
    if callable(target):
        return target
    module, _, name = target.partition(":")
    if not module or not name:
        raise ValueError(f"target {target!r}: expected 'package.module:function'")
    return getattr(importlib.import_module(module), name)


def _free_cuda() -> None:
    try:
        import torch

        if torch.cuda.is_available():
            torch.cuda.empty_cache()
    except Exception:  # pragma: no cover
        pass


def run_inline(target: str | Callable, kwargs: dict | None = None) -> dict:
    """Run ``target(**kwargs)`` (which returns a dict) in this process and turn exceptions into
    records: ``{"status": "oom"|"error", "reason": ...}``. No protection from the OOM killer
    or hangs: prefer :func:`run_isolated` for anything big."""
    t0 = time.perf_counter()
    try:
        res = dict(_resolve_target(target)(**(kwargs or {})) or {})
        res.setdefault("status", "ok")
    except Exception as exc:  # noqa: BLE001 - every failure becomes a record
        res = _failure_record(exc)
        _free_cuda()
    res["wall_s"] = time.perf_counter() - t0
    return res


def _apply_address_space_cap(cap_bytes: int) -> int:
    """Limit this process to its current virtual size plus ``cap_bytes`` (plus room for
    thread stacks and malloc arenas). Allocations beyond fail with ENOMEM, which torch raises
    as ``RuntimeError: DefaultCPUAllocator: can't allocate memory``: a clean, catchable OOM
    instead of the kernel OOM killer or swapping. Returns the limit set."""
    vm_kib = _status_kib("VmSize") or 0
    threads = os.cpu_count() or 1
    slack = (256 << 20) + threads * (80 << 20)  # 8 MiB stack + 64 MiB malloc arena per thread
    limit = vm_kib * 1024 + int(cap_bytes) + slack
    resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    return limit


def worker_main(argv: list[str] | None = None) -> int:
    """Entry point of the isolated worker (``python -m benchmarks.run._worker SPEC OUT``)."""
    argv = sys.argv[1:] if argv is None else argv
    spec_path, out_path = argv
    with open(spec_path) as f:
        spec = json.load(f)
    t0 = time.perf_counter()
    try:
        for mod in spec.get("preload", []):  # import big libraries before the cap is set
            importlib.import_module(mod)
        fn = _resolve_target(spec["target"])
        if spec.get("mem_cap_bytes"):
            spec_limit = _apply_address_space_cap(int(spec["mem_cap_bytes"]))
        else:
            spec_limit = None
        res = dict(fn(**spec.get("kwargs", {})) or {})
        res.setdefault("status", "ok")
        if spec_limit is not None:
            res.setdefault("address_space_limit_bytes", spec_limit)
    except BaseException as exc:  # noqa: BLE001 - every failure becomes a record
        res = _failure_record(exc)
    res["wall_s"] = time.perf_counter() - t0
    atomic_write_json(out_path, res)
    return 0


def run_isolated(
    target: str,
    kwargs: dict | None = None,
    *,
    timeout_s: float | None = None,
    mem_cap_bytes: int | None = None,
    env: dict | None = None,
    preload: list[str] | tuple[str, ...] = (),
) -> dict:
    """Run ``target`` (``"module:function"``, returning a JSON-able dict) in a fresh Python
    process and return its record; the caller never raises because of the point.

    * an exception in the point: ``status`` ``"oom"`` (memory errors) or ``"error"``;
    * ``mem_cap_bytes`` (CPU): the worker's address space is capped at its size after
      imports plus this, so a too-big allocation fails cleanly as ``"oom"``;
    * killed by SIGKILL (the kernel OOM killer): ``"oom"``; by another signal: ``"error"``;
    * still running after ``timeout_s``: killed, ``"timeout"``.

    ``preload``: modules the worker imports before the memory cap is set (their code
    mappings must not count against the cap, and may not even fit under it).
    """
    full_env = dict(os.environ)
    full_env.setdefault("PYTHONWARNINGS", "ignore::FutureWarning")
    pp = full_env.get("PYTHONPATH")
    full_env["PYTHONPATH"] = str(REPO_ROOT) + (os.pathsep + pp if pp else "")
    if env:
        full_env.update(env)
    with tempfile.TemporaryDirectory(prefix="attnbench-point-") as tmp:
        spec_path, out_path = os.path.join(tmp, "spec.json"), os.path.join(tmp, "result.json")
        with open(spec_path, "w") as f:
            json.dump({"target": target, "kwargs": kwargs or {}, "mem_cap_bytes": mem_cap_bytes,
                       "preload": list(preload)}, f)
        cmd = [sys.executable, "-m", "benchmarks.run._worker", spec_path, out_path]
        t0 = time.perf_counter()
        try:
            proc = subprocess.run(
                cmd, env=full_env, cwd=str(REPO_ROOT), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                timeout=timeout_s,
            )
        except subprocess.TimeoutExpired:  # run() has killed the worker
            return {
                "status": "timeout",
                "reason": f"still running after the per-point limit of {timeout_s:g} s; killed",
                "wall_s": time.perf_counter() - t0,
            }
        wall = time.perf_counter() - t0
        stderr = proc.stderr.decode(errors="replace")
        if os.path.exists(out_path):
            with open(out_path) as f:
                res = json.load(f)
            res["process_wall_s"] = wall
            return res
        rc = proc.returncode
        if rc < 0:
            sig = -rc
            name = signal.Signals(sig).name if sig in signal.Signals._value2member_map_ else str(sig)
            if sig == signal.SIGKILL:
                return {
                    "status": "oom",
                    "reason": "worker killed by SIGKILL (most likely the kernel OOM killer)",
                    "wall_s": wall,
                }
            return {"status": "error", "reason": f"worker killed by signal {name}", "wall_s": wall,
                    "stderr_tail": stderr[-2000:]}
        tail = _short(stderr.strip().splitlines()[-1] if stderr.strip() else "no output")
        status = "oom" if any(m in stderr.lower() for m in _OOM_MARKERS) else "error"
        return {"status": status, "reason": f"worker exited with code {rc} without a result: {tail}",
                "wall_s": wall, "stderr_tail": stderr[-2000:]}


def execute(
    target: str,
    kwargs: dict | None = None,
    *,
    isolate: bool = True,
    timeout_s: float | None = None,
    mem_cap_bytes: int | None = None,
    preload: list[str] | tuple[str, ...] = (),
    env: dict | None = None,
) -> dict:
    """:func:`run_isolated` (``env`` on top of ours) or :func:`run_inline` (no limits, no env) by ``isolate``."""
    if isolate:
        return run_isolated(target, kwargs, timeout_s=timeout_s, mem_cap_bytes=mem_cap_bytes, preload=preload, env=env)
    return run_inline(target, kwargs)


# --------------------------------------------------------------------------- environment, files
# One environment block and one atomic JSON writer for every result file: see records.py.
collect_environment = R.environment
atomic_write_json = R.write_json_atomic
