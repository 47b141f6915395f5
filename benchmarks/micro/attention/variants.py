"""The attention-variants part of ``attnbench bench attention`` (config section ``variants``).

Forward + backward time and peak memory over ``L`` of every registered sequence pattern
(:mod:`attn_core.patterns`: ``full``, ``truncated``, ``linear``, ``performer``, ``linformer``,
``nystrom``, ``local_global`` and any a plug-in adds), each through its registered function with
its per-layer state (Performer's features, Linformer's projections sized by ``L``), next to raw
full SDPA (``variant_sdpa``) on the same ``(B, H, L, D)`` inputs as the ``sequence`` section.

Checks (:func:`variant_checks`): every variant of sub-quadratic complexity (registered
``complexity`` other than ``L^2``) grows its peak memory at most ``growth_limit`` (2.3x) per
doubling of ``L`` from 2048 on; and, for information, each variant's speed crossover against
full SDPA: the smallest measured ``L`` from which it is at least as fast at every larger ``L``.

Off by default (``enabled: false``), so the quick sweep costs what it did:
``attnbench bench attention --config benchmarks/configs/bench_attention_variants.yaml``.
"""

from __future__ import annotations

from typing import Any

from benchmarks.run import measure
from benchmarks.micro.checks import check as _check, doubling_check
from benchmarks.micro.crossover import crossover
from benchmarks.micro.common import attn_core_fingerprint, make_inputs, select_patterns, set_threads
from benchmarks.config.schema import ConfigError, Field, Section

__all__ = ["SECTION", "DEFAULT_PARAMS", "variant_patterns", "plan_variant_points", "point_variant", "variant_checks",
           "BASELINE", "KIND"]

KIND = "variant"
BASELINE = "sdpa"  # raw F.scaled_dot_product_attention, full
#: parameters a pattern needs at this benchmark's lengths (``window`` has no default)
#: CPU peak memory is the resident-set high-water mark. glibc raises its mmap threshold after a
#: large block is freed, so later large tensors may come from the heap and stay resident after
#: they are freed: the peak then depends on what ran before (one doubling ratio in 12 read
#: 2.45-2.70x per run, in a different place each run). In a second worker started with a fixed
#: threshold every block of 128 KiB or more is its own mapping, returned on free, so the peak
#: follows the live tensors. Not used for the times: fresh mappings slowed the patterns 1.3-3x.
MMAP_THRESHOLD = 131072
CPU_MEMORY_NOTE = f"separate worker, MALLOC_MMAP_THRESHOLD_={MMAP_THRESHOLD}"
DEFAULT_PARAMS: dict[str, dict[str, Any]] = {"truncated": {"window": 128},
                                             "local_global": {"window": 128, "global_tokens": 16}}

SECTION = Section({
    "enabled": Field("bool", False, doc="measure every registered sequence pattern next to full SDPA"),
    "patterns": Field("any", "all", doc="'all' (every registered sequence pattern) or a list of pattern names"),
    "lengths": Field("per_device[list[int]]", {"cpu": [512, 1024, 2048, 4096, 8192],
                                               "cuda": [1024, 2048, 4096, 8192, 16384, 32768]}, minimum=1),
    "params": Field("any", {}, doc="{pattern: {param: value}} over DEFAULT_PARAMS (truncated/local_global window ...)"),
    "growth_limit": Field("float", 2.3, minimum=1.0,
                          doc="most peak-memory growth per doubling of L (L >= 2048) of a sub-quadratic variant"),
    "cpu_memory_worker": Field("bool", True,
                               doc="CPU, isolated points: peak memory from a second fresh worker run with "
                                   f"MALLOC_MMAP_THRESHOLD_={MMAP_THRESHOLD} (see CPU_MEMORY_NOTE)"),
}, doc="every registered sequence pattern vs full SDPA (off by default)")


def variant_patterns(section: dict, *, causal: bool, source: str = "config") -> dict[str, dict[str, Any]]:
    """``{pattern: resolved params}`` the section measures: the registered sequence patterns
    (``causal``: those that can be), or the listed ones, each checked (one-line ConfigError)."""
    from benchmarks.config.plugins import load_plugins

    import attn_core

    load_plugins()
    every = attn_core.list_patterns(kind="sequence", causal=causal)
    return select_patterns(section["patterns"], section["params"], every=every, defaults=DEFAULT_PARAMS,
                           check=lambda name: attn_core.check_pattern(name, causal=causal), where=source, key="variants.")


