"""The optional fused kernels (``backend="fla"``, :mod:`attn_core.recurrent.backends`).

On CPU: the choice is checked, asking for fla without CUDA is one clear error, the stable
``log a`` the HGRN kernel reads equals ``log(a)``, and the adapters' argument mapping is right:
with stand-ins that compute fla's documented recurrences naively, the fla path equals the pure
one (values and gradients, padded batches). On a GPU with flash-linear-attention installed, the
real kernels against the pure path (``-m gpu``; skipped without either)."""

from __future__ import annotations

import importlib.util
from types import SimpleNamespace

import pytest
import torch

from attn_core.recurrent import Mamba2, MinRNN, get_recurrence
from attn_core.recurrent import backends as K
from tasks.common.recurrence import recurrence_params


def _hgrn_naive(x, g, initial_state=None, output_final_state=False):
    """fla's HGRN: ``h_t = exp(g_t) h_{t-1} + x_t``, ``(B, T, D)``."""
    h, out = torch.zeros_like(x[:, 0]), []
    for t in range(x.shape[1]):
        h = g[:, t].exp() * h + x[:, t]
        out.append(h)
    return torch.stack(out, 1), (h if output_final_state else None)


def _simple_gla_naive(q, k, v, g=None, scale=None, initial_state=None, output_final_state=False):
    """fla's simple GLA: ``S_t = exp(g_t) S_{t-1} + k_t v_t^T`` (K x V per head),
    ``o_t = scale q_t^T S_t``; ``q, k (B, T, H, K)``, ``v (B, T, H, V)``, ``g (B, T, H)``."""
    scale = k.shape[-1] ** -0.5 if scale is None else scale
    s = q.new_zeros(q.shape[0], q.shape[2], k.shape[-1], v.shape[-1])  # (B, H, K, V)
    out = []
    for t in range(q.shape[1]):
        s = g[:, t, :, None, None].exp() * s + k[:, t, :, :, None] * v[:, t, :, None, :]
        out.append(scale * torch.einsum("bhk,bhkv->bhv", q[:, t], s))
    return torch.stack(out, 1), (s if output_final_state else None)


@pytest.fixture
def fake_fla(monkeypatch):
    """fla's two ops as their naive recurrences, on any device."""
    mods = {"fla.ops.hgrn": SimpleNamespace(chunk_hgrn=_hgrn_naive),
            "fla.ops.simple_gla": SimpleNamespace(chunk_simple_gla=_simple_gla_naive)}
    monkeypatch.setattr(K, "_fla", lambda name, device: mods[name])


def _batch(seed, b=3, length=23, d=16):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(b, length, d, generator=g, dtype=torch.float64)
    lengths = torch.tensor([length, 1, 11])[:b]
    return x, torch.arange(length)[None] < lengths[:, None]  # (B, L), True = real


def _same_with_both_kernels(make, seed):
    x, mask = _batch(seed)
    outs = []
    for backend in ("pure", "fla"):
        torch.manual_seed(seed)
        layer = make(backend).double()
        xi = x.clone().requires_grad_()
        y = layer(xi, key_padding_mask=mask)
        grads = torch.autograd.grad((y * mask[..., None]).square().sum(), [xi, *layer.parameters()])
        outs.append((y, grads))
    (y0, g0), (y1, g1) = outs
    torch.testing.assert_close(y1[mask], y0[mask], atol=1e-10, rtol=1e-10)
    for a, b in zip(g1, g0):
        torch.testing.assert_close(a, b, atol=1e-9, rtol=1e-9)


@pytest.mark.parametrize("kind", ["gru", "lstm"])
def test_min_rnn_fla_path_maps_onto_hgrn(fake_fla, kind):
    _same_with_both_kernels(lambda k: MinRNN(16, kind=kind, backend=k), seed=1)


def test_mamba2_fla_path_maps_onto_simple_gla(fake_fla):
    _same_with_both_kernels(lambda k: Mamba2(16, d_state=8, headdim=8, chunk_size=8, backend=k), seed=2)


