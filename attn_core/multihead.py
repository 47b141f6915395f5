"""Multi-head attention: projections and reshapes only; the maths is the registered pattern's
function (:mod:`attn_core.patterns`): :func:`attn_core.attention` for ``"full"`` and
``"truncated"``, :func:`attn_core.graph_attention` for ``"graph"``, a variant's own function for
the others. A pattern's per-layer state (Linformer's projections, Performer's features) is built
once here and owned as the submodule ``pattern_state``.

For incremental decoding, :meth:`MultiHeadAttention.project_kv` projects keys/values once and
:meth:`MultiHeadAttention.step` attends one new query position over them (a key/value cache).
:meth:`~MultiHeadAttention.init_decoding` / :meth:`~MultiHeadAttention.decode` hold causal
self-attention's cache for a decoder: those keys/values, or the fixed-size state of a pattern
registered with a :class:`~attn_core.Recurrence` (``linear``, ``performer``)."""

from __future__ import annotations

from typing import Any, Mapping

import torch
from torch import Tensor, nn

from attn_core import _validate as V
from attn_core.functional import attention
from attn_core.graph import GRAPH_SCORES
from attn_core.patterns import PATTERNS, Pattern, check_pattern, get_pattern, list_patterns

__all__ = ["MultiHeadAttention", "PATTERNS", "incremental_patterns", "decoding_patterns"]


def incremental_patterns() -> tuple[str, ...]:
    """The registered patterns :meth:`MultiHeadAttention.project_kv` / :meth:`~MultiHeadAttention.step`
    (the key/value cache of incremental decoding) support: those registered ``incremental``
    (full attention over the cached keys, ``truncated`` over their last window, ``linear``
    and ``performer`` over all of them, a plug-in's that says so)."""
    return tuple(name for name in PATTERNS if get_pattern(name).incremental)


def decoding_patterns() -> tuple[str, ...]:
    """The registered patterns a causal decoder can run one position at a time
    (:meth:`MultiHeadAttention.init_decoding` / :meth:`~MultiHeadAttention.decode`): the
    ``incremental`` ones (a key/value cache) and those with a ``recurrence`` (a fixed-size state)."""
    return tuple(name for name in PATTERNS if get_pattern(name).decodes)


