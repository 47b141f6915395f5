"""The compiled FlexAttention path (the CUDA path of ``attention(window=...)``), run on CPU where
torch compiles its forward pass: values against the blocked reference, a bounded number of
compiled graphs over many batch shapes, and block-layout caching that is safe across grad modes.

Compile strategies measured on a 2-core AMD EPYC CPU (AVX2), torch 2.14.1, forward only, 16
random batches (B in {3, 4}, L in 200..2000, half padded), H=4, D=32, window 64; "graphs" is
``counters["stats"]["unique_graphs"]``, "L=1000" the best of 7 steady-state calls at B=4:

    strategy                                  graphs  first sweep  L=1000
    dynamic=False, exact lengths (before)        17      78 s      772 ms  (limit 8 hit: uncompiled)
    dynamic=False, lengths padded to 128k        15      52 s     1093 ms  (limit hit)
    dynamic=False, ladder 2^n, 1.5*2^n            9      43 s       93 ms
    dynamic=None (automatic), exact lengths       2      10 s      102 ms  (*)
    dynamic=None, lengths padded to 128k          2      13 s       63 ms  (*)
    dynamic=True / mark_dynamic                   -   inductor C++ compile error on CPU
    chosen: ladder 2^n, 1.5*2^n, lengths static,  7      32 s       89 ms
      batch automatic-dynamic (7 buckets + 1)

(*) dynamic lengths compile on CPU only for some shape orders: a length change before a batch
change hits the same C++ codegen error (``cur_qSplitSize1`` undeclared), so lengths stay static.

Gradients of the compiled path need CUDA (CPU FlexAttention has no compiled backward): see
tests/attn_core/test_cuda.py.
"""

from __future__ import annotations

import random
import warnings

import pytest
import torch
from torch._dynamo.utils import counters

import attn_core
from attn_core import functional as Fn
from attn_core.functional import _window_attention_blocked, _window_attention_flex

pytest.importorskip("torch.nn.attention.flex_attention")

TOL = {torch.float32: 2e-5, torch.bfloat16: 3e-2}


