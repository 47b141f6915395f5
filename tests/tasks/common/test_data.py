"""tasks.common.data: materialize into the cache, length buckets, padding, SplitDataModule
and the training-set fraction."""

from __future__ import annotations

import gzip
import os
import stat

import pytest
import torch
from torch.utils.data import TensorDataset

from tasks.common.data import (
    BucketBatchSampler,
    SplitDataModule,
    materialize,
    pad_sequences,
    subset_indices,
    tensor_checksum,
)


# ----------------------------------------------------------------------------- materialize
def _read_only_tree(root):
    for p in root.rglob("*"):
        p.chmod(p.stat().st_mode & ~(stat.S_IWUSR | stat.S_IWGRP | stat.S_IWOTH))


def test_materialize_copies_and_gunzips_without_touching_the_source(tmp_path):
    src = tmp_path / "data" / "ds"
    src.mkdir(parents=True)
    (src / "a.txt").write_text("plain\n")
    with gzip.open(src / "b.txt.gz", "wt") as fh:
        fh.write("zipped\n")
    _read_only_tree(tmp_path / "data")
    before = {p: p.stat().st_mtime_ns for p in src.iterdir()}
    dest = materialize(["a.txt", "b.txt"], subdir="ds", data_dir=tmp_path / "data", cache_dir=tmp_path / "cache",
                       dataset="demo")
    assert dest == tmp_path / "cache" / "ds"
    assert (dest / "a.txt").read_text() == "plain\n" and (dest / "b.txt").read_text() == "zipped\n"
    assert os.access(dest / "a.txt", os.W_OK)  # the cached copy is writable
    assert {p: p.stat().st_mtime_ns for p in src.iterdir()} == before
    assert not [p for p in dest.iterdir() if ".tmp" in p.name]
    # a second call with no data dir uses the cache
    assert materialize(["a.txt", "b.txt"], subdir="ds", data_dir=None, cache_dir=tmp_path / "cache", dataset="demo") == dest


def test_materialize_names_the_missing_file(tmp_path):
    (tmp_path / "data" / "ds").mkdir(parents=True)
    with pytest.raises(FileNotFoundError, match=r"demo: missing .*data/ds/gone\.txt\[\.gz\]; no download"):
        materialize(["gone.txt"], subdir="ds", data_dir=tmp_path / "data", cache_dir=tmp_path / "c", dataset="demo")

    def offline(dest):
        raise OSError("network is unreachable")

    with pytest.raises(FileNotFoundError, match=r"download into .* failed \(OSError: network is unreachable\)"):
        materialize(["gone.txt"], subdir="ds", data_dir=None, cache_dir=tmp_path / "c", dataset="demo", download=offline)


def test_materialize_downloads_into_the_cache(tmp_path):
    calls = []

    def fetch(dest):
        calls.append(dest)
        (dest / "x.bin").write_bytes(b"123")

    dest = materialize(["x.bin"], subdir="d", data_dir=None, cache_dir=tmp_path, dataset="demo", download=fetch)
    assert (dest / "x.bin").read_bytes() == b"123" and calls == [dest]
    materialize(["x.bin"], subdir="d", data_dir=None, cache_dir=tmp_path, dataset="demo", download=fetch)
    assert len(calls) == 1  # cached: no second download


# ----------------------------------------------------------------------------- batching
def test_pad_sequences_values_and_mask():
    seqs = [torch.tensor([1, 2, 3]), torch.tensor([4]), torch.tensor([5, 6])]
    out, mask = pad_sequences(seqs, pad_value=-1)
    assert out.tolist() == [[1, 2, 3], [4, -1, -1], [5, 6, -1]]
    assert mask.tolist() == [[True, True, True], [True, False, False], [True, True, False]]
    feats = [torch.randn(2, 3), torch.randn(4, 3)]
    out, mask = pad_sequences(feats)
    assert out.shape == (2, 4, 3) and torch.equal(out[0, :2], feats[0]) and out[0, 2:].abs().sum() == 0


