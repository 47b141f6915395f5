"""FLOPs per sample count recurrent layers (issue 34 item 3): the fused oneDNN/cuDNN ops get the
rule the unfused path follows, checked against a hand count for LSTM, GRU and RNN, one and two
layers, one and two directions, padded and packed input."""

from __future__ import annotations

import pytest
import torch
from torch.utils.flop_counter import FlopCounterMode

from benchmarks.run.flops import FLOPS_RULE, flops_per_sample, register_recurrent_flops, rnn_flops

GATES = {torch.nn.LSTM: 4, torch.nn.GRU: 3, torch.nn.RNN: 1}


def hand_count(cls, inp: int, hidden: int, layers: int, dirs: int, tokens: int) -> int:
    """2 FLOPs per multiply-add of x W_ih^T and h W_hh^T at every token, per layer and direction;
    a layer above the first reads the directions' outputs side by side (dirs * hidden)."""
    total = 0
    for layer in range(layers):
        i = inp if layer == 0 else dirs * hidden
        total += dirs * 2 * tokens * GATES[cls] * hidden * (i + hidden)
    return total


def count(fn) -> int:
    with torch.no_grad(), FlopCounterMode(display=False) as c:
        fn()
    return c.get_total_flops()


@pytest.mark.parametrize("cls", [torch.nn.LSTM, torch.nn.GRU, torch.nn.RNN])
@pytest.mark.parametrize("layers,bidirectional", [(1, False), (2, False), (1, True), (2, True)])
@pytest.mark.parametrize("packed", [False, True])
def test_recurrent_layers_counted_like_a_hand_count(cls, layers, bidirectional, packed):
    register_recurrent_flops()
    torch.manual_seed(0)
    inp, hidden, batch, steps = 5, 7, 3, 6
    m = cls(inp, hidden, num_layers=layers, bidirectional=bidirectional, batch_first=True)
    x = torch.randn(batch, steps, inp)
    lengths = [6, 4, 2]
    if packed:
        seq = torch.nn.utils.rnn.pack_padded_sequence(x, lengths, batch_first=True, enforce_sorted=False)
        tokens = sum(lengths)
    else:
        seq, tokens = x, batch * steps
    assert count(lambda: m(seq)) == hand_count(cls, inp, hidden, layers, 2 if bidirectional else 1, tokens)


def test_the_fused_gpu_ops_follow_the_same_rule():
    """cuDNN's op gets the flat list of every layer's matrices and biases (no GPU needed: the
    formula on the shapes it receives)."""
    h, i = 7, 5
    weights = [(4 * h, i), (4 * h, h), (4 * h,), (4 * h,), (4 * h, 2 * h), (4 * h, h), (4 * h,), (4 * h,)]
    assert rnn_flops((6, 3, i), weights, False, []) == 2 * 18 * 4 * h * ((i + h) + (2 * h + h))
    assert rnn_flops((12, i), weights[:2], False, [3, 3, 2, 2, 1, 1]) == 2 * 12 * 4 * h * (i + h)


class _Out:
    samples = 4


class _Module(torch.nn.Module):
    """The parts of a task's LightningModule that flops_per_sample uses."""

    def __init__(self):
        super().__init__()
        self.lstm = torch.nn.LSTM(5, 7, batch_first=True)

    device = torch.device("cpu")

    def transfer_batch_to_device(self, batch, device, idx):
        return batch

    def step(self, batch, stage):
        self.lstm(batch)
        return _Out()


class _Data:
    def val_dataloader(self):
        return [torch.randn(4, 6, 5)]


def test_flops_per_sample_counts_an_unpacked_lstm():
    m = _Module()
    assert flops_per_sample(m, _Data()) == hand_count(torch.nn.LSTM, 5, 7, 1, 1, 24) / 4
    assert m.training and FLOPS_RULE == "matmul+recurrent+cpu_sdpa"


def test_cpu_sdpa_is_counted_like_the_gpu_flash_kernel():
    """CPU's fused SDPA op has no formula in torch (it counted 0): forward 4 * B * H * Lq * Lk * D,
    backward 2.5 times that (torch's flash formulas), every query-key pair of the padded batch."""
    from torch.utils.flop_counter import FlopCounterMode

    register_recurrent_flops()
    b, h, lq, lk, d = 2, 3, 5, 7, 8
    q = torch.randn(b, h, lq, d, requires_grad=True)
    k, v = torch.randn(b, h, lk, d, requires_grad=True), torch.randn(b, h, lk, d, requires_grad=True)
    with FlopCounterMode(display=False) as fc:
        out = torch.nn.functional.scaled_dot_product_attention(q, k, v, attn_mask=torch.zeros(b, 1, 1, lk))
    assert fc.get_total_flops() == 4 * b * h * lq * lk * d  # QK^T and AV, 2 FLOPs per multiply-add
    with FlopCounterMode(display=False) as fc:
        out.sum().backward()
    assert fc.get_total_flops() == 2.5 * 4 * b * h * lq * lk * d  # torch's flash backward: 5 products
