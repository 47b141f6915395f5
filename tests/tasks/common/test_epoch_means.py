"""One process logs each stage's loss and metrics once per epoch from sums kept on the device
(:class:`tasks.common.module.EpochMeans`) instead of ``self.log`` per step: the logged values
must equal Lightning's own per-step ``on_epoch`` means (the several-ranks path, which still logs
per step), with uneven batches."""

from __future__ import annotations

import pytest

from tasks.common.module import TaskModule
from tests.helpers.uneven_task import PerStep, Toy, train as _train


def test_epoch_means_equal_lightnings_per_step_means() -> None:
    _, fast, fast_test = _train(Toy)
    _, ref, ref_test = _train(PerStep)
    assert set(fast) == set(ref) == {"val0", "val1", "val2", "train"}
    for key in ref:
        assert set(fast[key]) == set(ref[key]), key
        for name, v in ref[key].items():
            assert fast[key][name] == pytest.approx(v, rel=1e-6, abs=1e-7), (key, name)
    assert set(fast_test[0]) == set(ref_test[0]) == {"test/loss", "test/acc", "test/host"}
    for name, v in ref_test[0].items():
        assert fast_test[0][name] == pytest.approx(v, rel=1e-6, abs=1e-7), name


def test_one_process_logs_once_per_epoch_not_per_step(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[str] = []
    original = TaskModule.log

    def counting(self, name, *args, **kwargs):
        calls.append(name)
        return original(self, name, *args, **kwargs)

    monkeypatch.setattr(TaskModule, "log", counting)
    _train(Toy)
    # 3 epochs x (train: 3 names once, val: 3 names once) + test 3 names; per step it would be 3x more
    assert sorted(calls) == sorted(["train/loss", "train/acc", "train/host"] * 3 + ["val/loss", "val/acc", "val/host"] * 3
                                   + ["test/loss", "test/acc", "test/host"])
