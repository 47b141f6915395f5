"""The checks of ``attnbench bench attention``: ours against SDPA, PyG and torch.nn's encoder
layer in time (from paired points, decided by the interval of the ratio:
:mod:`benchmarks.micro.attention.pairs`), truncated against full, linear memory growth, the
dense graph baseline running out of memory (the variants' own checks:
:func:`benchmarks.micro.attention.variants.variant_checks`)."""

from __future__ import annotations

from benchmarks.micro.attention.encoder import KIND as ENCODER
from benchmarks.micro.attention.pairs import LIMITS, NOTES, pair_index
from benchmarks.micro.attention.variants import variant_checks
from benchmarks.micro.checks import (
    check as _check,
    doubling_check,
    format_checks as _format_checks,
    interval_check,
    ratio_check,
)

__all__ = ["compute_checks", "format_checks"]


def _index(points: list[dict]) -> dict:
    idx = {}
    for r in points:
        if r["kind"] == "sequence":
            idx[("seq", r["method"], r["L"])] = r
        elif r["kind"] == "graph":
            idx[("graph", r["method"], r["N"], r["E"])] = r
    return idx


def _time_check(name: str, pair: dict | None, ours: dict | None, base: dict | None) -> list[dict]:
    """The interval check of one paired point (none when it was not measured)."""
    if pair is None:
        return []
    key = (pair["ours"], pair["peer"])
    c = interval_check(name, pair, LIMITS[key], ours=ours, base=base, confidence=pair.get("confidence", 0.95))
    if c and key in NOTES and not c.get("note"):
        c["note"] = NOTES[key]
    return [c] if c else []


def compute_checks(points: list[dict], growth_limit: float = 2.3) -> list[dict]:
    """Targets evaluated from the measured points; checks whose points are absent are omitted
    (the variants' ones: :func:`~benchmarks.micro.attention.variants.variant_checks`)."""
    idx, pairs = _index(points), pair_index(points)
    checks: list[dict] = []
    seq_L = sorted({r["L"] for r in points if r["kind"] == "sequence"})

    for (o, p, L), pair in sorted((k, v) for k, v in pairs.items() if k[:2] == ("ours_full", "sdpa")):
        # 1. ours_full is SDPA plus (almost) nothing
        checks += _time_check(f"time ours_full / sdpa @ L={L}", pair, idx.get(("seq", o, L)), idx.get(("seq", p, L)))
    # 2. truncated is faster than full at long L
    full, trunc = idx.get(("seq", "ours_full", 8192)), idx.get(("seq", "ours_truncated_w128", 8192))
    if full is not None and trunc is not None:
        if trunc["status"] != "ok":
            checks.append(_check("speedup ours_truncated_w128 vs ours_full @ L=8192", None, ">= 5", False,
                                 note=f"ours_truncated_w128: {trunc['status']}"))
        elif full["status"] != "ok":
            checks.append(_check("speedup ours_truncated_w128 vs ours_full @ L=8192", None, ">= 5", None,
                                 note=f"ours_full: {full['status']} (truncated ran)"))
        else:
            s = full["time_ms"] / trunc["time_ms"]
            extra = {}
            if full.get("cpu_median_ms") and trunc.get("cpu_median_ms"):
                extra["value_cpu_time"] = round(full["cpu_median_ms"] / trunc["cpu_median_ms"], 4)
            checks.append(_check("speedup ours_truncated_w128 vs ours_full @ L=8192", s, ">= 5", s >= 5,
                                 ours=trunc["time_ms"], baseline=full["time_ms"], **extra))
    # 3. memory grows linearly for truncated (ratio ~2 per doubling), info for full
    for method, limit in (("ours_truncated_w128", 2.3), ("ours_full", None)):
        for L in seq_L:
            if L < 2048 or ("seq", method, 2 * L) not in idx or ("seq", method, L) not in idx:
                continue
            checks.append(doubling_check(f"peak mem {method} L={2 * L} / L={L}", idx[("seq", method, L)],
                                         idx[("seq", method, 2 * L)], limit))
    # 4. graph at the largest size
    sizes = sorted({(r["N"], r["E"]) for r in points if r["kind"] == "graph"})
    if sizes:
        N, E = sizes[-1]
        ours, pyg = idx.get(("graph", "ours_graph", N, E)), idx.get(("graph", "pyg_transformerconv", N, E))
        checks += _time_check(f"time ours_graph / pyg_transformerconv @ N={N} E={E}",
                              pairs.get(("ours_graph", "pyg_transformerconv", (N, E))), ours, pyg)
        c = ratio_check(f"peak mem ours_graph / pyg_transformerconv @ N={N} E={E}", ours, pyg, "<= 0.6",
                         lambda v: v <= 0.6, key="peak_mem_bytes")
        if c:
            checks.append(c)
        dense = idx.get(("graph", "dense_masked", N, E))
        if dense is not None:
            st = dense["status"]
            oom = st == "oom" or (st == "skipped" and dense.get("skipped_because") == "oom")
            if oom:
                checks.append(_check(f"dense_masked status @ N={N} E={E}", st, "oom (expected)", True))
            elif st == "ok":
                checks.append(_check(f"dense_masked status @ N={N} E={E}", st, "oom (expected)", None,
                                     note="dense attention fit in memory at this size; the OOM is expected "
                                          "for large graphs (full sweep: N=200k)"))
            else:
                checks.append(_check(f"dense_masked status @ N={N} E={E}", st, "oom (expected)", False,
                                     note=dense.get("reason")))
    enc = {r["method"]: r for r in points if r["kind"] == ENCODER}
    for (o, p, size), pair in pairs.items():
        if (o, p) == ("ours_encoder", "torch_encoder"):
            B, L = size
            checks += _time_check(f"time ours_encoder / torch_encoder @ B={B} L={L}", pair, enc.get(o), enc.get(p))
    return checks + variant_checks(points, growth_limit)


def format_checks(checks: list[dict]) -> str:
    """The checks as the sweep prints them (:func:`benchmarks.micro.checks.format_checks`)."""
    return _format_checks(checks, empty="checks: none applicable to this sweep")
