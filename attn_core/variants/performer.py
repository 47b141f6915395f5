"""Performer attention (Choromanski et al. 2021, FAVOR+): an unbiased estimate of softmax
attention from ``m`` positive orthogonal random features

    phi(x) = exp(W x - |x|^2 / 2) / sqrt(m),      E[phi(q) . phi(k)] = exp(q . k)

(``q``, ``k`` pre-scaled by ``scale^(1/2)`` each, so the kernel is ``exp(q . k * scale)``), then
the linear-attention sums of :func:`attn_core.variants.linear.feature_attention`: O(L m Dv),
causal by prefix sums. The rows of ``W (m, D)`` are orthogonal in blocks of ``D`` with
chi-distributed norms, as in the paper.

Numerical stability as in the paper's code: each query's features are divided by
``exp(max_f(W q))`` (a per-row constant: it cancels between numerator and denominator) and
every key's by ``exp(max over real keys and features of W k)`` (one constant per head: it
cancels too, for every causal prefix as well), so the estimator is unchanged.

Decoding keeps the running sums of :func:`attn_core.variants.linear.feature_step` with the key
stabiliser as a running maximum: when a new key raises it, the sums are rescaled by
``exp(old - new)`` (as online softmax does), so each step costs O(m D) and equals the
causal function's last row.
"""

from __future__ import annotations

import math
from typing import Any

import torch
from torch import Tensor, nn

from attn_core import _validate as V
from attn_core.functional import check_inputs
from attn_core.patterns import Recurrence, register_pattern
from attn_core.variants.linear import feature_attention, feature_carry, feature_step

__all__ = ["performer_attention", "PerformerFeatures", "orthogonal_gaussian", "favor_features"]


