"""``attention`` and ``graph_attention`` do no host-device synchronisation on their default
paths: forward + backward run under a dispatch mode that counts the ops that sync on CUDA
(reading a scalar back, ops whose output size depends on values, boolean-mask indexing)."""

from __future__ import annotations

import pytest
import torch
from torch.utils._python_dispatch import TorchDispatchMode

from attn_core import add_self_loops, attention, graph_attention

_SYNC_OPS = {
    torch.ops.aten._local_scalar_dense.default,
    torch.ops.aten.nonzero.default,
    torch.ops.aten.masked_select.default,
    torch.ops.aten.unique_dim.default,
    torch.ops.aten._unique2.default,
    torch.ops.aten.is_nonzero.default,
}


class SyncCounter(TorchDispatchMode):
    """Records every dispatched op that synchronises host and device on CUDA."""

    def __init__(self) -> None:
        super().__init__()
        self.syncs: list[str] = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        bool_index = func in (torch.ops.aten.index.Tensor, torch.ops.aten.index_put_.default) and any(
            isinstance(i, torch.Tensor) and i.dtype == torch.bool for i in (args[1] or ())
        )
        if func in _SYNC_OPS or bool_index:
            self.syncs.append(str(func))
        return func(*args, **kwargs)


def _seq(b=2, h=2, lq=37, lk=37, d=8):
    g = torch.Generator().manual_seed(0)
    return [torch.randn(b, h, n, d, generator=g, requires_grad=True) for n in (lq, lk, lk)]


def _count(fn) -> list[str]:
    with SyncCounter() as counter:
        out = fn()
        out.sum().backward()
    return counter.syncs


KPM = torch.tensor([[True] * 30 + [False] * 7, [False] * 37])  # one ragged row, one fully padded


@pytest.mark.parametrize(
    "kw",
    [
        {},
        {"causal": True},
        {"key_padding_mask": KPM},
        {"key_padding_mask": KPM, "causal": True},
        {"window": 4},
        {"window": 4, "causal": True, "key_padding_mask": KPM},
    ],
    ids=["full", "causal", "padding", "causal-padding", "truncated", "truncated-causal-padding"],
)
def test_attention_does_not_sync(kw):
    q, k, v = _seq()
    assert _count(lambda: attention(q, k, v, **kw)) == []


@pytest.mark.parametrize("score", ["dot", "additive"])
def test_graph_attention_does_not_sync(score):
    g = torch.Generator().manual_seed(1)
    n = 40
    ei = add_self_loops(torch.randint(0, n, (2, 200), generator=g), n)  # built outside the counter
    q, k, v = (torch.randn(n, 2, 8, generator=g, requires_grad=True) for _ in range(3))
    assert _count(lambda: graph_attention(q, k, v, ei, score=score)) == []


def test_counter_sees_a_sync():
    """The counter can fail: ``.item()`` and boolean indexing are seen."""
    x = torch.randn(5)
    with SyncCounter() as counter:
        x.sum().item()
        x[x > 0]
    assert len(counter.syncs) >= 2
