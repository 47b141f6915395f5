"""What ``attnbench bench complexity`` measures against: the layer types it times, the probe
kinds of the path-length measurement, and Table 1 of Vaswani et al. (2017) with the paper's
class per layer and probe. Data only."""

from __future__ import annotations

from typing import Any

__all__ = ["LAYERS", "RNN_LAYERS", "PROBE_KINDS", "DTYPES", "LAYER_DOC", "PAPER", "LAYER_ROW", "LAYER_PROBES",
           "PROBE_PAPER_CLASS", "PROBE_DOC"]


LAYERS = (
    "self_attention", "restricted_attention", "lstm", "gru", "conv", "dilated_conv",
    "self_attention_op", "restricted_attention_op",
)
RNN_LAYERS = ("lstm", "gru")
PROBE_KINDS = (
    "self_attention", "restricted_attention", "lstm", "gru", "conv_causal", "conv_centred", "dilated_conv",
)
DTYPES = ("auto", "float32", "float64", "bfloat16", "float16")

LAYER_DOC = {
    "self_attention": "attn_core.MultiHeadAttention(d, heads, pattern='full'), projections included",
    "restricted_attention": "attn_core.MultiHeadAttention(d, heads, pattern='truncated', window=r), projections included",
    "lstm": "torch.nn.LSTM(d, d, batch_first=True), fused kernel",
    "gru": "torch.nn.GRU(d, d, batch_first=True), fused kernel",
    "conv": "torch.nn.Conv1d(d, d, k), centred zero padding",
    "dilated_conv": "torch.nn.Conv1d(d, d, k, dilation=k), centred zero padding",
    "self_attention_op": "attn_core.attention(x, x, x) on x split into heads: the attention alone, no projections",
    "restricted_attention_op": "attn_core.attention(x, x, x, window=r), no projections",
}

#: Table 1 of Vaswani et al. (2017), "Attention Is All You Need", with the exponents of
#: ``n`` and ``d`` in the per-layer complexity and the growth classes of the other columns.
PAPER: dict[str, dict[str, Any]] = {
    "self_attention": {
        "row": "Self-Attention", "complexity": "O(n^2·d)", "sequential": "O(1)", "path": "O(1)",
        "exp_n": 2.0, "exp_d": 1.0, "sequential_class": "O(1)", "path_class": "O(1)",
    },
    "recurrent": {
        "row": "Recurrent", "complexity": "O(n·d^2)", "sequential": "O(n)", "path": "O(n)",
        "exp_n": 1.0, "exp_d": 2.0, "sequential_class": "O(n)", "path_class": "O(n)",
    },
    "convolutional": {
        "row": "Convolutional", "complexity": "O(k·n·d^2)", "sequential": "O(1)",
        "path": "O(log_k(n)) dilated, O(n/k) contiguous",
        "exp_n": 1.0, "exp_d": 2.0, "sequential_class": "O(1)", "path_class": "O(n/k) | O(log n)",
    },
    "restricted": {
        "row": "Self-Attention (restricted)", "complexity": "O(r·n·d)", "sequential": "O(1)", "path": "O(n/r)",
        "exp_n": 1.0, "exp_d": 1.0, "sequential_class": "O(1)", "path_class": "O(n/r)",
    },
}
LAYER_ROW = {
    "self_attention": "self_attention", "self_attention_op": "self_attention",
    "restricted_attention": "restricted", "restricted_attention_op": "restricted",
    "lstm": "recurrent", "gru": "recurrent", "conv": "convolutional", "dilated_conv": "convolutional",
}
#: Path-length probes that stand for a timed layer (the ``_op`` variants have the same paths).
LAYER_PROBES = {
    "self_attention": ("self_attention",), "self_attention_op": ("self_attention",),
    "restricted_attention": ("restricted_attention",), "restricted_attention_op": ("restricted_attention",),
    "lstm": ("lstm",), "gru": ("gru",), "conv": ("conv_causal", "conv_centred"), "dilated_conv": ("dilated_conv",),
}
#: The paper's path-length class per probe.
PROBE_PAPER_CLASS = {
    "self_attention": "O(1)", "restricted_attention": "O(n/r)", "lstm": "O(n)", "gru": "O(n)",
    "conv_causal": "O(n/k)", "conv_centred": "O(n/k)", "dilated_conv": "O(log n)",
}
PROBE_DOC = {
    "self_attention": "stack of MultiHeadAttention(full) layers",
    "restricted_attention": "stack of MultiHeadAttention(truncated, window r) layers; param = r",
    "lstm": "explicit LSTMCell loop; a hop = a time step (state transition); no param",
    "gru": "explicit GRUCell loop; a hop = a time step (state transition); no param",
    "conv_causal": "stack of causal (left-padded) Conv1d, kernel k, no dilation; param = k",
    "conv_centred": "stack of centred (symmetric padding) Conv1d, kernel k odd, no dilation; param = k",
    "dilated_conv": "stack of causal Conv1d, kernel k, dilation k^i at layer i (WaveNet/ByteNet); param = k",
}
