"""The summary table of ``attnbench bench recurrence``: per timed row, the time and peak memory at
``report_length``, the exponent of time ~ L^k (:func:`benchmarks.micro.complexity.fits.fit_power_law`),
the crossovers against ``torch_lstm`` and ``sdpa`` (:func:`benchmarks.micro.crossover.crossover`),
the analytical sequential depth and path length, and the float32 error."""

from __future__ import annotations

import inspect
import math

from benchmarks.micro.complexity.fits import fit_power_law, growth_class
from benchmarks.micro.complexity.paths import expected_path_length
from benchmarks.micro.crossover import crossover
from benchmarks.micro.recurrence.config import recurrence_of

__all__ = ["DEPTH_RULE", "PATH_RULE", "CROSSOVER_PEERS", "sequential_depth", "path_length", "summary_table",
           "format_table"]

#: the rows every other row is compared with
CROSSOVER_PEERS = ("torch_lstm", "sdpa")
DEPTH_RULE = ("sequential depth = dependent steps along L of one forward pass, a kernel over all positions at once "
              "(elementwise, matmul, softmax, FFT) counting 1 (its internal log-depth reductions are not counted, as "
              "in Table 1 of Vaswani et al.); the backward pass has the same depth again")
PATH_RULE = ("path length = hops from input position 1 to output position L: a recurrence carries it through L - 1 "
             "state transitions (h_L depends on x_1 through a_2 ... a_L) however its states are computed (loop, "
             "doubling scan, FFT, chunks); full attention 1; truncated attention with window w does not reach in one "
             "layer when L - 1 > w: the entry is the ceil((L - 1) / w) stacked layers it needs")

_LOG_SCANS = ("scan_doubling", "min_rnn", "lru")  # linear_scan over L


def _mamba2_chunk(params: dict) -> int:
    from attn_core.recurrent import Mamba2

    return int(params.get("chunk_size", inspect.signature(Mamba2).parameters["chunk_size"].default))


def sequential_depth(method: str, family: str, L: int, params: dict | None = None) -> tuple[int | None, str]:
    """``(depth at L, rule)`` of one forward pass of a row (see :data:`DEPTH_RULE`)."""
    params = params or {}
    log2 = lambda n: n.bit_length() - 1 if n > 1 else 0  # noqa: E731  floor(log2 n): levels of the recursion
    if family == "attention":
        return 1, "1 (every position at once)"
    if method in _LOG_SCANS:
        return 2 * log2(L), "2 floor(log2 L) (odd/even doubling: one combine down, one fill-in up per level)"
    if method == "scan_loop" or family == "peer":
        return L, "L (one step per position)"
    if method == "s4d":
        return 3, "3 (rfft, product, irfft: O(1); log2(2L) butterfly stages inside each FFT)"
    if method == "mamba2":
        q = _mamba2_chunk(params)
        return 2 * log2(math.ceil(L / q)), f"2 floor(log2 ceil(L/Q)) + O(1) (doubling scan over chunks, Q={q})"
    return None, "unknown (not a built-in recurrence)"


def path_length(method: str, family: str, L: int, params: dict | None = None) -> tuple[int | None, str]:
    """``(hops from position 1 to L, rule)`` of a row (see :data:`PATH_RULE`)."""
    params = params or {}
    if family == "attention":
        w = params.get("window")
        if w is None:
            return expected_path_length("self_attention", L), "1"
        return expected_path_length("restricted_attention", L, w), f"ceil((L-1)/{w}) stacked layers"
    return expected_path_length("lstm", L), "L - 1 (state transitions)"


def _crossover_entry(times: dict[int, float], peer: dict[int, float]) -> dict:
    c = crossover(times, peer)
    c["ratios"] = {str(L): round(r, 4) for L, r in c["ratios"].items()}
    return c


