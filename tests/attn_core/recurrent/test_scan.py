"""The parallel paths of attn_core.recurrent against plain loops: linear_scan (real, complex,
broadcast, initial state; gradients by gradcheck), fft_conv against the direct sum, segsum's
stability, ssd_scan against the sequential recurrence, and float32 against float64 at L=5000."""

from __future__ import annotations

import pytest
import torch

from attn_core.recurrent import fft_conv, linear_scan, segsum, ssd_scan

LENGTHS = (1, 2, 3, 7, 16, 33)


def loop_scan(a, b, h0=None):
    """``h_t = a_t h_{t-1} + b_t`` along dim 1, one step at a time."""
    a, b = torch.broadcast_tensors(a, b)
    h = torch.zeros_like(b[:, 0]) if h0 is None else h0
    out = []
    for t in range(b.shape[1]):
        h = a[:, t] * h + b[:, t]
        out.append(h)
    return torch.stack(out, 1)


def rand(*shape, dtype=torch.float64, g=None):
    if dtype.is_complex:
        return torch.complex(torch.randn(*shape, generator=g, dtype=torch.float64),
                             torch.randn(*shape, generator=g, dtype=torch.float64)).to(dtype)
    return torch.randn(*shape, generator=g, dtype=torch.float64).to(dtype)


@pytest.mark.parametrize("dtype", [torch.float64, torch.complex128])
@pytest.mark.parametrize("length", LENGTHS)
def test_linear_scan_matches_the_loop(length, dtype):
    g = torch.Generator().manual_seed(length)
    a, b, h0 = rand(3, length, 4, dtype=dtype, g=g) * 0.9, rand(3, length, 4, dtype=dtype, g=g), rand(3, 4, dtype=dtype, g=g)
    torch.testing.assert_close(linear_scan(a, b), loop_scan(a, b), rtol=1e-10, atol=1e-10)
    torch.testing.assert_close(linear_scan(a, b, h0), loop_scan(a, b, h0), rtol=1e-10, atol=1e-10)


def test_linear_scan_broadcasts_promotes_and_takes_any_dim():
    g = torch.Generator().manual_seed(0)
    a = torch.rand(2, 9, 3, 1, generator=g, dtype=torch.float64)  # real decay per channel
    b = rand(2, 9, 3, 5, dtype=torch.complex128, g=g)  # complex input per state
    h = linear_scan(a, b)
    assert h.shape == (2, 9, 3, 5) and h.dtype == torch.complex128
    torch.testing.assert_close(h, loop_scan(a.to(b.dtype), b))
    # time along the last dim
    torch.testing.assert_close(linear_scan(a.movedim(1, -1), b.movedim(1, -1), dim=-1), h.movedim(1, -1))


@pytest.mark.parametrize("dtype", [torch.float64, torch.complex128])
@pytest.mark.parametrize("length", [1, 2, 5, 8])
def test_linear_scan_gradients(length, dtype):
    """The reverse-scan backward (and its own backward) against finite differences."""
    g = torch.Generator().manual_seed(10 + length)
    a = (rand(2, length, 3, dtype=dtype, g=g) * 0.8).requires_grad_()
    b = rand(2, length, 3, dtype=dtype, g=g).requires_grad_()
    h0 = rand(2, 3, dtype=dtype, g=g).requires_grad_()
    assert torch.autograd.gradcheck(lambda a, b, h0: linear_scan(a, b, h0), (a, b, h0))
    assert torch.autograd.gradgradcheck(lambda a, b: linear_scan(a, b), (a, b))


def test_linear_scan_gradients_through_broadcast_and_promotion():
    g = torch.Generator().manual_seed(3)
    a = (torch.rand(2, 6, 3, 1, generator=g, dtype=torch.float64)).requires_grad_()
    b = rand(2, 6, 3, 2, dtype=torch.complex128, g=g).requires_grad_()
    assert torch.autograd.gradcheck(lambda a, b: linear_scan(a, b), (a, b))


