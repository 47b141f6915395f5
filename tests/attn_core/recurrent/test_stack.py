"""RecurrentEncoder: the stack is its blocks composed, padded batches are exact (both
directions), step() and a prompt read in parallel then stepped equal the causal pass."""

from __future__ import annotations

import pytest
import torch

from attn_core.recurrent import Bidirectional, RecurrentEncoder

from tests.attn_core.recurrent.naive import D_MODEL

PARAMS = {"min_rnn": {"kind": "lstm"}, "s4d": {"d_state": 4}, "mamba2": {"d_state": 4, "headdim": 4, "chunk_size": 4},
          "lru": {"hidden_size": 6}}


def _stack(name, bidirectional=False):
    torch.manual_seed(0)
    enc = RecurrentEncoder(name, D_MODEL, 2, bidirectional=bidirectional, params=PARAMS[name]).double()
    with torch.no_grad():  # random norms too (unit weights, zero biases would hide a skipped norm)
        for p in enc.parameters():
            p.add_(torch.randn(p.shape, dtype=p.dtype) * 0.1)
    return enc.eval()


def test_the_stack_is_its_blocks_composed():
    enc = _stack("lru")
    x = torch.randn(2, 7, D_MODEL, dtype=torch.float64)
    h = x
    for layer, norm in zip(enc.layers, enc.norms):
        h = h + layer(norm(h))
    torch.testing.assert_close(enc(x), enc.final_norm(h))


@pytest.mark.parametrize("bidirectional", [False, True], ids=["causal", "bidirectional"])
@pytest.mark.parametrize("name", list(PARAMS))
def test_padded_stack_equals_each_sequence_alone(name, bidirectional):
    enc = _stack(name, bidirectional)
    assert all(isinstance(layer, Bidirectional) == bidirectional for layer in enc.layers)
    lengths = [6, 1, 9]
    x = torch.randn(3, 9, D_MODEL, dtype=torch.float64)
    mask = torch.arange(9)[None] < torch.tensor(lengths)[:, None]
    x = x.masked_fill(~mask[..., None], float("nan")).requires_grad_()
    y = enc(x, lengths=torch.tensor(lengths))
    assert not y[~mask].any()
    g_x, = torch.autograd.grad(y.sum(), [x])
    assert not g_x[~mask].any()
    for b, n in enumerate(lengths):
        xb = x[b : b + 1, :n].detach().requires_grad_()
        yb = enc(xb)
        torch.testing.assert_close(y[b : b + 1, :n], yb)
        torch.testing.assert_close(g_x[b : b + 1, :n], torch.autograd.grad(yb.sum(), [xb])[0])


@pytest.mark.parametrize("name", list(PARAMS))
def test_stack_step_and_prompt_equal_the_causal_pass(name):
    enc = _stack(name)
    x = torch.randn(2, 8, D_MODEL, dtype=torch.float64)
    y = enc(x)
    state = None
    for t in range(8):
        y_t, state = enc.step(x[:, t], state)
        torch.testing.assert_close(y_t, y[:, t])
    y3, state = enc(x[:, :3], return_state=True)
    for t in range(3, 8):
        y_t, state = enc.step(x[:, t], state)
        torch.testing.assert_close(y_t, y[:, t])


def test_a_bidirectional_stack_refuses_step_in_one_line():
    enc = _stack("lru", bidirectional=True)
    with pytest.raises(NotImplementedError, match="has no step\\(\\): it is bidirectional"):
        enc.step(torch.zeros(1, D_MODEL, dtype=torch.float64))
    with pytest.raises(ValueError, match="return_state=True needs a causal stack"):
        enc(torch.zeros(1, 3, D_MODEL, dtype=torch.float64), return_state=True)
    with pytest.raises(ValueError, match=r"norm='batch' is invalid: expected one of 'layer', 'rms'"):
        RecurrentEncoder("lru", D_MODEL, norm="batch")
