"""The speech CNN's BatchNorm counts real frames only: in training it equals ``nn.BatchNorm1d``
run on the real frames alone (outputs, gradients, running statistics), whatever the padding."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from tasks.speech.models import MaskedBatchNorm1d


def _batch(seed: int, lengths: list[int], pad_to: int, c: int = 5):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(len(lengths), c, pad_to, generator=g, dtype=torch.float64) * 3 + 1  # (B, C, L)
    m = (torch.arange(pad_to)[None, :] < torch.tensor(lengths)[:, None])[:, None].double()  # (B, 1, L)
    return x, m


@pytest.mark.parametrize("momentum", [0.1, None])
@pytest.mark.parametrize("pad_to", [9, 30])
def test_training_equals_batchnorm_on_the_real_frames(momentum, pad_to):
    lengths = [9, 4, 7]
    x, m = _batch(pad_to, lengths, pad_to)
    ours, ref = MaskedBatchNorm1d(5, momentum=momentum).double(), nn.BatchNorm1d(5, momentum=momentum).double()
    with torch.no_grad():
        ours.weight.uniform_(0.5, 2, generator=torch.Generator().manual_seed(1))
        ours.bias.normal_(generator=torch.Generator().manual_seed(2))
    ref.load_state_dict(ours.state_dict())  # the same keys
    real = torch.cat([x[b, :, :n] for b, n in enumerate(lengths)], 1)[None]  # (1, C, sum n)
    for step in range(3):  # running statistics over several steps
        xo, xr = x.clone().requires_grad_(), real.clone().requires_grad_()
        out, want = ours(xo, m), ref(xr)
        got = torch.cat([out[b, :, :n] for b, n in enumerate(lengths)], 1)[None]
        torch.testing.assert_close(got, want)
        torch.autograd.backward(got, torch.ones_like(got) * (step + 1))
        torch.autograd.backward(want, torch.ones_like(want) * (step + 1))
        grad = torch.cat([xo.grad[b, :, :n] for b, n in enumerate(lengths)], 1)[None]
        torch.testing.assert_close(grad, xr.grad)
    for key in ("running_mean", "running_var", "num_batches_tracked"):
        torch.testing.assert_close(getattr(ours, key), getattr(ref, key))
    ours.eval(), ref.eval()
    torch.testing.assert_close(ours(x, m)[:, :, :4], ref(x)[:, :, :4])  # evaluation: running statistics
