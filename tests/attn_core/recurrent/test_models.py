"""Each recurrent layer against its own naive sequential loop (float64, values and gradients,
fresh random inputs, odd lengths and L=1), its step() against its parallel pass at every
position, S4D's FFT against its step(), and float32 against float64 at L=5000."""

from __future__ import annotations

import pytest
import torch

from attn_core.recurrent import S4D

from tests.attn_core.recurrent.naive import CASES, D_MODEL, make

IDS = [c[0] for c in CASES]


def grads(m, x, y):
    w = torch.randn(y.shape, generator=torch.Generator().manual_seed(5), dtype=y.dtype)
    params = [p for p in m.parameters()]
    return torch.autograd.grad((y * w).sum(), [x, *params], allow_unused=True)


@pytest.mark.parametrize("length", [1, 5, 13])
@pytest.mark.parametrize("name,cls,kwargs,loop", CASES, ids=IDS)
def test_layer_matches_its_sequential_loop(name, cls, kwargs, loop, length):
    m = make(cls, kwargs, seed=length)
    x = torch.randn(3, length, D_MODEL, dtype=torch.float64, requires_grad=True)
    y, y_ref = m(x), loop(m, x)
    assert y.shape == (3, length, D_MODEL)
    torch.testing.assert_close(y, y_ref, rtol=1e-9, atol=1e-10)
    for got, want in zip(grads(m, x, y), grads(m, x, y_ref)):
        if want is None:
            assert got is None or not got.any()
        else:
            torch.testing.assert_close(got, want, rtol=1e-8, atol=1e-10)


@pytest.mark.parametrize("name,cls,kwargs,loop", CASES, ids=IDS)
def test_step_equals_the_causal_pass_at_every_position(name, cls, kwargs, loop):
    m = make(cls, kwargs, seed=3).eval()
    x = torch.randn(2, 11, D_MODEL, dtype=torch.float64)
    y = m(x)
    state = None
    for t in range(x.shape[1]):
        y_t, state = m.step(x[:, t], state)
        torch.testing.assert_close(y_t, y[:, t], rtol=1e-9, atol=1e-10)


@pytest.mark.parametrize("name,cls,kwargs,loop", CASES, ids=IDS)
def test_prompt_read_in_parallel_then_stepped_equals_the_causal_pass(name, cls, kwargs, loop):
    """forward(return_state=True) hands step() the state after the prompt (S4D: from its FFT
    path, Mamba-2: the convolution window too, also for a prompt shorter than it)."""
    m = make(cls, kwargs, seed=8).eval()
    x = torch.randn(2, 10, D_MODEL, dtype=torch.float64)
    y = m(x)
    for prompt in (1, 2, 5, 10):
        y_prompt, state = m(x[:, :prompt], return_state=True)
        torch.testing.assert_close(y_prompt, y[:, :prompt])
        for t in range(prompt, x.shape[1]):
            y_t, state = m.step(x[:, t], state)
            torch.testing.assert_close(y_t, y[:, t], rtol=1e-9, atol=1e-10)


def test_s4d_fft_kernel_equals_its_step_response():
    """The FFT path's kernel is the impulse response of the recurrence step() runs."""
    m = make(S4D, {"d_state": 16}, seed=4)
    length = 40
    kernel = m.kernel(length)  # (H, L)
    impulse = torch.zeros(1, D_MODEL, dtype=torch.float64)
    dta, a, _ = m._discrete()
    s = m.init_state(1, dtype=torch.float64)["x"]
    c = torch.view_as_complex(m.C)
    for t in range(length):
        s = torch.exp(dta) * s + (torch.exp(dta) - 1) / a * (impulse + (t == 0))[..., None]
        torch.testing.assert_close(2 * (c * s).sum(-1).real[0], kernel[:, t], rtol=1e-9, atol=1e-12)


@pytest.mark.parametrize("length", [1, 2, 3, 16, 17, 40, 101, 5000])
def test_s4d_blocked_vandermonde_equals_the_direct_one(length):
    """The kernel and the final state from blocks of powers (one matmul) equal the sums over
    every ``z^l`` written out, float64, for lengths on and off a square."""
    from attn_core.recurrent.s4d import _power_blocks

    m = make(S4D, {"d_state": 16}, seed=5)
    dta, a, c = m._discrete()
    powers = torch.exp(dta[..., None] * torch.arange(length, dtype=torch.float64))  # (H, N/2, L)
    zr, zq, mm = _power_blocks(dta, length)
    assert zq.shape[-1] * mm >= length and zq.shape[-1] <= mm
    want = 2 * torch.einsum("hn,hnl->hl", c, powers).real
    torch.testing.assert_close(m.kernel(length), want, rtol=1e-10, atol=1e-12)
    x = torch.randn(2, length, D_MODEL, generator=torch.Generator().manual_seed(1), dtype=torch.float64)
    mask = torch.arange(length)[None] < torch.tensor([length, max(1, length // 2)])[:, None]
    x = x * mask[..., None]  # the layer zeroes padding before it gets here
    u_rev = torch.stack([torch.cat([x[b, :n].flip(0), torch.zeros(length - n, D_MODEL, dtype=x.dtype)])
                         for b, n in enumerate(mask.sum(1).tolist())]).transpose(1, 2)  # (B, H, L)
    state = torch.einsum("bhl,hnl->bhn", u_rev.to(powers.dtype), powers) * (torch.exp(dta) - 1.0) / a
    torch.testing.assert_close(m._final_state(x, mask)["x"], state, rtol=1e-10, atol=1e-12)


#: float32 against float64 at L=5000, largest error over largest |y|: measured 1.3e-7 (minGRU)
#: to 1.6e-6 (S4D) on a 2-core AMD EPYC (AVX2); the bound leaves a margin for other CPUs/BLAS
F32_BOUND = 1e-5


@pytest.mark.parametrize("name,cls,kwargs,loop", CASES, ids=IDS)
def test_float32_stays_close_to_float64_at_length_5000(name, cls, kwargs, loop):
    kwargs = {**kwargs, "chunk_size": 64} if name == "mamba2" else kwargs
    m = make(cls, kwargs, seed=6)
    x = torch.randn(2, 5000, D_MODEL, generator=torch.Generator().manual_seed(0), dtype=torch.float64)
    with torch.no_grad():
        ref = m(x)
        out = m.float()(x.float())
    assert ((out - ref).abs().max() / ref.abs().max()).item() < F32_BOUND
