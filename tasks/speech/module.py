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
from tasks.speech.report import CONFUSION_KEY

__all__ = ["SpeechModule", "MODULE_DEFAULTS", "make_module", "segments", "edit_distance", "spec_augment"]

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
    each sequence's real frames (``mask (B, L)``). Returns a new tensor."""
    x = x.clone()
    b, _, nf = x.shape
    lengths = mask.sum(1).tolist()

    def rint(hi: int) -> int:
        return int(torch.randint(0, max(hi, 0) + 1, (1,), generator=generator))

    for i in range(b):
        for _ in range(cfg.get("freq_masks", 0)):
            w = rint(min(cfg.get("freq_width", 0), nf))
            f0 = rint(nf - w)
            x[i, :, f0 : f0 + w] = 0
        for _ in range(cfg.get("time_masks", 0)):
            w = rint(min(cfg.get("time_width", 0), int(lengths[i])))
            t0 = rint(int(lengths[i]) - w)
            x[i, t0 : t0 + w] = 0
    return x


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
        self.labels = list(labels) if labels else [str(i) for i in range(num_classes)]
        self.augment, self.label_smoothing = spec_augment, float(label_smoothing)
        self._reset_epoch()
        self.test_confusion: Tensor | None = None
        self.test_segment_error: float | None = None

    def _reset_epoch(self) -> None:
        self._correct = 0
        self._total = 0
        self._edits = 0
        self._words = 0
        self._confusion = torch.zeros(self.num_classes, self.num_classes, dtype=torch.long)

    def step(self, batch: dict[str, Tensor], stage: str) -> StepOutput:
        x, mask, y = batch["x"], batch["mask"], batch["y"]
        if stage == "train" and self.augment:
            x = spec_augment(x, mask, self.augment)
        logits = self.net(x, mask)
        frames = int(mask.sum())
        smooth = self.label_smoothing if stage == "train" else 0.0
        if self.form == "classify":
            loss = F.cross_entropy(logits, y, label_smoothing=smooth)
            pred, gold = logits.argmax(-1), y
        else:
            loss = F.cross_entropy(logits.flatten(0, 1), y.flatten(), ignore_index=-100, label_smoothing=smooth)
            pred, gold = logits.argmax(-1)[mask], y[mask]
        correct = int((pred == gold).sum())
        metrics: dict[str, Any] = {}
        if stage == "train":
            metrics["acc"] = correct / max(gold.numel(), 1)
        else:
            self._correct += correct
            self._total += gold.numel()
            idx = gold.cpu() * self.num_classes + pred.cpu()
            # not in place: the counters may have been made under inference mode (trainer.test)
            self._confusion = self._confusion + torch.bincount(idx, minlength=self.num_classes**2).view(self.num_classes, -1)
            if self.form == "tag":
                full_pred = logits.argmax(-1)
                for i in range(y.shape[0]):
                    m = mask[i]
                    ref = segments(y[i][m], self.silence)
                    self._edits += edit_distance(segments(full_pred[i][m], self.silence), ref)
                    self._words += len(ref)
        return StepOutput(loss=loss, metrics=metrics, samples=int(y.shape[0]), tokens=frames)

    # -- corpus-level validation / test metrics ----------------------------------------
    def _sum_epoch(self) -> None:
        """Several ranks: the epoch's counters and confusion summed over them (each rank
        evaluated its own shard), the same on every rank afterwards."""
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
