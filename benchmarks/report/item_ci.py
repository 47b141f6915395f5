"""Intervals that include the test set's own sampling error (issue 51 item 2): a paired bootstrap
over test items **and** seeds, from the per-item outcomes beside each record
(:mod:`benchmarks.run.items`).

Each resample draws the seeds with replacement (from the seeds both models ran) and, independently,
the test examples with replacement (whole sentences for token accuracy, whole utterances for frame
accuracy, images, nodes, sentences for BLEU), the same draw for both models: the difference of the
two models' test metric, averaged over the drawn seeds, is one bootstrap value; the interval is the
percentile interval of 4000 of them. It covers the variance between seeds and the test set's
sampling error together (the t-interval over seeds covers the first only).

Written here rather than taken from ``scipy.stats.bootstrap``: scipy resamples one level (one axis
of independent observations), and this needs two crossed levels (seeds x test examples) with a
metric that is a ratio (tokens correct over tokens drawn) or corpus BLEU over the drawn sentences.
The draws are multinomial counts, so a resample is a weighted sum, vectorised with numpy.
"""

from __future__ import annotations

import functools
import warnings
from dataclasses import dataclass
from typing import Any

import numpy as np

__all__ = ["ItemInterval", "item_seed_interval", "model_items", "RESAMPLES"]

RESAMPLES = 4000


@dataclass(frozen=True)
class ItemInterval:
    """``a - b`` with its percentile interval over seeds and test examples."""

    diff: float
    low: float
    high: float
    seeds: int
    examples: int
    unit: str  # what was resampled: sentence, utterance, image, node, ...
    confidence: float

    @property
    def excludes_zero(self) -> bool:
        return self.low > 0 or self.high < 0


def model_items(records: list[dict[str, Any]]) -> dict[Any, Any]:
    """``{seed: Items}`` of a model's ok records that have test items (others left out)."""
    from benchmarks.run.items import load_items

    out = {}
    for rec in records:
        pointer = rec.get("items")
        if not isinstance(pointer, dict) or not rec.get("_path"):
            continue
        key = (str(rec["_path"]), str(pointer.get("sha256")))
        if key not in _CACHE:  # a report tests one model in several comparisons: read its items once
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")  # a missing sidecar: no bootstrap, the t-interval stands
                try:
                    _CACHE[key] = load_items(rec)
                except (OSError, ValueError, KeyError):
                    _CACHE[key] = None
        if _CACHE[key] is not None:
            out[rec.get("seed")] = _CACHE[key]
    return out


_CACHE: dict[tuple[str, str], Any] = {}


