"""``attention`` (every path) against ``reference_attention`` on fresh random inputs."""

from __future__ import annotations

import itertools
import warnings

import pytest
import torch

from attn_core import attention, reference_attention
from attn_core.functional import _window_attention_blocked, _window_attention_flex, block_size_for
from attn_core.masks import causal_mask, window_mask
from tests.helpers.attention import attention_inputs as _inputs
from tests.helpers.attention import expected_attention as _expected

# Tolerances per dtype: float64 checks the maths exactly, the others check the kernels.
TOL = {torch.float64: 1e-10, torch.float32: 2e-5, torch.bfloat16: 3e-2}


LENGTHS = [(1, 1), (7, 7), (33, 33), (70, 41), (41, 70), (300, 300)]
WINDOWS = [None, 0, 1, 5, 32, 40, 299, 1000]


@pytest.mark.parametrize("lq,lk", LENGTHS)
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("pad", [False, True])
def test_attention_matches_reference_float64(lq, lk, causal, pad):
    for i, window in enumerate(WINDOWS):
        q, k, v, kpm = _inputs(3, 2, lq, lk, 8, 5, torch.float64, seed=lq * 1000 + lk + i, pad=pad)
        out = attention(q, k, v, causal=causal, window=window, key_padding_mask=kpm)
        ref = _expected(q, k, v, causal, window, kpm)
        assert not out.isnan().any()
        torch.testing.assert_close(out, ref, atol=TOL[torch.float64], rtol=0, msg=f"window={window}")


@pytest.mark.parametrize("causal,window,pad", list(itertools.product([False, True], [None, 3, 17], [False, True])))
def test_attention_gradients_match_reference(causal, window, pad):
    q, k, v, kpm = _inputs(2, 2, 50, 50, 6, 4, torch.float64, seed=7, pad=pad, requires_grad=True)
    out = attention(q, k, v, causal=causal, window=window, key_padding_mask=kpm)
    grad_out = torch.randn_like(out)
    got = torch.autograd.grad(out, (q, k, v), grad_out)
    want = torch.autograd.grad(_expected(q, k, v, causal, window, kpm), (q, k, v), grad_out)
    for g, w in zip(got, want):
        assert torch.isfinite(g).all()
        torch.testing.assert_close(g, w, atol=1e-10, rtol=0)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("window", [None, 16])
def test_attention_low_precision_close_to_float64(dtype, window):
    q, k, v, kpm = _inputs(2, 4, 200, 200, 32, 32, torch.float64, seed=11, pad=True)
    ref = _expected(q, k, v, True, window, kpm)
    out = attention(q.to(dtype), k.to(dtype), v.to(dtype), causal=True, window=window, key_padding_mask=kpm)
    assert out.dtype == dtype
    torch.testing.assert_close(out.double(), ref, atol=TOL[dtype], rtol=TOL[dtype])


@pytest.mark.parametrize("b,h,lq,lk", [(1, 1, 300, 300), (1, 2, 257, 100), (2, 1, 130, 700)])
def test_cpu_query_chunked_full_attention_matches_reference(b, h, lq, lk, monkeypatch):
    """The CPU fast path for few batch x heads (queries folded into the batch), values and grads."""
    monkeypatch.setattr(torch, "get_num_threads", lambda: 4)
    q, k, v, _ = _inputs(b, h, lq, lk, 8, 5, torch.float64, seed=lq, requires_grad=True)
    out = attention(q, k, v)
    ref = reference_attention(q, k, v)
    torch.testing.assert_close(out, ref, atol=1e-10, rtol=0)
    go = torch.randn_like(out)
    for g, w in zip(torch.autograd.grad(out, (q, k, v), go), torch.autograd.grad(ref, (q, k, v), go)):
        torch.testing.assert_close(g, w, atol=1e-10, rtol=0)


def test_window_at_least_length_equals_full():
    q, k, v, kpm = _inputs(2, 3, 64, 64, 8, 8, torch.float64, seed=3, pad=True)
    full = attention(q, k, v, key_padding_mask=kpm)
    for w in (63, 64, 500):
        torch.testing.assert_close(attention(q, k, v, window=w, key_padding_mask=kpm), full, atol=1e-12, rtol=0)
    # The blocked kernel itself (not only the dispatch shortcut) also equals full attention.
    torch.testing.assert_close(_window_attention_blocked(q, k, v, 64, False, kpm, 0.0, None), full, atol=1e-12, rtol=0)


