"""The attention maths: one function for sequences, with full and truncated patterns.

``attention`` dispatches to one of three implementations of the same maths:

* full attention: ``F.scaled_dot_product_attention`` (fused kernels where torch has them);
* truncated attention on CPU (or when FlexAttention is unavailable): a blocked
  implementation that cuts the queries into blocks of ``bs`` rows and gives each
  block only the ``bs + 2w`` keys it can see, so time and memory are O(L * w);
* truncated attention on CUDA: FlexAttention with a block-sparse mask.

``reference_attention`` is the plain dense maths every path is tested against.
"""

from __future__ import annotations

import functools
from typing import NamedTuple

import torch
import torch.nn.functional as F
from torch import Tensor

from attn_core import _validate as V
from attn_core.masks import causal_mask, mask_to_bias, window_allows, window_mask

__all__ = ["attention", "reference_attention", "attention_probs", "masked_softmax", "clear_caches"]


# --------------------------------------------------------------------------- reference maths
def masked_softmax(scores: Tensor, mask: Tensor | None = None) -> Tensor:
    """Softmax over the last dim restricted to ``mask`` (bool, broadcastable, ``True`` = may
    attend). Masked entries are exactly 0; a row with nothing to attend is all 0 with finite,
    zero gradients (the bias is finite and masked entries are zeroed afterwards)."""
    if mask is None:
        return torch.softmax(scores, dim=-1)
    probs = torch.softmax(scores + mask_to_bias(mask, scores.dtype), dim=-1)
    return probs.masked_fill(~mask, 0.0)


def attention_probs(q: Tensor, k: Tensor, mask: Tensor | None = None, scale: float | None = None) -> Tensor:
    """``masked_softmax(q k^T * scale, mask)``: the ``(..., Lq, Lk)`` attention probabilities."""
    scale = q.shape[-1] ** -0.5 if scale is None else scale
    return masked_softmax(torch.matmul(q, k.transpose(-2, -1)) * scale, mask)


def reference_attention(
    q: Tensor, k: Tensor, v: Tensor, mask: Tensor | None = None, scale: float | None = None
) -> Tensor:
    """Dense ``softmax(q k^T / sqrt(d), masked) v`` for tests and teaching; O(Lq * Lk) memory.

    Rows whose mask is all ``False`` return zeros."""
    return torch.matmul(attention_probs(q, k, mask, scale), v)


# --------------------------------------------------------------------------- public entry point
def attention(
    q: Tensor,
    k: Tensor,
    v: Tensor,
    *,
    causal: bool = False,
    window: int | None = None,
    key_padding_mask: Tensor | None = None,
    dropout_p: float = 0.0,
    scale: float | None = None,
    need_weights: bool = False,
) -> Tensor | tuple[Tensor, Tensor]:
    """Scaled dot-product attention over sequences.

    Args:
        q: ``(B, H, Lq, D)``; k: ``(B, H, Lk, D)``; v: ``(B, H, Lk, Dv)``.
        causal: query ``i`` sees keys ``j <= i`` (top-left aligned, as SDPA).
        window: ``None`` for full attention, else ``w >= 0``: query ``i`` sees ``|i - j| <= w``.
            Runs in O(L * w) time and memory; never builds an ``Lq x Lk`` tensor.
        key_padding_mask: ``(B, Lk)`` bool, ``True`` = real token.
        dropout_p: dropout on the attention probabilities. Applied whenever > 0, exactly
            like SDPA: modules pass ``p if self.training else 0``.
        scale: defaults to ``1 / sqrt(D)``.
        need_weights: also return the ``(B, H, Lq, Lk)`` probabilities (before dropout).
            This materialises the dense matrix, so use it for inspection, not speed.

    Returns ``out (B, H, Lq, Dv)`` or ``(out, weights)``. Query rows with nothing to
    attend (all keys padded, or outside the window) are zeros, never NaN.
    """
    check_inputs(q, k, v, window, key_padding_mask, dropout_p, scale)
    b, _, lq, _ = q.shape
    lk = k.shape[2]
    if window is not None and window >= max(lq, lk) - 1:
        window = None  # the window covers every pair: identical to full attention

    if need_weights:
        mask = _dense_mask(b, lq, lk, causal, window, key_padding_mask, q.device)
        probs = attention_probs(q, k, mask, scale)  # (B, H, Lq, Lk)
        dropped = F.dropout(probs, dropout_p) if dropout_p > 0 else probs
        return torch.matmul(dropped, v), probs
    if window is None:
        return _full_attention(q, k, v, causal, key_padding_mask, dropout_p, scale)
    if window_kernel(q.device, q.dtype, min(q.shape[-1], v.shape[-1]), dropout_p) == "flex":
        return _window_attention_flex(q, k, v, window, causal, key_padding_mask, scale, compiled=True)
    return _window_attention_blocked(q, k, v, window, causal, key_padding_mask, dropout_p, scale)


