"""The image-classification LightningModule: cross-entropy, top-1 accuracy, and attention
rollout maps of a few fixed test images as a report artefact."""

from __future__ import annotations

from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from tasks.common.module import StepOutput, TaskModule

__all__ = ["ImageClassifier", "MODULE_DEFAULTS", "make_module", "ROLLOUT_IMAGES", "rollout_extras", "ROLLOUT_KEY"]

#: ``rec["extras"]`` key of the rollout maps: ``{"grid", "patch_size", "classes", "images"}`` (rendered by
#: :mod:`benchmarks.report.domains.vision`).
ROLLOUT_KEY = "rollout"

#: AdamW with a linear warm-up into a cosine decay: a sound default for ViTs, CNNs and LSTMs
#: alike on these small images (configs may change lr per cell).
MODULE_DEFAULTS: dict[str, Any] = {"lr": 2e-3, "weight_decay": 0.05, "optimizer": "adamw", "scheduler": "cosine",
                                   "warmup_steps": 100, "label_smoothing": 0.0}
#: At most this many fixed test images get rollout maps: the first of each class, in class order.
ROLLOUT_IMAGES = 6
#: Stored images are downsampled (area) so that their longer side is at most this.
_MAX_SIDE = 32


class ImageClassifier(TaskModule):
    """Receives ``net(x (B, C, H, W)) -> logits (B, K)``; logs ``<stage>/loss`` and
    ``<stage>/acc`` (top-1); ``samples`` = images in the batch. Test items: each image's correctness."""

    item_unit = "image"

    def __init__(self, net: nn.Module, **kwargs: Any) -> None:
        super().__init__(net, **{**MODULE_DEFAULTS, **kwargs})

    def step(self, batch: Any, stage: str) -> StepOutput:
        x, y = batch  # (B, C, H, W) float, (B,)
        logits = self.net(x)  # (B, K)
        smoothing = self.hparams.label_smoothing if stage == "train" else 0.0
        loss = F.cross_entropy(logits, y, label_smoothing=smoothing)
        hit = logits.detach().argmax(-1) == y  # (B,)
        acc = hit.float().mean()
        return StepOutput(loss=loss, metrics={"acc": acc}, samples=int(y.shape[0]),
                          items=hit if self.keeps_items(stage) else None)

    def report_extras(self, trainer: Any, datamodule: Any) -> dict[str, Any]:
        """``{"rollout": ...}`` for networks with ``attention_rollout`` (the ViTs) whose attention
        forms its weights, else ``{}`` (a CNN; a ViT with a kernel or low-rank pattern)."""
        if not hasattr(self.net, "attention_rollout") or not getattr(self.net, "forms_attention_weights", True):
            return {}
        return {ROLLOUT_KEY: rollout_extras(self.net, datamodule)}


def _pick_indices(labels: torch.Tensor, k: int) -> list[int]:
    """The first test image of each of the first ``k`` classes present, in class order."""
    return [int((labels == c).nonzero()[0]) for c in labels.unique().tolist()[:k]]


def rollout_extras(net: nn.Module, datamodule: Any, k: int = ROLLOUT_IMAGES) -> dict[str, Any]:
    """Rollout maps of fixed test images (the first of each of the first ``k`` classes):
    ``grid`` ``[gh, gw]``, ``patch_size``, ``classes``, and per image its test ``index``,
    ``label``, ``pred``, the ``map`` (``gh`` rows of ``gw`` values, rounded, summing to ~1) and the
    ``image``: per channel, one hex string per row of uint8 pixels (compact in the JSON record),
    downsampled so that the longer side is at most 32 pixels."""
    test = datamodule.splits["test"]
    base = getattr(test, "dataset", test)
    idx = _pick_indices(base.labels, k)
    raw = base.images[idx]  # (k, C, H, W) uint8
    x = datamodule.normalize(raw)
    device = next(net.parameters()).device
    was_training = net.training
    net.eval()
    with torch.no_grad():
        x = x.to(device)
        maps = net.attention_rollout(x).float().cpu()  # (k, gh, gw)
        preds = net(x).argmax(-1).cpu()
    net.train(was_training)
    small = raw.float()
    side = max(raw.shape[-2:])
    if side > _MAX_SIDE:
        small = F.interpolate(small, scale_factor=_MAX_SIDE / side, mode="area")
    small = small.round().clamp(0, 255).to(torch.uint8)
    classes = getattr(datamodule, "classes", None) or []
    return {
        "grid": list(maps.shape[1:]),
        "patch_size": int(getattr(net, "patch_size", 0)),
        "classes": list(classes),
        "images": [
            {"index": int(i), "label": int(base.labels[i]), "pred": int(p),
             "map": [[round(float(v), 5) for v in row] for row in m],
             "image": [[bytes(r).hex() for r in ch] for ch in small[j].tolist()]}
            for j, (i, p, m) in enumerate(zip(idx, preds.tolist(), maps))
        ],
    }


def make_module(net: nn.Module, data_info: dict | None = None, **train_params: Any) -> ImageClassifier:
    """``Task.make_module``: the classifier around ``net`` (``data_info`` is not needed)."""
    del data_info
    return ImageClassifier(net, **train_params)
