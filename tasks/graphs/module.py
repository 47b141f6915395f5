"""The node-classification LightningModule: full-batch cross-entropy on the stage's mask."""

from __future__ import annotations

from typing import Any

import torch.nn.functional as F
from torch import nn

from tasks.common.module import StepOutput, TaskModule

__all__ = ["GraphNodeClassifier", "MODULE_DEFAULTS"]

#: The GAT-paper protocol: Adam, lr 0.005, L2 weight decay 5e-4 (early stopping is the runner's).
MODULE_DEFAULTS: dict[str, Any] = {"lr": 0.005, "weight_decay": 5e-4, "optimizer": "adam"}

_MASKS = {"train": "train_mask", "val": "val_mask", "test": "test_mask"}


class GraphNodeClassifier(TaskModule):
    """Receives a network ``net(data) -> logits (N, C)``; every step sees the whole graph and
    scores only the nodes of the stage's mask (``train_mask``, ``val_mask``, ``test_mask``).
    Logs ``<stage>/loss`` and ``<stage>/acc``; ``samples`` = nodes in the mask.

    Several ranks each step the whole graph (it cannot be sharded): their metrics are equal and
    their counts are one rank's (``shards_data`` False), not a sum over repeated work.
    Test items: each test node's correctness, in node order."""

    shards_data = False
    item_unit = "node"

    def __init__(self, net: nn.Module, **kwargs: Any) -> None:
        super().__init__(net, **{**MODULE_DEFAULTS, **kwargs})

    def step(self, batch: Any, stage: str) -> StepOutput:
        # the stage's nodes by weight, not by boolean indexing: no host-device sync
        mask = getattr(batch, _MASKS[stage])  # (N,) bool
        logits = self.net(batch)  # (N, C)
        weight = mask.to(logits.dtype)  # (N,)
        count = mask.sum()  # a 0-d device tensor
        denom = weight.sum().clamp(min=1)
        loss = (F.cross_entropy(logits, batch.y, reduction="none") * weight).sum() / denom
        hit = logits.detach().argmax(-1) == batch.y  # (N,)
        acc = (hit.to(weight.dtype) * weight).sum() / denom
        keep = self.keeps_items(stage)  # the graph is one example of N positions, the mask's nodes its units
        return StepOutput(loss=loss, metrics={"acc": acc.detach()}, samples=count,
                          items=hit[None] if keep else None, item_mask=mask[None] if keep else None)


def make_module(net: nn.Module, data_info: dict | None = None, **train_params: Any) -> GraphNodeClassifier:
    """``Task.make_module``: the classifier around ``net`` (``data_info`` is not needed)."""
    del data_info
    return GraphNodeClassifier(net, **train_params)
