"""Attention for RNN encoder-decoders: one decoder state attends over the encoder states.

* :class:`AdditiveAttention` (Bahdanau et al., 2015): ``score(q, k) = v^T tanh(W_q q + W_k k + b)``.
* :class:`LuongAttention` (Luong et al., 2015): ``dot`` (``q . k``), ``general`` (``q^T W k``)
  or ``concat`` (the same MLP score as Bahdanau's).

Both take one query per sequence, ``(B, Dq)``, and return ``(context (B, Dv), weights (B, L))``.
The dot and general scores run through :func:`attn_core.functional.attention` with unit scale,
so the RNN and Transformer families share one softmax; MLP scores use the same
:func:`attn_core.functional.masked_softmax` on their precomputed scores.
Masks follow the package convention: ``key_padding_mask`` is ``(B, L)`` bool, ``True`` = real
token; padding gets exactly zero weight and an all-padding row gives zero context, never NaN.
"""

from __future__ import annotations

import torch
import torch.nn as nn
from torch import Tensor

from attn_core import _validate as V
from attn_core.functional import attention, masked_softmax

__all__ = ["AdditiveAttention", "LuongAttention"]

LUONG_SCORES = ("dot", "general", "concat")


def _check_dims(query_dim: object, key_dim: object, **optional: object) -> None:
    """``query_dim``, ``key_dim`` and every ``optional`` size given (not ``None``) are positive ints."""
    V.check_positive_int("query_dim", query_dim)
    V.check_positive_int("key_dim", key_dim)
    for name, val in optional.items():
        if val is not None:
            V.check_positive_int(name, val)


def check_inputs(
    query: object,
    keys: object,
    values: object,
    key_padding_mask: object,
    query_dim: int,
    key_dim: int,
    value_dim: int | None,
) -> tuple[Tensor, Tensor, Tensor, Tensor | None]:
    """Validate ``query (B, Dq)``, ``keys (B, L, Dk)``, ``values (B, L, Dv) | None`` and the
    ``(B, L)`` bool padding mask; returns them with ``values`` defaulted to ``keys``."""
    q = V.check_tensor("query", query, 2, f"(B, Dq) with Dq = query_dim = {query_dim}")
    k = V.check_tensor("keys", keys, 3, f"(B, L, Dk) with Dk = key_dim = {key_dim}")
    if q.shape[-1] != query_dim:
        raise ValueError(f"query has shape {tuple(q.shape)}: expected (B, Dq) with Dq = query_dim = {query_dim}")
    if k.shape[-1] != key_dim:
        raise ValueError(f"keys has shape {tuple(k.shape)}: expected (B, L, Dk) with Dk = key_dim = {key_dim}")
    if k.shape[0] != q.shape[0]:
        raise ValueError(f"keys has batch {k.shape[0]} but query has batch {q.shape[0]}: they must match")
    if values is None:
        v = k
    else:
        v = V.check_tensor("values", values, 3, "(B, L, Dv) matching keys' (B, L)")
        if v.shape[:2] != k.shape[:2]:
            raise ValueError(
                f"values has shape {tuple(v.shape)} but keys has {tuple(k.shape)}: (B, L) must match"
            )
    if value_dim is not None and v.shape[-1] != value_dim:
        raise ValueError(f"values has shape {tuple(v.shape)}: expected (B, L, Dv) with Dv = value_dim = {value_dim}")
    V.check_same("rnn attention", {"query": q, "keys": k, "values": v}, "dtype")
    V.check_same("rnn attention", {"query": q, "keys": k, "values": v}, "device")
    kpm = V.check_key_padding_mask(key_padding_mask, k.shape[0], k.shape[1])
    return q, k, v, kpm