def test_mamba2_final_state_is_the_pure_paths(fake_fla):
    g = torch.Generator().manual_seed(3)
    x, log_a = torch.randn(2, 19, 3, 4, generator=g), -torch.rand(2, 19, 3, generator=g)
    b, c = torch.randn(2, 19, 3, 5, generator=g), torch.randn(2, 19, 3, 5, generator=g)
    y0, s0 = K.ssd(x, log_a, b, c, chunk_size=8)
    y1, s1 = K.ssd(x, log_a, b, c, chunk_size=8, backend="fla")
    torch.testing.assert_close(y1, y0, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(s1, s0, atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("kind", ["gru", "lstm"])
def test_min_rnn_log_a_is_log_of_a_and_finite_where_a_underflows(kind):
    layer = MinRNN(8, kind=kind).double()
    x = torch.randn(4, 9, 8, dtype=torch.float64) * 3
    a, _, log_a = layer._coefficients(x, log=True)
    torch.testing.assert_close(log_a, a.log(), atol=1e-12, rtol=1e-10)
    with torch.no_grad():  # gates saturate so that a = 0 in float32: z = 1 (gru); f = 0, i = 1 (lstm)
        layer.in_proj.bias.zero_()
        if kind == "gru":
            layer.in_proj.bias[:8] = 60.0
        else:
            layer.in_proj.bias[:8], layer.in_proj.bias[8:16] = -120.0, 60.0
    a32, _, log32 = layer.float()._coefficients(x.float(), log=True)
    assert (a32 == 0).any() and torch.isfinite(log32).all() and (log32 < -30).any()


def test_kernel_choice_and_the_cpu_refusal():
    with pytest.raises(ValueError, match=r"backend='triton' is invalid: expected one of 'pure', 'fla'"):
        MinRNN(8, backend="triton")
    layer = MinRNN(8, backend="fla")
    with pytest.raises(ValueError, match=r"backend='fla' runs on CUDA only, and the input is on cpu"):
        layer(torch.randn(2, 5, 8))


def test_cells_with_a_fused_kernel_and_their_params():
    assert get_recurrence("min_rnn").gpu_kernel and get_recurrence("mamba2").gpu_kernel
    assert not get_recurrence("s4d").gpu_kernel and not get_recurrence("lru").gpu_kernel
    assert recurrence_params("mingru", None) == ("min_rnn", {"kind": "gru"})  # default: no key, ids unchanged
    assert recurrence_params("mamba2", 16, "fla") == ("mamba2", {"d_state": 16, "backend": "fla"})
    with pytest.raises(ValueError, match=r"cell 's4d' has no fused kernel .*cells with one: mingru, minlstm, mamba2"):
        recurrence_params("s4d", None, "fla")
    with pytest.raises(ValueError, match=r"backend='cuda'; valid: pure, fla"):
        recurrence_params("mingru", None, "cuda")


# ----------------------------------------------------------------------------- GPU, real fla
@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
@pytest.mark.skipif(importlib.util.find_spec("fla") is None, reason="needs flash-linear-attention")
@pytest.mark.parametrize("make", [lambda k: MinRNN(64, backend=k), lambda k: MinRNN(64, kind="lstm", backend=k),
                                  lambda k: Mamba2(64, d_state=16, headdim=16, backend=k)],
                         ids=["mingru", "minlstm", "mamba2"])
def test_fla_kernels_on_cuda_equal_the_pure_path(make):
    g = torch.Generator().manual_seed(0)
    x = torch.randn(3, 300, 64, generator=g).cuda()
    mask = (torch.arange(300)[None] < torch.tensor([300, 1, 157])[:, None]).cuda()
    if isinstance(make("pure"), Mamba2) and K.fla_backward_refused(x.device):
        # fla refuses this backward here (Hopper, Triton 3.4-3.7.0, no tilelang): one line before the
        # forward pass; the forward alone runs and equals the pure path
        with pytest.raises(ValueError, match=r"backend='fla' cannot train Mamba-2 here: fla refuses"):
            make("fla").cuda()(x.clone().requires_grad_(), key_padding_mask=mask)
        with torch.no_grad():
            ys = []
            for backend in ("pure", "fla"):
                torch.manual_seed(0)
                ys.append(make(backend).cuda()(x, key_padding_mask=mask)[mask])
        assert ((ys[1] - ys[0]).abs().max() / (1 + ys[0].abs().max())).item() < 1e-3
        return
    res = []
    for backend in ("pure", "fla"):
        torch.manual_seed(0)
        layer = make(backend).cuda()
        xi = x.clone().requires_grad_()
        y = layer(xi, key_padding_mask=mask)
        gx = torch.autograd.grad((y * mask[..., None]).square().sum(), xi)[0]
        res.append((y[mask], gx))
    (y0, g0), (y1, g1) = res
    rel = lambda a, b: ((a - b).abs().max() / (1 + b.abs().max())).item()  # noqa: E731
    assert rel(y1, y0) < 1e-3 and rel(g1, g0) < 1e-3, (rel(y1, y0), rel(g1, g0))  # tf32-level



@pytest.mark.parametrize("capability,triton,tilelang,refused", [
    ((9, 0), "3.6.0", False, True),          # the H100 image of 2026-11-27: fla raised in the backward
    ((9, 0), "3.4.0", False, True),
    ((9, 0), "3.7.1", False, False),         # fixed upstream
    ((9, 0), "3.6.0+git3", True, False),     # tilelang installed: fla uses it
    ((8, 0), "3.6.0", False, False),         # A100: not affected
    ((9, 0), "3.3.1", False, False),
])
def test_fla_backward_refused_names_hopper_with_the_bad_tritons(capability, triton, tilelang, refused):
    why = K.fla_backward_refused(torch.device("cuda"), triton_version=triton, capability=capability, tilelang=tilelang)
    assert (why is not None) == refused
    if refused:
        assert f"Triton {triton}" in why and "sm_90" in why and "tilelang" in why and "\n" not in why
    assert K.fla_backward_refused(torch.device("cpu")) is None


def test_a_refused_fla_backward_is_one_line_before_the_forward_pass(fake_fla, monkeypatch):
    monkeypatch.setattr(K, "fla_backward_refused", lambda device: "fla refuses it here (test)")
    layer = Mamba2(16, d_state=4, headdim=4, chunk_size=4, backend="fla")
    x = torch.randn(2, 8, 16, requires_grad=True)
    with pytest.raises(ValueError, match=r"^backend='fla' cannot train Mamba-2 here: fla refuses it here \(test\); "
                                         r"use backend='pure'"):
        layer(x)
    with torch.no_grad():
        assert layer(x).shape == x.shape  # the forward alone is allowed


def test_the_machine_is_read_once_per_device_not_at_every_forward_pass(monkeypatch):
    calls = []
    monkeypatch.setattr(torch.cuda, "get_device_capability", lambda i: calls.append(i) or (9, 0))
    K._machine.cache_clear()
    try:
        for _ in range(3):
            K.fla_backward_refused(torch.device("cuda", 0))
        assert calls == [0]
    finally:
        K._machine.cache_clear()