def _batch(b, lq, lk, d, seed, pad, requires_grad=False):
    """float64 ``q (B, 4, Lq, D)``, ``k, v (B, 4, Lk, D)`` and a key mask ``(B, Lk)`` or None."""
    g = torch.Generator().manual_seed(seed)
    q = torch.randn(b, 4, lq, d, generator=g, dtype=torch.float64, requires_grad=requires_grad)
    k = torch.randn(b, 4, lk, d, generator=g, dtype=torch.float64, requires_grad=requires_grad)
    v = torch.randn(b, 4, lk, d, generator=g, dtype=torch.float64, requires_grad=requires_grad)
    kpm = None
    if pad:
        kpm = torch.arange(lk)[None] < torch.randint(1, lk + 1, (b, 1), generator=g)  # (B, Lk)
        kpm[0, : lk // 3] = False  # not only trailing padding
    return q, k, v, kpm


def _check_compiled(q, k, v, kpm, window, causal, dtype):
    """Compiled flex in ``dtype`` against the blocked kernel in float64 (itself tested equal to
    the dense reference)."""
    want = _window_attention_blocked(q, k, v, window, causal, kpm, 0.0, None)
    got = _window_attention_flex(*(t.to(dtype) for t in (q, k, v)), window, causal, kpm, None, compiled=True)
    assert got.dtype == dtype and got.shape == want.shape
    torch.testing.assert_close(got.double(), want, atol=TOL[dtype], rtol=TOL[dtype])


@pytest.fixture(autouse=True)
def _fresh_caches():
    attn_core.clear_caches()
    counters.clear()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # torch's compile-time notices
        yield
    attn_core.clear_caches()


@pytest.fixture
def dynamo_only(monkeypatch):
    """``attn_core``'s own ``torch.compile`` call (its options, its caching), with each graph handed
    to the ``eager`` backend: the graph count is dynamo's alone (traces, guards, recompiles), and no
    inductor C++ build (10-25 s per graph on 2 CPU cores) is paid for a test about shapes. The
    compiled kernels' values are :func:`test_head_sizes_and_dtypes`'."""
    real = torch.compile
    monkeypatch.setattr(torch, "compile", lambda fn, **kw: real(fn, **{**kw, "backend": "eager"}))


def test_sweep_of_batch_shapes_compiles_a_fixed_number_of_graphs(dynamo_only):
    """16 batches of new shapes (as length-bucketed speech batches are), with and without
    padding: at most one graph per length bucket plus one for the batch size going dynamic,
    all equal to the reference; after ``clear_caches()`` the next call compiles afresh.
    (A batch of 1 is a graph of its own per bucket: dynamo specialises sizes 0 and 1.)"""
    rng = random.Random(0)
    buckets = set()
    for i in range(16):
        b, length = rng.choice([2, 3, 4]), rng.randint(200, 700)
        buckets.add(Fn._flex_length(length))
        q, k, v, kpm = _batch(b, length, length, 32, seed=i, pad=i % 2 == 1)
        _check_compiled(q, k, v, kpm, 16, False, torch.float32)
    assert buckets == {256, 384, 512, 768}
    # lengths static: a graph per bucket; the batch dynamic: at most one more
    assert len(buckets) <= counters["stats"]["unique_graphs"] <= len(buckets) + 1, dict(counters["stats"])
    attn_core.clear_caches()
    assert not Fn._BAND_LAYOUTS
    counters.clear()
    _check_compiled(*_batch(2, 100, 100, 32, seed=99, pad=True), 16, False, torch.float32)
    assert counters["stats"]["unique_graphs"] == 1  # compiled again: nothing survived the clear


@pytest.mark.slow
@pytest.mark.parametrize("d,dtype,causal", [(24, torch.float32, False), (64, torch.bfloat16, True)])
def test_head_sizes_and_dtypes(d, dtype, causal):
    """The inductor-compiled kernel's values: head sizes 24 and 64, fp32 and bf16, causal and not
    (each value in one case: every graph is a C++ build of 10-25 s on 2 CPU cores), padded or not,
    lengths of one bucket (129..256) and a cross-length pair: one graph per bucket pair, +1 for the
    batch."""
    for i, (b, lq, lk, pad) in enumerate([(2, 130, 130, True), (3, 190, 190, False), (1, 150, 100, True)]):
        q, k, v, kpm = _batch(b, lq, lk, d, seed=d + i, pad=pad)
        _check_compiled(q, k, v, kpm, 7, causal, dtype)
    assert 1 <= counters["stats"]["unique_graphs"] <= 3, dict(counters["stats"])


def test_layout_built_under_inference_mode_is_safe_to_train_on():
    """A block layout first built under ``inference_mode`` (as Lightning validates) holds no
    inference tensors (so autograd may save it), and a grad-enabled call of the same shape
    reuses it with the reference's values. (CPU FlexAttention has no backward at all: the
    training step itself is checked on CUDA in test_cuda.py.)"""
    q, k, v, kpm = _batch(2, 200, 200, 16, seed=5, pad=True)
    with torch.inference_mode():
        _window_attention_flex(q, k, v, 9, False, kpm, None, compiled=False)
    (tables,) = Fn._BAND_LAYOUTS.values()
    assert tables and not any(t.is_inference() for t in tables)

    with torch.enable_grad():
        out = _window_attention_flex(q, k, v, 9, False, kpm, None, compiled=False)
    assert len(Fn._BAND_LAYOUTS) == 1  # the same cached layout served the grad-enabled call
    ref = _window_attention_blocked(q, k, v, 9, False, kpm, 0.0, None)
    torch.testing.assert_close(out, ref, atol=1e-10, rtol=0)


@pytest.mark.parametrize("lq,lk,window,causal", [
    (256, 256, 7, False),  # lengths on a bucket: nothing padded
    (200, 200, 9, True),  # bucket padding of keys and queries
    (300, 140, 20, False),  # queries past Lk + w: rows with no key give zeros
    (150, 333, 5, True),
])
def test_layout_without_key_mask_is_built_once_per_shape(lq, lk, window, causal):
    """Without a key padding mask the block layout depends on the shapes alone: cached, one
    entry per shape whatever the batch, and the values stay the blocked kernel's (the bucket's
    padded keys masked, query rows with no key in reach zero)."""
    for b, seed in ((2, 1), (3, 2), (2, 3)):
        q, k, v, _ = _batch(b, lq, lk, 16, seed=seed, pad=False)
        want = _window_attention_blocked(q, k, v, window, causal, None, 0.0, None)
        got = _window_attention_flex(q, k, v, window, causal, None, None, compiled=False)
        torch.testing.assert_close(got, want, atol=1e-10, rtol=0)
    assert len(Fn._BAND_MASKS) == 1 and not any(t.is_inference() for t in
                                                 next(iter(Fn._BAND_MASKS.values())).as_tuple()
                                                 if isinstance(t, torch.Tensor))


def _blocks(num, idx):
    """BlockMask counts ``(1, 1, nq)`` and indices ``(1, 1, nq, nk)`` -> the ``(nq, nk)`` bool table."""
    got = torch.zeros(idx.shape[-2:], dtype=torch.bool)
    for r in range(got.shape[0]):
        got[r, idx[0, 0, r, : num[0, 0, r]].long()] = True
    return got


def test_layout_is_the_band_at_block_granularity():
    """The layout lists exactly the 128 x 128 blocks that hold an allowed pair: full where every
    pair is allowed, partial on the band's edges."""
    lq, lk, w = 640, 512, 100
    assert [Fn._flex_length(n) for n in (1, 128, 129, 193, 640, 3000)] == [128, 128, 256, 256, 768, 3072]
    layout = Fn._band_layout(lq, lk, w, True, torch.device("cpu"))
    allowed = attn_core.window_mask(lq, lk, w, causal=True).view(5, 128, 4, 128)
    partial, full = _blocks(layout.kv_num_blocks, layout.kv_indices), _blocks(layout.full_kv_num_blocks, layout.full_kv_indices)
    assert torch.equal(partial | full, allowed.any(3).any(1)) and not (partial & full).any()
    assert torch.equal(full, allowed.all(3).all(1))


# (L, window, causal) -> (full, partial) blocks of 128, counted by hand: with d = r - c the
# block distance, a block is full iff 128 |d| + 127 <= w (and d > 0 when causal), non-empty
# iff 128 (|d| - 1) + 1 <= w (and d >= 0 when causal).
HAND_COUNTS = [
    (1024, 128, False, 8, 14),  # full: d = 0 (8); partial: |d| = 1 (2 x 7)
    (1024, 256, False, 22, 12),  # full: |d| <= 1 (8 + 14); partial: |d| = 2 (2 x 6)
    (1024, 256, True, 7, 14),  # full: d = 1 (7); partial: d = 0 (8), d = 2 (6)
    (512, 64, False, 0, 10),  # w < 127: no block is full; partial: |d| <= 1 (4 + 6)
]


@pytest.mark.parametrize("length,w,causal,n_full,n_partial", HAND_COUNTS)
def test_layout_full_and_partial_counts(length, w, causal, n_full, n_partial):
    layout = Fn._band_layout(length, length, w, causal, torch.device("cpu"))
    assert int(layout.full_kv_num_blocks.sum()) == n_full
    assert int(layout.kv_num_blocks.sum()) == n_partial


def test_padding_makes_only_its_key_blocks_partial():
    """Key padding turns into partial only the full blocks whose key block holds a padded key
    (in any row of the batch); the others stay full."""
    real = torch.ones(2, 1024, dtype=torch.bool)
    real[1, 1000:] = False  # key block 7 holds padding
    layout = Fn._band_layout(1024, 1024, 256, False, torch.device("cpu"), real)
    full = _blocks(layout.full_kv_num_blocks, layout.full_kv_indices)
    assert int(full.sum()) == 22 - 2 and not full[:, 7].any()  # blocks (6, 7), (7, 7) became partial
    assert int(layout.kv_num_blocks.sum()) == 12 + 2


def test_cpu_attention_keeps_the_blocked_kernel(monkeypatch):
    """On CPU ``attention(window=...)`` never takes the flex path (no CPU flex backward)."""

    def boom(*args, **kwargs):
        raise AssertionError("flex path taken on CPU")

    monkeypatch.setattr(Fn, "_window_attention_flex", boom)
    q, k, v, kpm = _batch(2, 50, 50, 8, seed=1, pad=True)
    attn_core.attention(q, k, v, window=4, key_padding_mask=kpm)