_FLEX_MIN_HEAD_DIM = 16  # FlexAttention refuses smaller head dims ("must be at least 16")


def window_kernel(device: torch.device | str, dtype: torch.dtype, head_dim: int, dropout_p: float) -> str:
    """Which kernel runs truncated attention: ``"flex"`` (compiled FlexAttention: CUDA, no
    dropout, head dims it supports) or ``"blocked"`` (the O(L * w) SDPA-over-blocks kernel,
    everywhere else). ``head_dim`` is the smaller of the query/key and value head dims.
    Pure (no tensors): the dispatch rule is tested on CPU."""
    del dtype  # fp32, bf16 and fp16 all run on flex; a parameter so the rule can grow
    if torch.device(device).type != "cuda" or dropout_p > 0.0 or not _flex_available():
        return "blocked"
    return "flex" if head_dim >= _FLEX_MIN_HEAD_DIM else "blocked"


def _inputs_ok(q, k, v, window, kpm, dropout_p, scale) -> bool:
    """The common valid call, accepted in a few attribute reads (``attention`` is called per
    layer per step, and the full checks below cost about as much as SDPA's own launch at short
    lengths); anything else goes through :func:`check_inputs`' checks, which name the problem."""
    T = Tensor
    return (
        type(q) is T and type(k) is T and type(v) is T and q.dim() == 4 and k.dim() == 4 and v.dim() == 4
        and q.dtype == k.dtype == v.dtype and q.device == k.device == v.device
        and q.shape[:2] == k.shape[:2] == v.shape[:2] and q.shape[3] == k.shape[3] and k.shape[2] == v.shape[2]
        and (window is None or (type(window) is int and window >= 0))
        and (kpm is None or (type(kpm) is T and kpm.dtype == torch.bool and kpm.shape == k.shape[::2]))
        and type(dropout_p) in (float, int) and 0.0 <= dropout_p < 1.0
        and (scale is None or (type(scale) in (float, int) and scale > 0))
    )


def check_inputs(q, k, v, window, kpm, dropout_p, scale) -> None:
    if _inputs_ok(q, k, v, window, kpm, dropout_p, scale):
        return
    for name, t in (("q", q), ("k", k), ("v", v)):
        V.check_tensor(name, t, 4, "(B, H, L, D)")
    V.check_same("attention", {"q": q, "k": k, "v": v}, "dtype")
    V.check_same("attention", {"q": q, "k": k, "v": v}, "device")
    if q.shape[:2] != k.shape[:2] or k.shape[:2] != v.shape[:2]:
        raise ValueError(
            f"q, k, v disagree on (B, H): q {tuple(q.shape)}, k {tuple(k.shape)}, v {tuple(v.shape)}"
        )
    if q.shape[-1] != k.shape[-1]:
        raise ValueError(f"q has head dim {q.shape[-1]} but k has {k.shape[-1]}: they must match")
    if k.shape[2] != v.shape[2]:
        raise ValueError(f"k has length {k.shape[2]} but v has {v.shape[2]}: they must match")
    V.check_window(window)
    V.check_key_padding_mask(kpm, k.shape[0], k.shape[2])
    V.check_dropout(dropout_p)
    V.check_scale(scale)


