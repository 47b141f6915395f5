"""Timing ours against a peer so that the ratio survives a noisy machine.

Two points timed one after the other (or in two processes) see different machines: another
process, a frequency change or a cache-cold worker moves one side and not the other, and the
ratio of their medians swung 0.9-1.2 between identical runs. Here both callables are built in
one process and timed in alternation, ``ours, peer, peer, ours, ours, peer, ...`` (the order
flips each round, so neither side always runs on the other's caches), so drift hits both sides
of a round alike:

* :func:`time_interleaved`: the per-round times of both sides;
* :func:`ratio_interval`: the geometric mean of the per-round ratios ``ours / peer`` and its
  Student-t confidence interval (the t-interval of the mean log ratio, exponentiated;
  :func:`benchmarks.report.stats.summarize`);
* :func:`decide`: ``pass`` when the whole interval is within an upper target, ``fail`` when the
  whole interval is beyond it, ``inconclusive`` otherwise (not a failure: the machine was too
  noisy, or the two are too close to the target, to tell).
"""

from __future__ import annotations

import math
import time
from typing import Any, Callable, Sequence

__all__ = ["PASS", "FAIL", "INCONCLUSIVE", "DECISIONS", "time_interleaved", "ratio_interval", "decide"]

PASS, FAIL, INCONCLUSIVE = "pass", "fail", "inconclusive"
#: a decision and the ``pass`` field of its check record
DECISIONS: dict[str, bool | None] = {PASS: True, FAIL: False, INCONCLUSIVE: None}


def time_interleaved(
    ours: Callable[[], Any],
    peer: Callable[[], Any],
    *,
    warmup: int = 1,
    repeats: int = 10,
    min_repeats: int = 3,
    target_s: float | None = None,
    sync: Callable[[], None] | None = None,
    timer: Callable[[], float] = time.perf_counter,
) -> dict:
    """``warmup`` untimed rounds, then up to ``repeats`` timed rounds of both callables (each
    call followed by ``sync()``); round ``r`` runs ``ours`` first when ``r`` is even, ``peer``
    first when odd. With ``target_s``, timing stops after ``min_repeats`` rounds once the
    rounds have taken that long. Returns ``ours_ms`` and ``peer_ms`` (one time per round, in
    round order), ``repeats`` (rounds timed) and ``warmup`` (rounds)."""
    if warmup < 0 or repeats < 1 or min_repeats < 1:
        raise ValueError(f"need warmup >= 0, repeats >= 1 and min_repeats >= 1, got {warmup}, {repeats}, {min_repeats}")
    sync = sync or (lambda: None)

    def timed(fn: Callable[[], Any]) -> float:
        t0 = timer()
        fn()
        sync()
        return (timer() - t0) * 1e3

    for _ in range(warmup):
        timed(ours)
        timed(peer)
    times: dict[str, list[float]] = {"ours": [], "peer": []}
    sides = {"ours": ours, "peer": peer}
    spent = 0.0
    for r in range(repeats):
        for side in (("ours", "peer") if r % 2 == 0 else ("peer", "ours")):
            times[side].append(timed(sides[side]))
            spent += times[side][-1]
        if target_s is not None and r + 1 >= min(min_repeats, repeats) and spent >= target_s * 1e3:
            break
    return {"ours_ms": times["ours"], "peer_ms": times["peer"], "repeats": len(times["ours"]), "warmup": warmup}


def ratio_interval(ours_ms: Sequence[float], peer_ms: Sequence[float], confidence: float = 0.95) -> dict:
    """The time ratio ``ours / peer`` over paired rounds: ``ratio`` (geometric mean of the
    per-round ratios), ``ci_low``/``ci_high`` (the Student-t interval of the mean log ratio,
    exponentiated; None with fewer than two rounds), ``repeats`` and ``confidence``."""
    from benchmarks.report.stats import summarize

    if len(ours_ms) != len(peer_ms) or not ours_ms:
        raise ValueError(f"need as many peer times as ours, at least one: got {len(ours_ms)} and {len(peer_ms)}")
    if min(min(ours_ms), min(peer_ms)) <= 0:
        raise ValueError("times must be positive to take their ratio")
    s = summarize([math.log(a / b) for a, b in zip(ours_ms, peer_ms)], confidence)
    ci = (None, None) if s.ci_low is None else (math.exp(s.ci_low), math.exp(s.ci_high))
    return {"ratio": math.exp(s.mean), "ci_low": ci[0], "ci_high": ci[1], "repeats": s.n, "confidence": confidence}


def decide(ci_low: float | None, ci_high: float | None, limit: float) -> str:
    """An upper target ``ratio <= limit`` read from an interval: :data:`PASS` when all of it is
    within, :data:`FAIL` when all of it is beyond, :data:`INCONCLUSIVE` when it straddles the
    limit (or is undefined)."""
    if ci_low is None or ci_high is None:
        return INCONCLUSIVE
    if ci_high <= limit:
        return PASS
    if ci_low > limit:
        return FAIL
    return INCONCLUSIVE
