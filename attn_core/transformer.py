"""Transformer layers and stacks on :class:`attn_core.multihead.MultiHeadAttention`.

Every task's attention model is built from these, so the attention pattern is a parameter: any
registered pattern (:data:`attn_core.PATTERNS`: ``"full"``, ``"truncated"`` with ``window``,
``"graph"`` with ``edge_index`` at call time, ``"linear"``, ``"performer"`` ...), its own
``pattern_params``, ``max_len`` for patterns sized by it, and ``causal``. Layer structure and parameter names mirror
``torch.nn.TransformerEncoderLayer`` / ``TransformerDecoderLayer`` (``linear1``, ``linear2``,
``norm1..3``, ``dropout1..3``), so weights map one to one and the tests compare against torch.

Every layer and stack is built from one :class:`LayerConfig` (given as one, or as its fields
by keyword: ``TransformerEncoder(64, 4, 2, dropout=0.0)`` equals
``TransformerEncoder(LayerConfig(64, 4, dropout=0.0), num_layers=2)``); a stack hands the same
config to each of its layers.

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

from dataclasses import dataclass, fields, replace
from typing import Any, Callable, Mapping

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
    "LayerConfig",
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


@dataclass(frozen=True)
class LayerConfig:
    """What a Transformer layer is built from, shared by the encoder and decoder layers and the
    stacks, and checked once here (each bad value raises one line naming it).

    ``dim_feedforward``: hidden width of the FFN (``None``: ``4 * d_model``). ``dropout``: on the
    residual branches and inside the FFN; ``attn_dropout`` (``None``: ``dropout``) on the attention
    probabilities. ``activation``: ``"gelu"`` (exact erf GELU) or ``"relu"``. ``norm_first``: pre-LN
    (else post-LN). ``pattern``, ``window``, ``score``, ``pattern_params``, ``max_len``: the
    self-attention's (:class:`MultiHeadAttention`). ``causal``: ``None`` is the layer's default
    (``False`` for encoders, ``True`` for decoders). ``memory_dim``: a decoder's memory width
    (``None``: ``d_model``); encoders refuse it."""

    d_model: int
    num_heads: int
    dim_feedforward: int | None = None
    dropout: float = 0.1
    activation: str = "gelu"
    norm_first: bool = True
    pattern: str = "full"
    window: int | None = None
    causal: bool | None = None
    attn_dropout: float | None = None
    layer_norm_eps: float = 1e-5
    score: str = "dot"
    pattern_params: Mapping[str, Any] | None = None
    max_len: int | None = None
    memory_dim: int | None = None

    def __post_init__(self) -> None:
        for name in ("d_model", "num_heads"):
            V.check_positive_int(name, getattr(self, name))
        V.check_positive_int("dim_feedforward", self.feedforward)
        V.check_dropout(self.dropout, "dropout")
        if self.attn_dropout is not None:
            V.check_dropout(self.attn_dropout, "attn_dropout")
        V.check_choice("activation", self.activation, ACTIVATIONS)
        if not isinstance(self.layer_norm_eps, (int, float)) or self.layer_norm_eps <= 0:
            V.fail("layer_norm_eps", self.layer_norm_eps, "expected a positive float")
        if self.memory_dim is not None:
            V.check_positive_int("memory_dim", self.memory_dim)

    @property
    def feedforward(self) -> int:
        """The FFN's hidden width: ``dim_feedforward``, default ``4 * d_model``."""
        return 4 * self.d_model if self.dim_feedforward is None else self.dim_feedforward  # type: ignore[return-value]

    @property
    def attention_dropout(self) -> float:
        """Dropout on the attention probabilities: ``attn_dropout``, default ``dropout``."""
        return self.dropout if self.attn_dropout is None else self.attn_dropout

    def self_attention(self, causal: bool) -> MultiHeadAttention:
        """The layer's self-attention; ``causal``: the layer's default when :attr:`causal` is ``None``."""
        return MultiHeadAttention(
            self.d_model, self.num_heads, pattern=self.pattern, window=self.window,
            causal=causal if self.causal is None else self.causal, dropout=self.attention_dropout,
            score=self.score, pattern_params=self.pattern_params, max_len=self.max_len,
        )


_OPTIONS = tuple(f.name for f in fields(LayerConfig))


def _layer_config(d_model: int | LayerConfig, num_heads: int | None = None, **options: Any) -> LayerConfig:
    """The :class:`LayerConfig` of a constructor's arguments: ``d_model`` is one (``options``
    then override its fields) or its first field; an unknown option raises listing the valid ones."""
    for key, val in options.items():
        if key not in _OPTIONS:
            V.fail(key, val, "unknown layer option; valid: " + ", ".join(_OPTIONS))
    if isinstance(d_model, LayerConfig):
        if num_heads is not None:
            V.fail("num_heads", num_heads, "the LayerConfig gives it: pass any other argument by keyword")
        return replace(d_model, **options) if options else d_model
    return LayerConfig(d_model, num_heads, **options)  # type: ignore[arg-type]


def _ff(dim_feedforward: int | None, options: dict[str, Any]) -> dict[str, Any]:
    """``options`` with a positional ``dim_feedforward`` (a layer's third argument) among them."""
    return options if dim_feedforward is None else {**options, "dim_feedforward": dim_feedforward}


