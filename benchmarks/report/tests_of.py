"""Hypothesis tests behind the report's verdicts: p-values of a difference, equivalence within a
margin (TOST), and the multiplicity correction over a named family of tests.

Kept libraries do the work; this module only picks the test:

* **a difference** ``a - b``: the paired t-test over common seeds (``scipy.stats.ttest_rel``), else
  Welch's (``scipy.stats.ttest_ind(equal_var=False)``): the same tests as the t-intervals of
  :mod:`benchmarks.report.stats`, so ``p < alpha`` exactly when the interval excludes 0;
* **zero spread** (every per-seed difference equal, or every value equal in both groups): no
  t-test exists and a zero-width interval decides nothing, so the test is exact and
  distribution-free: ``scipy.stats.permutation_test`` over all sign flips of the per-seed
  differences (paired) or all relabellings (unpaired). With 3 seeds its smallest two-sided p is
  2/2^3 = 0.25: three identical seeds never decide a verdict;
* **equivalence within +-m** (``a ~ b``): two one-sided tests (TOST) of ``|a - b| >= m``,
  ``statsmodels.stats.weightstats.ttost_paired`` / ``ttost_ind(usevar="unequal")``; with zero spread
  the two one-sided tests are the exact permutation tests of the shifted differences;
* **multiplicity**: Holm's step-down correction over the family
  (``statsmodels.stats.multitest.multipletests(method="holm")``): the report shows the adjusted
  verdict beside the raw one.

What the tests cover: the variance between seeds (initialisation, batch order, dropout) of one
fixed split; not the test set's own sampling error (every seed uses the same test items).
"""

from __future__ import annotations

import gc
import math
from typing import Any, Sequence

import numpy as np


__all__ = ["ALPHA", "difference_p", "equivalence_p", "holm", "no_spread"]

#: the significance level of every verdict (two-sided 95% intervals)
ALPHA = 0.05


def no_spread(values: Iterable[float]) -> bool:
    """Whether every value is the same up to float rounding (1e-9 relative): per-seed accuracies
    of k/N correct items differ by 1e-17, not 0, when k is the same on every seed, and a t-test
    of that noise claims p = 1e-30."""
    arr = np.asarray(list(values), dtype=np.float64)
    return arr.size > 0 and float(np.ptp(arr)) <= 1e-9 * max(1.0, float(np.abs(arr).max()))


def _pairs(a: Sequence[float], b: Sequence[float], seeds_a: Sequence[Any] | None,
           seeds_b: Sequence[Any] | None) -> np.ndarray | None:
    """The per-seed differences ``a_s - b_s`` when both groups hold the same distinct seeds (at
    least two), in ``a``'s order; None otherwise (the unpaired tests apply)."""
    if seeds_a is None or seeds_b is None:
        return None
    sa, sb = list(seeds_a), list(seeds_b)
    if len(set(sa)) != len(sa) or len(set(sb)) != len(sb) or set(sa) != set(sb) or len(sa) < 2:
        return None
    by_b = dict(zip(sb, b))
    return np.asarray(a, dtype=float) - np.asarray([by_b[s] for s in sa], dtype=float)


def _exact(data: tuple, paired: bool, alternative: str) -> float:
    """The exact permutation p-value of the mean difference (all sign flips or relabellings)."""
    from scipy import stats

    def statistic(*xs, axis=-1):
        return np.mean(xs[0], axis=axis) - (np.mean(xs[1], axis=axis) if len(xs) > 1 else 0.0)

    res = stats.permutation_test(data, statistic, permutation_type="samples" if paired else "independent",
                                 alternative=alternative, n_resamples=np.inf, vectorized=True)
    return float(min(1.0, res.pvalue))


def difference_p(a: Sequence[float], b: Sequence[float], seeds_a: Sequence[Any] | None = None,
                 seeds_b: Sequence[Any] | None = None) -> tuple[float | None, str]:
    """Two-sided p-value of ``mean(a) - mean(b) = 0`` and the test's name; (None, reason) with
    fewer than two values on a side."""
    from scipy import stats

    xa, xb = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    d = _pairs(a, b, seeds_a, seeds_b)
    if d is not None:
        if no_spread(d):
            return (1.0 if no_spread(np.append(d, 0.0)) else _exact((d,), True, "two-sided")), "exact sign-flip test (identical differences)"
        return float(stats.ttest_rel(xa, [dict(zip(seeds_b, b))[s] for s in seeds_a]).pvalue), "paired t-test"
    if xa.size < 2 or xb.size < 2:
        return None, "fewer than two values"
    if no_spread(xa) and no_spread(xb):
        return (1.0 if no_spread(np.append(xa, xb)) else _exact((xa, xb), False, "two-sided")), "exact permutation test (no spread)"
    return float(stats.ttest_ind(xa, xb, equal_var=False).pvalue), "Welch t-test"


def equivalence_p(a: Sequence[float], b: Sequence[float], margin: float, seeds_a: Sequence[Any] | None = None,
                  seeds_b: Sequence[Any] | None = None) -> tuple[float | None, str]:
    """The TOST p-value of ``|mean(a) - mean(b)| >= margin`` (small: level within +-margin) and the
    test's name; (None, reason) with fewer than two values on a side."""
    from statsmodels.stats.weightstats import ttost_ind, ttost_paired

    if not margin > 0:
        raise ValueError(f"an equivalence margin must be > 0, got {margin!r}")
    xa, xb = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    d = _pairs(a, b, seeds_a, seeds_b)
    if d is not None:
        if no_spread(d):  # both one-sided tests exact: shifted differences against 0
            p = max(_exact((d + margin,), True, "greater"), _exact((d - margin,), True, "less"))
            return p, "TOST, exact sign-flip tests (identical differences)"
        xb_paired = np.asarray([dict(zip(seeds_b, b))[s] for s in seeds_a], dtype=float)
        return float(ttost_paired(xa, xb_paired, -margin, margin)[0]), "TOST, paired t-tests"
    if xa.size < 2 or xb.size < 2:
        return None, "fewer than two values"
    if no_spread(xa) and no_spread(xb):
        p = max(_exact((xa + margin, xb), False, "greater"), _exact((xa - margin, xb), False, "less"))
        return p, "TOST, exact permutation tests (no spread)"
    return float(ttost_ind(xa, xb, -margin, margin, usevar="unequal")[0]), "TOST, Welch t-tests"


def holm(pvalues: Sequence[float | None]) -> list[float | None]:
    """Holm-adjusted p-values over the family (None stays None and is not counted)."""
    from statsmodels.stats.multitest import multipletests

    idx = [i for i, p in enumerate(pvalues) if p is not None and math.isfinite(p)]
    out: list[float | None] = [None] * len(pvalues)
    if idx:
        # statsmodels' Holm branch ends in a full gc.collect(), which costs seconds in a process
        # with a large heap (a page build): the objects alive now are frozen out of it, unless the
        # process keeps a freeze of its own (unfreezing would undo that one too)
        mine = gc.get_freeze_count() == 0
        if mine:
            gc.freeze()
        try:
            adjusted = multipletests([pvalues[i] for i in idx], alpha=ALPHA, method="holm")[1]
        finally:
            if mine:
                gc.unfreeze()
        for i, p in zip(idx, adjusted):
            out[i] = float(p)
    return out
