"""BLEU by sentence length (issue 52, translation): quantile bins that cover every length once, and
each bin's corpus BLEU recomputed from the sentences' statistics."""

from __future__ import annotations

import numpy as np
import pytest

from benchmarks.report.by_length import bleu_by_length, doubling_bins, length_bins
from benchmarks.run.items import Items, bleu_from_stats


def test_bins_cover_every_length_once():
    rng = np.random.default_rng(0)
    for _ in range(20):
        lengths = rng.integers(3, 40, int(rng.integers(5, 300)))
        bins = length_bins(lengths)
        covered = [n for lo, hi in bins for n in range(lo, hi + 1)]
        assert covered == list(range(int(lengths.min()), int(lengths.max()) + 1)) and 1 <= len(bins) <= 5


def test_each_bin_is_the_corpus_bleu_of_its_sentences():
    rng = np.random.default_rng(1)
    rows = []
    for _ in range(40):
        n = int(rng.integers(4, 20))
        rows.append([n, n, *(int(rng.integers(0, n - k + 1)) for k in range(4)), n, n - 1, n - 2, n - 3])
    stats = np.array(rows, dtype=np.int64)
    fields = ("sys_len", "ref_len") + tuple(f"m{i}" for i in range(8))
    items = {0: Items("sentence", np.arange(40), stats, None, None, fields, "bleu")}
    bins = length_bins(stats[:, 1])
    got = bleu_by_length(items, bins)
    for (lo, hi), cell in zip(bins, got):
        want = bleu_from_stats(stats[(stats[:, 1] >= lo) & (stats[:, 1] <= hi)])
        assert cell[0] == pytest.approx(want) and cell[1] == cell[2] == pytest.approx(want)


def _corpus(rng, lengths, quality) -> np.ndarray:
    """(n, 10) BLEU statistics of sentences of these lengths whose n-gram precision is ``quality(length)``."""
    rows = []
    for L in map(int, lengths):
        q = quality(L)
        rows.append([L, L, *(int(rng.binomial(L - k, q)) for k in range(4)), L, L - 1, L - 2, L - 3])
    return np.array(rows, dtype=np.int64)


def _items(stats_by_seed):
    fields = ("sys_len", "ref_len") + tuple(f"m{i}" for i in range(8))
    return {s: Items("sentence", np.arange(len(st)), st, None, None, fields, "bleu") for s, st in stats_by_seed.items()}


def test_a_gap_that_grows_with_length_is_said_to_widen_and_no_gap_is_not():
    from benchmarks.report.by_length import gap_by_length, length_statement

    rng = np.random.default_rng(2)
    lengths = rng.integers(4, 31, 400)  # one test set: every seed translates the same sentences
    base = {s: _corpus(np.random.default_rng(10 + s), lengths, lambda L: 0.9) for s in range(3)}
    # the same sentences (same lengths); b loses precision as sentences grow, a keeps it
    worse = {s: st.copy() for s, st in base.items()}
    for st in worse.values():
        for row in st:
            L = row[1]
            row[2:6] = [rng.binomial(L - k, max(0.9 - 0.025 * L, 0.05)) for k in range(4)]
    a, b = _items(base), _items(worse)
    bins = length_bins(base[0][:, 1])
    gaps = gap_by_length(a, b, bins, resamples=300)
    text = length_statement("a", "b", bins, gaps)
    assert gaps[-1].low > gaps[0].high and "widens with sentence length" in text and "behind in none" in text
    same = length_statement("a", "a", bins, gap_by_length(a, a, bins, resamples=300))
    assert "ahead in 0 of" in same and "no significant change" in same


def test_doubling_bins_cover_every_distance_once_and_merge_thin_tails():
    rng = np.random.default_rng(3)
    for _ in range(20):
        lengths = np.concatenate([rng.geometric(0.4, int(rng.integers(200, 3000))), np.zeros(30, np.int64)])
        bins = doubling_bins(lengths, min_units=50)
        covered = [n for lo, hi in bins for n in range(lo, hi + 1)]
        assert covered == list(range(1, int(lengths.max()) + 1))  # the roots (0) left out
        counts = [((lengths >= lo) & (lengths <= hi)).sum() for lo, hi in bins]
        assert all(c >= 50 for c in counts[1:])
    assert doubling_bins(np.array([1] * 200 + [2] * 200 + [3] * 200 + [7] * 200 + [40] * 200), 100) == [
        (1, 1), (2, 2), (3, 4), (5, 32), (33, 40)]  # 9-16 and 17-32 hold none: joined to 5-8


