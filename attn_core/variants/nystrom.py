"""Nystromformer attention (Xiong et al. 2021): softmax attention approximated through ``m``
landmarks, the means of ``m`` contiguous segments of the queries (``q~``) and keys (``k~``),

    out = softmax(q k~^T s) pinv(softmax(q~ k~^T s)) softmax(q~ k^T s) v
               (L, m)              (m, m)              (m, L)

with the Moore-Penrose pseudo-inverse by the paper's iterative method, O(L m) time and memory.
Segment ``c`` holds the ``j``-th real positions with ``j * m // n == c`` (near-equal, contiguous),
``n`` the sequence's own length (never the padded one: the landmarks do not depend on the padding);
``landmarks >= L`` makes every token its own landmark (then it is exact attention up to the
pseudo-inverse's convergence). Self-attention only (``Lq == Lk``), non-causal.

Padding is exact: padded positions are left out of every landmark mean and of every softmax;
a landmark whose segment is all padding is dropped (its rows and columns of the ``m x m``
matrix become an identity block that no real output reads).
"""

from __future__ import annotations

from typing import Any

import torch
from torch import Tensor

from attn_core import _validate as V
from attn_core.functional import check_inputs, attention_probs
from attn_core.patterns import register_pattern

__all__ = ["nystrom_attention", "segment_means", "iterative_pinv"]


def segment_means(x: Tensor, m: int, real: Tensor | None = None) -> tuple[Tensor, Tensor]:
    """``x (B, H, L, D)`` -> the means of its ``m`` segments over the real positions ``real (B, L)``
    ``(means (B, H, m, D), valid (B|1, m))``. Each sequence is cut by its own length (its ``j``-th real
    position of ``n`` in segment ``j * m // n``, as if the padding were removed), so the landmarks
    never depend on how far a batch is padded; a segment with no real position is not valid (its
    mean is 0)."""
    b, h, length, d = x.shape
    pos = torch.arange(length, device=x.device)  # (L,)
    if real is None:
        seg = (pos * m // length)[None]  # (1, L) segment of each position
        w = torch.ones(1, length, dtype=x.dtype, device=x.device)  # (1, L)
    else:
        rank = real.long().cumsum(1) - 1  # (B, L) index of each real position among the real ones
        n = rank[:, -1:].clamp(min=0) + 1  # (B, 1) real length
        seg = (rank.clamp(min=0) * m // n).clamp(max=m - 1)  # (B, L); padding's segment is weighted 0
        w = real.to(x.dtype)  # (B, L)
    idx = seg[:, None, :, None].expand(b, h, length, d)  # (B, H, L, D), a view
    sums = x.new_zeros(b, h, m, d).scatter_add(2, idx, x * w[:, None, :, None])  # (B, H, m, D)
    counts = w.new_zeros(w.shape[0], m).scatter_add(1, seg.expand(w.shape[0], length), w)  # (B|1, m)
    return sums / counts.clamp(min=1)[:, None, :, None], counts > 0


def iterative_pinv(a: Tensor, iterations: int) -> Tensor:
    """Moore-Penrose pseudo-inverse of each ``a (..., m, m)`` by the Nystromformer iteration
    ``Z <- Z (13 I - AZ (15 I - AZ (7 I - AZ))) / 4`` from ``Z0 = A^T / (|A|_1 |A|_inf)``
    (per matrix), which converges to ``pinv(A)``."""
    eye = torch.eye(a.shape[-1], dtype=a.dtype, device=a.device)
    norm = a.abs().sum(-2).amax(-1) * a.abs().sum(-1).amax(-1)  # (...,): |A|_1 |A|_inf
    z = a.transpose(-2, -1) / norm[..., None, None]
    for _ in range(iterations):
        az = torch.matmul(a, z)
        z = 0.25 * torch.matmul(z, 13 * eye - torch.matmul(az, 15 * eye - torch.matmul(az, 7 * eye - az)))
    return z


def _check(params: dict[str, Any]) -> None:
    for key in ("landmarks", "pinv_iterations"):
        if params[key] < 1:
            V.fail(key, params[key], "expected an int >= 1")


@register_pattern(
    "nystrom", causal=False, padding=True, cross=False, complexity="L*m", dropout=False,
    params={"landmarks": 64, "pinv_iterations": 6}, check=_check,
    description="Nystromformer: softmax through `landmarks` segment means and an iterative "
    "pseudo-inverse; self-attention, non-causal; O(L m)",
)
def nystrom_attention(
    q: Tensor, k: Tensor, v: Tensor, *, causal: bool = False, key_padding_mask: Tensor | None = None,
    dropout_p: float = 0.0, scale: float | None = None, state: None = None,
    landmarks: int = 64, pinv_iterations: int = 6,
) -> Tensor:
    """Nystrom self-attention of q, k ``(B, H, L, D)``, v ``(B, H, L, Dv)`` -> ``(B, H, L, Dv)``.
    ``key_padding_mask (B, L)`` masks the positions of both queries and keys (self-attention).
    ``dropout_p`` is ignored (no single probability matrix to drop)."""
    check_inputs(q, k, v, None, key_padding_mask, dropout_p, scale)
    if causal:
        V.fail("causal", causal, "pattern='nystrom' is non-causal only (landmarks mix every position)")
    if q.shape[2] != k.shape[2]:
        raise ValueError(f"pattern='nystrom' is self-attention only: q has length {q.shape[2]}, k {k.shape[2]}")
    m = min(landmarks, k.shape[2])
    q_l, valid = segment_means(q, m, key_padding_mask)  # (B, H, m, D), (B|1, m)
    k_l, _ = segment_means(k, m, key_padding_mask)  # (B, H, m, D)
    cols = valid[:, None, None, :]  # (B|1, 1, 1, m): the landmarks that exist
    kernel_1 = attention_probs(q, k_l, cols, scale)  # (B, H, L, m)
    kernel_2 = attention_probs(q_l, k_l, cols, scale)  # (B, H, m, m)
    eye = torch.eye(m, dtype=q.dtype, device=q.device)
    kernel_2 = torch.where(valid[:, None, :, None] & cols, kernel_2, eye)  # dropped landmarks: identity
    key_mask = None if key_padding_mask is None else key_padding_mask[:, None, None, :]  # (B, 1, 1, L)
    kernel_3 = attention_probs(q_l, k, key_mask, scale)  # (B, H, m, L)
    with torch.autocast(q.device.type, enabled=False):  # the iteration amplifies rounding: >= float32
        low = kernel_2.dtype in (torch.float16, torch.bfloat16)
        pinv = iterative_pinv(kernel_2.float() if low else kernel_2, pinv_iterations).to(kernel_2.dtype)  # (B, H, m, m)
    return torch.matmul(kernel_1, torch.matmul(pinv, torch.matmul(kernel_3, v)))  # (B, H, L, Dv)