@pytest.mark.parametrize("max_tokens", [None, 40])
def test_bucket_sampler_covers_every_index_once_and_groups_lengths(max_tokens):
    g = torch.Generator().manual_seed(0)
    lengths = torch.randint(1, 30, (503,), generator=g).tolist()
    s = BucketBatchSampler(lengths, 16, max_tokens=max_tokens, shuffle=True, seed=3, pool_batches=8)
    batches = list(iter(s))
    flat = sorted(i for b in batches for i in b)
    assert flat == list(range(503))
    assert all(1 <= len(b) <= 16 for b in batches)
    if max_tokens is not None:
        assert all(len(b) == 1 or len(b) * max(lengths[i] for i in b) <= max_tokens for b in batches)
    # bucketing: far less padding than random batches of the same sizes
    pad = sum(len(b) * max(lengths[i] for i in b) - sum(lengths[i] for i in b) for b in batches)
    rnd = torch.randperm(503, generator=g).tolist()
    pos, rpad = 0, 0
    for b in batches:
        rb = rnd[pos:pos + len(b)]
        pos += len(b)
        rpad += len(rb) * max(lengths[i] for i in rb) - sum(lengths[i] for i in rb)
    assert pad < 0.5 * rpad


def test_bucket_sampler_is_seeded_and_changes_per_epoch():
    lengths = list(range(1, 101))
    a, b = BucketBatchSampler(lengths, 8, seed=1), BucketBatchSampler(lengths, 8, seed=1)
    e0a, e0b = list(iter(a)), list(iter(b))
    assert e0a == e0b
    assert list(iter(a)) != e0a  # the next epoch is shuffled differently
    a.set_epoch(0)
    assert list(iter(a)) == e0a
    assert list(iter(BucketBatchSampler(lengths, 8, shuffle=False))) == list(iter(BucketBatchSampler(lengths, 8, shuffle=False)))
    with pytest.raises(ValueError, match="batch_size=0"):
        BucketBatchSampler(lengths, 0)


# ----------------------------------------------------------------------------- DataModule
class _Seqs(SplitDataModule):
    def load(self):
        g = torch.Generator().manual_seed(0)
        mk = lambda n: [torch.randint(0, 9, (int(torch.randint(1, 12, (1,), generator=g)),), generator=g) for _ in range(n)]
        return {"train": mk(100), "val": mk(20), "test": mk(20)}

    def collate(self, items):
        return pad_sequences(items)

    def length(self, item):
        return len(item)


def test_split_datamodule_limit_train_and_checksum():
    dm = _Seqs(batch_size=8)
    full = dm.checksum()
    assert dm.info == {"num_train": 100, "num_val": 20, "num_test": 20}
    assert _Seqs(batch_size=8).checksum() == full  # the same data, the same checksum
    n = dm.limit_train(0.25, seed=7)
    assert n == 25 and dm.info["num_train"] == 25 and len(dm.splits["train"]) == 25
    assert dm.checksum() != full
    n_items = sum(mask.shape[0] for _, mask in dm.train_dataloader())
    assert n_items == 25
    other = _Seqs(batch_size=8)
    other.limit_train(0.25, seed=7)
    assert other.checksum() == dm.checksum()  # same fraction and seed: the same subset
    with pytest.raises(ValueError, match=r"train_fraction=1\.5"):
        dm.limit_train(1.5)


def test_split_datamodule_unbucketed_batches():
    class Flat(SplitDataModule):
        def load(self):
            x = torch.arange(30.0)
            return {k: TensorDataset(x[i:i + 10]) for k, i in (("train", 0), ("val", 10), ("test", 20))}

        def collate(self, items):
            return torch.stack([t[0] for t in items])

    dm = Flat(batch_size=4)
    assert torch.equal(torch.cat(list(dm.val_dataloader())), torch.arange(10.0, 20.0))
    assert sorted(torch.cat(list(dm.train_dataloader())).tolist()) == list(map(float, range(10)))


def test_subset_indices_and_checksum_helpers():
    assert subset_indices(10, 1.0, 0) == list(range(10))
    a = subset_indices(1000, 0.1, 3)
    assert len(a) == 100 and a == sorted(set(a)) and a == subset_indices(1000, 0.1, 3) != subset_indices(1000, 0.1, 4)
    assert subset_indices(5, 0.01, 0).__len__() == 1
    assert tensor_checksum(torch.ones(3), [1, "a"]) == tensor_checksum(torch.ones(3), [1, "a"])
    assert tensor_checksum(torch.ones(3)) != tensor_checksum(torch.ones(3, dtype=torch.float64))
