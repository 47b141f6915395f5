"""attn_core: one attention function, many registered patterns, and the modules built on it.
No Lightning, no task code: reusable in any PyTorch model.

Patterns live in a registry (:mod:`attn_core.patterns`): ``full``, ``truncated`` and ``graph``
(exact), and the efficient variants ``linear`` (Katharopoulos), ``performer`` (FAVOR+),
``linformer``, ``nystrom`` and ``local_global`` (window + global tokens), one module each under
:mod:`attn_core.variants`. Plug-ins add more with :func:`register_pattern`; every registered
pattern works in :class:`MultiHeadAttention` and the Transformer layers (``pattern=``,
``pattern_params=``, ``max_len=``). :data:`PATTERNS` is a live view of the registered names.

Conventions: boolean masks with ``True`` = may attend; sequences ``(B, H, L, D)``;
graph nodes ``(N, H, D)``; ``edge_index`` ``(2, E)`` with row 0 = source ``j`` and
row 1 = target ``i`` (node ``i`` attends to its in-neighbours).
"""

from attn_core.functional import attention, attention_probs, clear_caches, masked_softmax, reference_attention
from attn_core.graph import add_self_loops, additive_score, dot_score, graph_attention
from attn_core.patterns import (
    PATTERNS,
    Pattern,
    Recurrence,
    check_pattern,
    get_pattern,
    list_patterns,
    make_pattern_state,
    register_pattern,
    resolve_params,
    unregister_pattern,
)
from attn_core import patterns as _patterns
from attn_core import variants  # noqa: F401  (registers every built-in pattern)
from attn_core.multihead import MultiHeadAttention
from attn_core.positional import LearnedPositionalEmbedding, SinusoidalPositionalEncoding
from attn_core.rnn_attention import AdditiveAttention, LuongAttention
from attn_core.transformer import (
    LayerConfig,
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
    local_global_allows,
    local_global_mask,
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
    *(name for name in _patterns.__all__ if name != "PatternNames"),  # the registry's API
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
    "LayerConfig",
    "reference_attention",
    "causal_mask",
    "combine_masks",
    "graph_mask",
    "grid_window_edges",
    "grid_window_mask",
    "local_global_allows",
    "local_global_mask",
    "mask_to_bias",
    "padding_mask",
    "window_allows",
    "window_mask",
]

# modern recurrences (issue 31): the scan, the layer registry and the built-in layers
from attn_core import recurrent  # noqa: E402
from attn_core.recurrent import (  # noqa: E402
    LRU, S4D, Bidirectional, Mamba2, MinRNN, RecurrentEncoder, build_recurrence, get_recurrence, linear_scan,
    list_recurrences, register_recurrence,
)

__all__ += ["recurrent", "linear_scan", "register_recurrence", "get_recurrence", "list_recurrences",
            "build_recurrence", "Bidirectional", "MinRNN", "S4D", "Mamba2", "LRU", "RecurrentEncoder"]