class _ResidualLayer(nn.Module):
    """What both layers share: their :class:`LayerConfig`, the feed-forward network, one
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

    def _init_common(self, config: LayerConfig) -> None:
        """Store the layer's :class:`LayerConfig` and what ``forward`` reads of it."""
        self.config = config
        self.d_model, self.norm_first, self.activation = config.d_model, bool(config.norm_first), config.activation

    def _init_blocks(self, blocks: int) -> None:
        """The FFN (``linear1``, ``linear2``, inner ``dropout``), then ``norm1..blocks`` and
        ``dropout1..blocks`` (one per residual block)."""
        cfg = self.config
        self.linear1 = nn.Linear(cfg.d_model, cfg.feedforward)
        self.linear2 = nn.Linear(cfg.feedforward, cfg.d_model)
        for i in range(1, blocks + 1):
            setattr(self, f"norm{i}", nn.LayerNorm(cfg.d_model, eps=cfg.layer_norm_eps))
        self.dropout = nn.Dropout(cfg.dropout)
        for i in range(1, blocks + 1):
            setattr(self, f"dropout{i}", nn.Dropout(cfg.dropout))
        self.activation_fn = ACTIVATIONS[cfg.activation]

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

    Built from a :class:`LayerConfig`, or ``d_model``, ``num_heads`` (which must divide
    ``d_model``) and the config's other fields by keyword (``causal`` default ``False``).

    ``forward(x, *, key_padding_mask=None, edge_index=None, need_weights=False)``: ``x`` is
    ``(B, L, E)`` for sequences or ``(N, E)`` node features with ``edge_index`` for ``pattern="graph"``.
    """

    def __init__(self, d_model: int | LayerConfig, num_heads: int | None = None, dim_feedforward: int | None = None,
                 **options: Any) -> None:  # the first three in torch.nn.TransformerEncoderLayer's order
        super().__init__()
        self._init_common(_layer_config(d_model, num_heads, **_ff(dim_feedforward, options)))
        if self.config.memory_dim is not None:
            V.fail("memory_dim", self.config.memory_dim, "only decoders take memory_dim (the width of their memory)")
        self.self_attn = self.config.self_attention(causal=False)
        self._init_blocks(2)  # blocks: 1 = self-attention, 2 = FFN

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
    (:data:`DECODER_PATTERNS`; :meth:`step` those of :func:`attn_core.multihead.decoding_patterns`);
    cross-attention is always full (every target position sees every real source position).
    Built like :class:`TransformerEncoderLayer` (``causal`` default ``True``); ``memory_dim``
    (default ``d_model``) lets the memory have another width.

    ``forward(x (B, Lt, E), memory (B, Ls, Em), *, tgt_key_padding_mask (B, Lt), memory_key_padding_mask
    (B, Ls), need_weights)`` -> ``out (B, Lt, E)``, or ``(out, cross_weights (B, H, Lt, Ls))`` so tasks
    can plot alignments. :meth:`step` is the incremental (key/value-cached) form for inference.
    """

    norm3: nn.LayerNorm
    dropout3: nn.Dropout

    def __init__(self, d_model: int | LayerConfig, num_heads: int | None = None, dim_feedforward: int | None = None,
                 **options: Any) -> None:  # the first three in torch.nn.TransformerDecoderLayer's order
        super().__init__()
        self._init_common(cfg := _layer_config(d_model, num_heads, **_ff(dim_feedforward, options)))
        check_pattern(cfg.pattern, causal=True)  # a decoder generates left to right
        self.self_attn = cfg.self_attention(causal=True)
        self.multihead_attn = MultiHeadAttention(  # cross-attention (torch's name)
            cfg.d_model, cfg.num_heads, pattern="full", dropout=cfg.attention_dropout, kdim=cfg.memory_dim,
            vdim=cfg.memory_dim,
        )
        self._init_blocks(3)  # blocks: 1 = self-attention, 2 = cross-attention, 3 = FFN

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
        self, layer: Callable[[LayerConfig], nn.Module], config: LayerConfig, num_layers: int | None,
        final_norm: bool | None,
    ) -> None:
        super().__init__()
        V.check_positive_int("num_layers", num_layers)
        self.config = config
        self.layers = nn.ModuleList(layer(config) for _ in range(num_layers))  # type: ignore[arg-type]
        final_norm = config.norm_first if final_norm is None else final_norm
        self.norm = nn.LayerNorm(config.d_model, eps=config.layer_norm_eps) if final_norm else None

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
    """``num_layers`` independent :class:`TransformerEncoderLayer` s built from the same
    :class:`LayerConfig` (given, or ``d_model``, ``num_heads`` and its fields by keyword), then a
    final LayerNorm (``final_norm``, default ``norm_first``: pre-LN stacks need it, post-LN stacks
    already end in one).

    ``forward(x, *, key_padding_mask=None, edge_index=None, need_weights=False)`` -> ``out`` or
    ``(out, [self-attention weights of each layer])``.
    """

    def __init__(
        self, d_model: int | LayerConfig, num_heads: int | None = None, num_layers: int | None = None, *,
        final_norm: bool | None = None, **options: Any,
    ) -> None:
        super().__init__(TransformerEncoderLayer, _layer_config(d_model, num_heads, **options), num_layers, final_norm)

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
    (default ``norm_first``), built like :class:`TransformerEncoder` (``causal`` default ``True``).
    ``need_weights`` returns the list of per-layer cross-attention
    weights ``(B, H, Lt, Ls)``.

    Incremental decoding (inference)::

        cache = decoder.init_cache(memory)                      # cross K/V once, empty self K/V
        for t in range(T):
            out, cache = decoder.step(x[:, t:t + 1], cache, memory_key_padding_mask=mask)

    gives ``out == decoder(x, memory, memory_key_padding_mask=mask)[:, t:t + 1]`` at every ``t``.
    """

    def __init__(
        self, d_model: int | LayerConfig, num_heads: int | None = None, num_layers: int | None = None, *,
        final_norm: bool | None = None, **options: Any,
    ) -> None:
        super().__init__(TransformerDecoderLayer, _layer_config(d_model, num_heads, **options), num_layers, final_norm)

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
