"""Transformer layers and stacks on :class:`attn_core.multihead.MultiHeadAttention`.

Every task's attention model is built from these, so the attention pattern is a parameter: any
registered pattern (:data:`attn_core.PATTERNS`: ``"full"``, ``"truncated"`` with ``window``,
``"graph"`` with ``edge_index`` at call time, ``"linear"``, ``"performer"`` ...), its own
``pattern_params``, ``max_len`` for patterns sized by it, and ``causal``. Layer structure and parameter names mirror
``torch.nn.TransformerEncoderLayer`` / ``TransformerDecoderLayer`` (``linear1``, ``linear2``,
``norm1..3``, ``dropout1..3``), so weights map one to one and the tests compare against torch.

Masks follow the package convention: ``key_padding_mask`` is ``(B, L)`` bool, ``True`` = real
token (the opposite of torch's ``src_key_padding_mask``).

Incremental decoding: :meth:`TransformerDecoder.init_cache` projects the memory into each layer's
cross-attention keys/values once, and :meth:`TransformerDecoder.step` decodes one new position
against the cache: each new token runs the layers on one position (its self-attention reads the
``t`` cached keys, or a recurrent pattern's fixed-size state) instead of recomputing the whole
prefix, so projections and feed-forward cost ``O(T)`` per sentence rather than ``O(T^2)``. The
cache is a flat ``dict[str, Tensor]`` of batch-first tensors, so a search can reorder
hypotheses with one ``index_select`` per entry.
"""

from __future__ import annotations

from typing import Callable

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch import Tensor

from attn_core import _validate as V
from attn_core.multihead import MultiHeadAttention
from attn_core.patterns import PatternNames, check_pattern

__all__ = [
    "TransformerEncoderLayer",
    "TransformerDecoderLayer",
    "TransformerEncoder",
    "TransformerDecoder",
    "ACTIVATIONS",
    "DECODER_PATTERNS",
    "KVCache",
]

#: Cache of :meth:`TransformerDecoder.step`: ``"kv.{layer}.self_{name}"``, the entries of the
#: layer's :meth:`MultiHeadAttention.init_decoding` cache (``self_k`` / ``self_v`` ``(B, H, t, Dh)``,
#: the ``t`` positions decoded so far, or a recurrent pattern's state), and
#: ``"kv.{layer}.cross_k"`` / ``"cross_v"`` ``(B, H, Ls, Dh)`` (the projected memory), batch-first.
KVCache = dict[str, Tensor]

ACTIVATIONS: dict[str, Callable[[Tensor], Tensor]] = {"gelu": F.gelu, "relu": F.relu}
#: Self-attention patterns a decoder may use: causal-capable sequence patterns (a live view).
DECODER_PATTERNS = PatternNames(kind="sequence", causal=True)


def _check_common(
    d_model: object, num_heads: object, dim_feedforward: object, dropout: object,
    activation: object, attn_dropout: object, layer_norm_eps: object,
) -> None:
    for name, val in (("d_model", d_model), ("num_heads", num_heads), ("dim_feedforward", dim_feedforward)):
        V.check_positive_int(name, val)
    V.check_dropout(dropout, "dropout")
    if attn_dropout is not None:
        V.check_dropout(attn_dropout, "attn_dropout")
    V.check_choice("activation", activation, ACTIVATIONS)
    if not isinstance(layer_norm_eps, (int, float)) or layer_norm_eps <= 0:
        V.fail("layer_norm_eps", layer_norm_eps, "expected a positive float")