@pytest.mark.parametrize("window", [None, 4])
def test_causal_ignores_future_positions(window):
    q, k, v, _ = _inputs(2, 2, 40, 40, 8, 8, torch.float64, seed=5)
    out = attention(q, k, v, causal=True, window=window)
    t = 25
    k2, v2 = k.clone(), v.clone()
    k2[:, :, t + 1 :] = torch.randn_like(k2[:, :, t + 1 :]) * 10
    v2[:, :, t + 1 :] = torch.randn_like(v2[:, :, t + 1 :]) * 10
    out2 = attention(q, k2, v2, causal=True, window=window)
    torch.testing.assert_close(out2[:, :, : t + 1], out[:, :, : t + 1], atol=0, rtol=0)
    assert not torch.allclose(out2[:, :, t + 1 :], out[:, :, t + 1 :])


@pytest.mark.parametrize("window", [None, 2])
def test_padding_content_never_leaks(window):
    q, k, v, kpm = _inputs(3, 2, 30, 30, 8, 8, torch.float64, seed=9, pad=True)
    out = attention(q, k, v, window=window, key_padding_mask=kpm)
    k2, v2 = k.clone(), v.clone()
    k2[~kpm[:, None, :].expand(-1, 2, -1)] = 1e3
    v2[~kpm[:, None, :].expand(-1, 2, -1)] = -1e3
    torch.testing.assert_close(attention(q, k2, v2, window=window, key_padding_mask=kpm), out, atol=0, rtol=0)


def test_rows_with_nothing_to_attend_are_zero_with_zero_grad():
    q, k, v, _ = _inputs(2, 2, 12, 12, 4, 4, torch.float64, seed=1, requires_grad=True)
    kpm = torch.ones(2, 12, dtype=torch.bool)
    kpm[0] = False  # sequence 0: every key padded
    kpm[1, :6] = False  # sequence 1: causal rows 0..5 see only padding
    for window in (None, 2):
        out = attention(q, k, v, causal=True, window=window, key_padding_mask=kpm)
        assert not out.isnan().any()
        assert (out[0] == 0).all() and (out[1, :, :6] == 0).all()
        assert (out[1, :, 6:].abs() > 0).any()
        gq, gk, gv = torch.autograd.grad(out.sum(), (q, k, v))
        assert torch.isfinite(gq).all() and (gq[0] == 0).all() and (gv[0] == 0).all()


def test_need_weights_returns_masked_probabilities():
    q, k, v, kpm = _inputs(2, 2, 20, 20, 8, 8, torch.float64, seed=4, pad=True)
    out, w = attention(q, k, v, causal=True, window=3, key_padding_mask=kpm, need_weights=True)
    allowed = window_mask(20, 20, 3, causal=True)[None, None] & kpm[:, None, None, :]
    assert (w[~allowed.expand_as(w)] == 0).all()
    rows = allowed.any(-1).expand(w.shape[:-1])
    torch.testing.assert_close(w.sum(-1)[rows], torch.ones_like(w.sum(-1)[rows]))
    torch.testing.assert_close(out, attention(q, k, v, causal=True, window=3, key_padding_mask=kpm))


def test_dropout_only_when_asked():
    q, k, v, _ = _inputs(1, 2, 64, 64, 8, 8, torch.float32, seed=2)
    base = attention(q, k, v, window=8)
    torch.manual_seed(0)
    dropped = attention(q, k, v, window=8, dropout_p=0.5)
    assert not torch.allclose(base, dropped)
    torch.testing.assert_close(attention(q, k, v, window=8, dropout_p=0.0), base)


@pytest.mark.parametrize("causal,pad", list(itertools.product([False, True], [False, True])))
def test_flex_path_mask_logic_matches_reference(causal, pad):
    """The CUDA path's block mask, run eagerly on CPU (dense under the hood), gives the same maths."""
    pytest.importorskip("torch.nn.attention.flex_attention")
    q, k, v, kpm = _inputs(2, 2, 150, 150, 16, 16, torch.float32, seed=21, pad=pad)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        out = _window_attention_flex(q, k, v, 9, causal, kpm, None, compiled=False)
    torch.testing.assert_close(out, _expected(q, k, v, causal, 9, kpm), atol=TOL[torch.float32], rtol=1e-4)


def test_block_size_covers_window():
    for w in (0, 1, 31, 32, 100, 256, 1000):
        assert block_size_for(w) >= min(w, 256) and block_size_for(w) >= 1


