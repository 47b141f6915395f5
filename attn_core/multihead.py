"""Multi-head attention: projections and reshapes only; the maths lives in
:func:`attn_core.attention` (sequences) and :func:`attn_core.graph_attention` (graphs).

For incremental decoding, :meth:`MultiHeadAttention.project_kv` projects keys/values once and
:meth:`MultiHeadAttention.step` attends one new query position over them (a key/value cache)."""

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

    def _heads(self, proj: nn.Linear, x: Tensor) -> Tensor:
        # (B, L, E_in) -> projected heads (B, H, L, Dh)
        return self._split(proj(x)).transpose(1, 2)

    def _check_inputs(self, graph: bool, **inputs: Tensor) -> None:
        """Rank and feature size of each of ``query``/``key``/``value`` given, and key/value agreement."""
        dims = {"query": self.embed_dim, "key": self.kdim, "value": self.vdim}
        for name, t in inputs.items():
            V.check_tensor(name, t, 2 if graph else 3, "(N, E) node features" if graph else "(B, L, E) batch-first")
            if t.shape[-1] != dims[name]:
                raise ValueError(f"{name} has feature size {t.shape[-1]}: expected {dims[name]}")
        key, value = inputs.get("key"), inputs.get("value")
        if key is not None and value is not None and key.shape[:-1] != value.shape[:-1]:
            raise ValueError(f"key {tuple(key.shape)} and value {tuple(value.shape)} must agree except in features")

    def _attend(
        self, q: Tensor, k: Tensor, v: Tensor, *, causal: bool, window: int | None,
        key_padding_mask: Tensor | None, need_weights: bool,
    ) -> Tensor | tuple[Tensor, Tensor]:
        """Heads ``q (B, H, Lq, Dh)``, ``k``/``v (B, H, Lk, Dh)`` -> ``out_proj`` of the merged
        attention output ``(B, Lq, E)`` [, weights ``(B, H, Lq, Lk)``]: the one sequence path
        shared by :meth:`forward` and :meth:`step`."""
        res = attention(
            q, k, v, causal=causal, window=window, key_padding_mask=key_padding_mask,
            dropout_p=self.dropout if self.training else 0.0, need_weights=need_weights,
        )
        out, weights = res if need_weights else (res, None)
        out = self.out_proj(out.transpose(1, 2).flatten(-2))  # (B, Lq, E)
        return (out, weights) if need_weights else out  # type: ignore[return-value]

    def project_kv(self, key: Tensor, value: Tensor | None = None) -> tuple[Tensor, Tensor]:
        """``key (B, Lk, Ek)``, ``value (B, Lk, Ev)`` (default ``key``) -> projected heads
        ``k, v (B, H, Lk, Dh)``, for sequence patterns.

        For incremental decoding: cross-attention projects its fixed memory once, and causal
        self-attention projects each new position once and appends it to a cache; both then
        call :meth:`step` instead of re-projecting the whole sequence every step."""
        if self.pattern == "graph":
            V.fail("pattern", self.pattern, "project_kv/step are for sequences ('full' or 'truncated')")
        value = key if value is None else value
        self._check_inputs(False, key=key, value=value)
        return self._heads(self.k_proj, key), self._heads(self.v_proj, value)

    def step(
        self,
        query: Tensor,
        k: Tensor,
        v: Tensor,
        *,
        key_padding_mask: Tensor | None = None,
        need_weights: bool = False,
    ) -> Tensor | tuple[Tensor, Tensor]:
        """One new query position ``query (B, 1, E)`` against keys/values already projected by
        :meth:`project_kv`, ``k``/``v (B, H, Lk, Dh)``; ``key_padding_mask (B, Lk)``. Returns
        ``(B, 1, E)`` [, weights ``(B, H, 1, Lk')``].

        * ``causal=True`` (self-attention with a cache): the query is the *last* of the ``Lk``
          positions, so it sees every cached key (``"full"``) or the last ``window + 1``
          (``"truncated"``). Passing ``causal=True`` to :func:`attention` would be wrong here:
          its causal mask is top-left aligned (query 0 would see key 0 only).
        * ``causal=False``, ``"full"`` (cross-attention): the keys are a fixed memory; the query
          sees all real ones. A non-causal truncated pattern has no "last position", so it raises.

        The result equals row ``Lk - 1`` of :meth:`forward` on the whole sequence.
        """
        if not self.causal and self.window is not None:
            V.fail("window", self.window, "step() needs causal=True for pattern='truncated' (the query is the last key)")
        self._check_inputs(False, query=query)
        if query.shape[1] != 1:
            raise ValueError(f"query has shape {tuple(query.shape)}: step() takes one position, (B, 1, E)")
        if self.causal and self.window is not None:  # the band of the last position
            k, v = k[:, :, -(self.window + 1):], v[:, :, -(self.window + 1):]
            if key_padding_mask is not None:
                key_padding_mask = key_padding_mask[:, -(self.window + 1):]
        q = self._heads(self.q_proj, query)  # (B, H, 1, Dh)
        return self._attend(q, k, v, causal=False, window=None, key_padding_mask=key_padding_mask,
                            need_weights=need_weights)

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
        self._check_inputs(graph, query=query, key=key, value=value)
        if not graph:
            if edge_index is not None:
                V.fail("edge_index", "a tensor", f"only pattern='graph' takes edge_index (pattern={self.pattern!r})")
            if query.shape[0] != key.shape[0]:
                raise ValueError(f"query batch {query.shape[0]} != key batch {key.shape[0]}")
            q = self._heads(self.q_proj, query)  # (B, H, Lq, Dh)
            k, v = self._heads(self.k_proj, key), self._heads(self.v_proj, value)  # (B, H, Lk, Dh)
            return self._attend(q, k, v, causal=self.causal, window=self.window,
                                key_padding_mask=key_padding_mask, need_weights=need_weights)
        if edge_index is None:
            V.fail("edge_index", None, "pattern='graph' needs a (2, E) edge_index")
        if key_padding_mask is not None:
            V.fail("key_padding_mask", "a tensor", "pattern='graph' takes no key_padding_mask")
        res = graph_attention(  # q (N, H, Dh), k/v (Ns, H, Dh)
            self._split(self.q_proj(query)), self._split(self.k_proj(key)), self._split(self.v_proj(value)),
            edge_index, score=self.score, dropout_p=self.dropout if self.training else 0.0,
            need_weights=need_weights,
        )
        out, weights = res if need_weights else (res, None)
        out = self.out_proj(out.flatten(-2))  # (N, E)
        return (out, weights) if need_weights else out