class _ResidualLayer(nn.Module):
    """What both layers share: the argument checks, the feed-forward network, one
    ``norm{i}``/``dropout{i}`` per residual block (torch's names), the pre-/post-LN rule and the
    dropped-out attention call. A subclass builds its attention modules between
    :meth:`_init_common` and :meth:`_init_blocks` (that order fixes the parameter init order)."""

    self_attn: MultiHeadAttention
    linear1: nn.Linear
    linear2: nn.Linear
    dropout: nn.Dropout  # inside the FFN
    norm1: nn.LayerNorm
    norm2: nn.LayerNorm
    dropout1: nn.Dropout
    dropout2: nn.Dropout

    def _init_common(
        self, d_model: int, num_heads: int, dim_feedforward: int | None, dropout: float, activation: str,
        norm_first: bool, attn_dropout: float | None, layer_norm_eps: float,
    ) -> tuple[int, float]:
        """Check and store the shared arguments; returns ``(dim_feedforward, attention dropout)``."""
        dim_feedforward = 4 * d_model if dim_feedforward is None and isinstance(d_model, int) else dim_feedforward
        _check_common(d_model, num_heads, dim_feedforward, dropout, activation, attn_dropout, layer_norm_eps)
        assert dim_feedforward is not None
        self.d_model, self.norm_first, self.activation = d_model, bool(norm_first), activation
        return dim_feedforward, dropout if attn_dropout is None else attn_dropout

    def _init_blocks(
        self, blocks: int, d_model: int, dim_feedforward: int, dropout: float, activation: str, layer_norm_eps: float
    ) -> None:
        """The FFN (``linear1``, ``linear2``, inner ``dropout``), then ``norm1..blocks`` and
        ``dropout1..blocks`` (one per residual block)."""
        self.linear1 = nn.Linear(d_model, dim_feedforward)
        self.linear2 = nn.Linear(dim_feedforward, d_model)
        for i in range(1, blocks + 1):
            setattr(self, f"norm{i}", nn.LayerNorm(d_model, eps=layer_norm_eps))
        self.dropout = nn.Dropout(dropout)
        for i in range(1, blocks + 1):
            setattr(self, f"dropout{i}", nn.Dropout(dropout))
        self.activation_fn = ACTIVATIONS[activation]

    @property
    def pattern(self) -> str:
        return self.self_attn.pattern

    def _ff(self, x: Tensor) -> Tensor:
        return self.linear2(self.dropout(self.activation_fn(self.linear1(x))))  # (..., E)

    def _residual(self, x: Tensor, norm: nn.LayerNorm, block: Callable[[Tensor], Tensor]) -> Tensor:
        """One residual block: pre-LN ``x + block(norm(x))`` or post-LN ``norm(x + block(x))``."""
        return x + block(norm(x)) if self.norm_first else norm(x + block(x))

    @staticmethod
    def _attend(
        attn: MultiHeadAttention, drop: nn.Dropout, weights: list[Tensor] | None, *args: Tensor, **kwargs: Tensor | None
    ) -> Tensor:
        """``drop(attn(*args, **kwargs))``; given a ``weights`` list, also appends the attention weights to it."""
        if weights is None:
            return drop(attn(*args, **kwargs))
        out, w = attn(*args, need_weights=True, **kwargs)
        weights.append(w)
        return drop(out)


class TransformerEncoderLayer(_ResidualLayer):
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
        pattern, window, causal, score, pattern_params, max_len: passed to :class:`MultiHeadAttention`.

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
        pattern_params: dict | None = None,
        max_len: int | None = None,
    ) -> None:
        super().__init__()
        ff, p_attn = self._init_common(
            d_model, num_heads, dim_feedforward, dropout, activation, norm_first, attn_dropout, layer_norm_eps
        )
        self.self_attn = MultiHeadAttention(
            d_model, num_heads, pattern=pattern, window=window, causal=causal, dropout=p_attn, score=score,
            pattern_params=pattern_params, max_len=max_len,
        )
        # blocks: 1 = self-attention, 2 = FFN
        self._init_blocks(2, d_model, ff, dropout, activation, layer_norm_eps)

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
        weights: list[Tensor] | None = [] if need_weights else None
        x = self._residual(x, self.norm1, lambda h: self._attend(
            self.self_attn, self.dropout1, weights, h, key_padding_mask=key_padding_mask, edge_index=edge_index
        ))  # (B, L, E) | (N, E)
        x = self._residual(x, self.norm2, lambda h: self.dropout2(self._ff(h)))
        return (x, weights[0]) if weights is not None else x


