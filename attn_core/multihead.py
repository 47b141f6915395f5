"""Multi-head attention: projections and reshapes only; the maths lives in
:func:`attn_core.attention` (sequences) and :func:`attn_core.graph_attention` (graphs)."""

from __future__ import annotations

from torch import Tensor, nn

from attn_core import _validate as V
from attn_core.functional import attention
from attn_core.graph import GRAPH_SCORES, graph_attention

__all__ = ["MultiHeadAttention", "PATTERNS"]

#: Attention patterns a :class:`MultiHeadAttention` (and every Transformer layer) can use.
PATTERNS = ("full", "truncated", "graph")


class MultiHeadAttention(nn.Module):
    """Multi-head attention with a pattern: ``"full"``, ``"truncated"`` (local window) or
    ``"graph"`` (edges only).

    Sequences are batch-first ``(B, L, E)``; graphs are node matrices ``(N, E)`` with an
    ``edge_index``. ``key_padding_mask`` is ``(B, Lk)`` with ``True`` = real token (note:
    the opposite of ``nn.MultiheadAttention``'s ``key_padding_mask``). ``score`` picks the
    graph score (``"dot"`` or GAT-style ``"additive"``).
    """

    def __init__(
        self,
        embed_dim: int,
        num_heads: int,
        *,
        pattern: str = "full",
        window: int | None = None,
        causal: bool = False,
        dropout: float = 0.0,
        bias: bool = True,
        kdim: int | None = None,
        vdim: int | None = None,
        score: str = "dot",
    ) -> None:
        super().__init__()
        for name, val in (("embed_dim", embed_dim), ("num_heads", num_heads)):
            if isinstance(val, bool) or not isinstance(val, int) or val <= 0:
                V.fail(name, val, "expected a positive int")
        if embed_dim % num_heads:
            V.fail("num_heads", num_heads, f"must divide embed_dim={embed_dim}")
        V.check_choice("pattern", pattern, PATTERNS)
        V.check_window(window)
        if pattern == "truncated" and window is None:
            V.fail("window", window, "pattern='truncated' needs an int window >= 0")
        if pattern != "truncated" and window is not None:
            V.fail("window", window, f"only pattern='truncated' takes a window (pattern={pattern!r})")
        if pattern == "graph" and causal:
            V.fail("causal", causal, "pattern='graph' has no order: use causal=False")
        V.check_dropout(dropout, "dropout")
        V.check_choice("score", score, GRAPH_SCORES)
        if score != "dot" and pattern != "graph":
            V.fail("score", score, "only pattern='graph' takes another score than 'dot'")

        self.embed_dim, self.num_heads, self.head_dim = embed_dim, num_heads, embed_dim // num_heads
        self.pattern, self.window, self.causal, self.dropout, self.score = pattern, window, causal, dropout, score
        self.kdim = embed_dim if kdim is None else kdim
        self.vdim = embed_dim if vdim is None else vdim
        self.q_proj = nn.Linear(embed_dim, embed_dim, bias=bias)
        self.k_proj = nn.Linear(self.kdim, embed_dim, bias=bias)
        self.v_proj = nn.Linear(self.vdim, embed_dim, bias=bias)
        self.out_proj = nn.Linear(embed_dim, embed_dim, bias=bias)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        for lin in (self.q_proj, self.k_proj, self.v_proj):
            nn.init.xavier_uniform_(lin.weight)
        for lin in (self.q_proj, self.k_proj, self.v_proj, self.out_proj):
            if lin.bias is not None:
                nn.init.zeros_(lin.bias)

    def extra_repr(self) -> str:
        extra = f", window={self.window}" if self.window is not None else ""
        return f"embed_dim={self.embed_dim}, num_heads={self.num_heads}, pattern={self.pattern!r}{extra}, causal={self.causal}"

    def _split(self, x: Tensor) -> Tensor:
        # (..., L, E) -> (..., L, H, Dh)
        return x.unflatten(-1, (self.num_heads, self.head_dim))

    def forward(
        self,
        query: Tensor,
        key: Tensor | None = None,
        value: Tensor | None = None,
        *,
        key_padding_mask: Tensor | None = None,
        edge_index: Tensor | None = None,
        need_weights: bool = False,
    ) -> Tensor | tuple[Tensor, Tensor]:
        """Self-attention when ``key``/``value`` are ``None``. Returns ``out`` shaped like
        ``query``, or ``(out, weights)``: ``(B, H, Lq, Lk)`` for sequences, ``(E, H)`` for graphs."""
        key = query if key is None else key
        value = key if value is None else value
        graph = self.pattern == "graph"
        layout = "(N, E) node features" if graph else "(B, L, E) batch-first"
        for name, t in (("query", query), ("key", key), ("value", value)):
            V.check_tensor(name, t, 2 if graph else 3, layout)
        for name, t, dim in (("query", query, self.embed_dim), ("key", key, self.kdim), ("value", value, self.vdim)):
            if t.shape[-1] != dim:
                raise ValueError(f"{name} has feature size {t.shape[-1]}: expected {dim}")
        if key.shape[:-1] != value.shape[:-1]:
            raise ValueError(f"key {tuple(key.shape)} and value {tuple(value.shape)} must agree except in features")
        p = self.dropout if self.training else 0.0

        q = self._split(self.q_proj(query))
        k = self._split(self.k_proj(key))
        v = self._split(self.v_proj(value))
        if graph:
            if edge_index is None:
                V.fail("edge_index", None, "pattern='graph' needs a (2, E) edge_index")
            if key_padding_mask is not None:
                V.fail("key_padding_mask", "a tensor", "pattern='graph' takes no key_padding_mask")
            res = graph_attention(  # q (N, H, Dh), k/v (Ns, H, Dh)
                q, k, v, edge_index, score=self.score, dropout_p=p, need_weights=need_weights
            )
            out, weights = res if need_weights else (res, None)
            out = out.flatten(-2)  # (N, E)
        else:
            if edge_index is not None:
                V.fail("edge_index", "a tensor", f"only pattern='graph' takes edge_index (pattern={self.pattern!r})")
            if query.shape[0] != key.shape[0]:
                raise ValueError(f"query batch {query.shape[0]} != key batch {key.shape[0]}")
            res = attention(  # (B, H, L, Dh) in, (B, H, Lq, Dh) out
                q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2),
                causal=self.causal, window=self.window, key_padding_mask=key_padding_mask,
                dropout_p=p, need_weights=need_weights,
            )
            out, weights = res if need_weights else (res, None)
            out = out.transpose(1, 2).flatten(-2)  # (B, Lq, E)
        out = self.out_proj(out)
        return (out, weights) if need_weights else out
