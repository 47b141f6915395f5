"""The speech LightningModule: cross-entropy per utterance (``classify``) or per frame (``tag``).

Metrics:

* ``acc``: utterance accuracy (``classify``) or frame accuracy over real frames (``tag``; the
  headline metric of both forms). Validation and test values are corpus-level (correct / total
  over the whole split), logged at the end of the epoch.
* ``segment_error`` (``tag`` only): a word error rate on segments. Each sequence's frame labels
  (predicted and true) are reduced to a word sequence by merging runs of equal labels and
  dropping silence; ``segment_error = sum of Levenshtein distances / number of true words``
  over the split (0 = every word found once, in order; insertions can push it above 1).

SpecAugment (``spec_augment``, training only): ``freq_masks`` bands of up to ``freq_width``
features and ``time_masks`` spans of up to ``time_width`` frames are set to zero (the mean of
normalised features) in each training sequence.
"""

from __future__ import annotations

from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from tasks.common.module import StepOutput, TaskModule, sum_over_ranks

__all__ = ["SpeechModule", "MODULE_DEFAULTS", "make_module", "segments", "edit_distance", "spec_augment",
           "CONFUSION_KEY"]

#: ``rec["extras"]`` key of the test confusion matrix: ``{"form", "labels", "matrix"}`` (rendered by
#: :mod:`benchmarks.report.domains.speech`).
CONFUSION_KEY = "speech_confusion"

MODULE_DEFAULTS: dict[str, Any] = {"lr": 2e-3, "weight_decay": 0.01, "optimizer": "adamw", "scheduler": "cosine",
                                   "warmup_steps": 50, "spec_augment": None, "label_smoothing": 0.0}
SPEC_AUGMENT_KEYS = ("freq_masks", "freq_width", "time_masks", "time_width")


def segments(labels: Tensor | list[int], silence: int) -> list[int]:
    """Frame labels -> word sequence: merge runs of equal labels, drop ``silence``."""
    seq = labels.tolist() if isinstance(labels, Tensor) else list(labels)
    out: list[int] = []
    prev = None
    for lab in seq:
        if lab != prev and lab != silence:
            out.append(lab)
        prev = lab
    return out


def edit_distance(a: list[int], b: list[int]) -> int:
    """Levenshtein distance (insertions, deletions, substitutions all cost 1)."""
    prev = list(range(len(b) + 1))
    for i, x in enumerate(a, 1):
        cur = [i] + [0] * len(b)
        for j, y in enumerate(b, 1):
            cur[j] = min(prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (x != y))
        prev = cur
    return prev[-1]


def spec_augment(x: Tensor, mask: Tensor, cfg: dict[str, int], generator: torch.Generator | None = None) -> Tensor:
    """SpecAugment time and frequency masking (zeros) of ``x (B, L, F)``; time masks fall inside
    each sequence's real frames (``mask (B, L)``). Every width and start is drawn on ``x``'s
    device (``generator`` must live there), so no value is read on the host. Returns a new tensor."""
    b, length, nf = x.shape
    dev = x.device
    lengths = mask.sum(1)  # (B,)

    def draw(hi: Tensor) -> Tensor:  # (B,) uniform ints in [0, hi]
        u = torch.rand(hi.shape, generator=generator, device=dev)
        return (u * (hi.clamp(min=0) + 1)).floor().long().clamp(max=hi.clamp(min=0))

    def span(pos: Tensor, start: Tensor, width: Tensor) -> Tensor:  # (B, n): start <= pos < start + width
        return (pos >= start[:, None]) & (pos < (start + width)[:, None])

    f, t = torch.arange(nf, device=dev), torch.arange(length, device=dev)
    drop_f = torch.zeros(b, nf, dtype=torch.bool, device=dev)
    drop_t = torch.zeros(b, length, dtype=torch.bool, device=dev)
    for _ in range(cfg.get("freq_masks", 0)):
        w = draw(torch.full((b,), min(cfg.get("freq_width", 0), nf), device=dev))
        drop_f |= span(f, draw(nf - w), w)
    for _ in range(cfg.get("time_masks", 0)):
        w = draw(lengths.clamp(max=cfg.get("time_width", 0)))
        drop_t |= span(t, draw(lengths - w), w)
    return x.masked_fill(drop_f[:, None, :] | drop_t[:, :, None], 0)


