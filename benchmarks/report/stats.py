"""Statistics over seeds: mean, sample standard deviation, Student-t confidence intervals,
and the difference of two groups with a confidence interval and a plain verdict.

Everything here is plain numpy plus ``scipy.stats.t`` for the quantiles.

Conventions
-----------
* ``std`` is the *sample* standard deviation (``ddof=1``); with one value it is undefined
  (``None``), and so is every confidence interval built from it.
* The confidence interval of a mean is ``mean +- t_{1-alpha/2, n-1} * std / sqrt(n)``.
* A difference is always ``a - b`` (in the report: attention minus baseline).
* :func:`compare` chooses the interval:

  - **paired** (the default when both groups hold exactly the same seeds, at least two, each
    seed once): the t-interval of the per-seed differences ``a_s - b_s``, ``n_pairs - 1``
    degrees of freedom (the interval of ``scipy.stats.ttest_rel``). Same seed means same
    data split, initialisation stream and batch order, so the pairing removes the variance
    those share;
  - **Welch** otherwise (different or partly overlapping seed sets, e.g. after a failed
    seed): ``se = sqrt(s_a^2/n_a + s_b^2/n_b)`` with the Welch-Satterthwaite degrees of
    freedom (the interval of ``scipy.stats.ttest_ind(..., equal_var=False)``). No seeds are
    dropped to force a pairing.

  ``paired=True`` demands the paired interval (error when the seeds do not match),
  ``paired=False`` always uses Welch.
* Zero spread (every value equal in both groups, or every per-seed difference equal) gives
  a zero-width interval at the observed difference rather than NaN: the runs disagree by
  exactly that much on every seed. **It never decides a verdict**: :func:`compare` also sets the
  difference's two-sided p-value (:mod:`benchmarks.report.tests_of`: the t-test of the interval,
  or with zero spread the exact permutation test, whose smallest p with 3 seeds is 0.25).
* :func:`verdict` reads the p-value (where set, else the interval) against the metric's mode: for
  ``"max"`` metrics a significant positive difference is ``"better"``, a negative one ``"worse"``
  (the reverse for ``"min"``); otherwise ``"no significant difference"``. For the t-tests this is
  the interval excluding 0. With fewer than
  :data:`MIN_SEEDS` values in either group it says ``"too few seeds"`` instead: a t-interval of
  two seeds (one degree of freedom, t = 12.7) is too wide to mean anything, and a zero-width one
  of two tied seeds claims a certainty it does not have.
* A bounded metric (accuracy in [0, 1], BLEU in [0, 100]) clips its intervals to what the metric
  can reach (a difference to +-(high - low)); ``clipped`` says so. ``identical`` marks a zero
  spread (every value equal, or every per-seed difference equal): not a zero-width certainty,
  the report shows it as "n=2, identical".

Selecting "the best model of a family" by its mean and then testing it is a selection step
the interval does not account for; the report says so.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, replace
from typing import Any, Iterable, Sequence

import numpy as np

from benchmarks.report.tests_of import difference_p, no_spread  # noqa: F401 - no_spread re-exported

__all__ = [
    "BETTER",
    "WORSE",
    "NO_DIFFERENCE",
    "TOO_FEW",
    "VERDICTS",
    "MIN_SEEDS",
    "MODES",
    "Summary",
    "Difference",
    "mean",
    "no_spread",
    "sample_std",
    "t_quantile",
    "mean_ci",
    "summarize",
    "welch_difference",
    "paired_difference",
    "compare",
    "verdict",
]

BETTER = "better"
WORSE = "worse"
NO_DIFFERENCE = "no significant difference"
TOO_FEW = "too few seeds"
VERDICTS = (BETTER, WORSE, NO_DIFFERENCE, TOO_FEW)
#: fewest values per group for a verdict (below it: :data:`TOO_FEW`)
MIN_SEEDS = 3
MODES = ("max", "min")


def _values(values: Iterable[float]) -> np.ndarray:
    arr = np.asarray(list(values), dtype=np.float64)
    if arr.ndim != 1:
        raise ValueError(f"expected a flat sequence of numbers, got shape {arr.shape}")
    return arr


def _check_confidence(confidence: float) -> None:
    if not 0.0 < confidence < 1.0:
        raise ValueError(f"confidence must be in (0, 1), got {confidence}")


def mean(values: Iterable[float]) -> float | None:
    """Arithmetic mean; ``None`` for no values."""
    arr = _values(values)
    return float(arr.mean()) if arr.size else None


def sample_std(values: Iterable[float]) -> float | None:
    """Sample standard deviation (``ddof=1``); ``None`` with fewer than two values."""
    arr = _values(values)
    return float(arr.std(ddof=1)) if arr.size >= 2 else None


def t_quantile(confidence: float, df: float) -> float:
    """Two-sided Student-t critical value: ``t_{(1+confidence)/2, df}``."""
    _check_confidence(confidence)
    from scipy import stats as _st

    return float(_st.t.ppf(0.5 + confidence / 2.0, df))


def mean_ci(values: Iterable[float], confidence: float = 0.95) -> tuple[float, float] | None:
    """Student-t confidence interval of the mean; ``None`` (undefined) with fewer than two values."""
    s = summarize(values, confidence)
    return None if s.ci_low is None else (s.ci_low, s.ci_high)


class _Interval:
    """What a summary and a difference share: an interval that may be undefined, and a dict form."""

    ci_low: float | None

    @property
    def ci_defined(self) -> bool:
        return self.ci_low is not None

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class Summary(_Interval):
    """Mean, sample std and t-interval of the mean of one group (``None`` where undefined)."""

    n: int
    mean: float | None
    std: float | None
    ci_low: float | None
    ci_high: float | None
    confidence: float
    clipped: bool = False  # the interval was cut to the metric's range

    @property
    def identical(self) -> bool:
        """Two or more values, all equal: a zero-width interval that is no certainty."""
        return self.std == 0.0


def _clip(lo: float, hi: float, bounds: tuple[float | None, float | None] | None) -> tuple[float, float, bool]:
    """``[lo, hi]`` cut to ``bounds`` (either end may be None); whether anything was cut."""
    if bounds is None:
        return lo, hi, False
    b_lo, b_hi = bounds
    nlo = lo if b_lo is None else max(lo, float(b_lo))
    nhi = hi if b_hi is None else min(hi, float(b_hi))
    return nlo, nhi, (nlo, nhi) != (lo, hi)


def difference_bounds(bounds: tuple[float | None, float | None] | None) -> tuple[float, float] | None:
    """The range of ``a - b`` for two values in ``bounds``: ``+-(high - low)``; None if unbounded."""
    if bounds is None or bounds[0] is None or bounds[1] is None:
        return None
    w = float(bounds[1]) - float(bounds[0])
    return (-w, w)


def summarize(values: Iterable[float], confidence: float = 0.95,
              bounds: tuple[float | None, float | None] | None = None) -> Summary:
    """``bounds``: the range of a bounded metric (accuracy in [0, 1]): the interval is clipped
    to it, since a t-interval of few seeds near 100% would otherwise claim the impossible."""
    _check_confidence(confidence)
    arr = _values(values)
    n = int(arr.size)
    if n == 0:
        return Summary(0, None, None, None, None, confidence)
    m = float(arr.mean())
    if n == 1:
        return Summary(1, m, None, None, None, confidence)
    sd = float(arr.std(ddof=1))
    half = t_quantile(confidence, n - 1) * sd / math.sqrt(n)
    lo, hi, clipped = _clip(m - half, m + half, bounds)
    return Summary(n, m, sd, lo, hi, confidence, clipped)


@dataclass(frozen=True)
class Difference(_Interval):
    """``a - b`` with its confidence interval (``None`` where undefined).

    ``method`` is ``"paired"`` or ``"welch"``; ``n_a``/``n_b`` are the group sizes (for the
    paired interval both equal the number of pairs); ``se`` and ``df`` are the standard error
    and degrees of freedom of the interval (``df`` is NaN for a zero-width Welch interval).
    """

    method: str
    mean_a: float
    mean_b: float
    diff: float
    ci_low: float | None
    ci_high: float | None
    se: float | None
    df: float | None
    n_a: int
    n_b: int
    confidence: float
    clipped: bool = False  # the interval was cut to the range a difference of the metric can reach
    p: float | None = None  # two-sided p-value of a - b = 0 (:func:`compare` sets it)
    test: str = ""  # the test behind ``p`` (:func:`benchmarks.report.tests_of.difference_p`)

    @property
    def identical(self) -> bool:
        """Zero spread (every value equal, or every per-seed difference equal)."""
        return self.se == 0.0

    @property
    def n(self) -> int:
        """The smaller group's size: what limits the interval."""
        return min(self.n_a, self.n_b)

    def clip(self, bounds: tuple[float | None, float | None] | None) -> "Difference":
        """This difference with its interval cut to ``bounds`` (see :func:`difference_bounds`)."""
        if self.ci_low is None or bounds is None:
            return self
        lo, hi, cut = _clip(self.ci_low, self.ci_high, bounds)
        return replace(self, ci_low=lo, ci_high=hi, clipped=self.clipped or cut)


