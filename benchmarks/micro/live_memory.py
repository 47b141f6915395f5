"""Peak of live tensor bytes during one call, on CPU: deterministic, unlike the process RSS.

The RSS high-water mark (:class:`benchmarks.run.measure.PeakMemory` on CPU) also counts what
malloc keeps or returns in pages, the allocator's own slack and whatever another thread
touches; for a call that allocates a few MiB it is mostly that noise. Here every allocation
and free of torch's CPU allocator during the call is recorded (``torch.profiler`` with
``profile_memory=True``, the raw ``[memory]`` events in time order) and the peak of their
running sum is the answer: the bytes of tensors alive at the worst moment, beyond what was
alive before the call. Torch is imported lazily.
"""

from __future__ import annotations

from typing import Any, Callable

__all__ = ["LIVE_METHOD", "peak_live_bytes", "add_live_peak"]

#: What ``mem_method`` says for a peak measured here.
LIVE_METHOD = "cpu_live_tensor_bytes (torch.profiler profile_memory: peak of allocations minus frees, one call)"


def peak_live_bytes(fn: Callable[[], Any]) -> int:
    """Run ``fn()`` once under the profiler; the peak (>= 0) of live CPU tensor bytes it added."""
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
        fn()
    events = [e for e in prof.profiler.kineto_results.events() if e.name() == "[memory]"
              and e.device_type().name == "CPU"]
    events.sort(key=lambda e: e.start_ns())
    live = peak = 0
    for e in events:  # + bytes on allocation, - bytes on free
        live += e.nbytes()
        peak = max(peak, live)
    return peak


def add_live_peak(res: dict, step: Callable[[], Any], device: str) -> dict:
    """On CPU: ``res["peak_mem_bytes"]`` becomes the live-tensor peak of one ``step()`` (the method
    in ``res["mem_method"]``); the RSS figure it replaces stays as ``peak_rss_bytes`` with its
    method in ``rss_mem_method``. Other devices keep their allocator figure (already exact)."""
    if device != "cpu":
        return res
    if "peak_mem_bytes" in res:
        res["peak_rss_bytes"], res["rss_mem_method"] = res["peak_mem_bytes"], res.get("mem_method")
    res["peak_mem_bytes"] = peak_live_bytes(step)
    res["mem_method"] = LIVE_METHOD
    return res
