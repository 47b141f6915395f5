"""The shared base of every task's LightningModule.

A task module *receives* its network (it never builds one): the same module trains an
attention model, an RNN or a CNN, so the comparison differs only in the network. The
base owns the optimiser and schedule, the logging convention (``<stage>/loss``,
``<stage>/<metric>``) and counts the samples and tokens each stage processed, which the
runner turns into throughput.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import lightning as L
import torch
from torch import Tensor, nn

OPTIMIZERS = ("adam", "adamw", "sgd")
SCHEDULERS = ("none", "cosine", "inverse_sqrt")


@dataclass
class StepOutput:
    """What a task's ``step`` returns: the loss to optimise, metric values to log (already
    reduced over the batch, or ``(sum, count)`` pairs are not needed: log means weighted by
    ``samples``), and how many samples/tokens the batch held."""

    loss: Tensor
    metrics: dict[str, Tensor | float]
    samples: int
    tokens: int = 0


class TaskModule(L.LightningModule):
    """Base LightningModule: subclasses implement :meth:`step`."""

    def __init__(
        self,
        net: nn.Module,
        *,
        lr: float = 1e-3,
        weight_decay: float = 0.0,
        optimizer: str = "adamw",
        scheduler: str = "none",
        warmup_steps: int = 0,
        **hparams: Any,
    ) -> None:
        super().__init__()
        if optimizer not in OPTIMIZERS:
            raise ValueError(f"optimizer={optimizer!r}; valid: {', '.join(OPTIMIZERS)}")
        if scheduler not in SCHEDULERS:
            raise ValueError(f"scheduler={scheduler!r}; valid: {', '.join(SCHEDULERS)}")
        self.net = net
        self.save_hyperparameters(ignore=["net"])
        self.counts: dict[str, dict[str, int]] = {s: {"samples": 0, "tokens": 0} for s in ("train", "val", "test")}

    # -- to implement ------------------------------------------------------------------
    def step(self, batch: Any, stage: str) -> StepOutput:  # pragma: no cover - abstract
        raise NotImplementedError

    # -- Lightning hooks ---------------------------------------------------------------
    def forward(self, *args: Any, **kwargs: Any) -> Any:
        return self.net(*args, **kwargs)

    def _run(self, batch: Any, stage: str) -> Tensor:
        out = self.step(batch, stage)
        self.counts[stage]["samples"] += int(out.samples)
        self.counts[stage]["tokens"] += int(out.tokens)
        bs = max(int(out.samples), 1)
        self.log(f"{stage}/loss", out.loss.detach(), batch_size=bs, prog_bar=stage != "test", on_epoch=True, on_step=False)
        for name, value in out.metrics.items():
            self.log(f"{stage}/{name}", value, batch_size=bs, prog_bar=stage == "val", on_epoch=True, on_step=False)
        return out.loss

    def training_step(self, batch: Any, batch_idx: int) -> Tensor:
        return self._run(batch, "train")

    def validation_step(self, batch: Any, batch_idx: int) -> None:
        self._run(batch, "val")

    def test_step(self, batch: Any, batch_idx: int) -> None:
        self._run(batch, "test")

    def configure_optimizers(self):
        hp = self.hparams
        params = [p for p in self.parameters() if p.requires_grad]
        if hp.optimizer == "adam":
            opt = torch.optim.Adam(params, lr=hp.lr, weight_decay=hp.weight_decay)
        elif hp.optimizer == "adamw":
            opt = torch.optim.AdamW(params, lr=hp.lr, weight_decay=hp.weight_decay)
        else:
            opt = torch.optim.SGD(params, lr=hp.lr, weight_decay=hp.weight_decay, momentum=0.9)
        if hp.scheduler == "none" and hp.warmup_steps == 0:
            return opt
        total = max(int(self.trainer.estimated_stepping_batches), 1)
        warm = max(int(hp.warmup_steps), 0)

        def factor(step: int) -> float:
            if warm and step < warm:
                return (step + 1) / warm
            if hp.scheduler == "cosine":
                return 0.5 * (1 + math.cos(math.pi * min(step - warm, total) / max(total - warm, 1)))
            if hp.scheduler == "inverse_sqrt":
                return math.sqrt(max(warm, 1) / max(step + 1, 1))
            return 1.0

        sched = torch.optim.lr_scheduler.LambdaLR(opt, factor)
        return {"optimizer": opt, "lr_scheduler": {"scheduler": sched, "interval": "step"}}