def welch_difference(a: Iterable[float], b: Iterable[float], confidence: float = 0.95) -> Difference:
    """Welch's t-interval for ``mean(a) - mean(b)`` (unequal variances). Undefined interval
    when either group has fewer than two values."""
    _check_confidence(confidence)
    xa, xb = _values(a), _values(b)
    if xa.size == 0 or xb.size == 0:
        raise ValueError("welch_difference needs at least one value in each group")
    ma, mb = float(xa.mean()), float(xb.mean())
    d = ma - mb
    na, nb = int(xa.size), int(xb.size)
    if na < 2 or nb < 2:
        return Difference("welch", ma, mb, d, None, None, None, None, na, nb, confidence)
    va, vb = float(xa.var(ddof=1)) / na, float(xb.var(ddof=1)) / nb
    se = 0.0 if no_spread(xa) and no_spread(xb) else math.sqrt(va + vb)
    if se == 0.0:
        return Difference("welch", ma, mb, d, d, d, 0.0, float("nan"), na, nb, confidence)
    df = (va + vb) ** 2 / (va**2 / (na - 1) + vb**2 / (nb - 1))
    half = t_quantile(confidence, df) * se
    return Difference("welch", ma, mb, d, d - half, d + half, se, df, na, nb, confidence)


def paired_difference(a: Sequence[float], b: Sequence[float], confidence: float = 0.95) -> Difference:
    """Paired t-interval for ``mean(a - b)``; ``a[i]`` and ``b[i]`` belong to the same seed.
    Undefined interval with fewer than two pairs."""
    _check_confidence(confidence)
    xa, xb = _values(a), _values(b)
    if xa.size != xb.size:
        raise ValueError(f"paired_difference needs equal lengths, got {xa.size} and {xb.size}")
    if xa.size == 0:
        raise ValueError("paired_difference needs at least one pair")
    n = int(xa.size)
    dd = xa - xb
    ma, mb = float(xa.mean()), float(xb.mean())
    d = float(dd.mean())
    if n < 2:
        return Difference("paired", ma, mb, d, None, None, None, None, n, n, confidence)
    se = 0.0 if no_spread(dd) else float(dd.std(ddof=1)) / math.sqrt(n)
    if se == 0.0:
        return Difference("paired", ma, mb, d, d, d, 0.0, float(n - 1), n, n, confidence)
    half = t_quantile(confidence, n - 1) * se
    return Difference("paired", ma, mb, d, d - half, d + half, se, float(n - 1), n, n, confidence)