@functools.lru_cache(maxsize=12)
def _draws(n_clusters: int, n_seeds: int, resamples: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """The resamples' draws: how often each example and each seed is drawn (multinomial counts, as
    float32: exact up to 2**24; seeds as weights summing to 1). The same for every comparison on one
    test set (a page makes dozens on a dozen test sets), so computed once: read-only."""
    rng = np.random.default_rng(seed)
    w = rng.multinomial(n_clusters, np.full(n_clusters, 1.0 / n_clusters), size=resamples).astype(np.float32)
    v = rng.multinomial(n_seeds, np.full(n_seeds, 1.0 / n_seeds), size=resamples) / n_seeds
    w.flags.writeable = False
    v.flags.writeable = False
    return w, v


def _clusters(items: Any) -> tuple[np.ndarray, int, str]:
    """Each unit's cluster index (the example it belongs to) and the number of clusters."""
    if items.group_of is None:
        return np.arange(len(items.ids)), len(items.ids), items.unit
    _, index = np.unique(items.group_of, return_inverse=True)
    return index, int(index.max()) + 1 if index.size else 0, items.group or items.unit


def item_seed_interval(a: dict[Any, Any], b: dict[Any, Any], confidence: float = 0.95, *,
                       resamples: int = RESAMPLES, seed: int = 0) -> ItemInterval | None:
    """The bootstrap interval of ``metric(a) - metric(b)`` over the seeds both have and their test
    examples; None with fewer than 2 common seeds or when the items do not line up (other units,
    other test examples)."""
    # a page builds each comparison several times (headline, sections, When, predicts) and its tests
    # build the page many times: the items are the same objects (model_items keeps them), so an
    # interval is computed once per process; the entry holds the items, so their ids stay theirs
    key = (tuple((s, id(it)) for s, it in a.items()), tuple((s, id(it)) for s, it in b.items()), confidence,
           resamples, seed)
    if key not in _INTERVALS:
        _INTERVALS[key] = (list(a.values()), list(b.values()),
                           _item_seed_interval(a, b, confidence, resamples=resamples, seed=seed))
    return _INTERVALS[key][-1]


_INTERVALS: dict[Any, tuple[list[Any], list[Any], ItemInterval | None]] = {}


def _item_seed_interval(a: dict[Any, Any], b: dict[Any, Any], confidence: float, *, resamples: int,
                        seed: int) -> ItemInterval | None:
    seeds = sorted(set(a) & set(b), key=str)
    if len(seeds) < 2:
        return None
    first = a[seeds[0]]
    for s in seeds:
        for it in (a[s], b[s]):
            if it.unit != first.unit or not np.array_equal(it.ids, first.ids) or it.values.shape != first.values.shape:
                return None
    cluster, n_clusters, unit = _clusters(first)
    if n_clusters < 2:
        return None
    w, v = _draws(n_clusters, len(seeds), resamples, seed)  # (R, C) example counts, (R, S) seed weights
    series = [a[s] for s in seeds] + [b[s] for s in seeds]  # a's seeds, then b's
    if first.values.ndim == 2:  # BLEU: each example's statistics, (C, K) per series
        from benchmarks.run.items import bleu_from_stats, bleu_rows

        k = first.values.shape[1]
        stats = np.zeros((n_clusters, len(series) * k), dtype=np.int64)  # (C, 2S*K)
        for j, it in enumerate(series):
            np.add.at(stats[:, j * k:(j + 1) * k], cluster, it.values)
        drawn = _drawn(w, stats)  # (R, 2S*K): one pass over the draws for every series
        sums = stats.sum(0)
        metric = np.stack([bleu_rows(drawn[:, j * k:(j + 1) * k]) for j in range(len(series))], 1)  # (R, 2S)
        observed = np.array([bleu_from_stats(sums[j * k:(j + 1) * k]) for j in range(len(series))])  # (2S,)
    else:  # accuracy: units correct over units drawn; the units per example are the same for every series
        count = np.bincount(cluster, minlength=n_clusters).astype(np.float64)  # (C,)
        cols = [count] + [np.bincount(cluster, weights=it.values.astype(np.float64), minlength=n_clusters)
                          for it in series]
        drawn = _drawn(w, np.stack(cols, 1))  # (R, 1 + 2S)
        metric = drawn[:, 1:] / np.maximum(drawn[:, :1], 1.0)  # (R, 2S)
        total = np.stack(cols, 1).sum(0)
        observed = total[1:] / max(total[0], 1.0)
    n = len(seeds)
    diffs = metric[:, :n] - metric[:, n:]  # (R, S)
    boot = (diffs * v).sum(axis=1)  # (R,) each resample's seeds, drawn with replacement
    tail = (1.0 - confidence) / 2.0
    low, high = np.quantile(boot, [tail, 1.0 - tail])
    observed = observed[:n] - observed[n:]
    return ItemInterval(float(np.mean(observed)), float(low), float(high), len(seeds), n_clusters, unit, confidence)


def _drawn(w: np.ndarray, x: np.ndarray) -> np.ndarray:
    """``w @ x`` in float64: (R, C) counts times (C, M) integer statistics per example; in float32
    (half the memory traffic) when every sum is an integer below 2**24, so exact either way."""
    if np.all(x >= 0) and float(x.max(initial=0)) * w.shape[1] < 2.0 ** 24 and np.array_equal(x, np.round(x)):
        return (w @ x.astype(np.float32)).astype(np.float64)
    return w.astype(np.float64) @ x.astype(np.float64)
