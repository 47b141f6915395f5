"""Fixed length buckets (tasks/common/buckets.py) and the bucket mode of ``BucketBatchSampler``
(tasks/common/sampling.py), on fresh seeded random inputs: ``from_lengths`` is the brute-force
optimum, ``given``/``index``/``pad_length``/``batch_size``/``padding_cost`` on hand-made cases,
the training epoch (``fill``) of fixed shapes, the evaluation epoch (each item once), the seed,
the shards of several ranks, ``pad_fields(length=)``, and the sampler without buckets unchanged."""

from __future__ import annotations

import itertools
import random
from collections import Counter

import pytest
import torch

from tasks.common.buckets import ROUND_TO, LengthBuckets, padding_cost
from tasks.common.padding import pad_fields, pad_sequences
from tasks.common.sampling import BucketBatchSampler


def _round_up(n: int) -> int:
    return max(ROUND_TO, -(-n // ROUND_TO) * ROUND_TO)


def _cost(lengths: list[int], bounds: tuple[int, ...]) -> int:
    """Padded positions beyond the items: each item padded to the first bound that holds it."""
    return sum(next(b for b in bounds if b >= n) - n for n in lengths)


def _epoch_positions(lengths: list[int], bounds: tuple[int, ...], batch_size: int | None,
                     max_tokens: int | None) -> int:
    """A training epoch's padded positions: each item to its bucket's length and, with
    ``batch_size``, each bucket's last batch filled to the bucket's batch size."""
    counts = Counter(next(k for k, b in enumerate(bounds) if b >= n) for n in lengths)
    total = 0
    for k, n in counts.items():
        if batch_size is not None:
            size = batch_size if max_tokens is None else max(1, min(batch_size, max_tokens // bounds[k]))
            n = -(-n // size) * size
        total += bounds[k] * n
    return total


def _brute_force(lengths: list[int], count: int, longest: int, batch_size: int | None = None,
                 max_tokens: int | None = None) -> int:
    """The fewest epoch positions over EVERY set of at most ``count`` multiples of 8 whose largest
    is the top (``longest`` rounded up): all subsets of {8, 16, ..., top - 8}, the top added."""
    top = _round_up(max([longest, *lengths]))
    below = list(range(ROUND_TO, top, ROUND_TO))
    return min(_epoch_positions(lengths, (*sub, top), batch_size, max_tokens)
               for k in range(min(count - 1, len(below)) + 1) for sub in itertools.combinations(below, k))


def _random_lengths(rng: random.Random, n: int, top: int = 60) -> list[int]:
    shape = rng.choice(["uniform", "clustered", "skewed"])
    if shape == "uniform":
        return [rng.randint(1, top) for _ in range(n)]
    if shape == "clustered":
        centres = [rng.randint(1, top) for _ in range(rng.randint(1, 3))]
        return [min(top, max(1, rng.choice(centres) + rng.randint(-3, 3))) for _ in range(n)]
    return [min(top, 1 + int(rng.expovariate(1 / 12))) for _ in range(n)]


# ----------------------------------------------------------------------------- from_lengths
def _check_bounds(bounds: tuple[int, ...], count: int, lengths: list[int], longest: int) -> None:
    assert all(x % ROUND_TO == 0 for x in bounds), bounds
    assert list(bounds) == sorted(set(bounds)), bounds  # strictly increasing
    assert 1 <= len(bounds) <= count, (bounds, count)
    assert bounds[-1] >= longest and bounds[-1] == _round_up(longest), (bounds, longest)
    assert bounds[-1] >= max(lengths)


@pytest.mark.parametrize("seed", range(6))
def test_from_lengths_is_the_brute_force_optimum(seed: int) -> None:
    """Without a batch size: the fewest padded positions over every set of multiples of 8."""
    rng = random.Random(1000 + seed)
    for _ in range(60):
        lengths = _random_lengths(rng, rng.randint(1, 25))
        count = rng.randint(1, 4)
        longest = max(lengths) + rng.choice([0, 0, rng.randint(1, 12)])  # val/test may hold a longer item
        bounds = LengthBuckets.from_lengths(lengths, count, longest).bounds
        _check_bounds(bounds, count, lengths, longest)
        want = _brute_force(lengths, count, longest)
        assert _epoch_positions(lengths, bounds, None, None) == want, (lengths, count, longest, bounds, want)
        # the same optimum in padding beyond the items (positions minus the constant sum of lengths)
        assert _cost(lengths, bounds) == want - sum(lengths)


@pytest.mark.parametrize("seed", range(6))
def test_from_lengths_with_filled_batches_is_the_brute_force_optimum(seed: int) -> None:
    """With ``batch_size`` (each bucket's last batch filled, as the training sampler does): the
    fewest epoch positions over every set of multiples of 8, with and without ``max_tokens``."""
    rng = random.Random(2000 + seed)
    for _ in range(60):
        lengths = _random_lengths(rng, rng.randint(1, 25))
        count, bs = rng.randint(1, 4), rng.randint(1, 12)
        longest = max(lengths) + rng.choice([0, 0, rng.randint(1, 12)])
        bounds = LengthBuckets.from_lengths(lengths, count, longest, bs).bounds
        _check_bounds(bounds, count, lengths, longest)
        got = _epoch_positions(lengths, bounds, bs, None)
        assert got == _brute_force(lengths, count, longest, bs), (lengths, count, longest, bs, bounds)
        mt = rng.randint(8, 300)
        bounds = LengthBuckets.from_lengths(lengths, count, longest, bs, mt).bounds
        _check_bounds(bounds, count, lengths, longest)
        got = _epoch_positions(lengths, bounds, bs, mt)
        assert got == _brute_force(lengths, count, longest, bs, mt), (lengths, count, bs, mt)


def test_from_lengths_with_max_tokens_is_the_optimum_over_all_multiples_of_8() -> None:
    lengths, count, bs, mt = [5, 48, 48], 2, 100, 100
    bounds = LengthBuckets.from_lengths(lengths, count, 48, bs, mt).bounds
    assert _epoch_positions(lengths, (40, 48), bs, mt) == 176
    assert _epoch_positions(lengths, bounds, bs, mt) == _brute_force(lengths, count, 48, bs, mt) == 176, bounds


def test_from_lengths_small_cases_by_hand() -> None:
    # one bucket: everything to the top; two: 8 holds the short ones
    assert LengthBuckets.from_lengths([3, 5, 20], 1, 20).bounds == (24,)
    assert LengthBuckets.from_lengths([3, 5, 20], 2, 20).bounds == (8, 24)
    # a longer item in another split only raises the top bound
    assert LengthBuckets.from_lengths([3, 5, 20], 2, 33).bounds[-1] == 40
    # more buckets than distinct rounded lengths: no more bounds than those
    assert LengthBuckets.from_lengths([1, 2, 9], 4, 9).bounds == (8, 16)
    assert LengthBuckets.from_lengths([8, 8], 3, 8).bounds == (8,)
    with pytest.raises(ValueError, match="count=0"):
        LengthBuckets.from_lengths([3], 0, 3)


def test_bounds_must_increase() -> None:
    for bad in [(), (8, 8), (16, 8), (0, 8)]:
        with pytest.raises(ValueError, match="increasing integers"):
            LengthBuckets(bad)


# ----------------------------------------------------------------------------- given
def test_given_adds_a_bound_only_for_a_longer_item() -> None:
    b = LengthBuckets.given([8, 16], 16)
    assert b.bounds == (8, 16) and "added" not in b.how
    b = LengthBuckets.given([16, 8], 20)  # unsorted input; 20 does not fit: 24 added
    assert b.bounds == (8, 16, 24) and "24 added" in b.how
    assert LengthBuckets.given([10], 30).bounds == (10, 32)  # the added one is rounded up to 8
    assert LengthBuckets.given([8, 8, 12], 5).bounds == (8, 12)  # duplicates dropped
    assert LengthBuckets.given([100], 3).bounds == (100,)


# ----------------------------------------------------------------------------- index / pad_length / batch_size
def test_index_and_pad_length() -> None:
    b = LengthBuckets((8, 16, 32))
    cases = {1: (0, 8), 8: (0, 8), 9: (1, 16), 16: (1, 16), 17: (2, 32), 32: (2, 32), 40: (2, 40)}
    for n, (k, pad) in cases.items():
        assert b.index(n) == k, n
        assert b.pad_length(n) == pad, n  # beyond the last bound: the item's own length


def test_batch_size_with_and_without_max_tokens() -> None:
    b = LengthBuckets((8, 16, 32))
    assert [b.batch_size(k, 32, None) for k in range(3)] == [32, 32, 32]
    assert [b.batch_size(k, 32, 100) for k in range(3)] == [12, 6, 3]  # 100 // bound
    assert [b.batch_size(k, 5, 100) for k in range(3)] == [5, 5, 3]  # never above batch_size
    assert [b.batch_size(k, 32, 10) for k in range(3)] == [1, 1, 1]  # at least one item
    for k in range(3):  # a batch of that size fits max_tokens (when one item does)
        assert b.batch_size(k, 32, 100) * b.bounds[k] <= 100


# ----------------------------------------------------------------------------- padding_cost
def test_padding_cost_by_hand() -> None:
    lengths = [3, 5, 9, 12, 2]
    batches = [[0, 1], [2, 3], [4, 0]]  # item 0 seen twice (as in a filled last batch)
    b = LengthBuckets((8, 16))
    got = padding_cost(batches, lengths, b)
    # padded: [3,5] -> 2*8, [9,12] -> 2*16, [2,3] -> 2*8 = 64; positions 3+5+9+12+2 = 31; repeated 3
    assert got == {"positions": 31, "padded": 64, "repeated": 3, "overhead": round(64 / 31 - 1, 4)}
    plain = padding_cost(batches, lengths, None)  # each batch to its longest: 2*5 + 2*12 + 2*3 = 40
    assert plain == {"positions": 31, "padded": 40, "repeated": 3, "overhead": round(40 / 31 - 1, 4)}
    assert padding_cost([], lengths, b) == {"positions": 0, "padded": 0, "repeated": 0, "overhead": 0.0}
    # an item beyond the last bound is padded to itself
    assert padding_cost([[0, 1]], [20, 4], b)["padded"] == 40


# ----------------------------------------------------------------------------- pad_fields(length=)
def test_pad_to_at_least_length() -> None:
    seqs = [torch.tensor([1, 2, 3]), torch.tensor([4])]
    out, mask = pad_sequences(seqs, 0, 8)
    assert out.shape == (2, 8) and out.tolist() == [[1, 2, 3, 0, 0, 0, 0, 0], [4, 0, 0, 0, 0, 0, 0, 0]]
    assert mask.sum(1).tolist() == [3, 1] and mask.tolist()[0] == [True] * 3 + [False] * 5
    out2, mask2 = pad_sequences(seqs, 0, 2)  # shorter than the longest: the longest
    assert out2.shape == (2, 3) and torch.equal(mask2, mask[:, :3])
    assert torch.equal(pad_sequences(seqs, 0, None)[0], out2)
    (a, f), m = pad_fields([(torch.tensor([1, 2]), torch.ones(2, 3)), (torch.tensor([5]), torch.ones(1, 3))],
                           (9, -1.0), 4)
    assert a.tolist() == [[1, 2, 9, 9], [5, 9, 9, 9]] and f.shape == (2, 4, 3) and (f[~m] == -1).all()


# ----------------------------------------------------------------------------- the sampler in bucket mode
def _setup(seed: int, max_tokens: int | None = None) -> tuple[list[int], LengthBuckets, int]:
    rng = random.Random(seed)
    lengths = _random_lengths(rng, rng.randint(60, 200))
    # a rare long bucket (fewer items than a batch) exercises a fill that wraps around
    lengths += [rng.randint(61, 70) for _ in range(rng.randint(1, 3))]
    bs = rng.choice([5, 7, 16])
    buckets = LengthBuckets.from_lengths(lengths, 4, max(lengths), bs, max_tokens)  # as use_length_buckets
    return lengths, buckets, bs


def _groups(batches: list[list[int]], lengths: list[int], buckets: LengthBuckets) -> dict[int, list[list[int]]]:
    """Batches by bucket; every batch must lie in one bucket."""
    out: dict[int, list[list[int]]] = {}
    for b in batches:
        ks = {buckets.index(lengths[i]) for i in b}
        assert len(ks) == 1, f"batch {b} spans buckets {ks}"
        out.setdefault(ks.pop(), []).append(b)
    return out


def _check_filled_bucket(batches: list[list[int]], items: list[int], size: int) -> None:
    """One bucket's training batches: ``ceil(n / size)`` batches of exactly ``size`` items, every
    item at least once; all but one batch are disjoint and hold items seen once, and the last,
    short one (filled) is its own tail of ``n % size`` items, seen nowhere else, followed by the
    bucket's first items again: the first ``size - tail`` items of another batch (cyclically, all
    in the one batch, when the bucket has fewer items than ``size``)."""
    n = len(items)
    nb = -(-n // size)
    assert len(batches) == nb, (len(batches), n, size)
    assert all(len(b) == size for b in batches), [len(b) for b in batches]
    seen = Counter(i for b in batches for i in b)
    assert set(seen) == set(items)  # every item at least once
    tail = n - size * (nb - 1)
    if tail == size:  # no short batch: every item exactly once
        assert all(c == 1 for c in seen.values()), seen
        return
    if nb == 1:  # fewer items than a batch: the items, then the items again, cyclically
        (only,) = batches
        assert sorted(only[:n]) == sorted(items) and only == (only[:n] * size)[:size], only
        return
    for f in batches:
        for g in batches:
            if g is f or g[: size - tail] != f[tail:]:
                continue
            rest = [i for b in batches if b is not f for i in b] + f[:tail]
            if sorted(rest) == sorted(items):  # apart from f's fill, every item exactly once
                return
    raise AssertionError(f"no batch is a short tail filled with its bucket's first items: {batches}")


@pytest.mark.parametrize("max_tokens", [None, 64])
@pytest.mark.parametrize("seed", range(4))
def test_training_epoch_has_one_shape_per_bucket(seed: int, max_tokens: int | None) -> None:
    lengths, buckets, bs = _setup(seed, max_tokens)
    s = BucketBatchSampler(lengths, bs, max_tokens=max_tokens, seed=seed, pool_batches=3, buckets=buckets, fill=True)
    for epoch in range(3):
        batches = s.all_batches(epoch)
        groups = _groups(batches, lengths, buckets)
        for k, bk in groups.items():
            items = [i for i, n in enumerate(lengths) if buckets.index(n) == k]
            _check_filled_bucket(bk, items, buckets.batch_size(k, bs, max_tokens))
        assert set(groups) == {buckets.index(n) for n in lengths}
        shapes = {(len(b), buckets.pad_length(max(lengths[i] for i in b))) for b in batches}
        assert len(shapes) <= len(buckets.bounds), shapes
        assert {p for _, p in shapes} <= set(buckets.bounds)
        if max_tokens is not None:
            assert all(n * p <= max_tokens or n == 1 for n, p in shapes), shapes
        assert list(iter(s)) == batches  # __iter__ draws the same (auto epoch)


def test_training_fill_when_a_bucket_is_smaller_than_a_batch() -> None:
    lengths = [3, 4, 5, 6, 7, 30, 31]  # bucket (32) holds 2 items, batch size 5
    buckets = LengthBuckets((8, 32))
    s = BucketBatchSampler(lengths, 5, seed=1, buckets=buckets, fill=True)
    batches = s.all_batches(0)
    long = [b for b in batches if lengths[b[0]] > 8]
    assert len(long) == 1 and len(long[0]) == 5 and set(long[0]) == {5, 6}
    assert Counter(long[0]) in (Counter({5: 3, 6: 2}), Counter({5: 2, 6: 3}))
    assert [len(b) for b in batches] == [5, 5]


@pytest.mark.parametrize("max_tokens", [None, 64])
@pytest.mark.parametrize("seed", range(4))
def test_evaluation_epoch_sees_every_item_once(seed: int, max_tokens: int | None) -> None:
    lengths, buckets, bs = _setup(seed, max_tokens)
    s = BucketBatchSampler(lengths, bs, max_tokens=max_tokens, shuffle=False, even=False, seed=seed,
                           buckets=buckets, fill=False)
    batches = s.all_batches(0)
    assert sorted(i for b in batches for i in b) == list(range(len(lengths)))
    groups = _groups(batches, lengths, buckets)
    order = [buckets.index(lengths[b[0]]) for b in batches]
    assert order == sorted(order)  # unshuffled: buckets in order
    for k, bk in groups.items():
        size = buckets.batch_size(k, bs, max_tokens)
        assert all(len(b) == size for b in bk[:-1]) and 1 <= len(bk[-1]) <= size
    shapes = {(len(b), buckets.pad_length(max(lengths[i] for i in b))) for b in batches}
    assert len(shapes) <= 2 * len(buckets.bounds)
    assert s.all_batches(1) == batches  # evaluation: the same every epoch
    # drop_last without fill skips a bucket's short batch instead
    dropped = BucketBatchSampler(lengths, bs, max_tokens=max_tokens, shuffle=False, buckets=buckets, drop_last=True)
    for k, bk in _groups(dropped.all_batches(0), lengths, buckets).items():
        assert all(len(b) == buckets.batch_size(k, bs, max_tokens) for b in bk)


@pytest.mark.parametrize("seed", range(3))
def test_same_seed_same_batches(seed: int) -> None:
    lengths, buckets, bs = _setup(seed)

    def make(sd: int) -> BucketBatchSampler:
        return BucketBatchSampler(lengths, bs, seed=sd, buckets=buckets, fill=True)

    a, b = make(seed), make(seed)
    epochs_a = [list(iter(a)) for _ in range(3)]
    assert epochs_a == [list(iter(b)) for _ in range(3)]
    assert epochs_a[0] != epochs_a[1]  # the epoch reshuffles
    assert make(seed + 50).all_batches(0) != epochs_a[0]  # another seed, other batches
    c = make(seed)
    c.set_epoch(2)
    assert list(iter(c)) == epochs_a[2] and list(iter(c)) == epochs_a[2]  # set_epoch pins it


def _union_is_the_epoch(full: list[list[int]], shards: list[list[list[int]]], even: bool) -> None:
    """As in test_distributed_sampling.py: the ranks' batches are the epoch's batches, each once,
    plus only the documented padding (the first batches again); ``even``: equal shard lengths."""
    world = len(shards)
    got = Counter(tuple(b) for s in shards for b in s)
    total = -(-len(full) // world) * world if even else max(len(full), world)
    want = Counter(tuple(b) for b in (full * world)[:total])
    assert got == want
    assert sum(len(s) for s in shards) == total
    if even:
        assert len({len(s) for s in shards}) == 1
    assert all(s for s in shards)


@pytest.mark.parametrize("world", [2, 3])
@pytest.mark.parametrize("even,fill", [(True, True), (False, False)])
@pytest.mark.parametrize("seed", range(3))
def test_ranks_shard_the_bucketed_epoch(world: int, even: bool, fill: bool, seed: int) -> None:
    lengths, buckets, bs = _setup(seed)
    kw = dict(max_tokens=None, seed=seed, shuffle=fill, buckets=buckets, fill=fill)
    ref = BucketBatchSampler(lengths, bs, **kw)
    ranks = [BucketBatchSampler(lengths, bs, even=even, rank=r, world_size=world, **kw) for r in range(world)]
    for _ in range(2):
        full = list(iter(ref))
        lens = [len(s) for s in ranks]
        shards = [list(iter(s)) for s in ranks]
        assert [len(s) for s in shards] == lens
        assert all(isinstance(b, list) and b in full for sh in shards for b in sh)  # whole batches of the epoch
        _union_is_the_epoch(full, shards, even)
        if not even:  # evaluation: every item exactly once over all ranks
            assert sorted(i for s in shards for b in s for i in b) == list(range(len(lengths)))
        if not even:  # no batch on two ranks (as many batches as ranks at least, here)
            assert len({tuple(b) for sh in shards for b in sh}) == sum(len(sh) for sh in shards)


# ----------------------------------------------------------------------------- without buckets: unchanged
def _pre_bucket_all_batches(lengths: list[int], batch_size: int, *, max_tokens: int | None = None,
                            shuffle: bool = True, seed: int = 0, pool_batches: int = 50, drop_last: bool = False,
                            epoch: int = 0) -> list[list[int]]:
    """The frozen reference: ``BucketBatchSampler.all_batches`` as it was before length buckets
    (git 931f1bf, tasks/common/sampling.py), copied: sorted pools of ``pool_batches * batch_size``,
    cut by ``batch_size`` and ``max_tokens``, then shuffled with the same generator."""
    n, pool_size = len(lengths), max(1, pool_batches) * batch_size
    g = torch.Generator().manual_seed(seed * 100003 + epoch)
    order = torch.randperm(n, generator=g).tolist() if shuffle else list(range(n))
    batches: list[list[int]] = []
    for start in range(0, n, pool_size):
        pool = sorted(order[start : start + pool_size], key=lambda i: lengths[i])
        cur: list[int] = []
        longest = 0
        for i in pool:
            ln = max(lengths[i], 1)
            new_longest = max(longest, ln)
            too_many = len(cur) + 1 > batch_size
            too_long = max_tokens is not None and cur and (len(cur) + 1) * new_longest > max_tokens
            if cur and (too_many or too_long):
                batches.append(cur)
                cur, new_longest = [], ln
            cur.append(i)
            longest = new_longest
        if cur:
            batches.append(cur)
    if drop_last and batches and len(batches[-1]) < batch_size and max_tokens is None:
        batches = batches[:-1]
    if shuffle:
        perm = torch.randperm(len(batches), generator=g).tolist()
        batches = [batches[i] for i in perm]
    return batches


@pytest.mark.parametrize("seed", range(5))
def test_without_buckets_the_batches_are_those_of_before(seed: int) -> None:
    rng = random.Random(500 + seed)
    for _ in range(8):
        lengths = _random_lengths(rng, rng.randint(1, 300))
        kw = dict(max_tokens=rng.choice([None, None, 40, 150]), shuffle=rng.random() < 0.8, seed=rng.randint(0, 99),
                  pool_batches=rng.choice([1, 3, 50]), drop_last=rng.random() < 0.3)
        bs = rng.randint(1, 20)
        new = BucketBatchSampler(lengths, bs, **kw)
        explicit_none = BucketBatchSampler(lengths, bs, buckets=None, fill=True, **kw)  # fill means nothing then
        for epoch in range(2):
            want = _pre_bucket_all_batches(lengths, bs, epoch=epoch, **kw)
            assert new.all_batches(epoch) == want
            assert explicit_none.all_batches(epoch) == want


def test_without_buckets_a_pinned_small_epoch() -> None:
    """A literal pinned when this test was written (git 0ed9850), and checked then to equal the
    pre-bucket implementation's output (git 931f1bf, ``_pre_bucket_all_batches`` above)."""
    lengths = [5, 1, 9, 3, 7, 2, 8, 4, 6, 10, 3, 1]
    s = BucketBatchSampler(lengths, 3, seed=7, pool_batches=2)
    assert s.all_batches(0) == PINNED_EPOCH0
    s = BucketBatchSampler(lengths, 4, max_tokens=16, seed=2, pool_batches=50)
    assert s.all_batches(1) == PINNED_EPOCH1_MAX_TOKENS


#: computed at git 0ed9850 and, identically, by the pre-bucket sampler of git 931f1bf
PINNED_EPOCH0 = [[8, 4, 9], [11, 3, 10], [1, 5, 7], [0, 6, 2]]
PINNED_EPOCH1_MAX_TOKENS = [[6], [11, 1, 5, 10], [9], [8, 4], [2], [3, 7, 0]]