def _tokens(correct_p, distances, seed):
    """A POS test set's items: one sentence per 10 tokens, correctness drawn with P = correct_p(distance)."""
    from benchmarks.run.items import Items

    rng = np.random.default_rng(seed)
    n = len(distances)
    values = rng.random(n) < np.vectorize(correct_p)(distances)
    return Items("token", np.arange(n), values, "sentence", np.arange(n) // 10, None, "acc", "head_distance", distances)


def test_accuracy_by_dependency_length_finds_a_model_that_falls_beyond_its_reach():
    """A tagger that is right 97% of the time up to 3 words from the head and 60% beyond, against one
    right 97% everywhere: behind only in the far bins, and the gap is said to widen (in points)."""
    from benchmarks.report.by_length import AXES, gap_by_length, length_statement, score_by_bin

    axis = AXES[1]
    distances = np.random.default_rng(4).geometric(0.3, 6000)
    near = {s: _tokens(lambda d: 0.97 if d <= 3 else 0.6, distances, 10 + s) for s in range(3)}
    far = {s: _tokens(lambda d: 0.97, distances, 20 + s) for s in range(3)}
    bins = axis.bins(near[0])
    assert bins[:3] == [(1, 1), (2, 2), (3, 4)]
    scores = score_by_bin(near, bins, axis)
    assert scores[0][0] == pytest.approx(97, abs=2) and scores[-1][0] == pytest.approx(60, abs=6)
    gaps = gap_by_length(near, far, bins, resamples=300, axis=axis)
    assert gaps[0].low < 0 < gaps[0].high and gaps[-1].high < -20  # points, not fractions
    text = length_statement("cnn", "bilstm", bins, gaps, axis=axis)
    assert "points" in text and "narrows with dependency length" in text and "ahead in 0" in text


def test_frame_accuracy_by_input_length_bins_the_inputs_not_the_frames():
    """Frame tagging: each frame's length is its input's; the bins are quintiles over inputs (one
    length each, not weighted by frames), and a model that fails on long inputs is behind there."""
    from benchmarks.report.by_length import AXES, gap_by_length, length_statement, score_by_bin
    from benchmarks.run.items import Items

    axis = AXES[2]
    rng = np.random.default_rng(5)
    sizes = rng.integers(1000, 5001, 60)  # 60 test inputs
    group_of = np.repeat(np.arange(60), sizes)
    length = np.repeat(sizes, sizes)

    def items(p_of_length, seed):
        r = np.random.default_rng(seed)
        values = r.random(len(group_of)) < p_of_length(length)
        return Items("frame", np.arange(len(values)), values, "utterance", group_of, None, "acc")

    steady = {s: items(lambda L: np.full(L.shape, 0.95), 30 + s) for s in range(3)}
    fading = {s: items(lambda L: np.where(L > 3500, 0.7, 0.95), 40 + s) for s in range(3)}
    first = steady[0]
    assert (axis.of(first) == length).all()
    bins = axis.bins(first)
    assert bins == length_bins(sizes) and len(bins) == 5
    per_bin = [int(((sizes >= lo) & (sizes <= hi)).sum()) for lo, hi in bins]
    assert min(per_bin) >= 10  # inputs, about a fifth each
    assert score_by_bin(fading, bins, axis)[-1][0] == pytest.approx(70, abs=3)
    gaps = gap_by_length(fading, steady, bins, resamples=300, axis=axis)
    assert gaps[0].low < 0 < gaps[0].high and gaps[-1].high < -15 and gaps[-1].unit == "utterance"
    assert "frames" in length_statement("a", "b", bins, gaps, axis=axis)


def test_a_length_crossover_is_placed_like_a_sweeps_and_named_by_bins():
    """Ahead on short dependencies, behind on long ones: the crossover lies between the bins where each
    holds, and the statement names the bins in words; a gap that never flips says so."""
    from benchmarks.report.by_length import AXES, gap_by_length, length_crossover

    axis = AXES[1]
    distances = np.random.default_rng(6).geometric(0.25, 8000)
    a = {s: _tokens(lambda d: 0.99 if d <= 2 else 0.75, distances, 50 + s) for s in range(3)}
    b = {s: _tokens(lambda d: 0.9, distances, 60 + s) for s in range(3)}
    bins = axis.bins(a[0])
    c = length_crossover(bins, gap_by_length(a, b, bins, resamples=300, axis=axis), "a", "b", axis)
    assert c.at is not None and 2 <= c.at <= 4 and c.low <= c.at <= c.high
    assert "1 words" in c.statement and "significantly better" in c.statement
    same = length_crossover(bins, gap_by_length(b, b, bins, resamples=300, axis=axis), "b", "b", axis)
    assert same.at is None and "no significant difference" in same.statement