class TransformerDecoderLayer(_ResidualLayer):
    """Masked self-attention + cross-attention over ``memory`` + feed-forward, pre-LN or post-LN.

    Self-attention is causal by default and may be any causal-capable sequence pattern
    (:data:`DECODER_PATTERNS`; :meth:`step` only ``"full"``/``"truncated"``); cross-attention is always full (every target position sees every real source position).
    ``memory_dim`` (default ``d_model``) lets the memory have another width.

    ``forward(x (B, Lt, E), memory (B, Ls, Em), *, tgt_key_padding_mask (B, Lt), memory_key_padding_mask
    (B, Ls), need_weights)`` -> ``out (B, Lt, E)``, or ``(out, cross_weights (B, H, Lt, Ls))`` so tasks
    can plot alignments. :meth:`step` is the incremental (key/value-cached) form for inference.
    """

    norm3: nn.LayerNorm
    dropout3: nn.Dropout

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
        pattern_params: dict | None = None,
        max_len: int | None = None,
    ) -> None:
        super().__init__()
        ff, p_attn = self._init_common(
            d_model, num_heads, dim_feedforward, dropout, activation, norm_first, attn_dropout, layer_norm_eps
        )
        check_pattern(pattern, causal=True)  # a decoder generates left to right
        self.self_attn = MultiHeadAttention(
            d_model, num_heads, pattern=pattern, window=window, causal=causal, dropout=p_attn,
            pattern_params=pattern_params, max_len=max_len,
        )
        self.multihead_attn = MultiHeadAttention(  # cross-attention (torch's name)
            d_model, num_heads, pattern="full", dropout=p_attn, kdim=memory_dim, vdim=memory_dim
        )
        # blocks: 1 = self-attention, 2 = cross-attention, 3 = FFN
        self._init_blocks(3, d_model, ff, dropout, activation, layer_norm_eps)

    def _residual_blocks(self, x: Tensor, sa: Callable[[Tensor], Tensor], ca: Callable[[Tensor], Tensor]) -> Tensor:
        """The layer's three residual blocks around ``sa`` and ``ca`` (dropped-out self- and
        cross-attention outputs ``(B, Lt, E)``), shared by :meth:`forward` and :meth:`step`."""
        x = self._residual(x, self.norm1, sa)
        x = self._residual(x, self.norm2, ca)
        return self._residual(x, self.norm3, lambda h: self.dropout3(self._ff(h)))

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
        weights: list[Tensor] | None = [] if need_weights else None
        x = self._residual_blocks(
            x,
            lambda h: self._attend(self.self_attn, self.dropout1, None, h, key_padding_mask=tgt_key_padding_mask),
            lambda h: self._attend(
                self.multihead_attn, self.dropout2, weights, h, memory, memory, key_padding_mask=memory_key_padding_mask
            ),
        )
        return (x, weights[0]) if weights is not None else x

    def project_memory(self, memory: Tensor) -> tuple[Tensor, Tensor]:
        """``memory (B, Ls, Em)`` -> cross-attention ``k, v (B, H, Ls, Dh)``, computed once per
        source for :meth:`step`."""
        return self.multihead_attn.project_kv(memory)

    def step(
        self,
        x: Tensor,
        self_cache: dict[str, Tensor],
        cross_kv: tuple[Tensor, Tensor],
        *,
        memory_key_padding_mask: Tensor | None = None,
    ) -> tuple[Tensor, dict[str, Tensor]]:
        """Decode one new position: ``x (B, 1, E)`` is the input at position ``t``;
        ``self_cache`` the self-attention cache of positions ``0..t-1``
        (:meth:`MultiHeadAttention.init_decoding` for ``t = 0``); ``cross_kv`` from
        :meth:`project_memory`. Returns ``(out (B, 1, E), self_cache extended to t + 1)``.
        ``out`` equals row ``t`` of :meth:`forward` on the whole prefix (causal self-attention:
        later positions never change earlier ones).

        Inference only: raises in training mode with dropout > 0 (the cached path is not the
        training path), and for ``causal=False`` (then every position would see future ones).
        """
        if not self.self_attn.causal:
            raise ValueError("step() needs a causal decoder (causal=True): a non-causal position sees later ones")
        if self.training and (self.dropout.p > 0 or self.self_attn.dropout > 0 or self.multihead_attn.dropout > 0):
            raise RuntimeError(
                "TransformerDecoderLayer.step is for inference: call .eval() (or build with dropout=0 "
                "and attn_dropout=0) before incremental decoding"
            )
        new_cache: dict[str, Tensor] = {}

        def sa(h: Tensor) -> Tensor:  # h (B, 1, E): this position after the cached ones
            out, new = self.self_attn.decode(h, self_cache)
            new_cache.update(new)
            return self.dropout1(out)

        def ca(h: Tensor) -> Tensor:  # attend over the projected memory
            return self.dropout2(self.multihead_attn.step(h, *cross_kv, key_padding_mask=memory_key_padding_mask))

        out = self._residual_blocks(x, sa, ca)  # (B, 1, E)
        return out, new_cache