def _dense_mask(b, lq, lk, causal, window, kpm, device) -> Tensor | None:
    """The full ``(B|1, 1, Lq, Lk)`` mask for the dense paths (``None`` = attend everywhere)."""
    mask = None
    if window is not None:
        mask = window_mask(lq, lk, window, causal=causal, device=device)
    elif causal:
        mask = causal_mask(lq, lk, device=device)
    if mask is not None:
        mask = mask[None, None]  # (1, 1, Lq, Lk)
    if kpm is not None:
        pad = kpm[:, None, None, :]  # (B, 1, 1, Lk)
        mask = pad if mask is None else mask & pad
    return mask


def sdpa_safe(q, k, v, mask: Tensor, dropout_p: float, scale) -> Tensor:
    """SDPA with a boolean mask, where fully masked rows give 0 (and 0 gradient), never NaN:
    such rows are let attend everywhere and their output is zeroed afterwards. No host sync.

    The mask goes in as an additive float bias (:func:`mask_to_bias`), the form every fused
    kernel takes: CPU flash takes bool or float (SDPA turns bool into a float bias anyway),
    CUDA's efficient kernel needs a float bias where a bool mask sends SDPA to its math kernel.
    A key padding mask stays ``(B, 1, 1, Lk)``, broadcast, never ``(B, 1, Lq, Lk)``."""
    row_ok = mask.any(dim=-1, keepdim=True)  # (..., Lq|1, 1)
    bias = mask_to_bias(mask | ~row_ok, q.dtype)  # same shape as mask
    out = F.scaled_dot_product_attention(q, k, v, attn_mask=bias, dropout_p=dropout_p, scale=scale)
    return out.masked_fill(~row_ok, 0.0)