def compare(
    a: Sequence[float],
    b: Sequence[float],
    seeds_a: Sequence[Any] | None = None,
    seeds_b: Sequence[Any] | None = None,
    *,
    paired: bool | None = None,
    confidence: float = 0.95,
) -> Difference:
    """``a - b`` with a confidence interval: paired when both groups have the same seeds
    (``paired=None``, the default; see the module docstring), Welch otherwise."""
    a, b = list(a), list(b)
    can_pair = False
    if seeds_a is not None and seeds_b is not None:
        seeds_a, seeds_b = list(seeds_a), list(seeds_b)
        if len(seeds_a) != len(a) or len(seeds_b) != len(b):
            raise ValueError("each value needs exactly one seed")
        can_pair = (
            len(set(seeds_a)) == len(seeds_a)
            and len(set(seeds_b)) == len(seeds_b)
            and set(seeds_a) == set(seeds_b)
            and len(seeds_a) >= 2
        )
    if paired is True and not can_pair:
        raise ValueError("a paired interval needs the same (distinct) seeds, at least two, in both groups")
    if can_pair and paired is not False:
        by_seed_b = dict(zip(seeds_b, b))
        diff = paired_difference(a, [by_seed_b[s] for s in seeds_a], confidence)
        p, test = difference_p(a, b, seeds_a, seeds_b)
    else:
        diff = welch_difference(a, b, confidence)
        p, test = difference_p(a, b)
    return replace(diff, p=p, test=test)


def verdict(diff: Difference, mode: str, min_n: int = MIN_SEEDS) -> str:
    """``"better"``, ``"worse"`` or ``"no significant difference"`` for group ``a`` against ``b``
    given the metric mode (``"max"``: larger is better; ``"min"``: smaller is better);
    ``"too few seeds"`` when either group has fewer than ``min_n`` values."""
    if mode not in MODES:
        raise ValueError(f"unknown metric mode {mode!r}; valid: {', '.join(MODES)}")
    if diff.n < min_n:
        return TOO_FEW
    if not diff.ci_defined:
        return NO_DIFFERENCE
    sign = 1.0 if mode == "max" else -1.0
    if diff.p is not None:  # the test decides (a zero-width interval never does: see tests_of)
        if diff.p >= 1.0 - diff.confidence or diff.diff == 0.0:
            return NO_DIFFERENCE
        return BETTER if sign * diff.diff > 0 else WORSE
    lo, hi = sorted((sign * diff.ci_low, sign * diff.ci_high))
    if lo > 0:
        return BETTER
    if hi < 0:
        return WORSE
    return NO_DIFFERENCE
