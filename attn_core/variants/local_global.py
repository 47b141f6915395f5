"""Local + global attention (Longformer / BigBird style): a sliding window of ``window`` plus the
first ``global_tokens`` positions, which attend to everything and are attended by everything
(:func:`attn_core.masks.local_global_mask` draws it). Exactly softmax attention under that
mask, in O(L * (w + g)) time and memory, never an ``L x L`` tensor:

* rows ``i >= g``: the truncated kernel's query blocks (:func:`attn_core.functional.band_blocks`)
  each get the ``g`` global keys prepended, masked where the window already covers them (no key
  counted twice), so one softmax per row spans window and global columns together;
* rows ``i < g``: full attention over every key (``g x L``).

Causal is exact too (``j <= i`` on both parts); key padding masks both parts.
"""

from __future__ import annotations

from typing import Any, Mapping

import torch
import torch.nn.functional as F
from torch import Tensor

from attn_core import _validate as V
from attn_core.functional import check_inputs, sdpa_safe, attention, attention_probs, band_blocks
from attn_core.masks import local_global_allows, local_global_mask, window_allows
from attn_core.patterns import register_pattern

__all__ = ["local_global_attention"]


def _check(params: dict[str, Any]) -> None:
    if params["window"] is None:
        V.fail("window", None, "pattern='local_global' needs an int window >= 0")
    V.check_window(params["window"])
    g = params["global_tokens"]
    if not V.is_int(g, 0):
        V.fail("global_tokens", g, "expected an int >= 0 (the first positions that are global)")


def _allows(i: Tensor, j: Tensor, *, causal: bool, window: int, global_tokens: int = 1) -> Tensor:
    return local_global_allows(i, j, window, global_tokens, causal)


def _buffer(params: Mapping[str, Any]) -> tuple[int, int]:
    """A causal decoder keeps the global tokens and the last ``window`` keys: no later position attends the others."""
    return int(params["global_tokens"]), int(params["window"])


@register_pattern(
    "local_global", causal=True, padding=True, cross=True, complexity="L*(w+g)", weights=True,
    params={"window": None, "global_tokens": 1}, check=_check, incremental=True, allows=_allows, buffer=_buffer,
    description="sliding window of `window` plus the first `global_tokens` positions attending to and "
    "attended by all (Longformer/BigBird); exact softmax; O(L (w + g))",
)
def local_global_attention(
    q: Tensor, k: Tensor, v: Tensor, *, causal: bool = False, key_padding_mask: Tensor | None = None,
    dropout_p: float = 0.0, scale: float | None = None, state: None = None,
    window: int, global_tokens: int = 1, need_weights: bool = False,
) -> Tensor | tuple[Tensor, Tensor]:
    """Local + global attention of q ``(B, H, Lq, D)``, k ``(B, H, Lk, D)``, v ``(B, H, Lk, Dv)`` ->
    ``(B, H, Lq, Dv)`` [, dense weights ``(B, H, Lq, Lk)`` with ``need_weights``]. Query rows with
    no key to attend are zeros."""
    check_inputs(q, k, v, window, key_padding_mask, dropout_p, scale)
    b, h, lq, d = q.shape
    lk, g = k.shape[2], global_tokens
    kpm = key_padding_mask
    if need_weights:  # dense, for inspection
        mask = local_global_mask(lq, lk, window, g, causal=causal, device=q.device)[None, None]  # (1, 1, Lq, Lk)
        mask = mask if kpm is None else mask & kpm[:, None, None, :]
        probs = attention_probs(q, k, mask, scale)  # (B, H, Lq, Lk)
        return torch.matmul(F.dropout(probs, dropout_p) if dropout_p > 0 else probs, v), probs
    if g >= lq or g >= lk or window >= max(lq, lk) - 1:  # every pair allowed
        return attention(q, k, v, causal=causal, key_padding_mask=kpm, dropout_p=dropout_p, scale=scale)
    if g == 0:
        return attention(q, k, v, causal=causal, window=window, key_padding_mask=kpm, dropout_p=dropout_p, scale=scale)

    blk = band_blocks(q, k, v, window, causal, kpm)  # (B*nb, H, bs, D), keys (B*nb, H, nk, D)

    def per_block(x: Tensor) -> Tensor:  # global keys (B, H, g, E) -> (B*nb, H, g, E), the same for each block
        return x[:, None].expand(b, blk.nb, h, g, x.shape[-1]).reshape(b * blk.nb, h, g, x.shape[-1])

    i = (torch.arange(blk.nb, device=q.device) * blk.bs)[:, None, None] + torch.arange(blk.bs, device=q.device)[:, None]
    j = torch.arange(g, device=q.device)  # (g,) global columns; i: (nb, bs, 1) query rows
    cols = local_global_allows(i, j, window, g, causal) & ~window_allows(i - j, window, causal)  # (nb, bs, g)
    cols = cols[None] if kpm is None else cols[None] & kpm[:, None, None, :g]  # (B|1, nb, bs, g)
    cols = cols.expand(b, blk.nb, blk.bs, g).reshape(b * blk.nb, 1, blk.bs, g)
    kb, vb = torch.cat([per_block(k[:, :, :g]), blk.k], 2), torch.cat([per_block(v[:, :, :g]), blk.v], 2)
    out = sdpa_safe(blk.q, kb, vb, torch.cat([cols, blk.mask], -1), dropout_p, scale)  # (B*nb, H, bs, Dv)
    local = blk.unblock(out, lq)  # (B, H, Lq, Dv)
    rows = attention(q[:, :, :g], k, v, causal=causal, key_padding_mask=kpm, dropout_p=dropout_p, scale=scale)
    return torch.cat([rows, local[:, :, g:]], 2)  # type: ignore[list-item]