@pytest.mark.parametrize("length", [1, 6, 31])
def test_fft_conv_is_the_causal_convolution(length):
    g = torch.Generator().manual_seed(length)
    u, k = rand(2, 3, length, g=g), rand(3, length, g=g)
    expected = torch.zeros_like(u)
    for t in range(length):
        for s in range(t + 1):
            expected[..., t] += k[:, s] * u[..., t - s]
    torch.testing.assert_close(fft_conv(u, k), expected, rtol=1e-10, atol=1e-10)


def test_segsum_values_and_stability():
    x = torch.randn(2, 6, dtype=torch.float64)
    out = segsum(x)
    for i in range(6):
        for j in range(6):
            want = x[:, j + 1 : i + 1].sum(-1) if i >= j else torch.full((2,), float("-inf"), dtype=x.dtype)
            torch.testing.assert_close(out[:, i, j], want)
    # one huge term early: a difference of cumulative sums loses the small ones after it in float32
    x = torch.tensor([-1e8, -0.25, -0.5, -0.125], dtype=torch.float32)
    assert segsum(x)[3, 1].item() == -0.625
    decay = torch.exp(segsum(torch.full((5,), -50.0, requires_grad=True)))
    decay.sum().backward()


def loop_ssd(x, log_a, B, C, h0=None):
    bt, length, h, p = x.shape
    s = torch.zeros(bt, h, p, B.shape[-1], dtype=x.dtype) if h0 is None else h0
    ys = []
    for t in range(length):
        s = torch.exp(log_a[:, t])[..., None, None] * s + x[:, t, :, :, None] * B[:, t, :, None, :]
        ys.append(torch.einsum("bhpn,bhn->bhp", s, C[:, t]))
    return torch.stack(ys, 1), s


def ssd_inputs(length, g, bt=2, h=3, p=2, n=4):
    return (rand(bt, length, h, p, g=g), -torch.rand(bt, length, h, generator=g, dtype=torch.float64),
            rand(bt, length, h, n, g=g), rand(bt, length, h, n, g=g), rand(bt, h, p, n, g=g))


@pytest.mark.parametrize("chunk", [1, 4, 64])
@pytest.mark.parametrize("length", [1, 7, 16])
def test_ssd_scan_matches_the_recurrence(length, chunk):
    x, log_a, B, C, h0 = ssd_inputs(length, torch.Generator().manual_seed(length * 100 + chunk))
    for init in (None, h0):
        y, final = ssd_scan(x, log_a, B, C, chunk_size=chunk, initial_state=init)
        y_ref, final_ref = loop_ssd(x, log_a, B, C, init)
        torch.testing.assert_close(y, y_ref, rtol=1e-10, atol=1e-10)
        torch.testing.assert_close(final, final_ref, rtol=1e-10, atol=1e-10)


def test_ssd_scan_gradients():
    x, log_a, B, C, h0 = (t.requires_grad_() for t in ssd_inputs(5, torch.Generator().manual_seed(7), 1, 2, 2, 2))
    assert torch.autograd.gradcheck(lambda *a: ssd_scan(*a[:4], chunk_size=2, initial_state=a[4]),
                                    (x, log_a, B, C, h0))


#: float32 against float64 at L=5000: the largest error relative to the largest |h| (see report)
F32_BOUND = 1e-5


def test_float32_stays_close_to_float64_at_length_5000():
    g = torch.Generator().manual_seed(0)
    length = 5000
    a = 1 - torch.rand(2, length, 8, generator=g, dtype=torch.float64) * 0.01  # |a| close to 1: long memory
    b = torch.randn(2, length, 8, generator=g, dtype=torch.float64)
    ac = a * torch.exp(1j * torch.rand(2, length, 8, generator=g, dtype=torch.float64))
    for aa in (a, ac):
        ref = linear_scan(aa, b)
        err = (linear_scan(aa.to(torch.complex64 if aa.is_complex() else torch.float32), b.float()) - ref).abs()
        assert err.max() / ref.abs().max() < F32_BOUND
    x, log_a, B, C, _ = ssd_inputs(length, g, 1, 2, 4, 8)
    log_a = log_a * 0.01
    ref, _ = ssd_scan(x, log_a, B, C, chunk_size=64)
    out, _ = ssd_scan(*(t.float() for t in (x, log_a, B, C)), chunk_size=64)
    assert (out - ref).abs().max() / ref.abs().max() < F32_BOUND
