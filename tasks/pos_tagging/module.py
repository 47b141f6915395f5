"""The tagging LightningModule: token cross-entropy and corpus-level accuracies, padding
masked everywhere (loss, metrics; the models mask attention and convolutions themselves)."""

from __future__ import annotations

from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from tasks.common.module import StepOutput, TaskModule, sum_over_ranks

__all__ = ["PosTaggerModule", "MODULE_DEFAULTS", "make_module", "count_stats", "CONFUSION_KEY"]

#: ``rec["extras"]`` key of the test confusion matrix: ``{"tags", "matrix", "oov"}`` (rendered by
#: :mod:`benchmarks.report.domains.pos_tagging`).
CONFUSION_KEY = "pos_confusion"

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
                        torch.full((), mask.shape[0], device=mask.device)]).long()  # a fill, not a host copy


class PosTaggerModule(TaskModule):
    """Receives ``net(batch) -> logits (B, L, T)``. Logs ``<stage>/loss`` per batch and, once
    per epoch, exact corpus-level ``<stage>/acc`` (UPOS token accuracy), ``oov_acc``
    (words whose form is unseen in train; omitted when there are none) and ``sent_acc``.
    The test stage also fills a gold x predicted confusion matrix for :meth:`report_extras`, and
    returns each real word's correctness (test items: tokens, grouped by sentence) and, where the
    data has a syntax (UD), its distance to its head (the items' ``head_distance`` axis)."""

    item_unit, item_group, item_axis = "token", "sentence", "head_distance"

    def __init__(self, net: nn.Module, *, num_tags: int = 17, tags: list[str] | None = None, **kwargs: Any) -> None:
        super().__init__(net, **{**MODULE_DEFAULTS, **kwargs})
        self.num_tags, self.tag_names = num_tags, list(tags) if tags else [str(i) for i in range(num_tags)]
        # counters live on the module's device (buffers follow .to()) and are read once an epoch
        for stage in ("train", "val", "test"):
            self.register_buffer(f"_stats_{stage}", torch.zeros(len(_STATS), dtype=torch.long), persistent=False)
        self.register_buffer("confusion", torch.zeros(num_tags, num_tags, dtype=torch.long), persistent=False)

    @property
    def stats(self) -> dict[str, Tensor]:
        """The stage's counters ``(correct, total, oov_correct, oov_total, sent_correct, sents)``."""
        return {s: getattr(self, f"_stats_{s}") for s in ("train", "val", "test")}

    def step(self, batch: dict[str, Tensor], stage: str) -> StepOutput:
        # padding is ignored by its target (-100), not removed by boolean indexing: no host-device sync
        mask, gold = batch["mask"], batch["tags"]
        logits = self.net(batch)  # (B, L, T)
        loss = F.cross_entropy(logits.flatten(0, 1), gold.masked_fill(~mask, -100).flatten(), ignore_index=-100)
        pred = logits.detach().argmax(-1)  # (B, L)
        # not in place: the counters may have been made under inference mode (trainer.test)
        setattr(self, f"_stats_{stage}", self.stats[stage] + count_stats(pred, gold, mask, batch["oov"]))
        if stage == "test":  # gold x predicted, padding weighted 0
            idx = (gold * self.num_tags + pred).flatten()  # (B*L,)
            flat = self.confusion.flatten().index_add(0, idx, mask.flatten().long())
            self.confusion = flat.view(self.num_tags, self.num_tags)
        keep = self.keeps_items(stage)
        return StepOutput(loss=loss, metrics={}, samples=int(mask.shape[0]), tokens=mask.sum(),
                          items=pred == gold if keep else None, item_mask=mask if keep else None,  # (B, L)
                          item_axis=batch.get("arcs") if keep else None)  # (B, L): UD's head distances

    # -- corpus-level metrics -----------------------------------------------------------
    def _reset(self, stage: str) -> None:
        setattr(self, f"_stats_{stage}", torch.zeros_like(self.stats[stage]))
        if stage == "test":
            self.confusion = torch.zeros_like(self.confusion)

    def _log_epoch(self, stage: str) -> None:
        """The corpus-level values of ``stage``, read on the host (once an epoch)."""
        if self.distributed:  # every rank counted its own shard: the corpus is their sum
            setattr(self, f"_stats_{stage}", sum_over_ranks(self.stats[stage]))
            if stage == "test":
                self.confusion = sum_over_ranks(self.confusion)
        c = dict(zip(_STATS, self.stats[stage].tolist()))
        if not c["total"]:
            return
        # the values are the same on every rank now; sync_dist only says so to Lightning
        kw = dict(on_step=False, on_epoch=True, batch_size=1, sync_dist=self.distributed)
        self.log(f"{stage}/acc", c["correct"] / c["total"], prog_bar=stage == "val", **kw)
        self.log(f"{stage}/sent_acc", c["sent_correct"] / c["sents"], **kw)
        if c["oov_total"]:
            self.log(f"{stage}/oov_acc", c["oov_correct"] / c["oov_total"], **kw)

    def _log_train(self) -> None:
        """The training epoch's accuracies, logged at its last batch as device tensors (no
        host read: Lightning reduces them at the epoch's end). Lightning calls callbacks'
        ``on_train_epoch_end`` before the module's, so a value logged there would miss a
        callback reading it then. Training words are never OOV (OOV means unseen in train)."""
        st = self.stats["train"]
        if self.distributed:
            st = sum_over_ranks(st)
        kw = dict(on_step=False, on_epoch=True, batch_size=1, sync_dist=self.distributed)
        self.log("train/acc", st[0].double() / st[1].clamp(min=1), **kw)
        self.log("train/sent_acc", st[4].double() / st[5].clamp(min=1), **kw)

    def _last_batch(self, batch_idx: int) -> bool:
        return batch_idx + 1 == self.trainer.num_training_batches

    def training_step(self, batch: Any, batch_idx: int) -> Tensor:
        if batch_idx == 0:
            self._reset("train")
        loss = super().training_step(batch, batch_idx)
        if self._last_batch(batch_idx):
            self._log_train()
        return loss

    # Evaluation counters are read at the epoch's end (every rank calls the hooks, whatever the
    # length of its shard): validation values reach the runner's monitor, checkpoint and early
    # stopping (they read at on_validation_end), test values the returned metrics.
    def on_validation_epoch_start(self) -> None:
        self._reset("val")

    def on_validation_epoch_end(self) -> None:
        super().on_validation_epoch_end()
        self._log_epoch("val")

    def on_test_epoch_start(self) -> None:
        self._reset("test")

    def on_test_epoch_end(self) -> None:
        super().on_test_epoch_end()
        self._log_epoch("test")

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
