"""The toy task's data, module and models (:mod:`tests.helpers.toy_task` registers them): imported
only when a cell builds them, so a test's driver process that registers the task never imports
Lightning for it (its cells' workers do)."""

from __future__ import annotations

import hashlib
import os
import signal
import time

import lightning as L
import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

from tasks.common.module import StepOutput, TaskModule


class ToyData(L.LightningDataModule):
    def __init__(self, seed: int, n: int = 256, dim: int = 4) -> None:
        super().__init__()
        g = torch.Generator().manual_seed(1234)
        self.x = torch.randn(n, dim, generator=g)
        self.y = (self.x @ torch.arange(1.0, dim + 1) > 0).long()
        self.info = {"dim": dim, "num_classes": 2, "num_train": 160}
        self.train_idx = torch.arange(160)

    def limit_train(self, fraction: float, seed: int = 0) -> int:
        from tasks.common.data import subset_indices

        self.train_idx = torch.tensor(subset_indices(160, fraction, seed))
        self.info["num_train"] = len(self.train_idx)
        return len(self.train_idx)

    def checksum(self) -> str:
        return "sha256:" + hashlib.sha256(self.x.numpy().tobytes()).hexdigest()[:16]

    def _dl(self, a: int, b: int, shuffle: bool = False) -> DataLoader:
        return DataLoader(TensorDataset(self.x[a:b], self.y[a:b]), batch_size=64, shuffle=shuffle)

    def train_dataloader(self):
        idx = self.train_idx
        return DataLoader(TensorDataset(self.x[idx], self.y[idx]), batch_size=64, shuffle=True)

    def val_dataloader(self):
        return self._dl(160, 208)

    def test_dataloader(self):
        return self._dl(208, 256)


class Classifier(TaskModule):
    def step(self, batch, stage):
        x, y = batch
        logits = self.net(x)
        loss = nn.functional.cross_entropy(logits, y)
        return StepOutput(loss, {"acc": (logits.argmax(-1) == y).float().mean()}, samples=len(y), tokens=len(y) * 4)


class Broken(nn.Module):
    def __init__(self, info, kind: str = "raise") -> None:
        super().__init__()
        self.lin = nn.Linear(info["dim"], 2)
        self.kind = kind
        starts = os.environ.get("ATTNBENCH_TOY_STARTS")  # tests count training starts here
        if starts:
            with open(starts, "a") as f:
                f.write(f"{os.getpid()}\n")

    def forward(self, x):
        if self.kind == "segfault":  # crash the interpreter, as a broken native kernel would
            import ctypes

            ctypes.string_at(0)
        if self.kind == "sigkill":  # as the kernel's out-of-memory killer would
            os.kill(os.getpid(), signal.SIGKILL)
        if self.kind == "exit137":
            os._exit(137)
        if self.kind == "hang":
            time.sleep(3600)
        if self.kind == "raise":
            raise RuntimeError("deliberately broken model")
        if self.kind == "host_read":  # trains, but reads a value on the host: no one-graph capture
            return self.lin(x) * (1.0 if float(x.abs().sum()) >= 0 else 2.0)
        if self.kind == "oom":
            raise RuntimeError("CUDA out of memory. Tried to allocate 1 TiB")
        if self.kind == "slow":  # trains normally, 50 ms per call: long enough to be interrupted
            stepped = os.environ.get("ATTNBENCH_TOY_STEPPED")  # tests poll this file: a forward ran (inside fit)
            if stepped and not os.path.exists(stepped):
                open(stepped, "a").close()
            time.sleep(0.05)
            return self.lin(x)
        return self.lin(x) * float("nan")
