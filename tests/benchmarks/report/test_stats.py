"""benchmarks.report.stats against scipy and hand-computed cases."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats as st

from benchmarks.report import stats
def test_mean_std_ci_hand_computed():
    s = stats.summarize([1.0, 2.0, 3.0])
    assert s.n == 3 and s.mean == 2.0 and s.std == 1.0
    half = 4.302652729749464 * 1.0 / math.sqrt(3)  # t_{0.975, 2}
    assert s.ci_low == pytest.approx(2.0 - half, rel=1e-12)
    assert s.ci_high == pytest.approx(2.0 + half, rel=1e-12)
    assert stats.mean_ci([1.0, 2.0, 3.0]) == (s.ci_low, s.ci_high)
    assert stats.mean([1.0, 2.0, 3.0]) == 2.0 and stats.sample_std([1.0, 2.0, 3.0]) == 1.0


def test_ci_matches_scipy_t_interval():
    rng = np.random.default_rng(0)
    x = rng.normal(0.8, 0.05, size=7)
    s = stats.summarize(x, confidence=0.9)
    lo, hi = st.t.interval(0.9, len(x) - 1, loc=x.mean(), scale=st.sem(x))
    assert (s.ci_low, s.ci_high) == pytest.approx((lo, hi), rel=1e-12)
    assert s.std == pytest.approx(np.std(x, ddof=1), rel=1e-12)


def test_single_value_and_empty():
    s = stats.summarize([0.5])
    assert s.mean == 0.5 and s.std is None and s.ci_low is None and s.ci_high is None and not s.ci_defined
    assert stats.mean_ci([0.5]) is None and stats.sample_std([0.5]) is None
    e = stats.summarize([])
    assert e.n == 0 and e.mean is None
    with pytest.raises(ValueError):
        stats.summarize([1.0, 2.0], confidence=1.5)


def test_welch_matches_scipy():
    a = [0.81, 0.84, 0.79, 0.86, 0.83]
    b = [0.70, 0.78, 0.65, 0.74]
    d = stats.welch_difference(a, b)
    res = st.ttest_ind(a, b, equal_var=False)
    ci = res.confidence_interval(0.95)
    assert d.method == "welch" and d.n_a == 5 and d.n_b == 4
    assert d.diff == pytest.approx(np.mean(a) - np.mean(b), rel=1e-12)
    assert (d.ci_low, d.ci_high) == pytest.approx((ci.low, ci.high), rel=1e-10)
    assert d.diff / d.se == pytest.approx(res.statistic, rel=1e-10)
    assert d.df == pytest.approx(res.df, rel=1e-10)


def test_welch_hand_computed():
    d = stats.welch_difference([1.0, 2.0, 3.0], [4.0, 6.0, 8.0])
    # var_a/n = 1/3, var_b/n = 4/3; se = sqrt(5/3); df = (5/3)^2 / ((1/3)^2/2 + (4/3)^2/2) = 50/17
    assert d.diff == -4.0
    assert d.se == pytest.approx(math.sqrt(5 / 3), rel=1e-12)
    assert d.df == pytest.approx(50 / 17, rel=1e-12)
    half = st.t.ppf(0.975, 50 / 17) * math.sqrt(5 / 3)
    assert (d.ci_low, d.ci_high) == pytest.approx((-4 - half, -4 + half), rel=1e-12)


def test_paired_matches_scipy():
    a = [0.91, 0.88, 0.93, 0.90]
    b = [0.85, 0.84, 0.86, 0.86]
    d = stats.paired_difference(a, b)
    res = st.ttest_rel(a, b)
    ci = res.confidence_interval(0.95)
    assert d.method == "paired" and d.n_a == d.n_b == 4 and d.df == 3
    assert (d.ci_low, d.ci_high) == pytest.approx((ci.low, ci.high), rel=1e-10)
    assert d.diff / d.se == pytest.approx(res.statistic, rel=1e-10)
    with pytest.raises(ValueError):
        stats.paired_difference([1.0, 2.0], [1.0])


def test_compare_pairs_by_seed_and_falls_back_to_welch():
    a = [0.91, 0.88, 0.93]
    b_by_seed = {0: 0.85, 1: 0.84, 2: 0.86}
    seeds_b = [2, 0, 1]  # other order: matched by seed, not position
    b = [b_by_seed[s] for s in seeds_b]
    d = stats.compare(a, b, [0, 1, 2], seeds_b)
    ci = st.ttest_rel(a, [b_by_seed[s] for s in (0, 1, 2)]).confidence_interval(0.95)
    assert d.method == "paired"
    assert (d.ci_low, d.ci_high) == pytest.approx((ci.low, ci.high), rel=1e-10)

    w = stats.compare(a, b, [0, 1, 2], seeds_b, paired=False)
    assert w.method == "welch"
    # different seed sets (a failed seed): Welch, nothing dropped
    w2 = stats.compare(a, b[:2], [0, 1, 2], seeds_b[:2])
    assert w2.method == "welch" and w2.n_a == 3 and w2.n_b == 2
    with pytest.raises(ValueError):
        stats.compare(a, b[:2], [0, 1, 2], seeds_b[:2], paired=True)
    assert stats.compare(a, b).method == "welch"  # no seeds given


def test_verdicts():
    better = stats.welch_difference([0.90, 0.92, 0.94], [0.60, 0.61, 0.62])
    assert stats.verdict(better, "max") == stats.BETTER == "better"
    assert stats.verdict(better, "min") == stats.WORSE == "worse"
    overlap = stats.welch_difference([0.5, 0.7, 0.6], [0.55, 0.65, 0.6])
    assert stats.verdict(overlap, "max") == stats.NO_DIFFERENCE == "no significant difference"
    assert stats.verdict(overlap, "min") == stats.NO_DIFFERENCE
    undefined = stats.welch_difference([0.9], [0.1, 0.2])
    assert not undefined.ci_defined and undefined.diff == pytest.approx(0.75)
    assert stats.verdict(undefined, "max", min_n=1) == stats.NO_DIFFERENCE
    with pytest.raises(ValueError):
        stats.verdict(better, "maximise")


def test_zero_spread_gives_zero_width_interval():
    d = stats.welch_difference([1.0, 1.0, 1.0], [0.0, 0.0])
    assert (d.ci_low, d.ci_high) == (1.0, 1.0) and stats.verdict(d, "max", min_n=2) == "better"
    assert d.identical and not stats.welch_difference([1.0, 2.0], [0.0, 0.0]).identical
    same = stats.paired_difference([0.5, 0.5], [0.5, 0.5])
    assert (same.ci_low, same.ci_high) == (0.0, 0.0) and stats.verdict(same, "max", min_n=2) == stats.NO_DIFFERENCE
    shift = stats.paired_difference([0.7, 0.8], [0.5, 0.6])
    assert shift.ci_low == pytest.approx(0.2) and shift.ci_high == pytest.approx(0.2)


def test_below_three_seeds_no_verdict():
    """Two seeds: t = 12.7, an interval too wide to mean anything; a verdict needs 3 per group."""
    wide = stats.paired_difference([24.0, 34.0], [10.0, 11.0])
    assert wide.n == 2 and stats.verdict(wide, "max") == stats.TOO_FEW == "too few seeds"
    assert stats.verdict(stats.welch_difference([0.9, 0.91, 0.92], [0.1, 0.11]), "max") == stats.TOO_FEW
    assert stats.verdict(stats.welch_difference([0.9, 0.91, 0.92], [0.1, 0.11, 0.12]), "max") == stats.BETTER


def test_intervals_clipped_to_the_metric_range_and_marked():
    s = stats.summarize([0.99, 1.0, 0.97], bounds=(0.0, 1.0))
    raw = stats.summarize([0.99, 1.0, 0.97])
    assert raw.ci_high > 1.0 and s.ci_high == 1.0 and s.ci_low == raw.ci_low and s.clipped and not raw.clipped
    inside = stats.summarize([0.5, 0.52, 0.51], bounds=(0.0, 1.0))
    assert not inside.clipped
    d = stats.paired_difference([24.26 + 9.6, 24.26 - 9.6], [30.0, 31.0])
    assert d.ci_low < -100  # the raw t-interval of two BLEU seeds
    c = d.clip(stats.difference_bounds((0.0, 100.0)))
    assert c.clipped and (c.ci_low, c.ci_high) == (-100.0, 100.0) and d.ci_high > 100
    assert stats.difference_bounds((0.0, None)) is None and d.clip(None) is d


def test_identical_seeds_are_marked():
    s = stats.summarize([1.0, 1.0])
    assert s.identical and (s.ci_low, s.ci_high) == (1.0, 1.0)
    assert not stats.summarize([1.0, 0.5]).identical and not stats.summarize([1.0]).identical
    from benchmarks.report.format import fmt_ci
    assert fmt_ci(s.ci_low, s.ci_high, s.n, identical=s.identical) == "n=2, identical"
    assert fmt_ci(0.5, 1.0, 3, clipped=True) == "[0.5, 1] (clipped)"