class _MLPScore(nn.Module):
    """``score(q, k) = v^T tanh(W_q q + W_k k + b)``: Bahdanau's additive score, also Luong's
    ``concat`` (``W [q; k]`` split into ``W_q q + W_k k``). The key projection does not depend on
    the query, so a decoder can compute it once per source sequence (:meth:`project_keys`);
    :meth:`attend` is the whole attention on that score, shared by both classes."""

    def __init__(self, query_dim: int, key_dim: int, hidden_dim: int) -> None:
        super().__init__()
        self.query_proj = nn.Linear(query_dim, hidden_dim, bias=False)
        self.key_proj = nn.Linear(key_dim, hidden_dim, bias=True)
        self.v = nn.Linear(hidden_dim, 1, bias=False)

    def project_keys(self, keys: Tensor) -> Tensor:
        return self.key_proj(keys)  # (B, L, Hd)

    def forward(self, query: Tensor, projected_keys: Tensor) -> Tensor:
        hidden = torch.tanh(self.query_proj(query)[:, None, :] + projected_keys)  # (B, L, Hd)
        return self.v(hidden).squeeze(-1)  # (B, L)

    def attend(
        self, query: Tensor, projected_keys: Tensor, values: Tensor, key_padding_mask: Tensor | None
    ) -> tuple[Tensor, Tensor]:
        """``query (B, Dq)``, ``projected_keys (B, L, Hd)``, ``values (B, L, Dv)`` ->
        ``(context (B, Dv), weights (B, L))``: softmax of the score over real keys."""
        weights = masked_softmax(self(query, projected_keys), key_padding_mask)  # (B, L)
        context = torch.bmm(weights[:, None, :], values).squeeze(1)  # (B, Dv)
        return context, weights


def _check_projected_keys(projected_keys: Tensor, keys: Tensor, hidden_dim: int) -> None:
    expected = (*keys.shape[:2], hidden_dim)
    if not isinstance(projected_keys, Tensor) or tuple(projected_keys.shape) != expected:
        got = tuple(projected_keys.shape) if isinstance(projected_keys, Tensor) else type(projected_keys).__name__
        raise ValueError(
            f"projected_keys has shape {got}: expected (B, L, hidden_dim) = {expected}, "
            "as returned by precompute_keys(keys)"
        )


class AdditiveAttention(nn.Module):
    """Bahdanau (additive, "mlp"/"concat") attention: ``e_j = v^T tanh(W_q q + W_k k_j + b)``,
    ``a = softmax(e)`` over real keys, ``context = sum_j a_j v_j``.

    Args:
        query_dim: size of the decoder state ``Dq``.
        key_dim: size of the encoder states ``Dk``.
        hidden_dim: width of the score MLP (default ``key_dim``).
        value_dim: if given, ``values`` must have this last dim (default: values are the keys,
            so ``Dv = key_dim``). Only checked; the context has the values' width.

    For decoding, call :meth:`precompute_keys` once per source batch and pass the result as
    ``projected_keys=`` at every step, saving the ``(B, L, Dk) x (Dk, hidden)`` matmul per step.
    """

    def __init__(self, query_dim: int, key_dim: int, hidden_dim: int | None = None, value_dim: int | None = None) -> None:
        super().__init__()
        hidden_dim = key_dim if hidden_dim is None else hidden_dim
        _check_dims(query_dim, key_dim, hidden_dim=hidden_dim, value_dim=value_dim)
        self.query_dim, self.key_dim, self.hidden_dim, self.value_dim = query_dim, key_dim, hidden_dim, value_dim
        self.mlp = _MLPScore(query_dim, key_dim, hidden_dim)

    def precompute_keys(self, keys: Tensor) -> Tensor:
        """``W_k keys + b`` ``(B, L, hidden_dim)``: the query-independent half of the score."""
        k = V.check_tensor("keys", keys, 3, f"(B, L, Dk) with Dk = key_dim = {self.key_dim}")
        if k.shape[-1] != self.key_dim:
            raise ValueError(f"keys has shape {tuple(k.shape)}: expected (B, L, Dk) with Dk = key_dim = {self.key_dim}")
        return self.mlp.project_keys(k)

    def forward(
        self,
        query: Tensor,
        keys: Tensor,
        values: Tensor | None = None,
        key_padding_mask: Tensor | None = None,
        *,
        projected_keys: Tensor | None = None,
    ) -> tuple[Tensor, Tensor]:
        """``query (B, Dq)``, ``keys (B, L, Dk)``, ``values (B, L, Dv)`` (``None`` = keys),
        ``key_padding_mask (B, L)`` bool (``True`` = real) -> ``(context (B, Dv), weights (B, L))``."""
        q, k, v, kpm = check_inputs(query, keys, values, key_padding_mask, self.query_dim, self.key_dim, self.value_dim)
        if projected_keys is None:
            projected_keys = self.mlp.project_keys(k)  # (B, L, Hd)
        else:
            _check_projected_keys(projected_keys, k, self.hidden_dim)
        return self.mlp.attend(q, projected_keys, v, kpm)


