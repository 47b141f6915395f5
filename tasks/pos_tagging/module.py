"""The tagging LightningModule: token cross-entropy and corpus-level accuracies, padding
masked everywhere (loss, metrics; the models mask attention and convolutions themselves)."""

from __future__ import annotations

from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from tasks.common.module import StepOutput, TaskModule, sum_over_ranks
from tasks.pos_tagging.report import CONFUSION_KEY

__all__ = ["PosTaggerModule", "MODULE_DEFAULTS", "make_module", "count_stats"]

MODULE_DEFAULTS: dict[str, Any] = {"lr": 2e-3, "weight_decay": 0.01, "optimizer": "adamw", "scheduler": "none",
                                   "warmup_steps": 200}

#: order of the per-stage counters
_STATS = ("correct", "total", "oov_correct", "oov_total", "sent_correct", "sents")


def count_stats(pred: Tensor, gold: Tensor, mask: Tensor, oov: Tensor) -> Tensor:
    """Counts ``(correct, total, oov_correct, oov_total, sent_correct, sents)`` over the real
    words (``mask`` True) of ``pred``/``gold`` ``(B, L)``; a sentence is correct when all its
    words are."""
    hit = (pred == gold) & mask
    sent_ok = (hit | ~mask).all(1)
    return torch.stack([hit.sum(), mask.sum(), (hit & oov).sum(), (oov & mask).sum(), sent_ok.sum(),
                        torch.tensor(mask.shape[0], device=mask.device)]).long()


class PosTaggerModule(TaskModule):
    """Receives ``net(batch) -> logits (B, L, T)``. Logs ``<stage>/loss`` per batch and, once
    per epoch, exact corpus-level ``<stage>/acc`` (UPOS token accuracy), ``oov_acc``
    (words whose form is unseen in train; omitted when there are none) and ``sent_acc``.
    The test stage also fills a gold x predicted confusion matrix for :meth:`report_extras`."""

    def __init__(self, net: nn.Module, *, num_tags: int = 17, tags: list[str] | None = None, **kwargs: Any) -> None:
        super().__init__(net, **{**MODULE_DEFAULTS, **kwargs})
        self.num_tags, self.tag_names = num_tags, list(tags) if tags else [str(i) for i in range(num_tags)]
        self.stats = {s: torch.zeros(len(_STATS), dtype=torch.long) for s in ("train", "val", "test")}
        self.confusion = torch.zeros(num_tags, num_tags, dtype=torch.long)

    def step(self, batch: dict[str, Tensor], stage: str) -> StepOutput:
        mask, gold = batch["mask"], batch["tags"]
        logits = self.net(batch)  # (B, L, T)
        loss = F.cross_entropy(logits[mask], gold[mask])
        pred = logits.detach().argmax(-1)  # (B, L)
        self.stats[stage] += count_stats(pred, gold, mask, batch["oov"]).cpu()
        if stage == "test":
            idx = (gold[mask] * self.num_tags + pred[mask]).cpu()
            self.confusion += torch.bincount(idx, minlength=self.num_tags ** 2).view(self.num_tags, self.num_tags)
        return StepOutput(loss=loss, metrics={}, samples=int(mask.shape[0]), tokens=int(mask.sum()))

    # -- corpus-level metrics -----------------------------------------------------------
    def _reset(self, stage: str) -> None:
        self.stats[stage].zero_()
        if stage == "test":
            self.confusion.zero_()

    def _log_epoch(self, stage: str) -> None:
        if self.distributed:  # every rank counted its own shard: the corpus is their sum
            # in place: a tensor made under inference mode (validation, test) could not be
            # updated in place outside it (the runner's FLOP count steps the module later)
            self.stats[stage].copy_(sum_over_ranks(self.stats[stage]))
            if stage == "test":
                self.confusion.copy_(sum_over_ranks(self.confusion))
        c = dict(zip(_STATS, self.stats[stage].tolist()))
        if not c["total"]:
            return
        # the values are the same on every rank now; sync_dist only says so to Lightning
        kw = dict(on_step=False, on_epoch=True, batch_size=1, sync_dist=self.distributed)
        self.log(f"{stage}/acc", c["correct"] / c["total"], prog_bar=stage == "val", **kw)
        self.log(f"{stage}/sent_acc", c["sent_correct"] / c["sents"], **kw)
        if c["oov_total"]:
            self.log(f"{stage}/oov_acc", c["oov_correct"] / c["oov_total"], **kw)

    # Exact corpus-level values are logged once per epoch, at the epoch's last batch: Lightning
    # calls callbacks' on_*_epoch_end before the module's, so a value logged there would reach
    # the checkpoint and early stopping but not a callback that reads it at epoch end. Under
    # several ranks each calls the reduction once, at its own last batch (evaluation shards
    # may differ in length by a batch).
    def _last_batch(self, stage: str, batch_idx: int) -> bool:
        t = self.trainer
        n = {"train": t.num_training_batches, "val": (t.num_val_batches or [0])[0],
             "test": (t.num_test_batches or [0])[0]}[stage]
        return batch_idx + 1 == n

    def training_step(self, batch: Any, batch_idx: int) -> Tensor:
        if batch_idx == 0:
            self._reset("train")
        loss = super().training_step(batch, batch_idx)
        if self._last_batch("train", batch_idx):
            self._log_epoch("train")
        return loss

    def _counted(self, stage: str, step: Any, batch: Any, batch_idx: int) -> None:
        """One evaluation batch between resetting the stage's counters (first batch) and logging them (last)."""
        if batch_idx == 0:
            self._reset(stage)
        step(batch, batch_idx)
        if self._last_batch(stage, batch_idx):
            self._log_epoch(stage)

    def validation_step(self, batch: Any, batch_idx: int) -> None:
        self._counted("val", super().validation_step, batch, batch_idx)

    def test_step(self, batch: Any, batch_idx: int) -> None:
        self._counted("test", super().test_step, batch, batch_idx)

    def report_extras(self, trainer: Any = None, datamodule: Any = None) -> dict[str, Any]:
        """``{"pos_confusion": {"tags", "matrix" (gold rows x predicted columns), "oov": [correct,
        total]}}`` of the last test run (the best checkpoint when the runner calls it), over
        every rank (summed when the test epoch ended)."""
        c = dict(zip(_STATS, self.stats["test"].tolist()))
        return {CONFUSION_KEY: {"tags": self.tag_names, "matrix": self.confusion.tolist(),
                                  "oov": [c["oov_correct"], c["oov_total"]]}}


def make_module(net: nn.Module, data_info: dict | None = None, **train_params: Any) -> PosTaggerModule:
    """``Task.make_module``: the tagger module around ``net`` (tag names from ``data_info``)."""
    info = data_info or {}
    tags = info.get("tags")
    return PosTaggerModule(net, num_tags=int(info.get("num_tags", len(tags) if tags else 17)), tags=tags,
                           **train_params)