class _Stack(nn.Module):
    """What both stacks share: ``num_layers`` independent layers from ``make_layer``, the
    optional final LayerNorm (default ``norm_first``) and the loop that collects weights."""

    def __init__(
        self, make_layer: Callable[[], nn.Module], num_layers: int, d_model: int, layer_norm_eps: float,
        norm_first: bool, final_norm: bool | None,
    ) -> None:
        super().__init__()
        V.check_positive_int("num_layers", num_layers)
        self.layers = nn.ModuleList(make_layer() for _ in range(num_layers))
        final_norm = norm_first if final_norm is None else final_norm
        self.norm = nn.LayerNorm(d_model, eps=layer_norm_eps) if final_norm else None

    def _final(self, x: Tensor) -> Tensor:
        return x if self.norm is None else self.norm(x)

    def _run(
        self, x: Tensor, need_weights: bool, call: Callable[[nn.Module, Tensor], Tensor | tuple[Tensor, Tensor]]
    ) -> Tensor | tuple[Tensor, list[Tensor]]:
        """``x`` through every ``call(layer, x)`` (which returns ``(x, w)`` when ``need_weights``),
        then the final norm; with ``need_weights`` also the list of per-layer ``w``."""
        weights: list[Tensor] = []
        for layer in self.layers:
            res = call(layer, x)
            if need_weights:
                x, w = res
                weights.append(w)
            else:
                x = res  # type: ignore[assignment]
        return (self._final(x), weights) if need_weights else self._final(x)


class TransformerEncoder(_Stack):
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
        pattern_params: dict | None = None,
        max_len: int | None = None,
    ) -> None:
        super().__init__(
            lambda: TransformerEncoderLayer(
                d_model, num_heads, dim_feedforward, dropout, activation, norm_first, pattern, window,
                causal, attn_dropout, layer_norm_eps=layer_norm_eps, score=score,
                pattern_params=pattern_params, max_len=max_len,
            ),
            num_layers, d_model, layer_norm_eps, norm_first, final_norm,
        )

    def forward(
        self,
        x: Tensor,
        *,
        key_padding_mask: Tensor | None = None,
        edge_index: Tensor | None = None,
        need_weights: bool = False,
    ) -> Tensor | tuple[Tensor, list[Tensor]]:
        """``x (B, L, E)`` or ``(N, E)`` -> same shape [, list of per-layer weights]."""
        return self._run(x, need_weights, lambda layer, h: layer(
            h, key_padding_mask=key_padding_mask, edge_index=edge_index, need_weights=need_weights
        ))