class SpeechModule(TaskModule):
    """Receives ``net(x (B, L, F), mask (B, L))`` -> ``(B, C)`` or ``(B, L, C)`` logits; the task
    form comes from ``data_info["form"]``. Counts ``samples`` = utterances or sequences and
    ``tokens`` = real frames (throughput in frames per second)."""

    def __init__(self, net: nn.Module, *, form: str = "classify", num_classes: int, silence_label: int | None = None,
                 labels: list[str] | None = None, spec_augment: dict[str, int] | None = None,
                 label_smoothing: float = 0.0, **kwargs: Any) -> None:
        if spec_augment is not None:
            if not isinstance(spec_augment, dict):
                raise ValueError(f"spec_augment={spec_augment!r}; expected null or a mapping with keys "
                                 f"{', '.join(SPEC_AUGMENT_KEYS)}")
            bad = sorted(set(spec_augment) - set(SPEC_AUGMENT_KEYS))
            if bad:
                raise ValueError(f"spec_augment: unknown keys {bad}; valid: {', '.join(SPEC_AUGMENT_KEYS)}")
        if form == "tag" and silence_label is None:
            raise ValueError("form='tag' needs silence_label")
        super().__init__(net, form=form, num_classes=num_classes, silence_label=silence_label, labels=labels,
                         spec_augment=spec_augment, label_smoothing=label_smoothing, **kwargs)
        self.form, self.num_classes, self.silence = form, num_classes, silence_label
        # test items: each utterance's correctness, or each real frame's (grouped by utterance)
        self.item_unit, self.item_group = ("utterance", None) if form == "classify" else ("frame", "utterance")
        self.labels = list(labels) if labels else [str(i) for i in range(num_classes)]
        self.augment, self.label_smoothing = spec_augment, float(label_smoothing)
        self._reset_epoch()
        self.test_confusion: Tensor | None = None
        self.test_segment_error: float | None = None

    def _reset_epoch(self) -> None:
        # device counters, read once at the epoch's end (ints until the first step adds to them)
        self._correct: int | Tensor = 0
        self._total: int | Tensor = 0
        self._edits = 0
        self._words = 0
        self._frames: list[tuple[Tensor, Tensor, Tensor]] = []  # tag: (pred, gold, mask) per batch
        self._confusion = torch.zeros(self.num_classes, self.num_classes, dtype=torch.long, device=self.device)

    def step(self, batch: dict[str, Tensor], stage: str) -> StepOutput:
        # no host-device sync: padding is weighted out, not removed by boolean indexing, and
        # the counts stay on the device (the segment error's alignments wait for the epoch's end)
        x, mask, y = batch["x"], batch["mask"], batch["y"]
        if stage == "train" and self.augment:
            x = spec_augment(x, mask, self.augment)
        logits = self.net(x, mask)
        frames = mask.sum()  # (,) device
        smooth = self.label_smoothing if stage == "train" else 0.0
        pred = logits.detach().argmax(-1)  # (B,) or (B, L)
        if self.form == "classify":
            loss = F.cross_entropy(logits, y, label_smoothing=smooth)
            real, total = torch.ones_like(y, dtype=torch.bool), y.numel()
        else:
            loss = F.cross_entropy(logits.flatten(0, 1), y.flatten(), ignore_index=-100, label_smoothing=smooth)
            real, total = mask, frames
        gold = torch.where(real, y, 0)  # padding -> class 0, weighted 0 below
        correct = ((pred == gold) & real).sum()
        metrics: dict[str, Any] = {}
        if stage == "train":
            metrics["acc"] = correct / (total.clamp(min=1) if isinstance(total, Tensor) else max(total, 1))
        else:
            self._correct = self._correct + correct
            self._total = self._total + total
            idx = (gold * self.num_classes + pred).flatten()
            if self._confusion.device != idx.device:  # reset before the module moved (once)
                self._confusion = self._confusion.to(idx.device)
            flat = self._confusion.flatten().index_add(0, idx, real.flatten().long())
            # not in place: the counters may have been made under inference mode (trainer.test)
            self._confusion = flat.view(self.num_classes, self.num_classes)
            if self.form == "tag":
                self._frames.append((pred, y, mask))
        keep = self.keeps_items(stage)
        return StepOutput(loss=loss, metrics=metrics, samples=int(y.shape[0]), tokens=frames,
                          items=pred == gold if keep else None,  # (B,) or (B, L)
                          item_mask=real if keep and self.form == "tag" else None)

    # -- corpus-level validation / test metrics ----------------------------------------
    def _count_segments(self) -> None:
        """Add the segment edit distances and true words of the batches kept this epoch (``tag``):
        the frame labels are read on the host here, once per batch at the epoch's end."""
        for pred, y, mask in self._frames:
            pred, y, lengths = pred.cpu(), y.cpu(), mask.sum(1).tolist()
            for i, n in enumerate(lengths):
                ref = segments(y[i, :n], self.silence)
                self._edits += edit_distance(segments(pred[i, :n], self.silence), ref)
                self._words += len(ref)
        self._frames = []

    def _sum_epoch(self) -> None:
        """The epoch's counters as host ints; several ranks: summed over them (each rank
        evaluated its own shard), the same on every rank afterwards."""
        self._count_segments()
        self._correct, self._total = int(self._correct), int(self._total)
        if not self.distributed:
            return
        c = sum_over_ranks(torch.tensor([self._correct, self._total, self._edits, self._words], dtype=torch.long))
        self._correct, self._total, self._edits, self._words = (int(v) for v in c)
        self._confusion = sum_over_ranks(self._confusion)

    def _log_epoch(self, stage: str) -> None:
        self._sum_epoch()
        if self._total:
            many = self.distributed  # the values are equal on every rank; sync_dist says so to Lightning
            self.log(f"{stage}/acc", self._correct / self._total, prog_bar=stage == "val", sync_dist=many)
            if self.form == "tag":
                self.log(f"{stage}/segment_error", self._edits / max(self._words, 1), sync_dist=many)

    def on_validation_epoch_start(self) -> None:
        self._reset_epoch()

    def on_validation_epoch_end(self) -> None:
        super().on_validation_epoch_end()
        self._log_epoch("val")

    def on_test_epoch_start(self) -> None:
        self._reset_epoch()

    def on_test_epoch_end(self) -> None:
        super().on_test_epoch_end()
        self._log_epoch("test")
        self.test_confusion = self._confusion.clone()
        if self.form == "tag":
            self.test_segment_error = self._edits / max(self._words, 1)

    def report_extras(self, trainer: Any = None, datamodule: Any = None) -> dict[str, Any]:
        """``{"speech_confusion": {"form", "labels", "matrix" (true x predicted counts on the
        test set)}}``: per-word errors (and, for tagging, word/silence confusions)."""
        if self.test_confusion is None:
            return {}
        return {CONFUSION_KEY: {"form": self.form, "labels": self.labels,
                                     "matrix": self.test_confusion.tolist()}}


def make_module(net: nn.Module, data_info: dict, **train_params: Any) -> SpeechModule:
    """``Task.make_module``: the module for ``data_info["form"]``."""
    return SpeechModule(net, form=data_info.get("form", "classify"), num_classes=int(data_info["num_classes"]),
                        silence_label=data_info.get("silence_label"), labels=data_info.get("labels"),
                        **{**MODULE_DEFAULTS, **train_params})