class MultiHeadAttention(nn.Module):
    """Multi-head attention with any registered pattern (:data:`attn_core.PATTERNS`): ``"full"``,
    ``"truncated"`` (local window), ``"graph"`` (edges only), ``"linear"``, ``"performer"``, ...

    Sequences are batch-first ``(B, L, E)``; graphs are node matrices ``(N, E)`` with an
    ``edge_index``. ``key_padding_mask`` is ``(B, Lk)`` with ``True`` = real token (note:
    the opposite of ``nn.MultiheadAttention``'s ``key_padding_mask``).

    ``pattern_params``: the pattern's own keyword parameters (checked against its registered
    defaults). ``window`` and ``score`` are shorthands for the ``window`` parameter (``"truncated"``,
    ``"local_global"``) and the graph ``score`` (``"dot"`` or GAT-style ``"additive"``).
    ``max_len``: the longest sequence, for patterns sized by it (``"linformer"``).
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
        pattern_params: Mapping[str, Any] | None = None,
        max_len: int | None = None,
    ) -> None:
        super().__init__()
        V.check_positive_int("embed_dim", embed_dim)
        V.check_positive_int("num_heads", num_heads)
        if embed_dim % num_heads:
            V.fail("num_heads", num_heads, f"must divide embed_dim={embed_dim}")
        spec = check_pattern(pattern, causal=bool(causal), kind=None)
        V.check_window(window)
        V.check_dropout(dropout, "dropout")
        V.check_choice("score", score, GRAPH_SCORES)
        params = _merge_shorthands(spec, pattern_params, window=window, score=score)

        self.embed_dim, self.num_heads, self.head_dim = embed_dim, num_heads, embed_dim // num_heads
        self.pattern, self.causal, self.dropout, self.max_len = pattern, causal, dropout, max_len
        #: The pattern's registration, looked up once: every question about the pattern asks it.
        self.spec: Pattern = spec
        #: The pattern's own parameters, defaults filled in (``{"window": 3}`` for truncated).
        self.pattern_params = spec.resolve(params)
        # What decoding needs, answered once: a band's width (step() slices the last band + 1
        # keys) and the rolling buffer (global, window) of causal decoding.
        self._band: int | None = None if spec.band is None else int(self.pattern_params[spec.band])
        self._buffer: tuple[int, int] | None = None if spec.buffer is None else spec.buffer(self.pattern_params)
        self.window: int | None = self.pattern_params.get("window")
        self.score: str = self.pattern_params.get("score", score)
        self.kdim = embed_dim if kdim is None else kdim
        self.vdim = embed_dim if vdim is None else vdim
        self.q_proj = nn.Linear(embed_dim, embed_dim, bias=bias)
        self.k_proj = nn.Linear(self.kdim, embed_dim, bias=bias)
        self.v_proj = nn.Linear(self.vdim, embed_dim, bias=bias)
        self.out_proj = nn.Linear(embed_dim, embed_dim, bias=bias)
        self.reset_parameters()
        #: Per-layer state of the pattern (a submodule) or ``None``: no state_dict entries then.
        self.pattern_state: nn.Module | None = spec.build_state(
            num_heads, self.head_dim, max_len=max_len, params=self.pattern_params
        )

    def reset_parameters(self) -> None:
        for lin in (self.q_proj, self.k_proj, self.v_proj):
            nn.init.xavier_uniform_(lin.weight)
        for lin in (self.q_proj, self.k_proj, self.v_proj, self.out_proj):
            if lin.bias is not None:
                nn.init.zeros_(lin.bias)
        state = getattr(self, "pattern_state", None)  # absent while __init__ runs
        if state is not None and hasattr(state, "reset_parameters"):
            state.reset_parameters()

    def extra_repr(self) -> str:
        extra = "".join(f", {k}={v}" for k, v in self.pattern_params.items() if k != "score" and v is not None)
        return f"embed_dim={self.embed_dim}, num_heads={self.num_heads}, pattern={self.pattern!r}{extra}, causal={self.causal}"

    def _split(self, x: Tensor) -> Tensor:
        # (..., L, E) -> (..., L, H, Dh)
        return x.unflatten(-1, (self.num_heads, self.head_dim))

    def _heads(self, proj: nn.Linear, x: Tensor) -> Tensor:
        # (B, L, E_in) -> projected heads (B, H, L, Dh)
        return self._split(proj(x)).transpose(1, 2)

    def check_inputs(self, graph: bool, **inputs: Tensor) -> None:
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
        self, q: Tensor, k: Tensor, v: Tensor, *, key_padding_mask: Tensor | None, need_weights: bool,
        cached: bool = False,
    ) -> Tensor | tuple[Tensor, Tensor]:
        """Heads ``q (B, H, Lq, Dh)``, ``k``/``v (B, H, Lk, Dh)`` -> ``out_proj`` of the merged
        attention output ``(B, Lq, E)`` [, weights ``(B, H, Lq, Lk)``]: the one sequence path
        shared by :meth:`forward` and :meth:`step`. ``cached``: :meth:`step`'s one query over the
        keys it was given, non-causally (full attention over them for patterns with a mask rule,
        whose keys :meth:`step` has selected; otherwise the pattern's function)."""
        p = self.dropout if self.training else 0.0
        if cached and self.spec.positional:
            res = attention(q, k, v, causal=False, window=None, key_padding_mask=key_padding_mask,
                            dropout_p=p, need_weights=need_weights)
        else:
            if need_weights and not self.spec.weights:
                V.fail("need_weights", True, f"pattern={self.pattern!r} never forms its attention weights")
            extra = {"need_weights": True} if need_weights else {}
            res = self.spec.fn(q, k, v, causal=self.causal and not cached, key_padding_mask=key_padding_mask,
                                dropout_p=p, state=self.pattern_state, **self.pattern_params, **extra)
        out, weights = res if need_weights else (res, None)
        out = self.out_proj(out.transpose(1, 2).flatten(-2))  # (B, Lq, E)
        return (out, weights) if need_weights else out  # type: ignore[return-value]

    def _check_incremental(self) -> None:
        if not self.spec.incremental:
            V.fail("pattern", self.pattern, "project_kv/step (the key/value cache) support only "
                   + ", ".join(map(repr, incremental_patterns())))

    def project_kv(self, key: Tensor, value: Tensor | None = None) -> tuple[Tensor, Tensor]:
        """``key (B, Lk, Ek)``, ``value (B, Lk, Ev)`` (default ``key``) -> projected heads
        ``k, v (B, H, Lk, Dh)``, for sequence patterns.

        For incremental decoding: cross-attention projects its fixed memory once, and causal
        self-attention projects each new position once and appends it to a cache; both then
        call :meth:`step` instead of re-projecting the whole sequence every step."""
        self._check_incremental()
        value = key if value is None else value
        self.check_inputs(False, key=key, value=value)
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
          positions, so it sees every cached key (a pattern without a mask rule, e.g. ``"full"``,
          ``"linear"``: its function, non-causal, over every cached key), the last ``w + 1`` of a
          registered ``band`` (``"truncated"``) or those its mask rule ``allows`` (``"local_global"``).
          Passing ``causal=True`` to the function would be wrong here: its causal mask is
          top-left aligned (query 0 would see key 0 only).
        * ``causal=False`` (cross-attention): the keys are a fixed memory; the query sees all
          real ones. A non-causal positional pattern (one with a mask rule) has no "last
          position", so it raises.

        The result equals row ``Lk - 1`` of :meth:`forward` on the whole sequence.
        """
        self._check_incremental()
        if not self.causal and self.spec.positional:
            V.fail("pattern", self.pattern,
                   "step() needs causal=True for a positional pattern (the query is the last key)")
        self._check_one_position(query)
        if self.causal and self._band is not None:  # the band of the last position
            k, v = k[:, :, -(self._band + 1):], v[:, :, -(self._band + 1):]
            if key_padding_mask is not None:
                key_padding_mask = key_padding_mask[:, -(self._band + 1):]
        elif self.causal and self.spec.positional:  # the pattern's own rule, on the last row
            last = k.shape[2] - 1
            rule = self.spec.allows(torch.tensor(last, device=k.device), torch.arange(last + 1, device=k.device),
                                     causal=True, **self.pattern_params)  # (Lk,)
            key_padding_mask = rule.expand(k.shape[0], -1) if key_padding_mask is None else key_padding_mask & rule
        q = self._heads(self.q_proj, query)  # (B, H, 1, Dh)
        return self._attend(q, k, v, key_padding_mask=key_padding_mask, need_weights=need_weights, cached=True)

    def _check_one_position(self, query: Tensor) -> None:
        self.check_inputs(False, query=query)
        if query.shape[1] != 1:
            raise ValueError(f"query has shape {tuple(query.shape)}: step() takes one position, (B, 1, E)")

    def _check_decoding(self) -> None:
        if not self.spec.decodes:
            V.fail("pattern", self.pattern, "decoding one position at a time supports only "
                   + ", ".join(map(repr, decoding_patterns())))
        if not self.causal:
            V.fail("causal", False, "init_decoding/decode are causal self-attention's (causal=True)")

    def init_decoding(self, batch: int, *, device: torch.device | None = None,
                      dtype: torch.dtype | None = None) -> dict[str, Tensor]:
        """The cache of causal self-attention before the first decoded position, batch-first:
        the pattern's :class:`~attn_core.Recurrence` state and ``"n" (B,)``, the positions so
        far (fixed size whatever the length), or else empty keys/values ``"k"``/``"v" (B, H, 0, Dh)``
        (a pattern registered with a ``buffer`` adds ``"n"``: its keys/values are a rolling buffer
        of its first ``g`` and last ``w``, e.g. ``"truncated"``'s band, ``"local_global"``'s)."""
        self._check_decoding()
        device = self.q_proj.weight.device if device is None else device
        dtype = self.q_proj.weight.dtype if dtype is None else dtype
        rec = self.spec.recurrence
        if rec is not None:
            carry = rec.init(batch, self.num_heads, self.head_dim, device=device, dtype=dtype,
                             state=self.pattern_state, **self.pattern_params)
            return {**carry, "n": torch.zeros(batch, dtype=torch.long, device=device)}
        empty = torch.zeros(batch, self.num_heads, 0, self.head_dim, device=device, dtype=dtype)
        if self._buffer is not None:  # a rolling buffer: keys no later position attends are dropped
            return {"k": empty, "v": empty, "n": torch.zeros(batch, dtype=torch.long, device=device)}
        return {"k": empty, "v": empty}

    @staticmethod
    def decoded_length(cache: Mapping[str, Tensor]) -> int:
        """How many positions have been decoded into an :meth:`init_decoding` / :meth:`decode`
        cache (a rolling buffer or a recurrent state holds fewer, or none, of them)."""
        return int(cache["n"][0]) if "n" in cache else cache["k"].shape[2]

    def decode(self, query: Tensor, cache: Mapping[str, Tensor]) -> tuple[Tensor, dict[str, Tensor]]:
        """Causal self-attention of one new position ``query (B, 1, E)`` after the positions in
        ``cache`` -> ``(out (B, 1, E), the cache with it)``; ``out`` equals the last row of
        :meth:`forward` on every position so far. A recurrent pattern updates its state
        (O(1) a step); the others append the new keys/values and :meth:`step` over them, and a
        pattern with a ``buffer`` ``(g, w)`` then keeps only the first ``g`` and last ``w`` (no
        later position attends the others): O(w + g) memory and time a step, however long the
        sequence."""
        self._check_decoding()
        rec = self.spec.recurrence
        if rec is None:
            k, v = self.project_kv(query)  # (B, H, 1, Dh)
            k, v = torch.cat([cache["k"], k], 2), torch.cat([cache["v"], v], 2)  # (B, H, Lk + 1, Dh)
            if "n" not in cache:
                return self.step(query, k, v), {"k": k, "v": v}  # type: ignore[return-value]
            # The buffer holds positions 0..g'-1 (g' = min(g, Lk)), then a run of at most w + 1 ending
            # at this one: every key in it is one this position attends, so the mask rule on
            # 0..Lk-1 (what step() applies) allows them all, as the rule on their real positions does.
            out = self.step(query, k, v)
            (g, w), lk = self._buffer, k.shape[2]  # type: ignore[misc]
            gk = min(g, lk)
            drop = lk - gk - w  # the run's oldest keys, which no later position attends
            if drop > 0:
                k, v = (torch.cat([t[:, :, :gk], t[:, :, gk + drop:]], 2) for t in (k, v))  # (B, H, g' + w, Dh)
            return out, {"k": k, "v": v, "n": cache["n"] + 1}  # type: ignore[return-value]
        self._check_one_position(query)
        q, k, v = (self._heads(proj, query) for proj in (self.q_proj, self.k_proj, self.v_proj))  # (B, H, 1, Dh)
        carry = {name: t for name, t in cache.items() if name != "n"}
        out, carry = rec.step(q, k, v, carry, state=self.pattern_state, **self.pattern_params)  # (B, H, 1, Dh)
        return self.out_proj(out.transpose(1, 2).flatten(-2)), {**carry, "n": cache["n"] + 1}

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
        cross = key is not None and key is not query
        key = query if key is None else key
        value = key if value is None else value
        graph = self.spec.graph
        self.check_inputs(graph, query=query, key=key, value=value)
        if not graph:
            if edge_index is not None:
                V.fail("edge_index", "a tensor", f"only graph patterns take edge_index (pattern={self.pattern!r})")
            if query.shape[0] != key.shape[0]:
                raise ValueError(f"query batch {query.shape[0]} != key batch {key.shape[0]}")
            padding = key_padding_mask is not None
            if not self.spec.supports(causal=self.causal, cross=cross, padding=padding):
                check_pattern(self.pattern, causal=self.causal, cross=cross, padding=padding)  # raises
            q = self._heads(self.q_proj, query)  # (B, H, Lq, Dh)
            k, v = self._heads(self.k_proj, key), self._heads(self.v_proj, value)  # (B, H, Lk, Dh)
            return self._attend(q, k, v, key_padding_mask=key_padding_mask, need_weights=need_weights)
        if edge_index is None:
            V.fail("edge_index", None, f"pattern={self.pattern!r} needs a (2, E) edge_index")
        if key_padding_mask is not None:
            V.fail("key_padding_mask", "a tensor", f"pattern={self.pattern!r} takes no key_padding_mask")
        res = self.spec.fn(  # q (N, H, Dh), k/v (Ns, H, Dh)
            self._split(self.q_proj(query)), self._split(self.k_proj(key)), self._split(self.v_proj(value)),
            edge_index, dropout_p=self.dropout if self.training else 0.0, need_weights=need_weights,
            **self.pattern_params,
        )
        out, weights = res if need_weights else (res, None)
        out = self.out_proj(out.flatten(-2))  # (N, E)
        return (out, weights) if need_weights else out


def _merge_shorthands(spec: Pattern, pattern_params: Mapping[str, Any] | None, *, window: int | None,
                      score: str) -> dict[str, Any]:
    """``pattern_params`` with the constructor's ``window=`` / ``score=`` shorthands folded in:
    each only for a pattern that has that parameter, and never disagreeing with ``pattern_params``."""
    if pattern_params is not None and not isinstance(pattern_params, Mapping):
        V.fail("pattern_params", pattern_params, "expected a dict of the pattern's own parameters or None")
    params = dict(pattern_params or {})
    for key, val, unset in (("window", window, None), ("score", score, "dot")):
        if val == unset:
            continue
        if key not in spec.params:
            takers = [n for n in list_patterns(kind=None) if key in get_pattern(n).params]
            V.fail(key, val, f"only pattern(s) {', '.join(map(repr, takers))} take a {key} (pattern={spec.name!r})")
        if params.get(key, val) != val:
            V.fail(key, val, f"pattern_params[{key!r}]={params[key]!r} says otherwise: give it once")
        params[key] = val
    return params
