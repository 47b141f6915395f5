"""Lightning's fixed per-step host cost on the cell path (``attnbench bench train``'s cell/bare
ratio): the trainer's profiler hands out one shared null context instead of a generator context
manager per hook call, and a task module's ``_current_fx_name``, set and restored around every
hook call, skips nn.Module's parameter/buffer/module checks. Counted in Python calls (the
profiler's hooks), not timed: deterministic on any machine."""

from __future__ import annotations

import sys

import torch

from benchmarks.run.callbacks import null_profiler
from tasks.common.module import TaskModule


def _calls(fn) -> int:
    n = [0]

    def prof(frame, event, arg):
        if event in ("call", "c_call"):
            n[0] += 1

    sys.setprofile(prof)
    try:
        fn()
    finally:
        sys.setprofile(None)
    return n[0]


def test_null_profiler_hands_out_one_shared_null_context() -> None:
    p = null_profiler()
    a, b = p.profile("[Callback]x.on_train_batch_start"), p.profile("[LightningModule]y.training_step")
    assert a is b
    with a:  # nested hook calls (a callback hook inside a module hook) nest the same context
        with b:
            pass
    from lightning.pytorch.profilers import PassThroughProfiler

    def hook(prof):
        with prof.profile("[Callback]x.on_train_batch_start"):
            pass
    ours, default = _calls(lambda: hook(p)), _calls(lambda: hook(PassThroughProfiler()))
    assert ours * 2 <= default, (ours, default)  # 6 vs 17 Python calls a hook call (Lightning 2.6.6)


def test_cell_trainer_uses_the_null_profiler(tmp_path) -> None:
    from benchmarks.config.suite import expand, load_suite
    from benchmarks.run.cell import _trainer_kwargs
    from benchmarks.run.runner import RunOptions

    cell = expand(load_suite("benchmarks/configs/quick.yaml", ["trainer.accelerator=cpu"]))[0]
    kw = _trainer_kwargs(cell, RunOptions(out=tmp_path), tmp_path)
    assert type(kw["profiler"]).__name__ == "NullProfiler"


class _Tiny(TaskModule):
    def step(self, batch, stage):  # pragma: no cover - not trained here
        raise NotImplementedError


def test_current_fx_name_is_a_plain_attribute_set_cheaply() -> None:
    m = _Tiny(torch.nn.Linear(2, 2))
    ours = _calls(lambda: setattr(m, "_current_fx_name", "training_step"))
    default = _calls(lambda: torch.nn.Module.__setattr__(m, "_current_fx_name", "training_step"))
    assert ours * 2 <= default, (ours, default)  # 4 vs 15 Python calls (torch 2.14)
    assert m._current_fx_name == "training_step"
    m._current_fx_name = None
    assert m._current_fx_name is None and "_current_fx_name" not in m._modules
    # every other attribute still goes through nn.Module: modules and parameters register
    m.extra = torch.nn.Linear(2, 3)
    m.scale = torch.nn.Parameter(torch.ones(1))
    assert "extra" in m._modules and "scale" in m._parameters
    assert {n for n, _ in m.named_parameters()} >= {"net.weight", "extra.weight", "scale"}
