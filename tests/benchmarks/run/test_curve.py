"""The learning curve (the cell monitor's) holds each epoch's own training loss."""

from __future__ import annotations

import lightning as L
import pytest

from benchmarks.run.callbacks import callbacks_module
from tests.helpers.uneven_task import Toy, train


def test_the_curve_holds_each_epochs_own_training_loss() -> None:
    """The curve's ``train_loss`` at epoch e is the sample-weighted mean of epoch e's training
    losses (it used to be epoch e-1's, and None at epoch 0: Lightning publishes a training
    epoch's values only after validation)."""
    losses: dict[int, list[tuple[float, int]]] = {}

    class Record(L.Callback):
        def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx):
            losses.setdefault(trainer.current_epoch, []).append((float(outputs["loss"]), len(batch[1])))

    monitor = callbacks_module()("acc", "max", "toy", lambda s: None, every_s=1e9)
    train(Toy, callbacks=[Record(), monitor])
    assert [c["epoch"] for c in monitor.curve] == [0, 1, 2]
    for c in monitor.curve:
        pairs = losses[c["epoch"]]
        want = sum(v * n for v, n in pairs) / sum(n for _, n in pairs)
        assert c["train_loss"] == pytest.approx(want, rel=1e-6)
