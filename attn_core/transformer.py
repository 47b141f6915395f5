"""Transformer layers and stacks on :class:`attn_core.multihead.MultiHeadAttention`.

Every task's attention model is built from these, so the attention pattern is a parameter:
``pattern="full" | "truncated" | "graph"`` (with ``window`` for truncated, ``edge_index`` at call
time for graphs) and ``causal``. Layer structure and parameter names mirror
``torch.nn.TransformerEncoderLayer`` / ``TransformerDecoderLayer`` (``linear1``, ``linear2``,
``norm1..3``, ``dropout1..3``), so weights map one to one and the tests compare against torch.

Masks follow the package convention: ``key_padding_mask`` is ``(B, L)`` bool, ``True`` = real
token (the opposite of torch's ``src_key_padding_mask``).
"""

from __future__ import annotations

from typing import Callable

import torch.nn as nn
import torch.nn.functional as F
from torch import Tensor

from attn_core import _validate as V
from attn_core.multihead import MultiHeadAttention

__all__ = [
    "TransformerEncoderLayer",
    "TransformerDecoderLayer",
    "TransformerEncoder",
    "TransformerDecoder",
    "ACTIVATIONS",
    "DECODER_PATTERNS",
]

ACTIVATIONS: dict[str, Callable[[Tensor], Tensor]] = {"gelu": F.gelu, "relu": F.relu}
#: Self-attention patterns a decoder may use (a decoder over a graph makes no sense).
DECODER_PATTERNS = ("full", "truncated")


def _check_common(
    d_model: object, num_heads: object, dim_feedforward: object, dropout: object,
    activation: object, attn_dropout: object, layer_norm_eps: object,
) -> None:
    for name, val in (("d_model", d_model), ("num_heads", num_heads), ("dim_feedforward", dim_feedforward)):
        if isinstance(val, bool) or not isinstance(val, int) or val <= 0:
            V.fail(name, val, "expected a positive int")
    V.check_dropout(dropout, "dropout")
    if attn_dropout is not None:
        V.check_dropout(attn_dropout, "attn_dropout")
    V.check_choice("activation", activation, ACTIVATIONS)
    if not isinstance(layer_norm_eps, (int, float)) or layer_norm_eps <= 0:
        V.fail("layer_norm_eps", layer_norm_eps, "expected a positive float")


class _FeedForward(nn.Module):
    """Shared FFN half of both layers: ``linear2(dropout(act(linear1(x))))`` (dropout2/3 outside)."""

    linear1: nn.Linear
    linear2: nn.Linear
    dropout: nn.Dropout

    def _ff(self, x: Tensor) -> Tensor:
        return self.linear2(self.dropout(self.activation_fn(self.linear1(x))))  # (..., E)


