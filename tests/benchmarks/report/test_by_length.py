"""BLEU by sentence length (issue 52, translation): quantile bins that cover every length once, and
each bin's corpus BLEU recomputed from the sentences' statistics."""

from __future__ import annotations

import numpy as np
import pytest

from benchmarks.report.by_length import bleu_by_length, length_bins
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
    assert gaps[-1].low > gaps[0].high and "widens with length" in text and "behind in none" in text
    same = length_statement("a", "a", bins, gap_by_length(a, a, bins, resamples=300))
    assert "ahead in 0 of" in same and "no significant change" in same
