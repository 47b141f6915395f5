"""An attnbench plug-in: sigmoid attention as the registered pattern ``"sigmoid"``.

Sigmoid attention (Ramapuram et al. 2024) replaces the row softmax by an element-wise sigmoid
with a bias ``b`` (default ``-log(Lk)``, which keeps the row sums near 1 at initialisation)::

    out = sigmoid(q k^T * scale + b) v        # masked pairs weigh 0; no normalisation

Every pair is independent, so causal masks, key padding and cross-attention come for free; it is
dense, O(L^2) time and memory. attnbench finds this module through the entry point in
``pyproject.toml`` and calls :func:`register`.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import Tensor

__all__ = ["register", "sigmoid_attention", "PATTERN"]

PATTERN = "sigmoid"


def sigmoid_attention(
    q: Tensor, k: Tensor, v: Tensor, *, causal: bool = False, key_padding_mask: Tensor | None = None,
    dropout_p: float = 0.0, scale: float | None = None, state: None = None, bias: float | None = None,
    need_weights: bool = False,
) -> Tensor | tuple[Tensor, Tensor]:
    """q ``(B, H, Lq, D)``, k ``(B, H, Lk, D)``, v ``(B, H, Lk, Dv)`` -> ``(B, H, Lq, Dv)``
    [, weights ``(B, H, Lq, Lk)``]. ``causal``: query ``i`` sees keys ``j <= i`` (top-left aligned,
    as SDPA); ``key_padding_mask (B, Lk)``: True = real key. ``bias=None``: ``-log(Lk)``."""
    lq, lk = q.shape[2], k.shape[2]
    scale = q.shape[-1] ** -0.5 if scale is None else scale
    b = -math.log(lk) if bias is None else bias
    weights = torch.sigmoid(torch.matmul(q, k.transpose(-2, -1)) * scale + b)  # (B, H, Lq, Lk)
    allowed = torch.ones(lq, lk, dtype=torch.bool, device=q.device)
    if causal:
        allowed = allowed.tril()
    allowed = allowed[None, None]  # (1, 1, Lq, Lk)
    if key_padding_mask is not None:
        allowed = allowed & key_padding_mask[:, None, None, :]
    weights = weights * allowed.to(weights.dtype)
    out = torch.matmul(F.dropout(weights, dropout_p) if dropout_p > 0 else weights, v)
    return (out, weights) if need_weights else out


def _check(params: dict) -> None:
    if params["bias"] is not None and not isinstance(params["bias"], (int, float)):
        raise ValueError(f"bias={params['bias']!r} is invalid: expected a number or null (-log(Lk))")


def register() -> None:
    """Register ``"sigmoid"`` with attn_core (once: a second call does nothing)."""
    import attn_core

    if PATTERN in attn_core.PATTERNS:
        return
    attn_core.register_pattern(
        PATTERN, causal=True, padding=True, cross=True, complexity="L^2", params={"bias": None}, weights=True,
        check=_check, description="sigmoid attention: sigmoid(q k^T scale + bias) v, no normalisation (dense)",
    )(sigmoid_attention)
