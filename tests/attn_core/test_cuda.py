"""Every CUDA path of attn_core against the float64 CPU reference, values and gradients:
``python -m pytest -m gpu`` on a GPU machine. Skips with "needs CUDA" elsewhere.

Covers full attention (SDPA), truncated attention (compiled FlexAttention) with and without
padding, causal, head sizes 24 and 64, fp32 and bf16; a block layout first built under
``inference_mode`` then trained on; graph attention; the decoder's key/value cache.
"""

from __future__ import annotations

import pytest
import torch

import attn_core
from attn_core import attention, graph_attention, reference_attention
from attn_core.functional import _dense_mask
from attn_core.masks import graph_mask
from tests.helpers.attention import attention_inputs as _inputs, expected_attention as _expected
from tests.helpers.attention import decoder_inputs as _decoder_inputs, make_decoder as _decoder, step_all as _step_all

DEVICE = "cuda"
pytestmark = [pytest.mark.gpu, pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")]

# (values, gradients) tolerances per dtype, relative to the float64 reference.
TOL = {torch.float32: (2e-4, 1e-3), torch.bfloat16: (4e-2, 8e-2)}
# Graph attention in bf16 rounds every edge's score and message (segment softmax + scatter):
# relative errors of small entries are large, so the error is measured against the tensor's scale.
TOL_GRAPH = {torch.float32: 1e-4, torch.bfloat16: 3e-2}


def _rel_err(got, want):
    """Largest absolute error over ``1 + max |want|``."""
    return ((got.double().cpu() - want).abs().max() / (1 + want.abs().max())).item()


def _grads(out, inputs, grad_out):
    return torch.autograd.grad(out.float(), inputs, grad_out)


def _check(q, k, v, dtype, **kw):
    """``attention`` on ``DEVICE`` in ``dtype`` vs the float64 CPU reference (``q, k, v`` float64
    CPU leaves): outputs and gradients of a random cotangent."""
    ref = _expected(q, k, v, kw.get("causal", False), kw.get("window"), kw.get("key_padding_mask"))
    go = torch.randn_like(ref)
    want = _grads(ref, (q, k, v), go)
    dq, dk, dv = (t.detach().to(DEVICE, dtype).requires_grad_() for t in (q, k, v))
    kpm = kw.pop("key_padding_mask", None)
    out = attention(dq, dk, dv, key_padding_mask=None if kpm is None else kpm.to(DEVICE), **kw)
    assert out.dtype == dtype and not out.isnan().any()
    got = _grads(out, (dq, dk, dv), go.to(DEVICE).float())
    vtol, gtol = TOL[dtype]
    torch.testing.assert_close(out.double().cpu(), ref, atol=vtol, rtol=vtol)
    for name, g, w in zip("qkv", got, want):
        torch.testing.assert_close(g.double().cpu(), w, atol=gtol, rtol=gtol, msg=f"grad of {name}")


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("d", [24, 64])
@pytest.mark.parametrize(
    "window,causal,pad",
    [(None, False, False), (None, True, True), (64, False, False), (64, False, True), (64, True, False), (64, True, True)],
)
def test_cuda_paths_match_reference(dtype, d, window, causal, pad):
    """Full (SDPA) and truncated (FlexAttention) attention, values and gradients."""
    q, k, v, kpm = _inputs(2, 4, 300, 300, d, d, torch.float64, seed=31 + d, pad=pad, requires_grad=True)
    _check(q, k, v, dtype, causal=causal, window=window, key_padding_mask=kpm)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_many_batch_shapes_stay_compiled(dtype):
    """Length-bucketed batches (new B and L each time) keep matching the reference."""
    attn_core.clear_caches()
    for i, (b, length) in enumerate([(4, 1000), (3, 1337), (4, 2100), (2, 777), (4, 3000), (1, 500)]):
        q, k, v, kpm = _inputs(b, 2, length, length, 32, 32, torch.float64, seed=i, pad=i % 2 == 0, requires_grad=True)
        _check(q, k, v, dtype, window=32, key_padding_mask=kpm)


def test_layout_built_under_inference_mode_then_trained():
    """Lightning validates under ``inference_mode``: a block layout first built there must not
    break the training step of the same shape ('Inference tensors cannot be saved for backward')."""
    attn_core.clear_caches()
    q, k, v, kpm = _inputs(2, 4, 777, 777, 32, 32, torch.float64, seed=3, pad=True, requires_grad=True)
    with torch.inference_mode():
        cq = q.detach().to(DEVICE, torch.float32)
        attention(cq, cq, cq, window=8, key_padding_mask=kpm.to(DEVICE))
    _check(q, k, v, torch.float32, window=8, key_padding_mask=kpm)


def test_flex_decoding_kernel_short_queries_no_grad():
    """Fewer than 128 queries without grad: FlexAttention's decoding kernel, head size 24."""
    q, k, v, kpm = _inputs(8, 4, 60, 60, 24, 24, torch.float64, seed=4, pad=True)
    with torch.no_grad():
        out = attention(*(t.to(DEVICE, torch.float32) for t in (q, k, v)), window=4, key_padding_mask=kpm.to(DEVICE))
    torch.testing.assert_close(out.double().cpu(), _expected(q, k, v, False, 4, kpm), atol=2e-4, rtol=2e-4)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("score", ["dot", "additive"])
def test_graph_attention_matches_dense_reference(dtype, score):
    """Graph attention on CUDA: values and gradients against the CPU float64 run of the same
    function (itself tested against the dense masked reference), and the dense reference for dot."""
    g = torch.Generator().manual_seed(5)
    n, h, d = 200, 4, 16
    # Inputs rounded to ``dtype`` first: the kernel's error is measured, not the inputs' rounding
    # (which alone moves bf16 additive gradients by 0.04, above the tolerance).
    q, k, v = (torch.randn(n, h, d, generator=g).to(dtype).double().requires_grad_() for _ in range(3))
    edges = torch.unique(attn_core.add_self_loops(torch.randint(0, n, (2, 1500), generator=g), n), dim=1)  # (2, E)
    ref = graph_attention(q, k, v, edges, score=score)
    if score == "dot":
        dense = reference_attention(q.transpose(0, 1), k.transpose(0, 1), v.transpose(0, 1), graph_mask(edges, n))
        torch.testing.assert_close(ref, dense.transpose(0, 1), atol=1e-10, rtol=0)
    go = torch.randn_like(ref)
    want = _grads(ref, (q, k, v), go)
    dq, dk, dv = (t.detach().to(DEVICE, dtype).requires_grad_() for t in (q, k, v))
    out = graph_attention(dq, dk, dv, edges.to(DEVICE), score=score)
    assert _rel_err(out, ref) < TOL_GRAPH[dtype]
    for g_, w in zip(_grads(out, (dq, dk, dv), go.to(DEVICE).float()), want):
        assert _rel_err(g_, w) < TOL_GRAPH[dtype]


@pytest.mark.parametrize("pattern,window", [("full", None), ("truncated", 2)])
def test_decoding_cache_equals_teacher_forced(pattern, window):
    """The key/value-cached decoder on CUDA (fp32) equals its teacher-forced causal run."""
    dec = _decoder(torch.float32, True, pattern, window).to(DEVICE)
    x, memory, mask = (t.to(DEVICE) for t in _decoder_inputs(torch.float32))
    with torch.no_grad():
        full = dec(x, memory, memory_key_padding_mask=mask)  # (B, T, E)
        inc, _ = _step_all(dec, x, memory, mask)
    torch.testing.assert_close(inc, full, atol=1e-4, rtol=1e-4)


def test_dense_mask_helper_is_on_device():
    """``_dense_mask`` (used by need_weights) builds on the requested device."""
    kpm = torch.ones(2, 10, dtype=torch.bool, device=DEVICE)
    assert _dense_mask(2, 10, 10, True, 3, kpm, torch.device(DEVICE)).device.type == "cuda"
