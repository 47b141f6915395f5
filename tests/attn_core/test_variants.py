"""The efficient patterns (linear, performer, linformer, nystrom, local_global), each against a
plain dense reference of its own maths written here, values and gradients, with and without
key padding, causal and cross where registered; and against full attention where they are
exact in a limit."""

from __future__ import annotations

import math

import pytest
import torch

from attn_core import attention, get_pattern, make_pattern_state
from attn_core.variants.linear import CAUSAL_CHUNK
from attn_core.variants.nystrom import iterative_pinv

F64 = torch.float64
# Tolerances per dtype: float64 checks the maths, float32 the kernels' rounding.
TOL = {torch.float64: 1e-10, torch.float32: 1e-4}


def _inputs(b=2, h=2, lq=9, lk=None, d=4, dv=3, *, seed=0, dtype=F64):
    g = torch.Generator().manual_seed(seed)
    lk = lq if lk is None else lk
    q = torch.randn(b, h, lq, d, generator=g, dtype=F64).to(dtype).requires_grad_()
    k = torch.randn(b, h, lk, d, generator=g, dtype=F64).to(dtype).requires_grad_()
    v = torch.randn(b, h, lk, dv, generator=g, dtype=F64).to(dtype).requires_grad_()
    return q, k, v


def _padding(b, lk):
    """Row 0 all real; row 1 with one padded key in the middle and the last third padded."""
    kpm = torch.ones(b, lk, dtype=torch.bool)
    kpm[1, 2] = False
    kpm[1, lk - lk // 3:] = False
    return kpm


def _check_grads(out, ref, inputs, tol):
    """Values, then the gradients of ``<out, c>`` for a random ``c`` w.r.t. every input."""
    torch.testing.assert_close(out, ref, atol=tol, rtol=tol)
    cot = torch.randn(out.shape, generator=torch.Generator().manual_seed(9), dtype=out.dtype)
    g_out = torch.autograd.grad((out * cot).sum(), inputs)
    g_ref = torch.autograd.grad((ref * cot).sum(), inputs)
    for a, b in zip(g_out, g_ref):
        assert a.abs().sum() > 0
        torch.testing.assert_close(a, b, atol=tol, rtol=tol)


def _dense_mask(b, lq, lk, kpm, causal, allowed=lambda i, j: True):
    """``(B, 1, Lq, Lk)`` by loops: the pattern's pairs, earlier keys if causal, real keys."""
    m = torch.zeros(b, 1, lq, lk, dtype=torch.bool)
    for bi in range(b):
        for i in range(lq):
            for j in range(lk):
                m[bi, 0, i, j] = allowed(i, j) and (not causal or j <= i) and (kpm is None or bool(kpm[bi, j]))
    return m


def _softmax_attention(q, k, v, mask=None, scale=None):
    """Plain masked softmax attention: rows with nothing allowed give zeros."""
    s = (q.shape[-1] ** -0.5 if scale is None else scale) * q @ k.transpose(-2, -1)
    if mask is not None:
        s = s.masked_fill(~mask, float("-inf"))
    p = torch.softmax(s, -1)
    return torch.nan_to_num(p, nan=0.0) @ v


def _kernel_attention(phi_q, phi_k, v, mask):
    """``out_i = sum_j A_ij v_j / sum_j A_ij`` with ``A = phi_q phi_k^T`` restricted to ``mask``."""
    a = (phi_q @ phi_k.transpose(-2, -1)) * mask
    den = a.sum(-1, keepdim=True)
    return (a @ v) / torch.where(den > 0, den, torch.ones_like(den))


def _call(name, q, k, v, *, state=None, **kw):
    return get_pattern(name).fn(q, k, v, state=state, **kw)


# --------------------------------------------------------------------------- linear
def _ref_linear(q, k, v, kpm, causal):
    phi = lambda x: torch.where(x > 0, x + 1, torch.exp(x))  # elu(x) + 1, written out
    return _kernel_attention(phi(q), phi(k), v, _dense_mask(q.shape[0], q.shape[2], k.shape[2], kpm, causal))


@pytest.mark.parametrize("lq,lk", [(9, 9), (CAUSAL_CHUNK + 7, CAUSAL_CHUNK + 7), (5, 11), (11, 5)])
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("pad", [False, True])
def test_linear_matches_its_dense_maths(lq, lk, causal, pad):
    q, k, v = _inputs(lq=lq, lk=lk, seed=lq + lk)
    kpm = _padding(2, lk) if pad else None
    out = _call("linear", q, k, v, causal=causal, key_padding_mask=kpm)
    _check_grads(out, _ref_linear(q, k, v, kpm, causal), (q, k, v), 1e-10)


# --------------------------------------------------------------------------- performer
def _performer_state(d, features, seed=0, dtype=F64):
    torch.manual_seed(seed)
    return make_pattern_state("performer", 2, d, params={"features": features}).to(dtype)


def _ref_performer(q, k, v, w, kpm, causal, scale=None):
    s = (q.shape[-1] ** -0.5 if scale is None else scale) ** 0.5

    def phi(x):  # exp(W x - |x|^2 / 2) / sqrt(m), no stabiliser
        x = x * s
        return torch.exp(x @ w.T - (x * x).sum(-1, keepdim=True) / 2) / math.sqrt(w.shape[0])

    return _kernel_attention(phi(q), phi(k), v, _dense_mask(q.shape[0], q.shape[2], k.shape[2], kpm, causal))


@pytest.mark.parametrize("lq,lk", [(9, 9), (CAUSAL_CHUNK + 7, CAUSAL_CHUNK + 7), (5, 11), (11, 5)])
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("pad", [False, True])
def test_performer_matches_its_dense_maths(lq, lk, causal, pad):
    q, k, v = _inputs(lq=lq, lk=lk, seed=lq * lk)
    kpm = _padding(2, lk) if pad else None
    state = _performer_state(4, 16)
    out = _call("performer", q, k, v, causal=causal, key_padding_mask=kpm, state=state, features=16)
    _check_grads(out, _ref_performer(q, k, v, state.projection, kpm, causal), (q, k, v), 1e-10)


def test_performer_huge_padded_keys_do_not_underflow_the_real_ones():
    """The key stabiliser is the max over real keys only: a padded key 1000x larger must not push
    every real key's features to 0."""
    q, k, v = _inputs(lq=10, seed=12)
    kpm = _padding(2, 10)
    state = _performer_state(4, 16)
    out = _call("performer", q, k, v, key_padding_mask=kpm, state=state, features=16)
    k_big = torch.where((~kpm)[:, None, :, None], k * 1000, k)
    out_big = _call("performer", q, k_big, v, key_padding_mask=kpm, state=state, features=16)
    torch.testing.assert_close(out_big, out, atol=1e-10, rtol=1e-10)
    assert out[1].abs().max() > 0


def test_performer_scale_and_orthogonal_blocks():
    q, k, v = _inputs(seed=3)
    state = _performer_state(4, 10)
    out = _call("performer", q, k, v, scale=0.3, state=state, features=10)
    torch.testing.assert_close(out, _ref_performer(q, k, v, state.projection, None, False, scale=0.3))
    w = state.projection  # (10, 4): rows 0-3 and 4-7 are orthogonal blocks
    for block in (w[:4], w[4:8]):
        gram = block @ block.T
        torch.testing.assert_close(gram - torch.diag(torch.diag(gram)), torch.zeros(4, 4, dtype=F64), atol=1e-6, rtol=0)


def test_performer_error_shrinks_with_features():
    q, k, v = _inputs(b=2, h=2, lq=16, d=8, seed=5)
    q, k = q.detach() * 0.5, k.detach() * 0.5
    exact = attention(q, k, v.detach())
    err = {}
    for m in (64, 4096):
        out = _call("performer", q, k, v.detach(), state=_performer_state(8, m, seed=1), features=m)
        err[m] = (out - exact).abs().mean().item()
    assert err[4096] < err[64] / 3, err
    assert err[4096] < 0.02, err


def test_performer_redraw_and_seeding():
    q, k, v = _inputs(seed=4)
    a, b = _performer_state(4, 8, seed=7), _performer_state(4, 8, seed=7)
    assert torch.equal(a.projection, b.projection)  # deterministic under torch.manual_seed
    before = a.projection.clone()
    a.eval()
    _call("performer", q, k, v, state=a, features=8, redraw=True)
    assert torch.equal(a.projection, before)  # eval: never redrawn
    a.train()
    _call("performer", q, k, v, state=a, features=8, redraw=False)
    assert torch.equal(a.projection, before)  # redraw=False: never redrawn
    _call("performer", q, k, v, state=a, features=8, redraw=True)
    assert not torch.equal(a.projection, before)  # training with redraw: a fresh draw per call


# --------------------------------------------------------------------------- linformer
def _ref_linformer(q, k, v, e, f, kpm):
    lk = k.shape[2]
    if kpm is not None:
        real = kpm[:, None, :, None].to(k.dtype)
        k, v = k * real, v * real
    kp = torch.einsum("rl,bhld->bhrd", e[:, :lk], k)
    vp = torch.einsum("rl,bhld->bhrd", f[:, :lk], v)
    return _softmax_attention(q, kp, vp)


@pytest.mark.parametrize("lq,lk", [(9, 9), (5, 11), (12, 7)])
@pytest.mark.parametrize("pad", [False, True])
def test_linformer_matches_its_dense_maths(lq, lk, pad):
    q, k, v = _inputs(lq=lq, lk=lk, seed=lq + 2 * lk)
    kpm = _padding(2, lk) if pad else None
    torch.manual_seed(0)
    state = make_pattern_state("linformer", 2, 4, max_len=13, params={"k_proj": 5}).double()
    out = _call("linformer", q, k, v, key_padding_mask=kpm, state=state, k_proj=5)
    ref = _ref_linformer(q, k, v, state.E, state.F, kpm)
    _check_grads(out, ref, (q, k, v, state.E, state.F), 1e-10)


def test_linformer_identity_projection_is_full_attention():
    q, k, v = _inputs(lq=10, seed=6)
    state = make_pattern_state("linformer", 2, 4, max_len=10, params={"k_proj": 10}).double()
    with torch.no_grad():
        state.E.copy_(torch.eye(10))
        state.F.copy_(torch.eye(10))
    out = _call("linformer", q, k, v, state=state, k_proj=10)
    torch.testing.assert_close(out, _softmax_attention(q, k, v), atol=1e-12, rtol=0)


def test_linformer_refuses_longer_than_max_len_and_causal():
    q, k, v = _inputs(lq=9)
    state = make_pattern_state("linformer", 2, 4, max_len=8, params={"k_proj": 3})
    with pytest.raises(ValueError, match="exceeds max_len=8"):
        _call("linformer", q, k, v, state=state, k_proj=3)
    with pytest.raises(ValueError, match="non-causal"):
        _call("linformer", q[:, :, :8], k[:, :, :8], v[:, :, :8], state=state, causal=True, k_proj=3)


# --------------------------------------------------------------------------- nystrom
def _ref_pinv(a, iterations):
    z = a.T / (a.abs().sum(0).max() * a.abs().sum(1).max())
    eye = torch.eye(a.shape[0], dtype=a.dtype)
    for _ in range(iterations):
        az = a @ z
        z = 0.25 * z @ (13 * eye - az @ (15 * eye - az @ (7 * eye - az)))
    return z


def _ref_nystrom(q, k, v, kpm, m, iterations):
    """Per (batch, head) by loops: landmarks = means of the real positions of each segment
    ``{j-th real position : j * m // n == c}`` (``n`` the sequence's real length), empty segments dropped,
    then the three softmaxes over real entries."""
    b, h, length, _ = q.shape
    m = min(m, length)
    s = q.shape[-1] ** -0.5
    out = torch.zeros(b, h, length, v.shape[-1], dtype=q.dtype)
    for bi in range(b):
        real = [p for p in range(length) if kpm is None or bool(kpm[bi, p])]
        segs = [[p for j, p in enumerate(real) if j * m // len(real) == c] for c in range(m)]
        segs = [sg for sg in segs if sg]
        for hi in range(h):
            qh, kh, vh = q[bi, hi], k[bi, hi], v[bi, hi]
            q_l = torch.stack([qh[sg].mean(0) for sg in segs])
            k_l = torch.stack([kh[sg].mean(0) for sg in segs])
            k1 = torch.softmax(s * qh @ k_l.T, -1)  # (L, m')
            k2 = torch.softmax(s * q_l @ k_l.T, -1)  # (m', m')
            k3 = torch.zeros(len(segs), length, dtype=q.dtype)
            k3[:, real] = torch.softmax(s * q_l @ kh[real].T, -1)  # (m', L), padded keys 0
            out[bi, hi] = k1 @ _ref_pinv(k2, iterations) @ (k3 @ vh)
    return out


@pytest.mark.parametrize("length,m", [(9, 3), (10, 4), (7, 7), (6, 20)])
@pytest.mark.parametrize("pad", [False, True])
def test_nystrom_matches_its_dense_maths(length, m, pad):
    q, k, v = _inputs(lq=length, seed=length * m)
    kpm = _padding(2, length) if pad else None
    out = _call("nystrom", q, k, v, key_padding_mask=kpm, landmarks=m, pinv_iterations=6)
    _check_grads(out, _ref_nystrom(q, k, v, kpm, m, 6), (q, k, v), 1e-9)


@pytest.mark.parametrize("real,m", [(70, 64), (30, 64), (20, 8)])
def test_nystrom_does_not_depend_on_the_padding(real, m):
    """The same sequences padded further give the same outputs at real positions (values and
    gradients): landmarks come from each sequence's own length, never the padded one."""
    q, k, v = _inputs(lq=real, seed=real + m)
    outs, grads = [], []
    for extra in (0, 9, 40):
        qq, kk, vv = (torch.nn.functional.pad(t.detach(), (0, 0, 0, extra)).requires_grad_() for t in (q, k, v))
        kpm = torch.arange(real + extra)[None, :].expand(q.shape[0], -1) < real
        out = _call("nystrom", qq, kk, vv, key_padding_mask=kpm, landmarks=m, pinv_iterations=6)[:, :, :real]
        g = torch.autograd.grad(out.square().sum(), (qq, kk, vv))
        outs.append(out.detach())
        grads.append([t[:, :, :real] for t in g])
    for out, g in zip(outs[1:], grads[1:]):
        torch.testing.assert_close(out, outs[0], atol=1e-10, rtol=1e-9)
        for a, b in zip(g, grads[0]):
            torch.testing.assert_close(a, b, atol=1e-10, rtol=1e-9)


def test_nystrom_pinv_converges_to_torch_pinv():
    a = torch.softmax(torch.randn(3, 6, 6, generator=torch.Generator().manual_seed(2), dtype=F64), -1)
    torch.testing.assert_close(iterative_pinv(a, 40), torch.linalg.pinv(a), atol=1e-8, rtol=1e-8)
    assert (iterative_pinv(a, 2) - torch.linalg.pinv(a)).abs().max() > 1e-3  # few iterations: approximate


@pytest.mark.parametrize("pad", [False, True])
def test_nystrom_one_token_per_landmark_is_full_attention(pad):
    q, k, v = _inputs(lq=8, seed=8)
    kpm = _padding(2, 8) if pad else None
    out = _call("nystrom", q, k, v, key_padding_mask=kpm, landmarks=8, pinv_iterations=40)
    mask = None if kpm is None else kpm[:, None, None, :]
    torch.testing.assert_close(out, _softmax_attention(q, k, v, mask), atol=1e-8, rtol=1e-8)


def test_nystrom_refuses_cross_and_causal():
    q, k, v = _inputs(lq=5, lk=7)
    with pytest.raises(ValueError, match="self-attention only"):
        _call("nystrom", q, k, v)
    with pytest.raises(ValueError, match="non-causal"):
        _call("nystrom", q, q, q, causal=True)


# --------------------------------------------------------------------------- local_global
def _ref_local_global(q, k, v, kpm, causal, w, g):
    allowed = lambda i, j: abs(i - j) <= w or i < g or j < g
    return _softmax_attention(q, k, v, _dense_mask(q.shape[0], q.shape[2], k.shape[2], kpm, causal, allowed))


@pytest.mark.parametrize("lq,lk,w,g", [(9, 9, 1, 2), (80, 80, 5, 3), (40, 25, 3, 4), (25, 40, 2, 1), (9, 9, 0, 1)])
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("pad", [False, True])
def test_local_global_matches_its_dense_maths(lq, lk, w, g, causal, pad):
    q, k, v = _inputs(lq=lq, lk=lk, seed=lq + lk + w)
    kpm = _padding(2, lk) if pad else None
    out = _call("local_global", q, k, v, causal=causal, key_padding_mask=kpm, window=w, global_tokens=g)
    _check_grads(out, _ref_local_global(q, k, v, kpm, causal, w, g), (q, k, v), 1e-10)
    out_w, weights = _call("local_global", q, k, v, causal=causal, key_padding_mask=kpm, window=w, global_tokens=g,
                           need_weights=True)
    torch.testing.assert_close(out_w, out, atol=1e-10, rtol=1e-10)
    allowed = lambda i, j: abs(i - j) <= w or i < g or j < g
    mask = _dense_mask(2, lq, lk, kpm, causal, allowed)
    assert not weights.masked_select(~mask).any()


@pytest.mark.parametrize("causal", [False, True])
def test_local_global_limits(causal):
    q, k, v = _inputs(lq=12, seed=11)
    kpm = _padding(2, 12)
    full = attention(q, k, v, causal=causal, key_padding_mask=kpm)
    for w, g in ((11, 2), (30, 0), (2, 12)):  # window covers all, or every row global
        out = _call("local_global", q, k, v, causal=causal, key_padding_mask=kpm, window=w, global_tokens=g)
        torch.testing.assert_close(out, full, atol=1e-12, rtol=0)
    trunc = attention(q, k, v, causal=causal, window=2, key_padding_mask=kpm)
    out = _call("local_global", q, k, v, causal=causal, key_padding_mask=kpm, window=2, global_tokens=0)
    torch.testing.assert_close(out, trunc, atol=1e-12, rtol=0)


# --------------------------------------------------------------------------- all variants
def _variant_call(name, q, k, v, kpm, causal=False):
    """Each variant with small parameters and its state (seeded)."""
    torch.manual_seed(0)
    if name == "performer":
        state = make_pattern_state("performer", 2, q.shape[-1], params={"features": 8}).to(q.device, q.dtype)
        return _call(name, q, k, v, key_padding_mask=kpm, causal=causal, state=state, features=8)
    if name == "linformer":
        state = make_pattern_state("linformer", 2, q.shape[-1], max_len=k.shape[2], params={"k_proj": 4})
        state = state.to(q.device, q.dtype)
        return _call(name, q, k, v, key_padding_mask=kpm, state=state, k_proj=4)
    if name == "nystrom":
        return _call(name, q, k, v, key_padding_mask=kpm, landmarks=3)
    if name == "local_global":
        return _call(name, q, k, v, key_padding_mask=kpm, causal=causal, window=1, global_tokens=2)
    return _call(name, q, k, v, key_padding_mask=kpm, causal=causal)


VARIANTS = ["linear", "performer", "linformer", "nystrom", "local_global"]


@pytest.mark.parametrize("name", VARIANTS)
def test_padded_positions_never_change_real_outputs(name):
    q, k, v = _inputs(lq=12, seed=13)
    kpm = _padding(2, 12)
    out = _variant_call(name, q, k, v, kpm)
    noise = torch.randn(2, 2, 12, 4, generator=torch.Generator().manual_seed(1), dtype=F64) * 10
    pad = (~kpm)[:, None, :, None]
    q2 = q + noise * pad if name == "nystrom" else q  # nystrom: the mask covers its queries too
    out2 = _variant_call(name, q2, k + noise * pad, v + noise[..., :3] * pad, kpm)
    rows = kpm[:, None, :, None].expand_as(out) if name == "nystrom" else torch.ones_like(out, dtype=torch.bool)
    torch.testing.assert_close(out2[rows], out[rows], atol=1e-10, rtol=1e-10)


@pytest.mark.parametrize("name", VARIANTS)
def test_no_real_key_gives_zeros_not_nan(name):
    q, k, v = _inputs(lq=12, seed=14)
    kpm = _padding(2, 12)
    kpm[1] = False
    out = _variant_call(name, q, k, v, kpm)
    assert torch.isfinite(out).all()
    assert out[1].abs().max() == 0
    assert out[0].abs().max() > 0


@pytest.mark.parametrize("name", VARIANTS)
def test_float32_close_to_float64(name):
    causal = get_pattern(name).causal
    q, k, v = _inputs(lq=12, seed=15)
    kpm = _padding(2, 12)
    ref = _variant_call(name, q, k, v, kpm, causal=causal)
    q32, k32, v32 = (t.detach().float() for t in (q, k, v))
    out = _variant_call(name, q32, k32, v32, kpm, causal=causal)
    assert out.dtype == torch.float32
    tol = 1e-3 if name == "nystrom" else TOL[torch.float32]  # the iterative pinv amplifies rounding
    torch.testing.assert_close(out.double(), ref, atol=tol, rtol=tol)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
@pytest.mark.parametrize("name", VARIANTS)
def test_cuda_matches_cpu(name):
    causal = get_pattern(name).causal
    q, k, v = (t.detach() for t in _inputs(lq=70, seed=16))
    kpm = _padding(2, 70)
    cpu = _variant_call(name, q, k, v, kpm, causal=causal)
    gpu = _variant_call(name, q.cuda(), k.cuda(), v.cuda(), kpm.cuda(), causal=causal)
    torch.testing.assert_close(gpu.cpu(), cpu, atol=1e-8, rtol=1e-8)