def crossover_text(c: dict | None) -> str:
    """The table cell of a crossover: ``~L`` interpolated, ``<=L0`` as fast from the smallest L,
    ``none`` (slower at the largest L measured), ``-`` no data or the peer itself."""
    if c is None or c["state"] == "no_data":
        return "-"
    if c["state"] == "never":
        return "none"
    if c["state"] == "always":
        return f"<={c['lengths'][0]}"
    return f"~{c['at_L']:.0f}"


def summary_table(points: list[dict], *, report_length: int) -> list[dict]:
    """One row per timed method, in plan order (see the module doc)."""
    timed = [r for r in points if r.get("kind", "recurrence") == "recurrence"]
    errors = {r["method"]: r for r in points if r.get("kind") == "f32_error"}
    by: dict[str, dict[int, dict]] = {}
    for r in timed:
        by.setdefault(r["method"], {})[r["L"]] = r
    ok = {m: {L: r["time_ms"] for L, r in rs.items() if r["status"] == "ok" and r.get("time_ms")}
          for m, rs in by.items()}
    rows = []
    for m, rs in by.items():
        first = next(iter(rs.values()))
        family, params = first.get("family"), first.get("params") or {}
        at = rs.get(report_length)
        fit = fit_power_law(list(ok[m]), list(ok[m].values()))
        mem = {L: r.get("peak_mem_bytes") for L, r in rs.items() if r["status"] == "ok"}
        mem_fit = fit_power_law(list(mem), list(mem.values()))
        depth, depth_rule = sequential_depth(recurrence_of(m), family, report_length, params)
        path, path_rule = path_length(recurrence_of(m), family, report_length, params)
        err = errors.get(m)
        rows.append({
            "method": m, "family": family, "L": report_length,
            "status": at["status"] if at else "not measured",
            "time_ms": at.get("time_ms") if at and at["status"] == "ok" else None,
            "peak_mib": (at["peak_mem_bytes"] / (1 << 20) if at and at["status"] == "ok"
                         and at.get("peak_mem_bytes") is not None else None),
            "time_exponent": fit, "time_class": growth_class(fit["exponent"]) if fit else None,
            "memory_exponent": mem_fit["exponent"] if mem_fit else None,
            "crossovers": {p: (None if p == m or p not in ok else _crossover_entry(ok[m], ok[p]))
                           for p in CROSSOVER_PEERS},
            "sequential_depth": depth, "sequential_depth_rule": depth_rule,
            "path_length": path, "path_length_rule": path_rule,
            "f32_rel_err": err.get("f32_rel_err") if err and err["status"] == "ok" else None,
            "f32_L": err["L"] if err else None,
        })
    return rows


def format_table(rows: list[dict], report_length: int) -> str:
    """The printed table (one line per row; ``-`` where nothing was measured; ``f32 err`` at
    each row's ``f32_L``)."""
    head = (f"{'method':<16} {f'ms@{report_length}':>11} {f'MiB@{report_length}':>10} {'k (time~L^k)':>15} "
            f"{'x lstm':>7} {'x sdpa':>7} {f'depth@{report_length}':>11} {f'path@{report_length}':>10} "
            f"{'f32 err@' + str(next((r['f32_L'] for r in rows if r['f32_L']), '-')):>12}")
    lines = [head, "-" * len(head)]
    for r in rows:
        fit = r["time_exponent"]
        k = "-" if not fit else f"{fit['exponent']:.2f}" + (f"±{fit['stderr']:.2f}" if fit["stderr"] is not None
                                                             else "")
        ms = f"{r['time_ms']:.1f}" if r["time_ms"] is not None else r["status"]
        mb = f"{r['peak_mib']:.1f}" if r["peak_mib"] is not None else "-"
        err = f"{r['f32_rel_err']:.1e}" if r["f32_rel_err"] is not None else "-"
        lines.append(f"{r['method']:<16} {ms:>11} {mb:>10} {k:>15} {crossover_text(r['crossovers']['torch_lstm']):>7} "
                     f"{crossover_text(r['crossovers']['sdpa']):>7} {str(r['sequential_depth']):>11} "
                     f"{str(r['path_length']):>10} {err:>12}")
    return "\n".join(lines)
