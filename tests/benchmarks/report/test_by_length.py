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