def test_blocked_never_builds_a_square_tensor(monkeypatch):
    """Truncated attention allocates O(L * w): check the largest tensor SDPA receives."""
    seen = []
    real = torch.nn.functional.scaled_dot_product_attention

    def spy(q, k, v, attn_mask=None, **kw):
        seen.append(max(q.numel(), k.numel(), 0 if attn_mask is None else attn_mask.numel()))
        return real(q, k, v, attn_mask=attn_mask, **kw)

    monkeypatch.setattr(torch.nn.functional, "scaled_dot_product_attention", spy)
    L, w = 4096, 16
    q = torch.randn(1, 1, L, 4)
    attention(q, q, q, window=w)
    assert seen and max(seen) <= L * (block_size_for(w) + 2 * w)  # far below L * L


BAD = [
    (dict(q=torch.randn(2, 3, 4)), "q has shape"),
    (dict(k=torch.randn(2, 2, 5, 7)), "head dim"),
    (dict(v=torch.randn(2, 2, 6, 8)), "length"),
    (dict(k=torch.randn(3, 2, 5, 8)), r"\(B, H\)"),
    (dict(window=-1), "window=-1"),
    (dict(window=2.5), "window=2.5"),
    (dict(key_padding_mask=torch.ones(2, 4, dtype=torch.bool)), "key_padding_mask has shape"),
    (dict(key_padding_mask=torch.ones(2, 5)), "key_padding_mask has dtype"),
    (dict(dropout_p=1.5), "dropout_p=1.5"),
    (dict(scale=-1.0), "scale=-1.0"),
    (dict(v=torch.randn(2, 2, 5, 8, dtype=torch.float64)), "dtype"),
]


@pytest.mark.parametrize("override,match", BAD)
def test_bad_input_raises_clear_value_error(override, match):
    args = dict(q=torch.randn(2, 2, 4, 8), k=torch.randn(2, 2, 5, 8), v=torch.randn(2, 2, 5, 8))
    kwargs = {k: override.pop(k) for k in list(override) if k not in args}
    args.update(override)
    with pytest.raises(ValueError, match=match):
        attention(args["q"], args["k"], args["v"], **kwargs)


def test_masks_pictures_hold():
    assert causal_mask(3).tolist() == [[True, False, False], [True, True, False], [True, True, True]]
    assert window_mask(4, window=1).int().tolist() == [[1, 1, 0, 0], [1, 1, 1, 0], [0, 1, 1, 1], [0, 0, 1, 1]]


@pytest.mark.parametrize(
    "device,head_dim,dropout_p,want",
    [
        ("cpu", 64, 0.0, "blocked"),
        ("cuda", 64, 0.0, "flex"),
        ("cuda", 16, 0.0, "flex"),
        ("cuda", 15, 0.0, "blocked"),  # FlexAttention refuses head dims under 16
        ("cuda", 4, 0.0, "blocked"),
        ("cuda", 64, 0.1, "blocked"),  # dropout: the blocked kernel
    ],
)
def test_window_kernel_dispatch(device, head_dim, dropout_p, want):
    from attn_core.functional import window_kernel

    assert window_kernel(device, torch.bfloat16, head_dim, dropout_p) == want


def test_quick_input_check_accepts_the_common_call_and_nothing_the_full_checks_refuse():
    """``_inputs_ok`` lets a valid call skip the detailed checks (it must say yes, or the fast
    path is gone) and says no to every input that :func:`check_inputs` refuses, so each of those
    still gets its message."""
    from attn_core.functional import _inputs_ok, check_inputs

    q, k, v = (torch.randn(2, 3, 5, 4) for _ in range(3))
    kpm = torch.ones(2, 5, dtype=torch.bool)
    assert _inputs_ok(q, k, v, None, None, 0.0, None) and _inputs_ok(q, k, v, 2, kpm, 0.1, 0.5)
    bad = [
        (q[0], k, v, None, None, 0.0, None), (q, k.double(), v, None, None, 0.0, None),
        (q, k[:, :2], v, None, None, 0.0, None), (q, k[..., :3], v, None, None, 0.0, None),
        (q, k, v[:, :, :4], None, None, 0.0, None), (q, k, v, -1, None, 0.0, None),
        (q, k, v, True, None, 0.0, None), (q, k, v, 2.0, None, 0.0, None),
        (q, k, v, None, kpm.int(), 0.0, None), (q, k, v, None, kpm[:, :4], 0.0, None),
        (q, k, v, None, None, 1.0, None), (q, k, v, None, None, -0.1, None), (q, k, v, None, None, 0.0, 0.0),
        (q, k, v, None, None, 0.0, -1.0), (q, k, v, None, None, "0", None),
    ]
    for args in bad:
        assert not _inputs_ok(*args)
        with pytest.raises(ValueError):
            check_inputs(*args)
