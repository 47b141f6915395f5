"""Speed crossovers over the length ``L``, shared by the micro-benchmarks: from which ``L`` one
method is at least as fast as another (the measured length, and the length interpolated in
log-log between the two measured points around the crossing). Pure Python: no torch."""

from __future__ import annotations

import math
from typing import Mapping

__all__ = ["crossover"]


def crossover(ours: Mapping[int, float], base: Mapping[int, float]) -> dict:
    """Where ``ours`` (``{L: time}``) becomes at least as fast as ``base`` for good.

    Only the lengths both have count. ``start``: the smallest of them from which ``ours`` is at
    least as fast (``<=``) at every larger one. Returns ``lengths`` (both measured, ascending),
    ``ratios`` (``{L: ours / base}``), ``from_L`` (``start``, or ``None``), ``at_L`` (the ``L``
    where ``log(ours / base)`` crosses 0, interpolated linearly in ``log L`` between the last
    slower length and ``start``; ``None`` when there is no such pair) and ``state``:
    ``no_data`` (no common length), ``never`` (slower at the largest length: none in range),
    ``always`` (as fast from the smallest length: the crossing is at or below it) or
    ``crosses``. A failed point may enter as an infinite time (slower than anything; a peer that
    failed is beaten): no interpolation across it."""
    both = sorted(L for L in ours if L in base and ours[L] and base[L])
    ratios = {L: ours[L] / base[L] for L in both}
    out: dict = {"lengths": both, "ratios": ratios, "from_L": None, "at_L": None}
    if not both:
        return {**out, "state": "no_data"}
    faster = [ratios[L] <= 1 for L in both]
    start = next((i for i in range(len(both)) if all(faster[i:])), None)
    if start is None:
        return {**out, "state": "never"}
    if start == 0:
        return {**out, "from_L": both[0], "state": "always"}
    lo, hi = both[start - 1], both[start]
    if not all(0 < ratios[L] < math.inf for L in (lo, hi)):  # a side that failed there (an infinite time)
        return {**out, "from_L": hi, "state": "crosses"}
    r_lo, r_hi = math.log(ratios[lo]), math.log(ratios[hi])  # > 0 (slower), <= 0 (as fast)
    t = r_lo / (r_lo - r_hi)
    at = math.exp(math.log(lo) + t * (math.log(hi) - math.log(lo)))
    return {**out, "from_L": hi, "at_L": at, "state": "crosses"}
