"""run_padded against packing (the reference): outputs, final states and gradients."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from tasks.common.rnn import reverse_within, run_padded
from tests.helpers.sync import count_syncs


def _packed(rnn: nn.RNNBase, x: torch.Tensor, lengths: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    packed = nn.utils.rnn.pack_padded_sequence(x, lengths, batch_first=True, enforce_sorted=False)
    out, h = rnn(packed)
    h = h[0] if isinstance(h, tuple) else h  # (layers * dirs, B, H)
    out, _ = nn.utils.rnn.pad_packed_sequence(out, batch_first=True, total_length=x.shape[1])
    final = torch.cat([h[-2], h[-1]], -1) if rnn.bidirectional else h[-1]
    return out, final


@pytest.mark.parametrize("kind", [nn.LSTM, nn.GRU])
@pytest.mark.parametrize("bidirectional", [True, False])
@pytest.mark.parametrize("dtype,tol", [(torch.float32, 1e-5), (torch.float64, 1e-10)])
def test_run_padded_equals_packing(kind, bidirectional: bool, dtype, tol: float) -> None:
    torch.manual_seed(0)
    rnn = kind(5, 7, num_layers=2, batch_first=True, bidirectional=bidirectional, dropout=0.3).to(dtype).eval()
    lengths = torch.tensor([6, 1, 4, 6, 3])
    x = torch.randn(5, 6, 5, dtype=dtype, requires_grad=True)
    mask = torch.arange(6)[None] < lengths[:, None]
    ref_out, ref_final = _packed(rnn, x, lengths)
    g = torch.randn_like(ref_out)
    ref_grads = torch.autograd.grad((ref_out * g).sum() + ref_final.sum(), [x, *rnn.parameters()])
    out, final = run_padded(rnn, x, mask)
    torch.testing.assert_close(out, ref_out, atol=tol, rtol=tol)
    torch.testing.assert_close(final, ref_final, atol=tol, rtol=tol)
    grads = torch.autograd.grad((out * g).sum() + final.sum(), [x, *rnn.parameters()])
    for a, b in zip(grads, ref_grads):
        torch.testing.assert_close(a, b, atol=tol * 10, rtol=tol * 10)


def test_reverse_within_keeps_padding_in_place() -> None:
    x = torch.arange(8.0).view(2, 4, 1)
    out = reverse_within(x, torch.tensor([3, 4]))
    assert out[..., 0].tolist() == [[2.0, 1.0, 0.0, 3.0], [7.0, 6.0, 5.0, 4.0]]


def test_run_padded_does_not_sync() -> None:
    rnn = nn.LSTM(3, 4, num_layers=2, batch_first=True, bidirectional=True)
    x, mask = torch.randn(2, 5, 3), torch.tensor([[1, 1, 1, 0, 0], [1, 1, 1, 1, 1]], dtype=torch.bool)
    with count_syncs() as c:
        out, final = run_padded(rnn, x, mask)
        (out.sum() + final.sum()).backward()
    assert not c.syncs, c.summary()
