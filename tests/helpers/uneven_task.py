"""A toy task with uneven batches in every stage (train 70 = 32+32+6, val 45 = 20+20+5, test
33 = 20+13) and :func:`train` (3 epochs, then test) for the logging and learning-curve tests."""

from __future__ import annotations

import lightning as L
import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

from tasks.common.module import StepOutput, TaskModule


class Data(L.LightningDataModule):
    """Uneven batches everywhere: train 70 = 32+32+6, val 45 = 20+20+5, test 33 = 20+13."""

    def __init__(self) -> None:
        super().__init__()
        g = torch.Generator().manual_seed(0)
        self.x = torch.randn(148, 5, generator=g)
        self.y = (self.x[:, 0] + 0.3 * torch.randn(148, generator=g) > 0).long()

    def _dl(self, a: int, b: int, bs: int) -> DataLoader:
        return DataLoader(TensorDataset(self.x[a:b], self.y[a:b]), batch_size=bs)

    def train_dataloader(self):
        return self._dl(0, 70, 32)

    def val_dataloader(self):
        return self._dl(70, 115, 20)

    def test_dataloader(self):
        return self._dl(115, 148, 20)


class Toy(TaskModule):
    def step(self, batch, stage):
        x, y = batch
        logits = self.net(x)
        acc = (logits.argmax(-1) == y).float().mean()
        return StepOutput(nn.functional.cross_entropy(logits, y), {"acc": acc, "host": float(len(y)) / 7},
                          samples=len(y))


class PerStep(Toy):
    """The several-ranks path (``self.log`` per step, Lightning's weighted epoch mean), run in
    one process: the reference the one-process sums must equal."""

    @property
    def distributed(self) -> bool:
        return True


def train(cls: type, callbacks=()) -> tuple[TaskModule, dict, list]:
    torch.manual_seed(0)
    module = cls(nn.Sequential(nn.Linear(5, 8), nn.Dropout(0.2), nn.Linear(8, 2)), lr=0.05)
    seen: dict[str, dict] = {}

    class Keep(L.Callback):  # the epoch values as Lightning publishes them (after every hook)
        def on_validation_end(self, trainer, pl_module):
            seen[f"val{trainer.current_epoch}"] = {k: float(v) for k, v in trainer.callback_metrics.items()
                                                   if k.startswith("val/")}

        def on_train_end(self, trainer, pl_module):
            seen["train"] = {k: float(v) for k, v in trainer.callback_metrics.items() if k.startswith("train/")}

    trainer = L.Trainer(max_epochs=3, accelerator="cpu", logger=False, enable_checkpointing=False,
                        enable_progress_bar=False, enable_model_summary=False, num_sanity_val_steps=0,
                        callbacks=[Keep(), *callbacks])
    dm = Data()
    trainer.fit(module, datamodule=dm)
    test = trainer.test(module, datamodule=dm, verbose=False)
    return module, seen, test
