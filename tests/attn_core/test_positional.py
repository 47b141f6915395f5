"""Sinusoidal and learned positional encodings: formula by hand, offsets, errors."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from attn_core.positional import LearnedPositionalEmbedding, SinusoidalPositionalEncoding


def _pe_by_hand(pos: int, dim: int) -> np.ndarray:
    """Attention Is All You Need, section 3.5, one position at a time in float64."""
    out = np.empty(dim, dtype=np.float64)
    for c in range(dim):
        i = c // 2
        angle = pos / 10000.0 ** (2 * i / dim)
        out[c] = math.sin(angle) if c % 2 == 0 else math.cos(angle)
    return out


@pytest.mark.parametrize("dim", [8, 7])
def test_sinusoidal_matches_paper_formula(dim):
    pe = SinusoidalPositionalEncoding(dim, max_len=600)
    positions = [0, 1, 5, 37, 511]
    expected = np.stack([_pe_by_hand(p, dim) for p in positions])
    # Table (stored in float32: within float32 rounding of the float64 formula).
    np.testing.assert_allclose(pe.pe[positions].double().numpy(), expected, rtol=0, atol=1e-7)
    # Forward adds it (float64 input), with an offset too.
    x = torch.randn(2, 600, dim, dtype=torch.float64)
    y = pe(x)
    np.testing.assert_allclose((y - x)[1, positions].numpy(), expected, rtol=0, atol=1e-7)
    y = pe(x[:, :100], offset=37)
    np.testing.assert_allclose((y - x[:, :100])[0, 0].numpy(), _pe_by_hand(37, dim), rtol=0, atol=1e-7)
    np.testing.assert_allclose((y - x[:, :100])[0, 5].numpy(), _pe_by_hand(42, dim), rtol=0, atol=1e-7)


def test_sinusoidal_buffer_not_in_state_dict_and_grad_passes():
    pe = SinusoidalPositionalEncoding(6, max_len=20)
    assert "pe" not in pe.state_dict() and list(pe.parameters()) == []
    x = torch.randn(2, 4, 6, dtype=torch.float64, requires_grad=True)
    (pe(x) * torch.arange(6.0, dtype=torch.float64)).sum().backward()
    torch.testing.assert_close(x.grad, torch.arange(6.0, dtype=torch.float64).expand(2, 4, 6))


def test_sinusoidal_dropout_only_in_training():
    pe = SinusoidalPositionalEncoding(16, max_len=50, dropout=0.5)
    x = torch.randn(4, 50, 16)
    pe.eval()
    base = pe(x)
    torch.testing.assert_close(base, x + pe.pe[:50])
    pe.train()
    y = pe(x)
    zeroed = y == 0
    assert 0.3 < zeroed.float().mean() < 0.7
    torch.testing.assert_close(y[~zeroed], 2 * base[~zeroed])


def test_learned_offset_and_grads():
    torch.manual_seed(0)
    emb = LearnedPositionalEmbedding(4, 10)
    x = torch.randn(2, 3, 4)
    y = emb(x, offset=5)
    torch.testing.assert_close(y, x + emb.embedding.weight[5:8][None])
    # Incremental decoding: step t with offset t equals slicing the full-sequence output.
    full = emb(torch.zeros(1, 10, 4))
    for t in range(10):
        torch.testing.assert_close(emb(torch.zeros(1, 1, 4), offset=t), full[:, t : t + 1])
    # Only the used rows get gradient.
    emb(x, offset=5).sum().backward()
    g = emb.embedding.weight.grad
    assert torch.all(g[5:8] == 2.0) and torch.all(g[:5] == 0) and torch.all(g[8:] == 0)


@pytest.mark.parametrize("make", [
    lambda: SinusoidalPositionalEncoding(4, max_len=8),
    lambda: LearnedPositionalEmbedding(4, 8),
])
def test_too_long_and_bad_input_raise(make):
    m = make()
    m(torch.zeros(1, 8, 4))  # exactly max_len is fine
    with pytest.raises(ValueError, match="max_len=8"):
        m(torch.zeros(1, 9, 4))
    with pytest.raises(ValueError, match="max_len=8"):
        m(torch.zeros(1, 4, 4), offset=5)
    with pytest.raises(ValueError, match="offset"):
        m(torch.zeros(1, 4, 4), offset=-1)
    with pytest.raises(ValueError, match="x"):
        m(torch.zeros(1, 4, 5))
    with pytest.raises(ValueError, match="x"):
        m(torch.zeros(4, 4))


@pytest.mark.parametrize("build, match", [
    (lambda: SinusoidalPositionalEncoding(0), "d_model"),
    (lambda: SinusoidalPositionalEncoding(4, max_len=0), "max_len"),
    (lambda: SinusoidalPositionalEncoding(4, dropout=1.5), "dropout"),
    (lambda: LearnedPositionalEmbedding(4, -1), "max_len"),
    (lambda: LearnedPositionalEmbedding(2.0, 4), "d_model"),
])
def test_bad_construction_raises(build, match):
    with pytest.raises(ValueError, match=match):
        build()


@pytest.mark.parametrize("cls", [SinusoidalPositionalEncoding, LearnedPositionalEmbedding])
def test_both_take_width_then_max_len(cls):
    """Issue 32: one argument order for both position modules, ``(d_model, max_len, dropout)``."""
    m = cls(4, 8, 0.25)
    assert (m.d_model, m.max_len, m.dropout.p) == (4, 8, 0.25)
    assert m.extra_repr() == "d_model=4, max_len=8"