def plan_variant_points(cfg: dict, device: str, common: dict) -> list[dict]:
    """The variant points, by increasing ``L``: SDPA first, then each pattern."""
    sec, seq = cfg["variants"], cfg["sequence"]
    if not sec["enabled"]:
        return []
    patterns = variant_patterns(sec, causal=seq["causal"], source=cfg.get("config_path", "config"))
    shape = {"batch": seq["batch"], "heads": seq["heads"], "head_dim": seq["head_dim"], "causal": seq["causal"]}
    separate = device == "cpu" and sec["cpu_memory_worker"] and cfg.get("isolate", True)
    memory_run = {"kwargs": {"timing": False, "memory": True}, "env": {"MALLOC_MMAP_THRESHOLD_": str(MMAP_THRESHOLD)},
                  "note": CPU_MEMORY_NOTE}
    points = []
    for L in sorted(set(sec["lengths"][device])):
        for name, params in [(BASELINE, {}), *patterns.items()]:
            points.append({
                "kind": KIND, "method": f"variant_{name}", "pattern": name, "pattern_params": params, "L": L,
                "target": "benchmarks.micro.attention:point_variant", "preload": ["torch", "attn_core"],
                "kwargs": {"pattern": name, "params": params, "L": L, **shape, **common,
                           **({"memory": False} if separate else {})},
                **({"memory_run": memory_run} if separate else {}),
            })
    return points


def point_variant(
    *, pattern: str, params: dict[str, Any], L: int, batch: int, heads: int, head_dim: int, causal: bool,
    dtype: str, device: str, seed: int, warmup: int, repeats: int, min_repeats: int, target_s: float | None,
    threads: int | None = None, memory: bool = True, timing: bool = True,
) -> dict:
    """One point: forward + backward of ``pattern`` (its registered function and state) or raw
    SDPA (``pattern="sdpa"``) on random ``(B, H, L, D)`` inputs; ``memory``/``timing``: which
    of the two :func:`~benchmarks.run.measure.measure_step` does (one worker each on CPU)."""
    import torch
    import torch.nn.functional as F

    import attn_core
    from benchmarks.config.plugins import load_plugins

    load_plugins()  # a plug-in's pattern, in this fresh process too
    nthreads = set_threads(threads)
    dt = getattr(torch, dtype)
    q, k, v, dout = make_inputs((batch, heads, L, head_dim), 4, dt, device, seed)
    for t in (q, k, v):
        t.requires_grad_()
    state = None
    if pattern == BASELINE:
        fn = lambda: F.scaled_dot_product_attention(q, k, v, is_causal=causal)  # noqa: E731
    else:
        spec = attn_core.get_pattern(pattern)
        torch.manual_seed(seed)
        state = attn_core.make_pattern_state(pattern, heads, head_dim, max_len=L, params=params)
        if state is not None:
            state.to(device=device, dtype=dt)
        fn = lambda: spec.fn(q, k, v, causal=causal, state=state, **params)  # noqa: E731
    grads = [q, k, v] + (list(state.parameters()) if state is not None else [])

    def step() -> None:
        out = fn()
        out.backward(dout)
        del out
        for t in grads:
            t.grad = None

    res = measure.measure_step(step, device=device, warmup=warmup, repeats=repeats, min_repeats=min_repeats,
                               target_s=target_s, memory=memory, timing=timing)
    res["static_bytes"] = 0
    res["input_bytes"] = 4 * q.numel() * q.element_size()
    res["params"] = sum(p.numel() for p in state.parameters()) if state is not None else 0
    res["threads"] = nthreads
    res["attn_core_sha1"] = attn_core_fingerprint()
    return res


def variant_checks(points: list[dict], growth_limit: float = 2.3) -> list[dict]:
    """Memory growth per doubling (sub-quadratic variants, ``L >= 2048``) and speed crossovers."""
    import attn_core

    idx = {(r["pattern"], r["L"]): r for r in points if r.get("kind") == KIND}
    names = list(dict.fromkeys(r["pattern"] for r in points if r.get("kind") == KIND and r["pattern"] != BASELINE))
    lengths = sorted({L for _, L in idx})
    checks: list[dict] = []
    for name in names:
        linear = name in attn_core.PATTERNS and attn_core.get_pattern(name).complexity != "L^2"
        for L in lengths:
            a, b = idx.get((name, 2 * L)), idx.get((name, L))
            if not linear or L < 2048 or a is None or b is None:
                continue
            checks.append(doubling_check(f"peak mem variant_{name} L={2 * L} / L={L}", b, a, growth_limit))
        checks.append(_crossover(name, idx, lengths))
    return checks


def _crossover(name: str, idx: dict, lengths: list[int]) -> dict:
    """The smallest measured L from which ``name`` is at least as fast as SDPA at every larger L
    (:func:`benchmarks.micro.crossover.crossover` over the lengths where both ran)."""
    label = f"speed crossover variant_{name} vs variant_{BASELINE}"

    def times(n: str) -> dict[int, float]:
        return {L: idx[(n, L)]["time_ms"] for L in lengths if idx.get((n, L), {}).get("status") == "ok"}

    c = crossover(times(name), times(BASELINE))
    if c["state"] == "no_data":
        return _check(label, None, "info", None, note="no length where both ran")
    ratios = {str(L): round(r, 3) for L, r in c["ratios"].items()}
    if c["state"] == "never":
        return _check(label, None, "info", None, note=f"slower than SDPA at the largest measured L={c['lengths'][-1]}",
                      time_ratios=ratios)
    note = "faster from the smallest L measured" if c["state"] == "always" else f"slower below L={c['from_L']}"
    return _check(label, c["from_L"], "info", None, note=note, time_ratios=ratios)
