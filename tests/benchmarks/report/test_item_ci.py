"""The seeds x test items bootstrap (issue 51 item 2): degenerate cases exact, the item level alone
agrees with scipy.stats.bootstrap, the seed level widens it, examples are resampled whole, BLEU
from sentence statistics, and items that do not line up give no interval."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats as st

from benchmarks.report.item_ci import item_seed_interval
from benchmarks.run.items import Items


def _acc(values, group_of=None) -> Items:
    v = np.asarray(values, dtype=bool)
    return Items("token" if group_of is not None else "image", np.arange(v.size), v,
                 "sentence" if group_of is not None else None, None if group_of is None else np.asarray(group_of))


def test_degenerate_cases_are_exact():
    ones, zeros = _acc([1] * 50), _acc([0] * 50)
    got = item_seed_interval({0: ones, 1: ones}, {0: zeros, 1: zeros})
    assert (got.diff, got.low, got.high) == (1.0, 1.0, 1.0)
    same = item_seed_interval({0: ones, 1: zeros}, {0: ones, 1: zeros})
    assert (same.diff, same.low, same.high) == (0.0, 0.0, 0.0)


@pytest.mark.parametrize("seed", range(3))
def test_the_item_level_alone_agrees_with_scipy(seed):
    rng = np.random.default_rng(seed)
    a, b = rng.random(400) < 0.8, rng.random(400) < 0.7
    # the same outcomes on every seed: the seed level adds nothing, the interval is the items'
    got = item_seed_interval({s: _acc(a) for s in range(3)}, {s: _acc(b) for s in range(3)}, resamples=8000)
    ref = st.bootstrap(((a.astype(float) - b.astype(float)),), np.mean, confidence_level=0.95, method="percentile",
                       n_resamples=8000, random_state=seed).confidence_interval
    assert got.diff == pytest.approx(a.mean() - b.mean())
    assert got.low == pytest.approx(ref.low, abs=0.012) and got.high == pytest.approx(ref.high, abs=0.012)


def test_seeds_that_disagree_widen_the_interval():
    rng = np.random.default_rng(5)
    base = rng.random(2000) < 0.75
    ref = {s: _acc(base) for s in range(4)}
    steady = item_seed_interval({s: _acc(base) for s in range(4)}, ref)
    noisy = {s: _acc(np.where(rng.random(2000) < 0.1 * s, ~base, base)) for s in range(4)}  # seed s flips 10s%
    wide = item_seed_interval(noisy, ref)
    assert (wide.high - wide.low) > (steady.high - steady.low) + 0.02


def test_tokens_are_resampled_by_sentence():
    # 100 sentences of 10 tokens: a sentence is all right or all wrong, so the tokens are not independent
    sent = np.repeat(np.arange(100), 10)
    rng = np.random.default_rng(1)
    ok = np.repeat(rng.random(100) < 0.6, 10)
    by_sentence = item_seed_interval({0: _acc(ok, sent), 1: _acc(ok, sent)}, {0: _acc(~ok, sent), 1: _acc(~ok, sent)})
    by_token = item_seed_interval({0: _acc(ok), 1: _acc(ok)}, {0: _acc(~ok), 1: _acc(~ok)})
    assert by_sentence.unit == "sentence" and by_sentence.examples == 100
    assert (by_sentence.high - by_sentence.low) > 2.5 * (by_token.high - by_token.low)


def test_bleu_from_sentence_statistics():
    from benchmarks.run.items import bleu_from_stats

    rng = np.random.default_rng(2)
    rows = []
    for _ in range(60):
        n = int(rng.integers(5, 15))
        m = [int(rng.integers(max(0, n - 4 - k), n - k + 1)) for k in range(4)]
        rows.append([n, n, *m, n, n - 1, n - 2, n - 3])
    good = np.array(rows, dtype=np.int64)
    worse = good.copy()
    worse[:, 2:6] = np.maximum(worse[:, 2:6] - 2, 0)
    fields = ("sys_len", "ref_len") + tuple(f"m{i}" for i in range(8))
    mk = lambda r: Items("sentence", np.arange(len(r)), r, None, None, fields, "bleu")  # noqa: E731
    got = item_seed_interval({0: mk(good), 1: mk(good)}, {0: mk(worse), 1: mk(worse)}, resamples=500)
    assert got.diff == pytest.approx(bleu_from_stats(good) - bleu_from_stats(worse))
    assert 0 < got.low < got.diff < got.high


def test_items_that_do_not_line_up_give_none():
    a = _acc([1, 0, 1, 1])
    other = Items("image", np.array([0, 1, 2, 5]), np.array([1, 0, 1, 1], dtype=bool))
    assert item_seed_interval({0: a, 1: a}, {0: other, 1: other}) is None
    assert item_seed_interval({0: a}, {0: a}) is None  # one common seed


@pytest.mark.parametrize("scale", [1, 10**6])  # sums below 2**24 (float32, exact) and above (float64)
def test_the_drawn_sums_are_exact(scale):
    from benchmarks.report.item_ci import _draws, _drawn

    w, _ = _draws(300, 3, 500, 0)
    x = np.random.default_rng(scale).integers(0, 40, size=(300, 5)) * scale  # (C, M) integer statistics
    want = w.astype(np.int64) @ x  # integer arithmetic: the exact sums
    got = _drawn(w, x)
    assert got.dtype == np.float64 and np.array_equal(got, want.astype(np.float64))
