"""Fixed length buckets: every batch of a sequence domain padded to one of a few lengths, so
batch shapes repeat (``trainer.compile: reduce-overhead`` records one CUDA graph per shape).

A bucket ``k`` has a padded length ``bounds[k]`` and a fixed batch size (``batch_size``, fewer
when ``max_tokens`` caps ``B * bounds[k]``); an item goes to the first bucket whose length holds
it. :class:`~tasks.common.sampling.BucketBatchSampler` cuts each bucket into batches of its size
(training fills a bucket's last, short batch with other items of that bucket, which are then
seen twice in that epoch) and the task's collate pads to the bucket's length
(:meth:`~tasks.common.data.SplitDataModule.pad_length`). The padding this costs is counted by
:func:`padding_cost`, next to what batches padded to their own longest item cost.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Sequence

__all__ = ["LengthBuckets", "padding_cost", "ROUND_TO", "DEFAULT_COUNT"]

#: padded lengths are multiples of this (tensor-core friendly; also fewer distinct lengths)
ROUND_TO = 8
#: with ``max_tokens``, every multiple of :data:`ROUND_TO` is a candidate length up to this many
#: (beyond, the lengths the items round up to: the programme is quadratic in the candidates)
MAX_GRID = 400
#: buckets when ``trainer.compile: reduce-overhead`` is set and ``trainer.length_buckets`` is not
DEFAULT_COUNT = 4


def _round_up(n: int, to: int = ROUND_TO) -> int:
    return max(to, -(-int(n) // to) * to)


def _items(length: int, batch_size: int, max_tokens: int | None) -> int:
    """Items per batch of padded ``length``: ``batch_size``, fewer when ``max_tokens`` caps the positions."""
    return batch_size if max_tokens is None else max(1, min(batch_size, max_tokens // length))


@dataclass(frozen=True)
class LengthBuckets:
    """Padded lengths, increasing. ``how``: how they were chosen (stored in the record)."""

    bounds: tuple[int, ...]
    how: str = "given"

    def __post_init__(self) -> None:
        b = self.bounds
        if not b or any(not isinstance(x, int) or x < 1 for x in b) or list(b) != sorted(set(b)):
            raise ValueError(f"length buckets {list(b)!r}: expected increasing integers >= 1")

    @classmethod
    def from_lengths(cls, train: Sequence[int], count: int, longest: int, batch_size: int | None = None,
                     max_tokens: int | None = None) -> "LengthBuckets":
        """At most ``count`` padded lengths, multiples of :data:`ROUND_TO`, that make a training
        epoch's padded positions fewest (an exact dynamic programme over the multiples the lengths
        round up to, or with ``max_tokens`` over every multiple, :data:`MAX_GRID`): each item padded to its bucket's length and, with ``batch_size``, each
        bucket's last batch filled to the bucket's batch size (:meth:`batch_size`). The last length
        is ``longest`` (over every split) rounded up, so no item is beyond it."""
        if count < 1:
            raise ValueError(f"length buckets: count={count}; must be >= 1")
        top = _round_up(max([longest, *train]))
        rounded = sorted({_round_up(n) for n in train} | {top})  # candidate bounds c_0 < ... < c_U-1
        if max_tokens is not None and batch_size is not None and (top - rounded[0]) // ROUND_TO < MAX_GRID:
            # capped batches: a longer bound holds fewer items, so its filled last batch may cost less
            rounded = list(range(rounded[0], top + 1, ROUND_TO))
        pos = {c: i for i, c in enumerate(rounded)}
        cnt = [0] * len(rounded)
        for n in train:
            cnt[pos[_round_up(n)]] += 1
        pc = [0]  # prefix counts
        for c in cnt:
            pc.append(pc[-1] + c)

        def pad(i: int, j: int) -> int:  # positions of the items in candidates i..j padded to rounded[j]
            n = pc[j + 1] - pc[i]
            if batch_size is not None and n:
                size = _items(rounded[j], batch_size, max_tokens)
                n = -(-n // size) * size  # the last batch filled
            return rounded[j] * n

        u = len(rounded)
        best = [pad(0, j) for j in range(u)]  # best[j]: one bucket ending at j
        cut: list[list[int]] = [[j] for j in range(u)]
        for _ in range(1, min(count, u)):
            nxt, ncut = best[:], [c[:] for c in cut]
            for j in range(u):
                for i in range(j):
                    v = best[i] + pad(i + 1, j)
                    if v < nxt[j]:
                        nxt[j], ncut[j] = v, cut[i] + [j]
            best, cut = nxt, ncut
        return cls(tuple(rounded[j] for j in cut[u - 1]), how=f"at most {count} lengths, multiples of {ROUND_TO}, "
                   "with the fewest padded positions in a training epoch (filled last batches included); the "
                   "last holds the longest item of any split")

    @classmethod
    def given(cls, bounds: Sequence[int], longest: int) -> "LengthBuckets":
        """Explicit padded lengths; one more, ``longest`` rounded up, when some item is beyond them."""
        b = sorted(set(int(x) for x in bounds))
        if longest > b[-1]:
            b.append(_round_up(longest))
        return cls(tuple(b), how="given (trainer.length_buckets)" + (
            f"; {b[-1]} added for the longest item" if len(b) > len(set(bounds)) else ""))

    def index(self, n: int) -> int:
        """The bucket of an item of length ``n`` (the last one for anything longer)."""
        for k, b in enumerate(self.bounds):
            if n <= b:
                return k
        return len(self.bounds) - 1

    def pad_length(self, n: int) -> int:
        """The padded length of a batch whose longest item has ``n`` positions."""
        return max(self.bounds[self.index(n)], n)

    def batch_shapes(self, batches: Sequence[Sequence[int]], lengths: Sequence[int]) -> set[tuple[int, int]]:
        """The distinct ``(items, padded length)`` of ``batches`` (item indices into ``lengths``)."""
        return {(len(b), self.pad_length(max(int(lengths[i]) for i in b))) for b in batches if len(b)}

    def batch_size(self, k: int, batch_size: int, max_tokens: int | None) -> int:
        """Items per batch in bucket ``k``: ``batch_size``, fewer when ``max_tokens`` caps the padded tokens."""
        return _items(self.bounds[k], batch_size, max_tokens)


def padding_cost(batches: Sequence[Sequence[int]], lengths: Sequence[int],
                 buckets: LengthBuckets | None) -> dict[str, float | int]:
    """What an epoch's ``batches`` (item indices into ``lengths``) cost in positions: ``positions``,
    the items' own (each item once); ``padded``, the batches as collated (each to its bucket's
    length, or to its longest item); ``repeated``, the positions of items seen again (a bucket's
    filled last batch); ``overhead = padded / positions - 1``, padding and repeats together."""
    seen: set[int] = set()
    positions = padded = repeated = 0
    for batch in batches:
        ls = [int(lengths[i]) for i in batch]
        longest = max(ls) if ls else 0
        padded += len(ls) * (buckets.pad_length(longest) if buckets else longest)
        for i, n in zip(batch, ls):
            if i in seen:
                repeated += n
            else:
                seen.add(i)
                positions += n
    return {"positions": positions, "padded": padded, "repeated": repeated,
            "overhead": round(padded / positions - 1, 4) if positions else 0.0}