class LuongAttention(nn.Module):
    """Luong (multiplicative) attention with three scores:

    * ``"dot"``: ``q . k`` (needs ``query_dim == key_dim``);
    * ``"general"``: ``q^T W k = (W^T q) . k``: the query is projected to ``key_dim``, then as dot;
    * ``"concat"``: ``v^T tanh(W [q; k])``, the same MLP score as :class:`AdditiveAttention`.

    ``dot`` and ``general`` run through :func:`attn_core.attention` with ``scale=1.0`` (Luong's
    scores are unscaled), i.e. one-query, one-head scaled dot-product attention.

    Args:
        query_dim, key_dim: ``Dq``, ``Dk``.
        score: ``"dot" | "general" | "concat"``.
        hidden_dim: width of the ``concat`` MLP (default ``key_dim``); unused otherwise.
        value_dim: if given, ``values`` must have this last dim (only checked).
    """

    def __init__(
        self,
        query_dim: int,
        key_dim: int,
        score: str = "dot",
        hidden_dim: int | None = None,
        value_dim: int | None = None,
    ) -> None:
        super().__init__()
        V.check_choice("score", score, LUONG_SCORES)
        _check_dims(query_dim, key_dim, value_dim=value_dim, hidden_dim=hidden_dim)
        if score == "dot" and query_dim != key_dim:
            raise ValueError(
                f"key_dim={key_dim} is invalid with score='dot': it must equal query_dim={query_dim} "
                "(use score='general' or 'concat' for different sizes)"
            )
        self.query_dim, self.key_dim, self.value_dim = query_dim, key_dim, value_dim
        self.score = score
        self.hidden_dim = (key_dim if hidden_dim is None else hidden_dim) if score == "concat" else None
        self.query_proj: nn.Linear | None = None  # general: W^T as a Linear(query_dim -> key_dim)
        self.mlp: _MLPScore | None = None  # concat
        if score == "general":
            self.query_proj = nn.Linear(query_dim, key_dim, bias=False)
        elif score == "concat":
            assert self.hidden_dim is not None
            self.mlp = _MLPScore(query_dim, key_dim, self.hidden_dim)

    def forward(
        self,
        query: Tensor,
        keys: Tensor,
        values: Tensor | None = None,
        key_padding_mask: Tensor | None = None,
    ) -> tuple[Tensor, Tensor]:
        """``query (B, Dq)``, ``keys (B, L, Dk)``, ``values (B, L, Dv)`` (``None`` = keys),
        ``key_padding_mask (B, L)`` bool (``True`` = real) -> ``(context (B, Dv), weights (B, L))``."""
        q, k, v, kpm = check_inputs(query, keys, values, key_padding_mask, self.query_dim, self.key_dim, self.value_dim)
        if self.mlp is not None:  # concat
            return self.mlp.attend(q, self.mlp.project_keys(k), v, kpm)
        if self.query_proj is not None:  # general: q^T W k = (W^T q) . k
            q = self.query_proj(q)  # (B, Dk)
        out, probs = attention(
            q[:, None, None, :],  # (B, 1, 1, Dk)
            k[:, None],  # (B, 1, L, Dk)
            v[:, None],  # (B, 1, L, Dv)
            key_padding_mask=kpm,
            scale=1.0,
            need_weights=True,
        )
        return out[:, 0, 0], probs[:, 0, 0]  # (B, Dv), (B, L)

    def extra_repr(self) -> str:
        return f"query_dim={self.query_dim}, key_dim={self.key_dim}, score={self.score!r}"
