"""The layers of ``attnbench bench complexity``, all ``(B, n, d) -> (B, n, d)``: attention with and
without projections, the fused recurrences and their explicit cell loop (for counting), and the
convolutions (centred, causal, dilated)."""

from __future__ import annotations

import attn_core
import torch
import torch.nn.functional as F
from torch import nn

from benchmarks.micro.complexity.paper import LAYERS, RNN_LAYERS

__all__ = ["SeqConv", "AttentionOp", "FusedRNN", "CellLoopRNN", "build_layer"]


class SeqConv(nn.Module):
    """``Conv1d(d, d, k, dilation)`` on ``(B, n, d)`` keeping the length: causal = all the
    padding on the left (output ``i`` sees inputs ``i - (k-1)dil .. i``), else centred
    (``floor((k-1)dil / 2)`` on the left, the rest on the right)."""

    def __init__(self, d: int, kernel: int, *, dilation: int = 1, causal: bool = False) -> None:
        super().__init__()
        self.conv = nn.Conv1d(d, d, kernel, dilation=dilation)
        span = (kernel - 1) * dilation
        self.pad = (span, 0) if causal else (span // 2, span - span // 2)
        self.causal = causal

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.conv(F.pad(x.transpose(1, 2), self.pad)).transpose(1, 2)


class AttentionOp(nn.Module):
    """Self-attention without projections: ``attn_core.attention(x, x, x)`` with ``x`` split
    into ``heads`` heads (``window`` = restricted)."""

    def __init__(self, heads: int, window: int | None = None) -> None:
        super().__init__()
        self.heads, self.window = heads, window

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, n, d = x.shape
        h = x.view(b, n, self.heads, d // self.heads).transpose(1, 2)
        out = attn_core.attention(h, h, h, window=self.window)
        return out.transpose(1, 2).reshape(b, n, d)


class FusedRNN(nn.Module):
    """``nn.LSTM`` / ``nn.GRU`` (one layer, ``d -> d``, batch-first), returning the outputs."""

    def __init__(self, kind: str, d: int) -> None:
        super().__init__()
        self.kind = kind
        self.rnn = (nn.LSTM if kind == "lstm" else nn.GRU)(d, d, batch_first=True)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.rnn(x)[0]


class CellLoopRNN(nn.Module):
    """The recurrence of a :class:`FusedRNN` as an explicit loop of ``LSTMCell``/``GRUCell``
    steps with the same (shared) weights: ``n`` dependent cell applications.

    ``horizon`` (for the path-length probe): when set, the carried state is detached before
    step ``n - 1 - horizon``, so only the last ``horizon`` state transitions carry gradient to
    the last output (input position ``j`` reaches output ``n - 1`` iff ``n - 1 - j <= horizon``)."""

    def __init__(self, fused: FusedRNN) -> None:
        super().__init__()
        rnn = fused.rnn
        self.kind = fused.kind
        cls = nn.LSTMCell if self.kind == "lstm" else nn.GRUCell
        self.cell = cls(rnn.input_size, rnn.hidden_size).to(rnn.weight_ih_l0.dtype)
        for name in ("weight_ih", "weight_hh", "bias_ih", "bias_hh"):
            setattr(self.cell, name, getattr(rnn, f"{name}_l0"))  # shared Parameters
        self.hidden = rnn.hidden_size
        self.horizon: int | None = None
        self.steps = 0

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, n, _ = x.shape
        h = x.new_zeros(b, self.hidden)
        c = x.new_zeros(b, self.hidden)
        cut = None if self.horizon is None else n - 1 - self.horizon
        outs = []
        self.steps = 0
        for t in range(n):
            if t == cut:
                h, c = h.detach(), c.detach()
            if self.kind == "lstm":
                h, c = self.cell(x[:, t], (h, c))
            else:
                h = self.cell(x[:, t], h)
            self.steps += 1
            outs.append(h)
        return torch.stack(outs, dim=1)


def build_layer(layer: str, d: int, *, heads: int, window: int, kernel: int):
    """One layer of type ``layer`` (see :data:`LAYERS`), ``(B, n, d) -> (B, n, d)``, float32 on CPU."""
    if layer == "self_attention":
        return attn_core.MultiHeadAttention(d, heads, pattern="full")
    if layer == "restricted_attention":
        return attn_core.MultiHeadAttention(d, heads, pattern="truncated", window=window)
    if layer == "self_attention_op":
        return AttentionOp(heads)
    if layer == "restricted_attention_op":
        return AttentionOp(heads, window)
    if layer in RNN_LAYERS:
        return FusedRNN(layer, d)
    if layer == "conv":
        return SeqConv(d, kernel)
    if layer == "dilated_conv":
        return SeqConv(d, kernel, dilation=kernel)
    raise ValueError(f"unknown layer {layer!r}; valid: {', '.join(LAYERS)}")
