"""Batch samplers that are aware of the distributed rank.

Under a distributed strategy (``trainer.devices > 1`` or ``num_nodes > 1``) every rank must
read a disjoint shard of each epoch. Lightning's own remedy (re-instantiating a custom batch
sampler around a ``DistributedSampler``) breaks :class:`BucketBatchSampler`, whose first
argument is the list of lengths, not a sampler. So these samplers shard themselves and the
Trainer must be built with ``use_distributed_sampler=False``; a sampler that Lightning tries
to re-instantiate refuses loudly instead of training every rank on the same data.

Sharding: every rank computes the epoch's full batch list exactly as one process would (same
seed, same length buckets), then keeps batches ``rank::world_size``. With ``even`` (training)
the list is first padded by repeating its first batches up to a multiple of ``world_size``,
as ``DistributedSampler`` does: every rank then runs the same number of steps, which DDP's
gradient all-reduce requires, and no sample is skipped (at most ``world_size - 1`` batches
are seen twice per epoch). Without ``even`` (evaluation) nothing is repeated, so every sample
is evaluated exactly once and a sample-weighted ``sync_dist`` mean is exact; only when there
are fewer batches than ranks are the first batches repeated so that no rank is left empty
(an empty rank would never join the metric reduction). One process (no initialised
``torch.distributed``) gives the unsharded batches, unchanged.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Iterable, Iterator, Sequence

import torch
import torch.distributed as dist
from torch.utils.data import Sampler

if TYPE_CHECKING:
    from tasks.common.buckets import LengthBuckets

__all__ = ["rank_and_world", "shard_batches", "BucketBatchSampler", "ShardedBatchSampler"]

_USE_OWN_SHARDING = (
    "{cls} shards itself across ranks (each rank a disjoint share of the same length-bucketed epoch) "
    "and cannot be rebuilt around Lightning's DistributedSampler; build the Trainer with "
    "use_distributed_sampler=False"
)


def rank_and_world() -> tuple[int, int]:
    """``(rank, world_size)`` of the initialised default process group, else ``(0, 1)``."""
    if dist.is_available() and dist.is_initialized():
        return dist.get_rank(), dist.get_world_size()
    return 0, 1


def _padded_total(n: int, world_size: int, even: bool) -> int:
    """How many batches the padded epoch holds (see :func:`shard_batches`)."""
    if world_size == 1 or n == 0:
        return n
    return -(-n // world_size) * world_size if even else max(n, world_size)


def shard_batches(batches: Sequence[list[int]], rank: int, world_size: int, *, even: bool) -> list[list[int]]:
    """Rank ``rank``'s share of ``batches``: ``batches[rank::world_size]`` after padding with
    the first batches (to a multiple of ``world_size`` when ``even``, else only up to one batch
    per rank). ``world_size == 1`` returns the batches unchanged."""
    if world_size < 1 or not 0 <= rank < world_size:
        raise ValueError(f"rank={rank}, world_size={world_size}; need 0 <= rank < world_size")
    out = list(batches)
    target = _padded_total(len(out), world_size, even)
    while len(out) < target:  # a loop: fewer batches than ranks may need the list more than twice
        out += out[: target - len(out)]
    return out[rank::world_size]


class _RankAware(Sampler[list[int]]):
    """Shared rank handling: explicit ``rank``/``world_size``, else read from
    ``torch.distributed`` each time batches are drawn (the loader may be built before the
    process group exists)."""

    def _init_rank(self, rank: int | None, world_size: int | None, even: bool) -> None:
        if (rank is None) != (world_size is None):
            raise ValueError("give both rank and world_size, or neither (then torch.distributed decides)")
        if world_size is not None:
            shard_batches([], rank, world_size, even=even)  # validates the pair
        self.rank, self.world_size, self.even = rank, world_size, bool(even)

    def _shard(self, batches: list[list[int]]) -> list[list[int]]:
        rank, world = (self.rank, self.world_size) if self.world_size is not None else rank_and_world()
        return shard_batches(batches, rank, world, even=self.even)


class BucketBatchSampler(_RankAware):
    """Batches of similar length, so that little compute goes to padding.

    Indices are sorted by length inside pools of ``pool_batches`` batches (shuffled first when
    ``shuffle``), cut into batches of at most ``batch_size`` items and, with ``max_tokens``,
    at most ``max_tokens`` padded tokens (``len(batch) * longest``); the batch order is then
    shuffled. The shuffle is seeded by ``seed`` and the epoch (:meth:`set_epoch`, or advanced
    automatically each ``__iter__``), so runs are repeatable. Under ``torch.distributed`` a
    rank gets its shard of those batches (module docstring; ``even`` for training).

    With ``buckets`` (:class:`~tasks.common.buckets.LengthBuckets`) the batches are cut per fixed
    bucket instead, each of the bucket's batch size, so that padded shapes repeat; ``fill``
    (training) completes a bucket's last, short batch with the bucket's first items of the
    epoch again (seen twice then), so every training batch of a bucket has one shape.
    """

    def __init__(
        self,
        lengths: Sequence[int],
        batch_size: int,
        *,
        max_tokens: int | None = None,
        shuffle: bool = True,
        seed: int = 0,
        pool_batches: int = 50,
        drop_last: bool = False,
        even: bool = True,
        rank: int | None = None,
        world_size: int | None = None,
        buckets: "LengthBuckets | None" = None,
        fill: bool = False,
    ) -> None:
        if isinstance(lengths, Sampler):  # Lightning's re-instantiation: BucketBatchSampler(sampler, batch_size=...)
            raise TypeError(_USE_OWN_SHARDING.format(cls=type(self).__name__))
        if batch_size < 1:
            raise ValueError(f"batch_size={batch_size}; must be >= 1")
        if max_tokens is not None and max_tokens < 1:
            raise ValueError(f"max_tokens={max_tokens}; must be >= 1 or None")
        self.lengths = [int(x) for x in lengths]
        self.batch_size = batch_size
        self.max_tokens = max_tokens
        self.shuffle = shuffle
        self.seed = seed
        self.pool = max(1, pool_batches) * batch_size
        self.drop_last = drop_last
        self.buckets, self.fill = buckets, bool(fill)
        self.epoch = 0
        self._auto_epoch = True
        self._init_rank(rank, world_size, even)

    def set_epoch(self, epoch: int) -> None:
        self.epoch = epoch
        self._auto_epoch = False

    def all_batches(self, epoch: int) -> list[list[int]]:
        """The epoch's batches over every rank: what a single process iterates."""
        n = len(self.lengths)
        g = torch.Generator().manual_seed(self.seed * 100003 + epoch)
        order = torch.randperm(n, generator=g).tolist() if self.shuffle else list(range(n))
        batches = self._per_bucket(order) if self.buckets is not None else self._pooled(order)
        if self.shuffle:
            perm = torch.randperm(len(batches), generator=g).tolist()
            batches = [batches[i] for i in perm]
        return batches

    def _per_bucket(self, order: list[int]) -> list[list[int]]:
        """Batches of fixed shape per bucket (class docstring), buckets in order."""
        assert self.buckets is not None
        groups: list[list[int]] = [[] for _ in self.buckets.bounds]
        for i in order:
            groups[self.buckets.index(self.lengths[i])].append(i)
        batches: list[list[int]] = []
        for k, items in enumerate(groups):
            size = self.buckets.batch_size(k, self.batch_size, self.max_tokens)
            for start in range(0, len(items), size):
                batch = items[start : start + size]
                if len(batch) < size and self.fill:
                    batch += (items * -(-size // len(items)))[: size - len(batch)]
                elif len(batch) < size and self.drop_last:
                    continue
                batches.append(batch)
        return batches

    def _pooled(self, order: list[int]) -> list[list[int]]:
        """Batches of similar length, cut from sorted pools (class docstring)."""
        n = len(order)
        batches: list[list[int]] = []
        for start in range(0, n, self.pool):
            pool = sorted(order[start : start + self.pool], key=lambda i: self.lengths[i])
            cur: list[int] = []
            longest = 0
            for i in pool:
                ln = max(self.lengths[i], 1)
                new_longest = max(longest, ln)
                too_many = len(cur) + 1 > self.batch_size
                too_long = self.max_tokens is not None and cur and (len(cur) + 1) * new_longest > self.max_tokens
                if cur and (too_many or too_long):
                    batches.append(cur)
                    cur, new_longest = [], ln
                cur.append(i)
                longest = new_longest
            if cur:
                batches.append(cur)
        if self.drop_last and batches and len(batches[-1]) < self.batch_size and self.max_tokens is None:
            batches = batches[:-1]
        return batches

    def _batches(self, epoch: int) -> list[list[int]]:
        return self._shard(self.all_batches(epoch))

    def __iter__(self) -> Iterator[list[int]]:
        batches = self._batches(self.epoch)
        if self._auto_epoch:
            self.epoch += 1
        return iter(batches)

    def __len__(self) -> int:
        return len(self._batches(self.epoch))


class ShardedBatchSampler(_RankAware):
    """A rank's shard of another batch sampler's batches (e.g. a plain ``BatchSampler`` over a
    ``RandomSampler``): every rank draws the full epoch from ``inner`` (all ranks must seed it
    alike) and keeps its share. It has no ``batch_size``/``drop_last``, so Lightning refuses to
    rebuild it unless ``use_distributed_sampler=False``, rather than training on wrong data."""

    def __init__(self, inner: Iterable[list[int]], *, even: bool = True,
                 rank: int | None = None, world_size: int | None = None) -> None:
        self.inner = inner
        self._init_rank(rank, world_size, even)

    def __iter__(self) -> Iterator[list[int]]:
        return iter(self._shard([list(b) for b in self.inner]))

    def __len__(self) -> int:
        rank, world = (self.rank, self.world_size) if self.world_size is not None else rank_and_world()
        return len(range(rank, _padded_total(len(self.inner), world, self.even), world))  # type: ignore[arg-type]
