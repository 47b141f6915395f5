"""The exact patterns as registrations: ``"full"`` and ``"truncated"`` are
:func:`attn_core.attention` with ``window=None`` / ``window=w`` (the same code paths and numbers
as calling it directly), ``"graph"`` is :func:`attn_core.graph_attention`."""

from __future__ import annotations

from typing import Any

from torch import Tensor

from attn_core import _validate as V
from attn_core.functional import attention
from attn_core.graph import GRAPH_SCORES, graph_attention
from attn_core.patterns import register_pattern

__all__ = ["full_attention", "truncated_attention"]


@register_pattern(
    "full", causal=True, padding=True, cross=True, complexity="L^2", weights=True, incremental=True,
    description="every query sees every (real, earlier if causal) key: softmax(q k^T / sqrt(d)) v",
)
def full_attention(
    q: Tensor, k: Tensor, v: Tensor, *, causal: bool = False, key_padding_mask: Tensor | None = None,
    dropout_p: float = 0.0, scale: float | None = None, state: None = None, need_weights: bool = False,
) -> Tensor | tuple[Tensor, Tensor]:
    """``attention(q, k, v, window=None, ...)``: q ``(B, H, Lq, D)`` -> ``(B, H, Lq, Dv)``."""
    return attention(q, k, v, causal=causal, window=None, key_padding_mask=key_padding_mask,
                     dropout_p=dropout_p, scale=scale, need_weights=need_weights)


def _check_truncated(params: dict[str, Any]) -> None:
    if params["window"] is None:
        V.fail("window", None, "pattern='truncated' needs an int window >= 0")
    V.check_window(params["window"])


@register_pattern(
    "truncated", causal=True, padding=True, cross=True, complexity="L*w", params={"window": None},
    weights=True, check=_check_truncated, incremental=True, band="window",
    description="local window: query i sees keys j with |i - j| <= window (blocked kernel / FlexAttention)",
)
def truncated_attention(
    q: Tensor, k: Tensor, v: Tensor, *, causal: bool = False, key_padding_mask: Tensor | None = None,
    dropout_p: float = 0.0, scale: float | None = None, state: None = None, window: int,
    need_weights: bool = False,
) -> Tensor | tuple[Tensor, Tensor]:
    """``attention(q, k, v, window=window, ...)``: q ``(B, H, Lq, D)`` -> ``(B, H, Lq, Dv)``."""
    return attention(q, k, v, causal=causal, window=window, key_padding_mask=key_padding_mask,
                     dropout_p=dropout_p, scale=scale, need_weights=need_weights)


def _check_graph(params: dict[str, Any]) -> None:
    V.check_choice("score", params["score"], GRAPH_SCORES)


register_pattern(
    "graph", causal=False, padding=False, cross=True, complexity="E", kind="graph", params={"score": "dot"},
    weights=True, check=_check_graph,
    description="node i attends to its in-neighbours along edge_index (segment softmax, O(E))",
)(graph_attention)
