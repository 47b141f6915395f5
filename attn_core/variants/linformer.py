"""Linformer attention (Wang et al. 2020): keys and values are projected along the sequence by
learned ``E, F (k_proj, max_len)`` to ``k_proj`` rows before a plain softmax attention,

    out = softmax(q (E k)^T * scale) (F v)      # (B, H, Lq, k_proj) probabilities

so time and memory are O(L * k_proj). One ``E``/``F`` pair per layer, shared by the heads; a
shorter sequence uses their first ``L`` columns. Non-causal only (a projection along the
sequence mixes every position). Padded keys and values are zeroed before the projection, so
they add nothing to ``E k`` and ``F v``.
"""

from __future__ import annotations

import math
from typing import Any

import torch
from torch import Tensor, nn

from attn_core import _validate as V
from attn_core.functional import check_inputs, attention
from attn_core.patterns import register_pattern

__all__ = ["linformer_attention", "LinformerProjections"]


class LinformerProjections(nn.Module):
    """Per-layer state of ``linformer``: the learned length projections ``E`` (keys) and ``F``
    (values), each ``(k_proj, max_len)``, initialised uniform in ``+-1/sqrt(max_len)`` (so a
    projected row has about the variance of one input row)."""

    def __init__(self, k_proj: int, max_len: int) -> None:
        super().__init__()
        self.E = nn.Parameter(torch.empty(k_proj, max_len))
        self.F = nn.Parameter(torch.empty(k_proj, max_len))
        self.reset_parameters()

    def reset_parameters(self) -> None:
        bound = 1.0 / math.sqrt(self.E.shape[1])
        for p in (self.E, self.F):
            nn.init.uniform_(p, -bound, bound)

    def extra_repr(self) -> str:
        return f"k_proj={self.E.shape[0]}, max_len={self.E.shape[1]}"


def _make_state(num_heads: int, head_dim: int, *, max_len: int, k_proj: int) -> nn.Module:
    return LinformerProjections(k_proj, max_len)


def _check(params: dict[str, Any]) -> None:
    if params["k_proj"] < 1:
        V.fail("k_proj", params["k_proj"], "expected an int >= 1 (projected length)")


@register_pattern(
    "linformer", causal=False, padding=True, cross=True, complexity="L*k", needs_max_len=True,
    params={"k_proj": 64}, make_state=_make_state, check=_check,
    description="keys/values projected along the sequence to k_proj rows by learned E, F (k_proj, max_len); "
    "non-causal; O(L k)",
)
def linformer_attention(
    q: Tensor, k: Tensor, v: Tensor, *, causal: bool = False, key_padding_mask: Tensor | None = None,
    dropout_p: float = 0.0, scale: float | None = None, state: LinformerProjections | None = None,
    k_proj: int = 64,
) -> Tensor:
    """Linformer attention of q ``(B, H, Lq, D)``, k ``(B, H, Lk, D)``, v ``(B, H, Lk, Dv)`` ->
    ``(B, H, Lq, Dv)``, with ``E, F`` from ``state`` (:class:`LinformerProjections`); ``Lk`` may
    not exceed their ``max_len``. ``dropout_p`` drops the ``(Lq, k_proj)`` probabilities."""
    check_inputs(q, k, v, None, key_padding_mask, dropout_p, scale)
    if causal:
        V.fail("causal", causal, "pattern='linformer' is non-causal only (its projection mixes every position)")
    if not isinstance(state, LinformerProjections):
        V.fail("state", state, "pattern='linformer' needs its LinformerProjections (make_pattern_state)")
    lk, max_len = k.shape[2], state.E.shape[1]
    if lk > max_len:
        raise ValueError(f"pattern='linformer': key length {lk} exceeds max_len={max_len} of its projections")
    if key_padding_mask is not None:
        real = key_padding_mask[:, None, :, None].to(k.dtype)  # (B, 1, Lk, 1)
        k, v = k * real, v * real
    e, f = state.E[:, :lk].to(k.dtype), state.F[:, :lk].to(v.dtype)  # (k_proj, Lk)
    kp, vp = torch.matmul(e, k), torch.matmul(f, v)  # (B, H, k_proj, D), (B, H, k_proj, Dv)
    return attention(q, kp, vp, dropout_p=dropout_p, scale=scale)  # type: ignore[return-value]