class TransformerEncoderLayer(_FeedForward):
    """Self-attention + feed-forward, each a residual block, pre-LN or post-LN.

    * ``norm_first=True`` (pre-LN): ``x = x + drop(attn(norm1(x)))``; ``x = x + drop(ff(norm2(x)))``.
      Stable without warm-up; stack it with a final LayerNorm (:class:`TransformerEncoder` does).
    * ``norm_first=False`` (post-LN, the 2017 paper): ``x = norm1(x + drop(attn(x)))``; ``x = norm2(x + drop(ff(x)))``.

    Args:
        d_model, num_heads: width and heads (``num_heads`` must divide ``d_model``).
        dim_feedforward: hidden width of the FFN (default ``4 * d_model``).
        dropout: on residual branches and inside the FFN. ``attn_dropout`` (default ``dropout``)
            is on the attention probabilities.
        activation: ``"gelu"`` (exact erf GELU) or ``"relu"``.
        pattern, window, causal, score: passed to :class:`MultiHeadAttention`.

    ``forward(x, *, key_padding_mask=None, edge_index=None, need_weights=False)``: ``x`` is
    ``(B, L, E)`` for sequences or ``(N, E)`` node features with ``edge_index`` for ``pattern="graph"``.
    """

    def __init__(
        self,
        d_model: int,
        num_heads: int,
        dim_feedforward: int | None = None,
        dropout: float = 0.1,
        activation: str = "gelu",
        norm_first: bool = True,
        pattern: str = "full",
        window: int | None = None,
        causal: bool = False,
        attn_dropout: float | None = None,
        *,
        layer_norm_eps: float = 1e-5,
        score: str = "dot",
    ) -> None:
        super().__init__()
        dim_feedforward = 4 * d_model if dim_feedforward is None and isinstance(d_model, int) else dim_feedforward
        _check_common(d_model, num_heads, dim_feedforward, dropout, activation, attn_dropout, layer_norm_eps)
        assert dim_feedforward is not None
        self.d_model, self.norm_first, self.activation = d_model, bool(norm_first), activation
        self.self_attn = MultiHeadAttention(
            d_model, num_heads, pattern=pattern, window=window, causal=causal,
            dropout=dropout if attn_dropout is None else attn_dropout, score=score,
        )
        self.linear1 = nn.Linear(d_model, dim_feedforward)
        self.linear2 = nn.Linear(dim_feedforward, d_model)
        self.norm1 = nn.LayerNorm(d_model, eps=layer_norm_eps)
        self.norm2 = nn.LayerNorm(d_model, eps=layer_norm_eps)
        self.dropout = nn.Dropout(dropout)  # inside the FFN
        self.dropout1 = nn.Dropout(dropout)  # attention branch
        self.dropout2 = nn.Dropout(dropout)  # FFN branch
        self.activation_fn = ACTIVATIONS[activation]

    @property
    def pattern(self) -> str:
        return self.self_attn.pattern

    def _sa(self, x: Tensor, kpm: Tensor | None, edge_index: Tensor | None, need_weights: bool):
        res = self.self_attn(x, key_padding_mask=kpm, edge_index=edge_index, need_weights=need_weights)
        out, w = res if need_weights else (res, None)
        return self.dropout1(out), w  # (B, L, E) | (N, E)

    def forward(
        self,
        x: Tensor,
        *,
        key_padding_mask: Tensor | None = None,
        edge_index: Tensor | None = None,
        need_weights: bool = False,
    ) -> Tensor | tuple[Tensor, Tensor]:
        """``x (B, L, E)`` or ``(N, E)`` -> same shape; with ``need_weights`` also the
        self-attention weights (``(B, H, L, L)`` for sequences, ``(E, H)`` per edge for graphs)."""
        if self.norm_first:
            a, w = self._sa(self.norm1(x), key_padding_mask, edge_index, need_weights)
            x = x + a
            x = x + self.dropout2(self._ff(self.norm2(x)))
        else:
            a, w = self._sa(x, key_padding_mask, edge_index, need_weights)
            x = self.norm1(x + a)
            x = self.norm2(x + self.dropout2(self._ff(x)))
        return (x, w) if need_weights else x  # type: ignore[return-value]


