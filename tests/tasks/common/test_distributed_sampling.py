"""tasks.common.sampling under several ranks (issue 16): every rank a disjoint shard of the
single-process epoch (same seed, same length buckets), one process unchanged, Lightning's
re-instantiation refused, and a real 2-process gloo run through ``SplitDataModule``."""

from __future__ import annotations

import hashlib
import json
from collections import Counter
from pathlib import Path
from typing import Any

import lightning as L
import pytest
import torch
from lightning.pytorch.utilities.data import _update_dataloader
from torch import Tensor
from torch.utils.data import BatchSampler, DataLoader, RandomSampler
from torch.utils.data.distributed import DistributedSampler

from tasks.common.data import SplitDataModule, pad_sequences
from tasks.common.sampling import BucketBatchSampler, ShardedBatchSampler, shard_batches


def _lengths(n: int, seed: int) -> list[int]:
    """Deterministic, varied lengths in 1..40."""
    return [(i * 37 + seed * 11 + (i * i) % 13) % 40 + 1 for i in range(n)]


def _union_is_the_epoch(full: list[list[int]], shards: list[list[list[int]]], even: bool) -> None:
    """The ranks' batches are the epoch's batches, each once, plus only the documented padding
    (the first batches repeated); with ``even`` every rank has the same number of batches."""
    world = len(shards)
    got = Counter(tuple(b) for s in shards for b in s)
    total = -(-len(full) // world) * world if even else max(len(full), world)
    want = Counter(tuple(b) for b in (full * world)[:total])  # full, then its first batches again
    assert got == want
    assert sum(len(s) for s in shards) == total
    if even:
        assert len({len(s) for s in shards}) == 1
    assert all(s for s in shards), "no rank may be left without a batch"


# ----------------------------------------------------------------------------- one process
# sha256 of three epochs of batches from the implementation before sharding (git 83217c7):
# one process must keep drawing exactly these (the committed reference results depend on it).
GOLDEN = [
    (dict(n=503, batch_size=16, max_tokens=None, shuffle=True, seed=3, pool_batches=8), "5381882fb44f3c51"),
    (dict(n=257, batch_size=8, max_tokens=96, shuffle=True, seed=11, pool_batches=50), "5c150cf67c710230"),
    (dict(n=100, batch_size=7, max_tokens=None, shuffle=False, seed=0, pool_batches=50), "10e5bfc8e4ec4c4b"),
]


@pytest.mark.parametrize("cfg,digest", GOLDEN)
def test_one_process_draws_the_same_batches_as_before(cfg: dict[str, Any], digest: str) -> None:
    cfg = dict(cfg)
    n = cfg.pop("n")
    s = BucketBatchSampler(_lengths(n, cfg["seed"]), cfg.pop("batch_size"), **cfg)
    epochs = [list(iter(s)) for _ in range(3)]
    assert hashlib.sha256(json.dumps(epochs).encode()).hexdigest()[:16] == digest
    explicit = BucketBatchSampler(_lengths(n, cfg["seed"]), s.batch_size, rank=0, world_size=1, **cfg)
    assert [list(iter(explicit)) for _ in range(3)] == epochs


# ----------------------------------------------------------------------------- shards
@pytest.mark.parametrize("world", [1, 2, 3, 4])
@pytest.mark.parametrize("even", [True, False])
@pytest.mark.parametrize("max_tokens", [None, 120])
def test_ranks_split_every_epoch_without_overlap(world: int, even: bool, max_tokens: int | None) -> None:
    for seed in (0, 5):
        lengths = _lengths(173 + seed, seed)
        ref = BucketBatchSampler(lengths, 9, max_tokens=max_tokens, seed=seed, pool_batches=4)
        ranks = [BucketBatchSampler(lengths, 9, max_tokens=max_tokens, seed=seed, pool_batches=4, even=even,
                                    rank=r, world_size=world) for r in range(world)]
        for epoch in range(3):
            full = list(iter(ref))
            assert len({len(b) for b in full}) > 1 or max_tokens is None  # max_tokens buckets do differ
            lens = [len(s) for s in ranks]  # __len__ before __iter__: the epoch about to be drawn
            shards = [list(iter(s)) for s in ranks]
            assert [len(s) for s in shards] == lens
            _union_is_the_epoch(full, shards, even)
            if world == 1:
                assert shards[0] == full
        assert ranks[0].epoch == 3 and ref.epoch == 3


@pytest.mark.parametrize("n,world", [(1, 4), (2, 3), (5, 2), (6, 3), (0, 2)])
@pytest.mark.parametrize("even", [True, False])
def test_shard_batches_pads_only_as_documented(n: int, world: int, even: bool) -> None:
    full = [[i] for i in range(n)]
    shards = [shard_batches(full, r, world, even=even) for r in range(world)]
    if n == 0:
        assert shards == [[]] * world
        return
    _union_is_the_epoch(full, shards, even)
    if not even and n >= world:
        assert sorted(b[0] for s in shards for b in s) == list(range(n))  # evaluation: each sample once


def test_shard_batches_rejects_a_bad_rank() -> None:
    with pytest.raises(ValueError, match="rank=2, world_size=2"):
        shard_batches([[0]], 2, 2, even=True)
    with pytest.raises(ValueError, match="both rank and world_size"):
        BucketBatchSampler([1, 2], 1, rank=0)


def test_sharded_plain_batches_follow_the_single_process_order() -> None:
    def inner() -> BatchSampler:
        return BatchSampler(RandomSampler(range(23), generator=torch.Generator().manual_seed(4)), 4, drop_last=False)

    ref, parts = inner(), [ShardedBatchSampler(inner(), rank=r, world_size=3) for r in range(3)]
    for _ in range(2):  # the generators advance alike: epoch 2 differs from epoch 1 on every rank
        full = list(iter(ref))
        shards = [list(iter(p)) for p in parts]
        assert [len(p) for p in parts] == [len(s) for s in shards]
        _union_is_the_epoch(full, shards, even=True)


def test_lightning_cannot_rebuild_the_sampler_around_a_distributed_sampler() -> None:
    """What Lightning does under DDP unless ``use_distributed_sampler=False``: refused, loudly."""
    data = list(range(10))
    bucketed = DataLoader(data, batch_sampler=BucketBatchSampler([1 + i % 3 for i in data], 2))
    with pytest.raises(TypeError, match="use_distributed_sampler=False"):
        _update_dataloader(bucketed, DistributedSampler(data, num_replicas=2, rank=0))
    plain = DataLoader(data, batch_sampler=ShardedBatchSampler(BatchSampler(range(10), 2, False), rank=0, world_size=2))
    with pytest.raises(TypeError, match="use_distributed_sampler=False"):
        _update_dataloader(plain, DistributedSampler(data, num_replicas=2, rank=0))


# ----------------------------------------------------------------------------- 2 processes
class _IndexData(SplitDataModule):
    """Items ``(index, tokens)``; with ``bucketed`` their length drives BucketBatchSampler."""

    SIZES = {"train": 19, "val": 9, "test": 9}

    def __init__(self, bucketed: bool = True) -> None:
        super().__init__(batch_size=4, eval_batch_size=2, shuffle_seed=7)
        self.bucketed = bucketed

    def load(self) -> dict[str, list[tuple[int, Tensor]]]:
        return {k: [(i, torch.ones(_lengths(n, 1)[i])) for i in range(n)] for k, n in self.SIZES.items()}

    def length(self, item: tuple[int, Tensor]) -> int | None:
        return int(item[1].shape[0]) if self.bucketed else None

    def collate(self, items: list[tuple[int, Tensor]]) -> dict[str, Tensor]:
        tokens, _ = pad_sequences([t for _, t in items])
        return {"index": torch.tensor([i for i, _ in items]), "tokens": tokens}


class _Recorder(L.LightningModule):
    """Records the sample indices this rank trained and validated on, per epoch; logs the
    validation mean index as TaskModule should under DDP (``sync_dist``, float ``batch_size``)."""

    def __init__(self, out: str) -> None:
        super().__init__()
        self.w = torch.nn.Parameter(torch.ones(1))
        self.out = out
        self.seen: dict[str, list[list[int]]] = {"train": [], "val": []}

    def _note(self, stage: str, batch: dict[str, Tensor]) -> None:
        while len(self.seen[stage]) <= self.current_epoch:
            self.seen[stage].append([])
        self.seen[stage][self.current_epoch].append(batch["index"].tolist())

    def training_step(self, batch: dict[str, Tensor], batch_idx: int) -> Tensor:
        self._note("train", batch)
        return (self.w * batch["tokens"].float().mean()) ** 2

    def validation_step(self, batch: dict[str, Tensor], batch_idx: int) -> None:
        self._note("val", batch)
        idx = batch["index"].float()
        # a float batch_size keeps Lightning's sample count a float tensor: its sync_dist mean of an
        # int count floors on uneven ranks (Lightning 2.6 issue #21859; 4.5 here instead of 4.0)
        self.log("val/mean_index", idx.mean(), batch_size=float(len(idx)), on_epoch=True, sync_dist=True)

    def on_fit_end(self) -> None:
        plain = _IndexData(bucketed=False)
        plain.setup("fit")  # a dataset without lengths: plain batches, sharded the same way
        self.seen["plain"] = [b["index"].tolist() for b in plain.train_dataloader()]
        Path(self.out, f"rank{self.global_rank}.json").write_text(json.dumps(self.seen))

    def configure_optimizers(self) -> torch.optim.Optimizer:
        return torch.optim.SGD(self.parameters(), lr=0.01)


def test_two_gloo_processes_train_on_disjoint_shards_of_each_epoch(tmp_path: Path) -> None:
    trainer = L.Trainer(accelerator="cpu", devices=2, strategy="ddp_spawn", use_distributed_sampler=False,
                        max_epochs=2, num_sanity_val_steps=0, logger=False, enable_checkpointing=False,
                        enable_progress_bar=False, enable_model_summary=False)
    trainer.fit(_Recorder(str(tmp_path)), datamodule=_IndexData())
    ranks = [json.loads((tmp_path / f"rank{r}.json").read_text()) for r in range(2)]

    data = _IndexData()
    data.setup("fit")
    lengths = [data.length(it) for it in data.splits["train"]]
    ref = BucketBatchSampler(lengths, 4, seed=7)
    for epoch in range(2):
        full = list(iter(ref))
        assert len(full) % 2 == 1  # 5 batches: rank 1 gets the first one again
        _union_is_the_epoch(full, [r["train"][epoch] for r in ranks], even=True)
    val = list(iter(BucketBatchSampler([data.length(it) for it in data.splits["val"]], 2, shuffle=False)))
    for epoch in range(2):  # uneven (3 + 2 batches) but each sample validated exactly once
        _union_is_the_epoch(val, [r["val"][epoch] for r in ranks], even=False)
        assert sorted(i for r in ranks for b in r["val"][epoch] for i in b) == list(range(9))
    # the synced epoch mean is the exact sample-weighted mean over both ranks' uneven shards
    assert trainer.callback_metrics["val/mean_index"].item() == pytest.approx(4.0)

    g = torch.Generator().manual_seed(7)
    plain = list(BatchSampler(RandomSampler(range(19), generator=g), 4, drop_last=False))
    _union_is_the_epoch(plain, [r["plain"] for r in ranks], even=True)
