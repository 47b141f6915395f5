"""attn_core: one attention function, many patterns (full, truncated, graph), and the
modules built on it. No Lightning, no task code: reusable in any PyTorch model.

Conventions: boolean masks with ``True`` = may attend; sequences ``(B, H, L, D)``;
graph nodes ``(N, H, D)``; ``edge_index`` ``(2, E)`` with row 0 = source ``j`` and
row 1 = target ``i`` (node ``i`` attends to its in-neighbours).
"""

from attn_core.functional import attention, attention_probs, clear_caches, masked_softmax, reference_attention
from attn_core.graph import add_self_loops, additive_score, dot_score, graph_attention
from attn_core.multihead import PATTERNS, MultiHeadAttention
from attn_core.positional import LearnedPositionalEmbedding, SinusoidalPositionalEncoding
from attn_core.rnn_attention import AdditiveAttention, LuongAttention
from attn_core.transformer import (
    TransformerDecoder,
    TransformerDecoderLayer,
    TransformerEncoder,
    TransformerEncoderLayer,
)
from attn_core.masks import (
    causal_mask,
    combine_masks,
    graph_mask,
    grid_window_edges,
    grid_window_mask,
    mask_to_bias,
    padding_mask,
    window_allows,
    window_mask,
)

__all__ = [
    "graph_attention",
    "add_self_loops",
    "dot_score",
    "additive_score",
    "MultiHeadAttention",
    "PATTERNS",
    "attention",
    "clear_caches",
    "attention_probs",
    "masked_softmax",
    "AdditiveAttention",
    "LuongAttention",
    "SinusoidalPositionalEncoding",
    "LearnedPositionalEmbedding",
    "TransformerEncoderLayer",
    "TransformerDecoderLayer",
    "TransformerEncoder",
    "TransformerDecoder",
    "reference_attention",
    "causal_mask",
    "combine_masks",
    "graph_mask",
    "grid_window_edges",
    "grid_window_mask",
    "mask_to_bias",
    "padding_mask",
    "window_allows",
    "window_mask",
]
