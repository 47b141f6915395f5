"""Linear attention (Katharopoulos et al. 2020, "Transformers are RNNs"): the softmax kernel
``exp(q . k)`` is replaced by ``phi(q) . phi(k)`` with ``phi(x) = elu(x) + 1`` (positive), so

    out_i = phi(q_i)^T (sum_j phi(k_j) v_j^T) / phi(q_i)^T (sum_j phi(k_j))

costs O(L F Dv) instead of O(L^2). Causal attention keeps running (prefix) sums over keys.

:func:`feature_attention` is the kernel shared by every feature-map pattern (``performer``
too): given the query and key features it does the normalised sums, non-causal or causal.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor

from attn_core import _validate as V
from attn_core.functional import check_inputs
from attn_core.patterns import Recurrence, register_pattern

__all__ = ["linear_attention", "feature_attention", "feature_step", "elu_feature_map"]

#: Positions per chunk in the causal kernel: O(L * chunk) for the in-chunk part, O(L / chunk * F * Dv)
#: for the running sums (instead of O(L * F * Dv) for a plain cumsum).
CAUSAL_CHUNK = 64


def elu_feature_map(x: Tensor) -> Tensor:
    """``elu(x) + 1``: positive everywhere, so every key gets a positive weight."""
    return F.elu(x) + 1.0


def feature_attention(
    phi_q: Tensor, phi_k: Tensor, v: Tensor, *, causal: bool = False,
    key_padding_mask: Tensor | None = None, chunk: int = CAUSAL_CHUNK,
) -> Tensor:
    """``out_i = sum_j A_ij v_j / sum_j A_ij`` with ``A_ij = phi_q[i] . phi_k[j]`` over the keys ``j``
    that are real (and ``j <= i`` when ``causal``), without building ``A``.

    ``phi_q (B, H, Lq, F)``, ``phi_k (B, H, Lk, F)`` non-negative features, ``v (B, H, Lk, Dv)``,
    ``key_padding_mask (B, Lk)`` True = real. Padded keys get zero features, so they add nothing
    to either sum. A row with no key (all padded) returns zeros. Causal attention is top-left
    aligned (as SDPA): query ``i`` sees keys ``0..i``."""
    if key_padding_mask is not None:
        phi_k = phi_k * key_padding_mask[:, None, :, None].to(phi_k.dtype)  # (B, H, Lk, F)
    if not causal:
        kv = torch.einsum("bhlf,bhld->bhfd", phi_k, v)  # (B, H, F, Dv)
        num = torch.matmul(phi_q, kv)  # (B, H, Lq, Dv)
        den = torch.matmul(phi_q, phi_k.sum(2).unsqueeze(-1)).squeeze(-1)  # (B, H, Lq)
        return _normalise(num, den)
    return _causal_feature_attention(phi_q, phi_k, v, chunk)


def _normalise(num: Tensor, den: Tensor) -> Tensor:
    """``num / den`` with rows whose denominator is 0 (no key: ``num`` is 0 too) left at 0."""
    return num / torch.where(den > 0, den, torch.ones_like(den)).unsqueeze(-1)


def feature_step(phi_q: Tensor, phi_k: Tensor, v: Tensor, carry: dict[str, Tensor]) -> tuple[Tensor, dict[str, Tensor]]:
    """One causal position of :func:`feature_attention` from the running sums of the positions
    before it: ``carry = {"kv": sum phi(k) v^T (B, H, F, Dv), "z": sum phi(k) (B, H, F)}``;
    ``phi_q``/``phi_k (B, H, 1, F)``, ``v (B, H, 1, Dv)`` -> ``(out (B, H, 1, Dv), carry with this
    position added)``."""
    kv = carry["kv"] + phi_k.transpose(-2, -1) @ v  # (B, H, F, Dv)
    z = carry["z"] + phi_k[:, :, 0]  # (B, H, F)
    num = phi_q @ kv  # (B, H, 1, Dv)
    den = (phi_q @ z.unsqueeze(-1)).squeeze(-1)  # (B, H, 1)
    return _normalise(num, den), {**carry, "kv": kv, "z": z}


def feature_carry(batch: int, heads: int, features: int, dv: int, *, device, dtype) -> dict[str, Tensor]:
    """The empty running sums of :func:`feature_step` (no position yet)."""
    return {"kv": torch.zeros(batch, heads, features, dv, device=device, dtype=dtype),
            "z": torch.zeros(batch, heads, features, device=device, dtype=dtype)}


def _causal_feature_attention(phi_q: Tensor, phi_k: Tensor, v: Tensor, chunk: int) -> Tensor:
    """Causal :func:`feature_attention` in chunks of ``C`` positions: within a chunk the masked
    ``C x C`` products, across chunks the running sums of ``phi(k) v^T`` and ``phi(k)`` of every
    earlier chunk (an exclusive cumsum over chunks)."""
    b, h, lq, f = phi_q.shape
    lk, dv = phi_k.shape[2], v.shape[-1]
    # Align keys with queries (query i sees keys 0..i): drop keys no query sees, pad with no-keys.
    phi_k, v = phi_k[:, :, :lq], v[:, :, :lq]
    if lk < lq:
        phi_k, v = F.pad(phi_k, (0, 0, 0, lq - lk)), F.pad(v, (0, 0, 0, lq - lk))
    c = min(chunk, lq)
    nc = -(-lq // c)
    pad = nc * c - lq

    def chunks(x: Tensor) -> Tensor:  # (B, H, L, E) -> (B, H, nc, C, E); padded rows are zero
        return F.pad(x, (0, 0, 0, pad)).view(b, h, nc, c, x.shape[-1])

    qc, kc, vc = chunks(phi_q), chunks(phi_k), chunks(v)
    kv = torch.einsum("bhncf,bhncd->bhnfd", kc, vc)  # (B, H, nc, F, Dv): each chunk's sum
    z = kc.sum(3)  # (B, H, nc, F)
    kv_prev = F.pad(kv.cumsum(2)[:, :, :-1], (0, 0, 0, 0, 1, 0))  # (B, H, nc, F, Dv): earlier chunks
    z_prev = F.pad(z.cumsum(2)[:, :, :-1], (0, 0, 1, 0))  # (B, H, nc, F)
    tril = torch.ones(c, c, dtype=torch.bool, device=phi_q.device).tril()
    intra = torch.matmul(qc, kc.transpose(-2, -1)).masked_fill(~tril, 0.0)  # (B, H, nc, C, C)
    num = torch.matmul(qc, kv_prev) + torch.matmul(intra, vc)  # (B, H, nc, C, Dv)
    den = torch.matmul(qc, z_prev.unsqueeze(-1)).squeeze(-1) + intra.sum(-1)  # (B, H, nc, C)
    out = _normalise(num, den).reshape(b, h, nc * c, dv)
    return out[:, :, :lq]


def _linear_init(batch: int, heads: int, head_dim: int, *, device, dtype, state: None = None) -> dict[str, Tensor]:
    return feature_carry(batch, heads, head_dim, head_dim, device=device, dtype=dtype)


def _linear_step(q: Tensor, k: Tensor, v: Tensor, carry: dict[str, Tensor], *, state: None = None
                 ) -> tuple[Tensor, dict[str, Tensor]]:
    return feature_step(elu_feature_map(q), elu_feature_map(k), v, carry)


@register_pattern(
    "linear", causal=True, padding=True, cross=True, complexity="L", dropout=False, incremental=True,
    recurrence=Recurrence(_linear_init, _linear_step),
    description="Katharopoulos linear attention, phi(x) = elu(x) + 1; causal by prefix sums; O(L D^2)",
)
def linear_attention(
    q: Tensor, k: Tensor, v: Tensor, *, causal: bool = False, key_padding_mask: Tensor | None = None,
    dropout_p: float = 0.0, scale: float | None = None, state: None = None,
) -> Tensor:
    """Linear attention of q ``(B, H, Lq, D)``, k ``(B, H, Lk, D)``, v ``(B, H, Lk, Dv)`` ->
    ``(B, H, Lq, Dv)``. There are no attention probabilities, so ``dropout_p`` is ignored; the
    feature map has no temperature, so ``scale`` must stay ``None``."""
    check_inputs(q, k, v, None, key_padding_mask, dropout_p, scale)
    if scale is not None:
        V.fail("scale", scale, "pattern='linear' has no temperature: leave scale=None")
    return feature_attention(elu_feature_map(q), elu_feature_map(k), v, causal=causal,
                             key_padding_mask=key_padding_mask)
