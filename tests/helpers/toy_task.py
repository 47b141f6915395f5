"""A tiny task for runner tests: linearly separable points, a linear model, and models that
fail on purpose (raise, NaN, out of memory, crash the process, hang) or run slowly (to be
interrupted). Worker processes find it through ``ATTNBENCH_PLUGINS=tests.helpers.toy_task``.

Registering it imports neither torch nor Lightning: its parts (:mod:`tests.helpers.toy_parts`)
are imported when a cell builds them. Many tests start a driver process that registers this task
and hands its cells to workers; each such import would cost the driver seconds of CPU."""

from __future__ import annotations

from typing import Any

from tasks.common.registry import TASKS, DatasetSpec, ModelSpec, Task, register_task


def _module(net: Any, info: Any, **kw: Any) -> Any:
    from tests.helpers.toy_parts import Classifier

    return Classifier(net, **kw)


def _data(data_dir: Any, cache_dir: Any, seed: int, **p: Any) -> Any:
    from tests.helpers.toy_parts import ToyData

    return ToyData(seed, **p)


def _linear(info: dict, hidden: int = 0) -> Any:
    from torch import nn

    return nn.Linear(info["dim"], 2)


def _broken(info: dict, kind: str = "raise") -> Any:
    from tests.helpers.toy_parts import Broken

    return Broken(info, kind)


def register() -> Task:
    if "toy" in TASKS:
        return TASKS.get("toy")
    task = Task(name="toy", metric="acc", mode="max", make_module=_module, module_params={"lr": 0.05})
    task.datasets.register("points", DatasetSpec("points", _data, {"n": 256}, synthetic=True))
    task.models.register("linear", ModelSpec("linear", "other", _linear, {"hidden": 0}))
    task.models.register("broken", ModelSpec("broken", "attention", _broken, {"kind": "raise"}, pattern="full"))
    return register_task(task)
