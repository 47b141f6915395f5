"""The optimiser implementation rule (issue 46, item 1): fused Adam/AdamW exactly when every
trainable parameter is a floating-point CUDA tensor, torch's default otherwise; the module
keeps the choice, and the cell's record stores it (cost.optimizer_impl)."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
import torch
from torch import nn

from tasks.common import module as M
from tests.helpers import toy_parts


def _p(cuda=True, dtype=torch.float32, grad=True, sparse=False):
    return SimpleNamespace(is_cuda=cuda, dtype=dtype, requires_grad=grad, is_sparse=sparse)


@pytest.mark.parametrize("params, impl", [
    ([_p(), _p(dtype=torch.bfloat16)], "fused"),
    ([_p(), _p(cuda=False)], "for-loop"),  # mixed devices: torch's default, no fused kernel
    ([_p(cuda=False)], "for-loop"),
    ([_p(), _p(dtype=torch.int64)], "foreach"),
    ([_p(), _p(sparse=True)], "foreach"),
    ([_p(), _p(cuda=False, grad=False)], "fused"),  # frozen parameters do not count
    ([], "for-loop"),
])
def test_choice_rule(params, impl):
    assert M.optimizer_impl(params) == impl


@pytest.mark.parametrize("optimizer, rule, fused, recorded", [
    ("adamw", "fused", True, "fused"), ("adam", "fused", True, "fused"), ("adamw", "for-loop", None, "for-loop"),
    ("sgd", "fused", None, "foreach"),
])
def test_module_applies_and_keeps_it(monkeypatch, optimizer, rule, fused, recorded):
    monkeypatch.setattr(M, "optimizer_impl", lambda params: rule)  # CPU fused Adam exists, so the kwarg is real
    module = toy_parts.Classifier(nn.Linear(3, 2), optimizer=optimizer)
    opt = module.configure_optimizers()
    opt = opt["optimizer"] if isinstance(opt, dict) else opt
    assert opt.defaults.get("fused") == fused and module.optimizer_impl == recorded


def test_cpu_module_records_for_loop():
    module = toy_parts.Classifier(nn.Linear(3, 2))
    module.configure_optimizers()
    assert module.optimizer_impl == "for-loop"