# --------------------------------------------------------------------------- full attention
def _full_attention(q, k, v, causal, kpm, dropout_p, scale) -> Tensor:
    if kpm is None:
        b, h, lq, _ = q.shape
        if q.device.type == "cpu" and not causal and not torch.compiler.is_compiling():  # (a thread count
            chunks = min(-(-torch.get_num_threads() // (b * h)), lq // 64)  # is no graph value)
            if chunks > 1:
                return _full_attention_query_chunks(q, k, v, chunks, dropout_p, scale)
        # No mask tensor at all: SDPA picks its fused kernel (flash/efficient on GPU, flash on CPU).
        return F.scaled_dot_product_attention(q, k, v, dropout_p=dropout_p, is_causal=causal, scale=scale)
    mask = _dense_mask(q.shape[0], q.shape[2], k.shape[2], causal, None, kpm, q.device)
    return sdpa_safe(q, k, v, mask, dropout_p, scale)


def _full_attention_query_chunks(q, k, v, chunks: int, dropout_p, scale) -> Tensor:
    """CPU SDPA parallelises its backward over batch x heads only, so one sequence with one
    head trains on one thread. Folding ``chunks`` slices of the queries into the batch is
    exact (each query's softmax still spans every key) and lets every thread work."""
    b, h, lq, d = q.shape
    lk, dv = k.shape[2], v.shape[-1]
    pad = (-lq) % chunks
    qc = F.pad(q, (0, 0, 0, pad)).view(b, h, chunks, -1, d).transpose(1, 2).reshape(b * chunks, h, -1, d)
    kc = k[:, None].expand(b, chunks, h, lk, d).reshape(b * chunks, h, lk, d)  # a view when B == 1
    vc = v[:, None].expand(b, chunks, h, lk, dv).reshape(b * chunks, h, lk, dv)
    out = F.scaled_dot_product_attention(qc, kc, vc, dropout_p=dropout_p, scale=scale)  # (B*c, H, Lq/c, Dv)
    return out.view(b, chunks, h, -1, dv).transpose(1, 2).reshape(b, h, -1, dv)[:, :, :lq]


# --------------------------------------------------------------------------- truncated: blocked
def block_size_for(window: int) -> int:
    """Query rows per block: ``bs >= w`` keeps each block's keys inside one span of ``bs + 2w``.
    Too small a block wastes time in many tiny matmuls, too large one computes masked pairs."""
    return max(32, min(window, 256))


class BandBlocks(NamedTuple):
    """Truncated attention cut into query blocks folded into the batch (see :func:`band_blocks`)."""

    q: Tensor  # (B*nb, H, bs, D)
    k: Tensor  # (B*nb, H, nk, D)
    v: Tensor  # (B*nb, H, nk, Dv)
    mask: Tensor  # (B*nb, 1, bs, nk) bool, True = may attend
    nb: int  # query blocks
    bs: int  # query rows per block

    def unblock(self, out: Tensor, lq: int) -> Tensor:
        """Per-block output ``(B*nb, H, bs, Dv)`` -> ``(B, H, Lq, Dv)``."""
        _, h, bs, dv = out.shape
        out = out.view(-1, self.nb, h, bs, dv).transpose(1, 2).reshape(-1, h, self.nb * bs, dv)
        return out[:, :, :lq]


def band_blocks(q: Tensor, k: Tensor, v: Tensor, window: int, causal: bool, kpm: Tensor | None) -> BandBlocks:
    """Cut truncated attention into blocks: query block ``b`` (rows ``b*bs .. b*bs+bs-1``) gets the
    ``nk = bs + 2w`` keys starting at ``b*bs - w`` (``bs + w`` keys when causal)::

        keys   ... [b*bs - w ............................ b*bs + bs - 1 + w] ...
        block b          [b*bs ........ b*bs + bs - 1]

    and the mask of the band, the keys that exist and the real ones. Shared by the truncated
    kernel and by patterns that add keys to each block (``local_global``)."""
    b, h, lq, d = q.shape
    lk = k.shape[2]
    w = window
    bs = block_size_for(w)
    nb = -(-lq // bs)  # query blocks
    span = bs + 2 * w  # keys a block may see
    nk = bs + w if causal else span

    # Queries: pad to nb*bs rows, then fold blocks into the batch.  (B*nb, H, bs, D)
    qb = F.pad(q, (0, 0, 0, nb * bs - lq)).view(b, h, nb, bs, d).transpose(1, 2).reshape(b * nb, h, bs, d)
    # Keys/values: original key j sits at padded index j + w; block b reads [b*bs, b*bs + span).
    used = min(lk, nb * bs + w)
    pad_front, pad_back = w, nb * bs + 2 * w - w - used

    def blocks(x: Tensor) -> Tensor:  # (B, H, Lk, E) -> (B*nb, H, nk, E)
        xp = F.pad(x[:, :, :used], (0, 0, pad_front, pad_back))
        xb = xp.unfold(2, span, bs)[..., :nk]  # (B, H, nb, E, nk), a view
        return xb.permute(0, 2, 1, 4, 3).reshape(b * nb, h, nk, x.shape[-1])

    kb, vb = blocks(k), blocks(v)

    # Mask (B|1, nb, bs, nk): band (depends only on the offsets) & key exists & key is real.
    i = torch.arange(bs, device=q.device)[:, None]
    c = torch.arange(nk, device=q.device)[None, :]
    band = window_allows(i - c + w, w, causal)  # i - c + w = i_abs - j_abs inside a block
    j_abs = (torch.arange(nb, device=q.device) * bs - w)[:, None, None] + c  # (nb, 1, nk)
    mask = band & (j_abs >= 0) & (j_abs < lk)  # (nb, bs, nk)
    mask = mask[None]  # (1, nb, bs, nk)
    if kpm is not None:
        kp = F.pad(kpm[:, :used], (pad_front, pad_back), value=False)  # (B, nb*bs + 2w)
        kp = kp.unfold(1, span, bs)[..., :nk]  # (B, nb, nk)
        mask = mask & kp[:, :, None, :]  # (B, nb, bs, nk)
    mask = mask.expand(b, nb, bs, nk).reshape(b * nb, 1, bs, nk)
    return BandBlocks(qb, kb, vb, mask, nb, bs)


def _window_attention_blocked(q, k, v, window, causal, kpm, dropout_p, scale) -> Tensor:
    """Truncated attention in O(L * w): each query block attends only the keys it can see
    (:func:`band_blocks`), one fused SDPA call over all blocks."""
    blk = band_blocks(q, k, v, window, causal, kpm)
    out = sdpa_safe(blk.q, blk.k, blk.v, blk.mask, dropout_p, scale)  # (B*nb, H, bs, Dv)
    return blk.unblock(out, q.shape[2])


# --------------------------------------------------------------------------- truncated: flex
# Compile strategy (issue 20; measurements in tests/attn_core/test_flex_compile.py's docstring):
# lengths are padded up to a ladder of bucket sizes (128, 256, 384, 512, 768, ...: < 50% extra,
# ~16 buckets up to 16k), padded keys are masked out through the key mask and padded query rows
# dropped; the key mask is always present (all True without padding). flex_attention is
# compiled with torch's automatic dynamic shapes but with the length dims marked static: one
# graph per length bucket (+1 once the batch size changes and goes dynamic; a batch of 1 is
# its own graph per bucket, as dynamo specialises sizes 0 and 1), not one per batch.
# (Dynamic lengths hit an inductor C++ codegen bug in the CPU flex template, torch 2.14.1.)
_FLEX_BLOCK = 128  # FlexAttention's default sparse block size
_FLEX_RECOMPILE_LIMIT = 64  # graphs per process for flex (dtype x head dim x window x grad mode)
_BAND_LAYOUTS: dict[tuple, tuple] = {}  # (Lq', Lk', window, causal, device) -> (nonempty, full) blocks
_BAND_MASKS: dict[tuple, object] = {}  # (Lq', Lk', Lk, window, causal, device) -> BlockMask without a key mask
_BAND_LAYOUTS_MAX = 64


def _remember(cache: dict, key: tuple, value):
    """Store ``value`` under ``key``, dropping the oldest entry past :data:`_BAND_LAYOUTS_MAX`."""
    if len(cache) >= _BAND_LAYOUTS_MAX:
        cache.pop(next(iter(cache)))
    cache[key] = value
    return value


@functools.lru_cache(maxsize=1)
def _flex_available() -> bool:
    try:
        import torch.nn.attention.flex_attention  # noqa: F401
    except ImportError:  # torch < 2.5
        return False
    return True


@functools.lru_cache(maxsize=1)
def _compiled_flex():
    from torch.nn.attention.flex_attention import flex_attention

    return torch.compile(flex_attention)  # dynamic=None: automatic dynamic shapes (see above)


def clear_caches() -> None:
    """Drop every cached FlexAttention block layout and compiled graph, so that nothing compiled
    or cached in one benchmark cell is seen by the next. Call it at the start of each cell.
    When the compiled flex path has been used in this process, this also runs
    ``torch.compiler.reset()``, which drops every graph ``torch.compile`` holds in the process."""
    _BAND_LAYOUTS.clear()
    _BAND_MASKS.clear()
    if _compiled_flex.cache_info().currsize:
        _compiled_flex.cache_clear()
        torch.compiler.reset()


def _flex_length(n: int) -> int:
    """The bucket ``n`` is padded to, the smallest of 128, 256, 384, 512, 768, ... (``128 * 2^k``
    and ``192 * 2^k`` from 256 on) >= ``n``: the lengths the compiled kernels see, multiples of
    the block size with few distinct values."""
    size = _FLEX_BLOCK
    while True:
        for bucket in (size, size * 3 // 2):
            if bucket >= n and bucket % _FLEX_BLOCK == 0:
                return bucket
        size *= 2


def _band_mask_mod(window: int, causal: bool, kpm: Tensor | None):
    """FlexAttention's ``mask_mod``: the window rule, and key ``kv_idx`` real in ``kpm`` ``(B, Lk)``."""

    def mask_mod(b, h, q_idx, kv_idx):
        m = window_allows(q_idx - kv_idx, window, causal)
        return m if kpm is None else m & kpm[b, kv_idx]

    return mask_mod


def _band_tables(lq: int, lk: int, window: int, causal: bool, device: torch.device) -> tuple[Tensor, Tensor]:
    """``(nonempty, full)``, each ``(nq, nk)`` bool over the 128 x 128 blocks of padded lengths
    ``lq, lk``: the block holds an allowed pair / only allowed pairs. Built from the window
    predicate in chunks of query blocks, never an ``Lq x Lk`` tensor; cached per shape, outside
    inference mode (safe to reuse when training)."""
    key = (lq, lk, window, causal, str(device))
    hit = _BAND_LAYOUTS.get(key)
    if hit is not None:
        return hit
    bs, nq, nk = _FLEX_BLOCK, lq // _FLEX_BLOCK, lk // _FLEX_BLOCK
    chunk = max(1, 2**24 // (bs * lk))  # query blocks per step: <= 16M predicate values
    with torch.inference_mode(False), torch.no_grad():
        kv_idx = torch.arange(lk, device=device)[None, :]  # (1, Lk)
        any_rows, all_rows = [], []
        for start in range(0, nq, chunk):
            q_idx = torch.arange(start * bs, min(nq, start + chunk) * bs, device=device)[:, None]
            allowed = window_allows(q_idx - kv_idx, window, causal).view(-1, bs, nk, bs)  # (chunk, bs, nk, bs)
            any_rows.append(allowed.any(3).any(1))  # (chunk, nk)
            all_rows.append(allowed.all(3).all(1))
        hit = (torch.cat(any_rows), torch.cat(all_rows))  # (nq, nk) each
    return _remember(_BAND_LAYOUTS, key, hit)


def _kv_blocks(blocks: Tensor) -> tuple[Tensor, Tensor]:
    """``(nq, nk)`` bool -> BlockMask's ``(1, 1, nq)`` counts and ``(1, 1, nq, nk)`` indices
    (the marked blocks first, in order). Tensor ops only: no host sync."""
    num = blocks.sum(-1, dtype=torch.int32)[None, None]
    order = torch.sort(blocks.to(torch.int8), dim=-1, descending=True, stable=True).indices
    return num, order.to(torch.int32)[None, None]


def _band_layout(lq: int, lk: int, window: int, causal: bool, device: torch.device, real: Tensor | None = None):
    """The band's ``BlockMask`` for padded lengths ``lq, lk`` (multiples of the block size).
    Blocks wholly inside the band are *full* (no ``mask_mod`` runs there); only the band's edge
    blocks and the key blocks that hold a padded key (``real (B, Lk)`` False, in any row of the
    batch) are *partial*, where the ``mask_mod`` applies the window and the key mask. The
    layout has no batch dim: one compiled kernel for every batch size."""
    from torch.nn.attention.flex_attention import BlockMask

    nonempty, full = _band_tables(lq, lk, window, causal, device)
    if real is not None:
        padded = (~real).view(real.shape[0], -1, _FLEX_BLOCK).any(-1).any(0)  # (nk,) block holds padding
        full = full & ~padded[None, :]
    partial = nonempty & ~full
    layout = BlockMask.from_kv_blocks(
        *_kv_blocks(partial), *_kv_blocks(full), BLOCK_SIZE=_FLEX_BLOCK, seq_lengths=(lq, lk)
    )
    for t in layout.as_tuple():
        if isinstance(t, Tensor):
            torch._dynamo.mark_static(t)  # its shape is the bucket's: never a dynamic dim
    return layout


def _unmasked_band_layout(lq: int, lk: int, lk_real: int, window: int, causal: bool, device: torch.device):
    """:func:`_band_layout` for a call without a key padding mask, built once per shape: only the
    bucket's padding (keys ``>= lk_real``) is masked, the same for every row and batch size, so
    the per-call work of building a ``BlockMask`` (a dozen small kernels and their host time)
    goes away."""
    key = (lq, lk, lk_real, window, causal, str(device))
    hit = _BAND_MASKS.get(key)
    if hit is None:
        with torch.inference_mode(False), torch.no_grad():
            real = (torch.arange(lk, device=device) < lk_real)[None] if lk_real < lk else None  # (1, Lk')
            hit = _remember(_BAND_MASKS, key, _band_layout(lq, lk, window, causal, device, real))
    return hit


def _window_rows_ok(lq: int, lk: int, window: int, causal: bool, kpm: Tensor | None, device) -> Tensor:
    """``(B|1, 1, Lq, 1)``: whether query row ``i`` has at least one key to attend. O(B * L)."""
    i = torch.arange(lq, device=device)
    lo = (i - window).clamp(min=0)
    hi = (i if causal else i + window).clamp(max=lk - 1)  # inclusive
    if kpm is None:
        ok = (lo <= hi)[None]
    else:
        cs = F.pad(kpm.long().cumsum(-1), (1, 0))  # (B, Lk + 1): real keys before index
        ok = (lo <= hi)[None] & (cs[:, (hi + 1).clamp(min=0)] - cs[:, lo.clamp(max=lk)] > 0)
    return ok[:, None, :, None]


def _window_attention_flex(q, k, v, window, causal, kpm, scale, *, compiled: bool) -> Tensor:
    """Truncated attention with FlexAttention block masks: blocks outside the band are skipped.

    ``compiled=False`` runs FlexAttention eagerly (dense under the hood) to check the mask logic;
    ``compiled=True`` is the CUDA path (on CPU torch compiles the forward only: the tests use it)."""
    from torch.nn.attention.flex_attention import flex_attention

    b, _, lq, _ = q.shape
    lk = k.shape[2]
    lqp, lkp = _flex_length(lq), _flex_length(lk)
    real = torch.ones(b, lk, dtype=torch.bool, device=q.device) if kpm is None else kpm
    real = F.pad(real, (0, lkp - lk), value=False)  # (B, Lk'): padded keys are never real
    qp = F.pad(q, (0, 0, 0, lqp - lq)) if lqp > lq else q  # (B, H, Lq', D)
    kp, vp = (F.pad(k, (0, 0, 0, lkp - lk)), F.pad(v, (0, 0, 0, lkp - lk))) if lkp > lk else (k, v)  # (B, H, Lk', D|Dv)
    if kpm is None:  # the layout depends on the shapes alone: cached
        block_mask = _unmasked_band_layout(lqp, lkp, lk, window, causal, q.device)
    else:
        block_mask = _band_layout(lqp, lkp, window, causal, q.device, real)
    block_mask.mask_mod = _band_mask_mod(window, causal, real)
    if compiled:
        for t, dim in ((qp, 2), (kp, 2), (vp, 2), (real, 1)):
            torch._dynamo.mark_static(t, dim)  # lengths are buckets: static; the batch may vary
        with torch._dynamo.config.patch(recompile_limit=_FLEX_RECOMPILE_LIMIT):
            out = _compiled_flex()(qp, kp, vp, block_mask=block_mask, scale=scale)
    else:
        out = flex_attention(qp, kp, vp, block_mask=block_mask, scale=scale)
    out = out[:, :, :lq]  # (B, H, Lq, Dv)
    if kpm is None and lq <= lk + window:  # every query row has a key in its window (row i sees key min(i, Lk-1))
        return out
    return out.masked_fill(~_window_rows_ok(lq, lk, window, causal, kpm, q.device), 0.0)
