"""The checks every micro-benchmark reports: one record shape (:func:`check`), the shared
comparisons (:func:`interval_check` for a time ratio measured in interleaved rounds,
:func:`ratio_check`, :func:`doubling_check`) and the PASS/FAIL table the sweep prints
(:func:`format_checks`).

A check is a dict ``{"name", "value", "target", "pass", **extra}``: ``pass`` is ``True``
(PASS), ``False`` (FAIL) or ``None`` (info, or undecided because a baseline failed). An
interval check adds ``decision`` (``pass``/``fail``/``inconclusive``: ``None`` is then
printed INCONCLUSIVE), ``ci_low``, ``ci_high``, ``confidence`` and ``repeats``.
Pure Python: no torch.
"""

from __future__ import annotations

from typing import Any, Callable

from benchmarks.report.format import interval_text  # noqa: F401 - re-exported: the checks' own text

from benchmarks.micro.paired import DECISIONS, INCONCLUSIVE, decide, ratio_interval

__all__ = ["VERDICT", "check", "verdict", "interval_check", "ratio_check", "doubling_check", "format_checks",
           "interval_text"]

#: How ``pass`` is printed.
VERDICT = {True: "PASS", False: "FAIL", None: "info"}


def check(name: str, value: Any, target: str, ok: bool | None, *, digits: int = 4, **extra: Any) -> dict:
    """One check record; a float ``value`` is rounded to ``digits`` decimals."""
    if isinstance(value, float):
        value = round(value, digits)
    return {"name": name, "value": value, "target": target, "pass": ok, **extra}


def verdict(c: dict) -> str:
    """How a check's result is printed: PASS, FAIL, INCONCLUSIVE (an interval check that could
    not decide) or info."""
    return "INCONCLUSIVE" if c.get("decision") == INCONCLUSIVE else VERDICT[c["pass"]]


def interval_check(name: str, pair: dict | None, limit: float, *, ours: dict | None = None,
                   base: dict | None = None, confidence: float = 0.95) -> dict | None:
    """The time ratio ``ours / peer <= limit`` from a paired point (``pair``: ``ours_ms`` and
    ``peer_ms`` timed in interleaved rounds, :func:`benchmarks.micro.paired.time_interleaved`),
    decided by its confidence interval (:func:`benchmarks.micro.paired.decide`): PASS when all of
    it is within the limit, FAIL only when all of it is beyond, INCONCLUSIVE (``pass: None``)
    otherwise. ``value`` is the geometric mean of the per-round ratios. ``None`` when the pair
    was not measured. ``ours``/``base``: the sides' own points, when measured: a failed point of
    ours fails the check, a failed baseline leaves it undecided (info), as in :func:`ratio_check`;
    a paired point that failed by itself is undecided too."""
    if pair is None:
        return None
    target = f"<= {limit:g}"
    if ours is not None and ours["status"] != "ok":
        return check(name, None, target, False, note=f"ours: {ours['status']} ({ours.get('reason', '')})")
    if base is not None and base["status"] != "ok":
        return check(name, None, target, None, note=f"baseline {base['method']}: {base['status']}")
    if pair["status"] != "ok":
        return check(name, None, target, None, note=f"paired timing: {pair['status']} ({pair.get('reason', '')})")
    iv = ratio_interval(pair["ours_ms"], pair["peer_ms"], confidence)
    decision = decide(iv["ci_low"], iv["ci_high"], limit)
    rnd = {k: None if iv[k] is None else round(iv[k], 4) for k in ("ci_low", "ci_high")}
    return check(name, iv["ratio"], target, DECISIONS[decision], decision=decision, **rnd,
                 confidence=confidence, repeats=iv["repeats"], statistic="geometric mean of interleaved round ratios",
                 ours=_median(pair["ours_ms"]), baseline=_median(pair["peer_ms"]))


def _median(xs: list[float]) -> float:
    import statistics

    return round(statistics.median(xs), 4)