class TransformerDecoderLayer(_FeedForward):
    """Masked self-attention + cross-attention over ``memory`` + feed-forward, pre-LN or post-LN.

    Self-attention is causal by default and may be ``"full"`` or ``"truncated"`` (``window``);
    cross-attention is always full (every target position sees every real source position).
    ``memory_dim`` (default ``d_model``) lets the memory have another width.

    ``forward(x (B, Lt, E), memory (B, Ls, Em), *, tgt_key_padding_mask (B, Lt), memory_key_padding_mask
    (B, Ls), need_weights)`` -> ``out (B, Lt, E)``, or ``(out, cross_weights (B, H, Lt, Ls))`` so tasks
    can plot alignments.
    """

    def __init__(
        self,
        d_model: int,
        num_heads: int,
        dim_feedforward: int | None = None,
        dropout: float = 0.1,
        activation: str = "gelu",
        norm_first: bool = True,
        pattern: str = "full",
        window: int | None = None,
        causal: bool = True,
        attn_dropout: float | None = None,
        *,
        layer_norm_eps: float = 1e-5,
        memory_dim: int | None = None,
    ) -> None:
        super().__init__()
        dim_feedforward = 4 * d_model if dim_feedforward is None and isinstance(d_model, int) else dim_feedforward
        _check_common(d_model, num_heads, dim_feedforward, dropout, activation, attn_dropout, layer_norm_eps)
        V.check_choice("pattern", pattern, DECODER_PATTERNS)
        assert dim_feedforward is not None
        p_attn = dropout if attn_dropout is None else attn_dropout
        self.d_model, self.norm_first, self.activation = d_model, bool(norm_first), activation
        self.self_attn = MultiHeadAttention(
            d_model, num_heads, pattern=pattern, window=window, causal=causal, dropout=p_attn
        )
        self.multihead_attn = MultiHeadAttention(  # cross-attention (torch's name)
            d_model, num_heads, pattern="full", dropout=p_attn, kdim=memory_dim, vdim=memory_dim
        )
        self.linear1 = nn.Linear(d_model, dim_feedforward)
        self.linear2 = nn.Linear(dim_feedforward, d_model)
        self.norm1 = nn.LayerNorm(d_model, eps=layer_norm_eps)
        self.norm2 = nn.LayerNorm(d_model, eps=layer_norm_eps)
        self.norm3 = nn.LayerNorm(d_model, eps=layer_norm_eps)
        self.dropout = nn.Dropout(dropout)
        self.dropout1 = nn.Dropout(dropout)
        self.dropout2 = nn.Dropout(dropout)
        self.dropout3 = nn.Dropout(dropout)
        self.activation_fn = ACTIVATIONS[activation]

    @property
    def pattern(self) -> str:
        return self.self_attn.pattern

    def _sa(self, x: Tensor, kpm: Tensor | None) -> Tensor:
        return self.dropout1(self.self_attn(x, key_padding_mask=kpm))  # (B, Lt, E)

    def _ca(self, x: Tensor, memory: Tensor, kpm: Tensor | None, need_weights: bool):
        res = self.multihead_attn(x, memory, memory, key_padding_mask=kpm, need_weights=need_weights)
        out, w = res if need_weights else (res, None)
        return self.dropout2(out), w  # (B, Lt, E), (B, H, Lt, Ls) | None

    def forward(
        self,
        x: Tensor,
        memory: Tensor,
        *,
        tgt_key_padding_mask: Tensor | None = None,
        memory_key_padding_mask: Tensor | None = None,
        need_weights: bool = False,
    ) -> Tensor | tuple[Tensor, Tensor]:
        """``x (B, Lt, E)``, ``memory (B, Ls, Em)`` -> ``(B, Lt, E)`` [, cross weights ``(B, H, Lt, Ls)``]."""
        if self.norm_first:
            x = x + self._sa(self.norm1(x), tgt_key_padding_mask)
            c, w = self._ca(self.norm2(x), memory, memory_key_padding_mask, need_weights)
            x = x + c
            x = x + self.dropout3(self._ff(self.norm3(x)))
        else:
            x = self.norm1(x + self._sa(x, tgt_key_padding_mask))
            c, w = self._ca(x, memory, memory_key_padding_mask, need_weights)
            x = self.norm2(x + c)
            x = self.norm3(x + self.dropout3(self._ff(x)))
        return (x, w) if need_weights else x  # type: ignore[return-value]


def _check_stack(num_layers: object) -> None:
    if isinstance(num_layers, bool) or not isinstance(num_layers, int) or num_layers <= 0:
        V.fail("num_layers", num_layers, "expected a positive int")