class TransformerDecoder(_Stack):
    """``num_layers`` independent :class:`TransformerDecoderLayer` s + optional final LayerNorm
    (default ``norm_first``). ``need_weights`` returns the list of per-layer cross-attention
    weights ``(B, H, Lt, Ls)``.

    Incremental decoding (inference)::

        cache = decoder.init_cache(memory)                      # cross K/V once, empty self K/V
        for t in range(T):
            out, cache = decoder.step(x[:, t:t + 1], cache, memory_key_padding_mask=mask)

    gives ``out == decoder(x, memory, memory_key_padding_mask=mask)[:, t:t + 1]`` at every ``t``.
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
        causal: bool = True,
        attn_dropout: float | None = None,
        layer_norm_eps: float = 1e-5,
        memory_dim: int | None = None,
        final_norm: bool | None = None,
        pattern_params: dict | None = None,
        max_len: int | None = None,
    ) -> None:
        super().__init__(
            lambda: TransformerDecoderLayer(
                d_model, num_heads, dim_feedforward, dropout, activation, norm_first, pattern, window,
                causal, attn_dropout, layer_norm_eps=layer_norm_eps, memory_dim=memory_dim,
                pattern_params=pattern_params, max_len=max_len,
            ),
            num_layers, d_model, layer_norm_eps, norm_first, final_norm,
        )

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
        return self._run(x, need_weights, lambda layer, h: layer(
            h, memory, tgt_key_padding_mask=tgt_key_padding_mask,
            memory_key_padding_mask=memory_key_padding_mask, need_weights=need_weights,
        ))

    def init_cache(self, memory: Tensor) -> KVCache:
        """``memory (B, Ls, Em)`` -> the :data:`KVCache` before the first step: every layer's
        cross-attention keys/values projected once, and its self-attention's empty cache."""
        cache: KVCache = {}
        for i, layer in enumerate(self.layers):
            empty = layer.self_attn.init_decoding(memory.shape[0], device=memory.device, dtype=memory.dtype)
            cache.update({f"kv.{i}.self_{name}": t for name, t in empty.items()})
            cache[f"kv.{i}.cross_k"], cache[f"kv.{i}.cross_v"] = layer.project_memory(memory)
        return cache

    @staticmethod
    def cache_length(cache: KVCache) -> int:
        """How many positions ``cache`` holds (the position of the next :meth:`step`)."""
        return MultiHeadAttention.decoded_length(_self_cache(cache, 0))

    def step(
        self, x: Tensor, cache: KVCache, *, memory_key_padding_mask: Tensor | None = None
    ) -> tuple[Tensor, KVCache]:
        """``x (B, 1, E)``, the input (embedding + position encoding) of position
        ``t = cache_length(cache)`` -> ``(out (B, 1, E), new cache)`` with every layer's self
        keys/values extended to ``t + 1``. ``memory_key_padding_mask (B, Ls)`` is the mask given
        to :meth:`forward`. Entries of ``cache`` other than the decoder's are passed through, so
        the cache may live inside a larger state dict. Inference only (see
        :meth:`TransformerDecoderLayer.step`)."""
        new = dict(cache)
        for i, layer in enumerate(self.layers):
            x, own = layer.step(x, _self_cache(cache, i), (cache[f"kv.{i}.cross_k"], cache[f"kv.{i}.cross_v"]),
                                memory_key_padding_mask=memory_key_padding_mask)
            new.update({f"kv.{i}.self_{name}": t for name, t in own.items()})
        return self._final(x), new


def _self_cache(cache: KVCache, layer: int) -> dict[str, Tensor]:
    """Layer ``layer``'s self-attention entries of ``cache``, under their own names."""
    prefix = f"kv.{layer}.self_"
    return {key[len(prefix):]: t for key, t in cache.items() if key.startswith(prefix)}