def orthogonal_gaussian(m: int, d: int, *, device=None, dtype=None) -> Tensor:
    """``(m, d)`` random projection: blocks of ``d`` orthonormal rows (QR of a Gaussian matrix),
    each row scaled by the norm of an independent ``d``-dim Gaussian (so rows are marginally
    Gaussian). Uses the global RNG: deterministic under ``torch.manual_seed``."""
    gauss = torch.randn(-(-m // d), d, d, device=device)  # (blocks, d, d)
    qmat = torch.linalg.qr(gauss).Q  # (blocks, d, d), orthonormal columns
    w = qmat.transpose(-2, -1).reshape(-1, d)[:m]  # (m, d): each block's rows orthonormal
    norms = torch.randn(m, d, device=device).norm(dim=1, keepdim=True)  # (m, 1), chi(d)
    return (norms * w).to(dtype or torch.get_default_dtype())


class PerformerFeatures(nn.Module):
    """Per-layer state of ``performer``: the random projection ``W (features, head_dim)``, a
    buffer (saved with the model and moved by ``.to()``, never trained)."""

    projection: Tensor

    def __init__(self, head_dim: int, features: int, redraw: bool) -> None:
        super().__init__()
        self.features, self.redraw_in_training = features, redraw
        self.register_buffer("projection", orthogonal_gaussian(features, head_dim))

    @torch.no_grad()
    def redraw(self) -> None:
        """Draw a fresh ``W`` in place (global RNG)."""
        w = self.projection
        self.projection.copy_(orthogonal_gaussian(w.shape[0], w.shape[1], device=w.device, dtype=w.dtype))

    def extra_repr(self) -> str:
        return f"features={self.features}, redraw={self.redraw_in_training}"


def favor_features(x: Tensor, projection: Tensor, *, is_query: bool, real: Tensor | None = None,
                   running: Tensor | None = None) -> tuple[Tensor, Tensor]:
    """Positive random features ``exp(W x - |x|^2 / 2 - c) / sqrt(m)`` of ``x (B, H, L, D)`` (already
    scaled) -> ``(features (B, H, L, m), c)``. The stabiliser ``c`` is the row max of ``W x`` for
    queries and, for keys, the max over the real keys ``real (B, L)``, all features and the
    earlier keys' maximum ``running (B, H, 1, 1)`` (decoding): constants that cancel in the
    attention ratio (detached: their exact gradient is zero)."""
    wx = torch.matmul(x, projection.to(x.dtype).T)  # (B, H, L, m)
    if is_query:
        stab = wx.amax(-1, keepdim=True)  # (B, H, L, 1)
    else:
        masked = wx if real is None else wx.masked_fill(~real[:, None, :, None], float("-inf"))
        stab = masked.amax((-2, -1), keepdim=True)  # (B, H, 1, 1)
        if running is not None:
            stab = torch.maximum(stab, running)
        stab = torch.where(torch.isfinite(stab), stab, torch.zeros_like(stab))  # no real key at all
    sq = x.pow(2).sum(-1, keepdim=True) / 2  # (B, H, L, 1)
    stab = stab.detach()
    return torch.exp(wx - sq - stab) / math.sqrt(projection.shape[0]), stab


def _make_state(num_heads: int, head_dim: int, *, max_len: int | None, features: int, redraw: bool) -> nn.Module:
    return PerformerFeatures(head_dim, features, redraw)


def _check(params: dict[str, Any]) -> None:
    if params["features"] < 1:
        V.fail("features", params["features"], "expected an int >= 1 (random features per head)")


def _performer_init(batch: int, heads: int, head_dim: int, *, device, dtype, state: PerformerFeatures,
                    features: int = 128, redraw: bool = False) -> dict[str, Tensor]:
    """Empty sums and no key seen yet: the running key stabiliser starts at -inf."""
    stab = torch.full((batch, heads, 1, 1), float("-inf"), device=device, dtype=dtype)
    return {**feature_carry(batch, heads, features, head_dim, device=device, dtype=dtype), "stab": stab}


def _performer_step(q: Tensor, k: Tensor, v: Tensor, carry: dict[str, Tensor], *, state: PerformerFeatures,
                    features: int = 128, redraw: bool = False) -> tuple[Tensor, dict[str, Tensor]]:
    """One decoded position: the new key's features under the running stabiliser, the earlier
    sums rescaled to it (``exp(old - new) <= 1``; 0 before the first key)."""
    root = q.shape[-1] ** -0.25  # the default scale, as performer_attention's
    phi_q, _ = favor_features(q * root, state.projection, is_query=True)  # (B, H, 1, m)
    phi_k, stab = favor_features(k * root, state.projection, is_query=False, running=carry["stab"])  # (B, H, 1, m)
    rescale = torch.exp(carry["stab"] - stab)  # (B, H, 1, 1)
    carry = {"kv": carry["kv"] * rescale, "z": carry["z"] * rescale[..., 0], "stab": stab}
    return feature_step(phi_q, phi_k, v, carry)


@register_pattern(
    "performer", causal=True, padding=True, cross=True, complexity="L*m", dropout=False, incremental=True,
    params={"features": 128, "redraw": False}, make_state=_make_state, check=_check,
    recurrence=Recurrence(_performer_init, _performer_step),
    description="FAVOR+: softmax estimated by `features` positive orthogonal random features; "
    "causal by prefix sums; O(L m D)",
)
def performer_attention(
    q: Tensor, k: Tensor, v: Tensor, *, causal: bool = False, key_padding_mask: Tensor | None = None,
    dropout_p: float = 0.0, scale: float | None = None, state: PerformerFeatures | None = None,
    features: int = 128, redraw: bool = False,
) -> Tensor:
    """FAVOR+ attention of q ``(B, H, Lq, D)``, k ``(B, H, Lk, D)``, v ``(B, H, Lk, Dv)`` ->
    ``(B, H, Lq, Dv)`` with the projection held by ``state`` (:class:`PerformerFeatures`); with
    ``redraw`` it is redrawn at every call while ``state`` is in training mode. ``dropout_p``
    is ignored (no probabilities to drop)."""
    check_inputs(q, k, v, None, key_padding_mask, dropout_p, scale)
    if not isinstance(state, PerformerFeatures):
        V.fail("state", state, "pattern='performer' needs its PerformerFeatures (make_pattern_state)")
    if tuple(state.projection.shape) != (features, q.shape[-1]):
        raise ValueError(f"performer state has projection {tuple(state.projection.shape)}: expected "
                         f"(features, head dim) = ({features}, {q.shape[-1]})")
    if redraw and state.training:
        state.redraw()
    root = (q.shape[-1] ** -0.5 if scale is None else scale) ** 0.5  # exp(q.k * scale) = exp(q'.k')
    phi_q, _ = favor_features(q * root, state.projection, is_query=True)  # (B, H, Lq, m)
    phi_k, _ = favor_features(k * root, state.projection, is_query=False, real=key_padding_mask)  # (B, H, Lk, m)
    return feature_attention(phi_q, phi_k, v, causal=causal, key_padding_mask=key_padding_mask)