class TransformerEncoder(nn.Module):
    """``num_layers`` independent :class:`TransformerEncoderLayer` s built from the same arguments,
    then a final LayerNorm (``final_norm``, default ``norm_first``: pre-LN stacks need it, post-LN
    stacks already end in one).

    ``forward(x, *, key_padding_mask=None, edge_index=None, need_weights=False)`` -> ``out`` or
    ``(out, [self-attention weights of each layer])``.
    """

    def __init__(
        self,
        d_model: int,
        num_heads: int,
        num_layers: int,
        *,
        dim_feedforward: int | None = None,
        dropout: float = 0.1,
        activation: str = "gelu",
        norm_first: bool = True,
        pattern: str = "full",
        window: int | None = None,
        causal: bool = False,
        attn_dropout: float | None = None,
        layer_norm_eps: float = 1e-5,
        score: str = "dot",
        final_norm: bool | None = None,
    ) -> None:
        super().__init__()
        _check_stack(num_layers)
        self.layers = nn.ModuleList(
            TransformerEncoderLayer(
                d_model, num_heads, dim_feedforward, dropout, activation, norm_first, pattern, window,
                causal, attn_dropout, layer_norm_eps=layer_norm_eps, score=score,
            )
            for _ in range(num_layers)
        )
        final_norm = norm_first if final_norm is None else final_norm
        self.norm = nn.LayerNorm(d_model, eps=layer_norm_eps) if final_norm else None

    def forward(
        self,
        x: Tensor,
        *,
        key_padding_mask: Tensor | None = None,
        edge_index: Tensor | None = None,
        need_weights: bool = False,
    ) -> Tensor | tuple[Tensor, list[Tensor]]:
        """``x (B, L, E)`` or ``(N, E)`` -> same shape [, list of per-layer weights]."""
        weights: list[Tensor] = []
        for layer in self.layers:
            res = layer(x, key_padding_mask=key_padding_mask, edge_index=edge_index, need_weights=need_weights)
            if need_weights:
                x, w = res
                weights.append(w)
            else:
                x = res
        if self.norm is not None:
            x = self.norm(x)
        return (x, weights) if need_weights else x


class TransformerDecoder(nn.Module):
    """``num_layers`` independent :class:`TransformerDecoderLayer` s + optional final LayerNorm
    (default ``norm_first``). ``need_weights`` returns the list of per-layer cross-attention
    weights ``(B, H, Lt, Ls)``."""

    def __init__(
        self,
        d_model: int,
        num_heads: int,
        num_layers: int,
        *,
        dim_feedforward: int | None = None,
        dropout: float = 0.1,
        activation: str = "gelu",
        norm_first: bool = True,
        pattern: str = "full",
        window: int | None = None,
        causal: bool = True,
        attn_dropout: float | None = None,
        layer_norm_eps: float = 1e-5,
        memory_dim: int | None = None,
        final_norm: bool | None = None,
    ) -> None:
        super().__init__()
        _check_stack(num_layers)
        self.layers = nn.ModuleList(
            TransformerDecoderLayer(
                d_model, num_heads, dim_feedforward, dropout, activation, norm_first, pattern, window,
                causal, attn_dropout, layer_norm_eps=layer_norm_eps, memory_dim=memory_dim,
            )
            for _ in range(num_layers)
        )
        final_norm = norm_first if final_norm is None else final_norm
        self.norm = nn.LayerNorm(d_model, eps=layer_norm_eps) if final_norm else None

    def forward(
        self,
        x: Tensor,
        memory: Tensor,
        *,
        tgt_key_padding_mask: Tensor | None = None,
        memory_key_padding_mask: Tensor | None = None,
        need_weights: bool = False,
    ) -> Tensor | tuple[Tensor, list[Tensor]]:
        """``x (B, Lt, E)``, ``memory (B, Ls, Em)`` -> ``(B, Lt, E)`` [, list of cross weights]."""
        weights: list[Tensor] = []
        for layer in self.layers:
            res = layer(
                x, memory, tgt_key_padding_mask=tgt_key_padding_mask,
                memory_key_padding_mask=memory_key_padding_mask, need_weights=need_weights,
            )
            if need_weights:
                x, w = res
                weights.append(w)
            else:
                x = res
        if self.norm is not None:
            x = self.norm(x)
        return (x, weights) if need_weights else x