def ratio_check(name: str, ours: dict | None, base: dict | None, target: str, cmp: Callable[[float], bool],
                key: str = "time_ms") -> dict | None:
    """``ours[key] / base[key]`` against ``target`` (``cmp(value) -> bool``); ``None`` when a point
    is absent. A failed point of ours fails the check; a failed baseline (ours ok) leaves it
    undecided (``pass: None``).

    A time ratio (``key="time_ms"``) is decided on each side's best run (``min_ms``) where both
    points have one: the two sides are timed in separate processes, one after the other, and
    on a shared CPU noise only ever adds time, so the minimum is the stable estimate of a
    side's cost (medians of 5 swung 0.9-1.2 between identical runs of the graph check). The
    ratio of the medians (``value_median``) and of the CPU times (``value_cpu_time``) stay in
    the check."""
    if ours is None or base is None:
        return None
    if ours["status"] != "ok":
        return check(name, None, target, False, note=f"ours: {ours['status']} ({ours.get('reason', '')})")
    if base["status"] != "ok":
        return check(name, None, target, None, note=f"baseline {base['method']}: {base['status']}")
    a, b = ours.get(key), base.get(key)
    if not a or not b:
        return check(name, None, target, None, note=f"{key} is zero or missing")
    value = a / b
    extra: dict[str, Any] = {}
    if key == "time_ms":
        if ours.get("min_ms") and base.get("min_ms"):
            extra["value_median"] = round(value, 4)
            a, b = ours["min_ms"], base["min_ms"]
            value = a / b
            extra["statistic"] = "min"
        if ours.get("cpu_median_ms") and base.get("cpu_median_ms"):
            extra["value_cpu_time"] = round(ours["cpu_median_ms"] / base["cpu_median_ms"], 4)
    return check(name, value, target, bool(cmp(value)), ours=a, baseline=b, **extra)


def doubling_check(name: str, small: dict, large: dict, limit: float | None) -> dict:
    """Peak-memory growth ``large / small`` over one doubling of the size: at most ``limit``
    (``None``: info only). A failed point fails a target (info stays undecided)."""
    target = f"<= {limit:g}" if limit is not None else "info"
    if large["status"] != "ok" or small["status"] != "ok":
        return check(name, None, target, False if limit is not None else None,
                     note=f"status {small['status']} / {large['status']}")
    if not small.get("peak_mem_bytes"):
        return check(name, None, target, None, note="zero peak at the smaller L")
    v = large["peak_mem_bytes"] / small["peak_mem_bytes"]
    return check(name, v, target, (v <= limit) if limit is not None else None,
                 ours=large["peak_mem_bytes"], baseline=small["peak_mem_bytes"])


def format_checks(checks: list[dict], *, empty: str = "checks: none", precision: int = 3, width: int = 8) -> str:
    """The checks as a plain-text table, one ``PASS``/``FAIL``/``INCONCLUSIVE``/``info`` line
    each, with the note, the interval (:func:`interval_text`), the CPU-time ratio
    (``value_cpu_time``) and the largest-points exponent (``tail``) where a check has them;
    ``empty`` when there is none."""
    if not checks:
        return empty
    lines = ["checks:"]
    w = max(len(c["name"]) for c in checks)
    vw = max(len(verdict(c)) for c in checks)
    for c in checks:
        v = c["value"]
        vs = f"{v:.{precision}f}" if isinstance(v, float) else str(v)
        note = f"  ({c['note']})" if c.get("note") else ""
        if interval_text(c):
            note += f"  [{interval_text(c)}]"
        if c.get("value_median") is not None:
            note += f"  [best-of-n ratio; of medians {c['value_median']:.3f}]"
        if c.get("value_cpu_time") is not None:
            note += f"  [cpu-time ratio {c['value_cpu_time']:.3f}]"
        if c.get("tail") is not None:
            note += f"  [largest 3 points: {c['tail']:.3f}]"
        lines.append(f"  {verdict(c):<{vw}}  {c['name']:<{w}}  {vs:>{width}}  target {c['target']}{note}")
    return "\n".join(lines)
