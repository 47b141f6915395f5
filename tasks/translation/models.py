"""Encoder-decoder translation networks, registered by name with their family.

Every network implements the decoder-step interface of :mod:`tasks.translation.search`
(``encode``, ``decode_step``) plus

* ``forward(src (B, S), src_mask (B, S), tgt_in (B, T)) -> logits (B, T, V)`` (teacher forcing;
  ``tgt_in`` starts with BOS; causality makes target padding harmless: padded positions come last);
* ``alignments(src, src_mask, tgt_in) -> (B, H, T, S) | None``: the cross-attention weights used
  for the report's heatmaps (``None`` for a model without attention).

All attention comes from :mod:`attn_core`. The vocabulary is joint (one sentencepiece model for
both languages), so every model shares one embedding table between source and target.

* ``transformer`` (attention): :class:`TransformerSeq2Seq`, the encoder-decoder of Vaswani et al.
  (2017) on :class:`attn_core.TransformerEncoder` / :class:`attn_core.TransformerDecoder`
  (multi-head self-attention, causal decoder self-attention, cross-attention, sinusoidal
  positions), pre-LN, source/target/output embeddings tied. ``decode_step`` is incremental: it
  decodes only the newest token against a key/value cache kept in the search state. ``pattern``
  (with ``pattern_params``) is the self-attention of encoder and decoder: any registered sequence
  pattern that can be causal (the decoder) and takes key padding (the padded source);
  cross-attention stays full (:class:`attn_core.TransformerDecoderLayer` fixes it).
* ``rnn_bahdanau``, ``rnn_luong_dot``, ``rnn_luong_general`` (rnn) and ``rnn_noattn`` (other):
  :class:`RNNSeq2Seq`, a bidirectional GRU encoder and a GRU decoder with Bahdanau additive
  attention (the previous decoder state queries the source before the GRU step), Luong attention
  (the new state queries it after the step, with input feeding; ``dot`` or ``general`` score), or
  none: the bottleneck ablation, where the decoder sees only the final encoder states (as its
  initial state and as a fixed context at every step, as in Cho et al. 2014); parameter ``score``.
* ``convs2s`` (cnn): :class:`ConvS2S` (Gehring et al. 2017), convolutional encoder and causal
  convolutional decoder with gated linear units and dot-product attention in every decoder layer.
"""

from __future__ import annotations

import math
from typing import Any, Mapping

import torch
import torch.nn.functional as F
from torch import Tensor, nn

import attn_core
from tasks.common.patterns import PATTERN_PARAMS, PatternCheck, model_pattern, register_variants
from tasks.common.registry import Bounds, register_model, register_preset
from tasks.common.rnn import run_padded
from tasks.translation.search import State

__all__ = ["TransformerSeq2Seq", "RNNSeq2Seq", "ConvS2S", "RNN_ATTENTIONS", "NEEDS", "transformer", "rnn_bahdanau",
           "convs2s", "check_vocab", "vocab_sizes", "shared_embedding"]

#: What the Transformer needs of its self-attention pattern: causal (the decoder generates left to
#: right) and key padding (the encoder reads padded source batches).
NEEDS = {"causal": True, "padding": True}

_SQRT_HALF = math.sqrt(0.5)


def check_vocab(vocab_size: int) -> None:
    """Every translation network's check of its (joint) vocabulary size."""
    if isinstance(vocab_size, bool) or not isinstance(vocab_size, int) or vocab_size < 4:
        raise ValueError(f"vocab_size={vocab_size!r}; must be an int >= 4 (pad, unk, bos, eos + words)")


# --------------------------------------------------------------------------- Transformer
class TransformerSeq2Seq(nn.Module):
    """Transformer encoder-decoder.

    With ``kv_cache=True`` (default), ``encode`` projects the encoder output into every decoder
    layer's cross-attention keys/values once and ``decode_step`` runs the decoder on the newest
    token only (:meth:`attn_core.TransformerDecoder.step`), appending its self-attention
    keys/values (or updating a recurrent pattern's state) in the state's cache, instead of re-running every layer on the whole prefix.
    ``kv_cache=False`` recomputes the decoder on the whole prefix at every step: the reference
    the cached path is tested against. Set it before ``encode`` (the two states differ). A
    pattern the cache does not support (see :func:`attn_core.multihead.decoding_patterns`: e.g.
    ``nystrom``) always decodes that way.

    ``pattern``/``pattern_params``: the self-attention pattern of encoder and decoder, one that
    supports causal attention and key padding (:data:`NEEDS`); ``max_positions`` also sizes
    patterns sized by the length (``"linformer"`` is non-causal, so refused anyway).
    """

    def __init__(
        self,
        vocab_size: int,
        *,
        d_model: int = 256,
        num_heads: int = 4,
        enc_layers: int = 3,
        dec_layers: int = 3,
        dim_feedforward: int = 1024,
        dropout: float = 0.1,
        attn_dropout: float = 0.1,
        activation: str = "relu",
        norm_first: bool = True,
        max_positions: int = 1024,
        pad_id: int = 0,
        kv_cache: bool = True,
        pattern: str = "full",
        pattern_params: dict[str, Any] | None = None,
    ) -> None:
        super().__init__()
        check_vocab(vocab_size)
        params = model_pattern(pattern, pattern_params, **NEEDS)
        self.pattern = pattern
        self.d_model, self.pad_id = d_model, pad_id
        self.kv_cache = bool(kv_cache) and pattern in attn_core.multihead.decoding_patterns()
        self.embed = shared_embedding(vocab_size, d_model, pad_id)
        self.pos = attn_core.SinusoidalPositionalEncoding(d_model, max_positions, dropout)
        common = dict(dim_feedforward=dim_feedforward, dropout=dropout, attn_dropout=attn_dropout,
                      activation=activation, norm_first=norm_first, pattern=pattern, pattern_params=params,
                      max_len=max_positions)
        self.encoder = attn_core.TransformerEncoder(d_model, num_heads, enc_layers, **common)
        self.decoder = attn_core.TransformerDecoder(d_model, num_heads, dec_layers, causal=True, **common)
        self.out = nn.Linear(d_model, vocab_size, bias=False)
        self.out.weight = self.embed.weight  # tied: one table for source, target and output

    def _embed(self, tokens: Tensor, offset: int = 0) -> Tensor:
        """Scaled token embeddings plus the encodings of positions ``offset, offset + 1, ...``."""
        return self.pos(self.embed(tokens) * math.sqrt(self.d_model), offset=offset)  # (B, L, E)

    def _memory(self, src: Tensor, src_mask: Tensor) -> Tensor:
        return self.encoder(self._embed(src), key_padding_mask=src_mask)  # (B, S, E)

    def encode(self, src: Tensor, src_mask: Tensor) -> State:
        """``{"mask", "kv.*"}`` (the decoder's key/value cache, cross-attention projected once)
        with ``kv_cache``, else ``{"memory", "mask"}``; every tensor batch-first."""
        memory = self._memory(src, src_mask)
        if self.kv_cache:
            return {"mask": src_mask, **self.decoder.init_cache(memory)}
        return {"memory": memory, "mask": src_mask}

    def _decode(self, memory: Tensor, mask: Tensor, tgt_in: Tensor, need_weights: bool = False):
        res = self.decoder(self._embed(tgt_in), memory, memory_key_padding_mask=mask, need_weights=need_weights)
        h, w = res if need_weights else (res, None)
        return self.out(h), w  # (B, T, V), [ (B, H, T, S) per layer ]

    def forward(self, src: Tensor, src_mask: Tensor, tgt_in: Tensor) -> Tensor:
        return self._decode(self._memory(src, src_mask), src_mask, tgt_in)[0]

    def decode_step(self, state: State, prefix: Tensor) -> tuple[Tensor, State]:
        """Logits ``(B, V)`` of the token after ``prefix (B, t + 1)``. Cached: only
        ``prefix[:, -1]`` is decoded, at position ``t``, and its keys/values join the state."""
        if not self.kv_cache:
            return self._decode(state["memory"], state["mask"], prefix)[0][:, -1], state
        t = prefix.shape[1] - 1
        if self.decoder.cache_length(state) != t:
            raise ValueError(
                f"decode_step: the key/value cache holds {self.decoder.cache_length(state)} positions but the "
                f"prefix has {t + 1} tokens; call decode_step once per new token, starting from encode()"
            )
        x = self._embed(prefix[:, -1:], offset=t)  # (B, 1, E) at position t
        h, state = self.decoder.step(x, state, memory_key_padding_mask=state["mask"])
        return self.out(h[:, 0]), state  # (B, V)

    def alignments(self, src: Tensor, src_mask: Tensor, tgt_in: Tensor) -> Tensor:
        """The last decoder layer's cross-attention, per head ``(B, H, T, S)``."""
        return self._decode(self._memory(src, src_mask), src_mask, tgt_in, need_weights=True)[1][-1]


# --------------------------------------------------------------------------- RNNs
RNN_ATTENTIONS = ("bahdanau", "luong_dot", "luong_general", "none")


class RNNSeq2Seq(nn.Module):
    """Bidirectional GRU encoder, GRU decoder, one of :data:`RNN_ATTENTIONS`.

    * ``bahdanau``: ``c_t = attn(s_{t-1}, enc)``; ``s_t = GRU([e(y_{t-1}); c_t], s_{t-1})``;
      ``o_t = tanh(W [s_t; c_t; e(y_{t-1})])``.
    * ``none``: the same with ``c_t = c`` the final encoder states (fixed; the bottleneck).
    * ``luong_*``: ``s_t = GRU([e(y_{t-1}); o_{t-1}], s_{t-1})`` (input feeding);
      ``c_t = attn(s_t, enc)``; ``o_t = tanh(W [c_t; s_t])``. ``dot`` scores against the encoder
      states projected to the decoder width, ``general`` is ``s^T W h``.

    The decoder's initial state is ``tanh(W [h_fwd; h_bwd])`` of the encoder's last layer; logits
    are ``W_out dropout(o_t)``. Padding is packed away in the encoder, so it never leaks.
    """

    def __init__(
        self,
        vocab_size: int,
        *,
        attention: str = "bahdanau",
        emb_dim: int = 256,
        hidden: int = 256,
        enc_layers: int = 1,
        dec_layers: int = 1,
        dropout: float = 0.2,
        pad_id: int = 0,
    ) -> None:
        super().__init__()
        check_vocab(vocab_size)
        if attention not in RNN_ATTENTIONS:
            raise ValueError(f"attention={attention!r}; valid: {', '.join(RNN_ATTENTIONS)}")
        self.kind, self.hidden, self.dec_layers = attention, hidden, dec_layers
        self.embed = nn.Embedding(vocab_size, emb_dim, padding_idx=pad_id)
        self.drop = nn.Dropout(dropout)
        self.encoder = nn.GRU(emb_dim, hidden, enc_layers, batch_first=True, bidirectional=True,
                              dropout=dropout if enc_layers > 1 else 0.0)
        self.bridge = nn.Linear(2 * hidden, hidden)
        enc_dim = 2 * hidden
        luong = attention.startswith("luong")
        feed = hidden if luong else enc_dim  # what is concatenated to the input embedding
        self.decoder = nn.GRU(emb_dim + feed, hidden, dec_layers, batch_first=True,
                              dropout=dropout if dec_layers > 1 else 0.0)
        self.key_proj: nn.Linear | None = None
        self.attn: nn.Module | None = None
        if attention == "bahdanau":
            self.attn = attn_core.AdditiveAttention(hidden, enc_dim, hidden_dim=hidden)
            self.combine = nn.Linear(hidden + enc_dim + emb_dim, hidden)
        elif attention == "none":
            self.combine = nn.Linear(hidden + enc_dim + emb_dim, hidden)
        elif attention == "luong_dot":
            self.key_proj = nn.Linear(enc_dim, hidden, bias=False)  # dot needs equal widths
            self.attn = attn_core.LuongAttention(hidden, hidden, score="dot")
            self.combine = nn.Linear(hidden + enc_dim, hidden)
        else:  # luong_general
            self.attn = attn_core.LuongAttention(hidden, enc_dim, score="general")
            self.combine = nn.Linear(hidden + enc_dim, hidden)
        self.out = nn.Linear(hidden, vocab_size)

    # -- encoder -----------------------------------------------------------------------
    def encode(self, src: Tensor, src_mask: Tensor) -> State:
        b, s = src.shape
        emb = self.drop(self.embed(src))  # (B, S, E)
        real = src_mask.clone()
        real[:, 0] = True  # an empty source still runs one step (as packing at length 1 did)
        # enc (B, S, 2H) as packed, final (B, 2H): last layer, forward and backward; no host-device sync
        enc, final = run_padded(self.encoder, emb, real)
        h0 = torch.tanh(self.bridge(final))[:, None].expand(b, self.dec_layers, self.hidden).contiguous()
        state: State = {"h": h0, "mask": src_mask}  # h: (B, layers, H), batch-first for search
        if self.kind == "none":
            state["ctx"] = final
        else:
            state["values"] = enc
            if self.key_proj is not None:
                state["keys"] = self.key_proj(enc)  # (B, S, H)
            elif self.kind == "bahdanau":
                assert isinstance(self.attn, attn_core.AdditiveAttention)
                state["proj_keys"] = self.attn.precompute_keys(enc)  # (B, S, H)
        if self.kind.startswith("luong"):
            state["feed"] = src.new_zeros(b, self.hidden, dtype=enc.dtype)
        return state

    def _attend(self, query: Tensor, state: State) -> tuple[Tensor, Tensor]:
        values, mask = state["values"], state["mask"]
        if self.kind == "bahdanau":
            return self.attn(query, values, values, mask, projected_keys=state["proj_keys"])  # type: ignore[misc]
        keys = state.get("keys", values)
        return self.attn(query, keys, values, mask)  # type: ignore[misc]  # (B, Dv), (B, S)

    # -- one decoder step --------------------------------------------------------------
    def _step(self, tok: Tensor, state: State) -> tuple[Tensor, State, Tensor | None]:
        """``tok (B,)`` -> ``(logits (B, V), new state, attention weights (B, S) | None)``."""
        e = self.drop(self.embed(tok))  # (B, E)
        h = state["h"].transpose(0, 1).contiguous()  # (layers, B, H)
        w = None
        if self.kind.startswith("luong"):
            out, h = self.decoder(torch.cat([e, state["feed"]], -1)[:, None], h)
            s = out[:, 0]  # (B, H)
            ctx, w = self._attend(s, state)
            o = torch.tanh(self.combine(torch.cat([ctx, s], -1)))  # (B, H)
            new = {**state, "h": h.transpose(0, 1), "feed": o}
        else:
            if self.kind == "none":
                ctx = state["ctx"]
            else:
                ctx, w = self._attend(h[-1], state)  # query: the previous top-layer state
            out, h = self.decoder(torch.cat([e, ctx], -1)[:, None], h)
            s = out[:, 0]
            o = torch.tanh(self.combine(torch.cat([s, ctx, e], -1)))
            new = {**state, "h": h.transpose(0, 1)}
        return self.out(self.drop(o)), new, w

    def _teacher_forced(self, src: Tensor, src_mask: Tensor, tgt_in: Tensor) -> tuple[Tensor, Tensor | None]:
        state = self.encode(src, src_mask)
        logits, weights = [], []
        for t in range(tgt_in.shape[1]):
            lg, state, w = self._step(tgt_in[:, t], state)
            logits.append(lg)
            if w is not None:
                weights.append(w)
        return torch.stack(logits, 1), (torch.stack(weights, 1) if weights else None)  # (B, T, V), (B, T, S)

    def forward(self, src: Tensor, src_mask: Tensor, tgt_in: Tensor) -> Tensor:
        return self._teacher_forced(src, src_mask, tgt_in)[0]

    def decode_step(self, state: State, prefix: Tensor) -> tuple[Tensor, State]:
        logits, state, _ = self._step(prefix[:, -1], state)
        return logits, state

    def alignments(self, src: Tensor, src_mask: Tensor, tgt_in: Tensor) -> Tensor | None:
        """The attention weights ``(B, 1, T, S)`` (one head), ``None`` without attention."""
        w = self._teacher_forced(src, src_mask, tgt_in)[1]
        return None if w is None else w[:, None]


# --------------------------------------------------------------------------- ConvS2S
class ConvS2S(nn.Module):
    """Convolutional sequence to sequence (Gehring et al. 2017).

    Encoder: token + learned position embeddings, ``enc_layers`` residual GLU convolutions
    (``"same"`` padding; padded positions are zeroed before every convolution so they never leak),
    projected back to ``emb_dim``: keys ``z``, values ``(z + e) * sqrt(.5)``. Decoder: causal GLU
    convolutions (left padding ``kernel_size - 1``); after each, single-head dot-product attention
    (:func:`attn_core.attention`, unscaled as in the paper) with the query
    ``(W h + g) * sqrt(.5)`` (``g``: the target embedding), whose context is added residually.

    With ``incremental=True`` (default), ``decode_step`` runs the decoder on the newest token
    only: each causal convolution needs just its layer's last ``kernel_size - 1`` inputs, which
    the state keeps (``"conv.{layer}" (B, k - 1, H)``, zeros before the first token, as the left
    padding of the full pass). ``incremental=False`` recomputes the decoder on the whole prefix at
    every step: the reference the incremental path is tested against.
    """

    def __init__(
        self,
        vocab_size: int,
        *,
        emb_dim: int = 256,
        hidden: int = 256,
        enc_layers: int = 4,
        dec_layers: int = 4,
        kernel_size: int = 3,
        dropout: float = 0.2,
        max_positions: int = 1024,
        pad_id: int = 0,
        incremental: bool = True,
    ) -> None:
        super().__init__()
        check_vocab(vocab_size)
        if kernel_size < 1 or kernel_size % 2 == 0:
            raise ValueError(f"kernel_size={kernel_size}; must be odd and >= 1")
        self.k, self.incremental = kernel_size, bool(incremental)
        self.embed = shared_embedding(vocab_size, emb_dim, pad_id, std=0.1)
        self.pos = attn_core.LearnedPositionalEmbedding(emb_dim, max_positions, dropout)
        self.drop = nn.Dropout(dropout)
        self.enc_in, self.enc_out = nn.Linear(emb_dim, hidden), nn.Linear(hidden, emb_dim)
        self.enc_convs = nn.ModuleList(nn.Conv1d(hidden, 2 * hidden, kernel_size, padding=kernel_size // 2)
                                       for _ in range(enc_layers))
        self.dec_in, self.dec_out = nn.Linear(emb_dim, hidden), nn.Linear(hidden, emb_dim)
        self.dec_convs = nn.ModuleList(nn.Conv1d(hidden, 2 * hidden, kernel_size) for _ in range(dec_layers))
        self.att_in = nn.ModuleList(nn.Linear(hidden, emb_dim) for _ in range(dec_layers))
        self.att_out = nn.ModuleList(nn.Linear(emb_dim, hidden) for _ in range(dec_layers))
        self.out = nn.Linear(emb_dim, vocab_size)

    def encode(self, src: Tensor, src_mask: Tensor) -> State:
        keep = src_mask[..., None]  # (B, S, 1)
        e = self.pos(self.embed(src))  # (B, S, E)
        h = self.enc_in(e)  # (B, S, H)
        for conv in self.enc_convs:
            x = self.drop(h.masked_fill(~keep, 0.0))
            h = (F.glu(conv(x.transpose(1, 2)), dim=1).transpose(1, 2) + h) * _SQRT_HALF
        z = self.enc_out(h.masked_fill(~keep, 0.0))  # (B, S, E)
        state = {"keys": z, "values": (z + e) * _SQRT_HALF, "mask": src_mask}
        if self.incremental:  # every decoder layer's last k - 1 inputs, and how many tokens were decoded
            b, hid = src.shape[0], self.dec_in.out_features
            for i in range(len(self.dec_convs)):
                state[f"conv.{i}"] = z.new_zeros(b, self.k - 1, hid)  # (B, k - 1, H)
            state["steps"] = torch.zeros(b, dtype=torch.long, device=src.device)  # (B,)
        return state

    def _decode(self, state: State, tgt_in: Tensor, need_weights: bool = False, offset: int | None = None):
        """``(logits (B, T, V), last layer's attention (B, 1, T, S) or None, windows)``.

        ``offset=None``: the whole target from position 0 (zeros before it). ``offset=t``:
        ``tgt_in`` holds the tokens from position ``t`` on, and each layer's previous
        ``k - 1`` inputs come from ``state["conv.{layer}"]``. ``windows`` holds each layer's last
        ``k - 1`` inputs after this call, for the next step."""
        g = self.pos(self.embed(tgt_in), offset=offset or 0)  # (B, T, E)
        h = self.dec_in(g)  # (B, T, H)
        keys, values = state["keys"][:, None], state["values"][:, None]  # (B, 1, S, E)
        weights, windows = None, {}
        for i, (conv, a_in, a_out) in enumerate(zip(self.dec_convs, self.att_in, self.att_out)):
            past = h.new_zeros(h.shape[0], self.k - 1, h.shape[2]) if offset is None else state[f"conv.{i}"]
            x = torch.cat([past, self.drop(h)], dim=1)  # (B, k - 1 + T, H): causal, left context only
            windows[f"conv.{i}"] = x[:, x.shape[1] - (self.k - 1):]  # (B, k - 1, H)
            c = F.glu(conv(x.transpose(1, 2)), dim=1).transpose(1, 2)  # (B, T, H)
            q = ((a_in(c) + g) * _SQRT_HALF)[:, None]  # (B, 1, T, E)
            res = attn_core.attention(q, keys, values, key_padding_mask=state["mask"], scale=1.0,
                                      need_weights=need_weights)
            ctx, weights = res if need_weights else (res, None)
            c = (c + a_out(ctx[:, 0])) * _SQRT_HALF
            h = (c + h) * _SQRT_HALF
        return self.out(self.drop(self.dec_out(h))), weights, windows  # (B, T, V), (B, 1, T, S), {...}

    def forward(self, src: Tensor, src_mask: Tensor, tgt_in: Tensor) -> Tensor:
        return self._decode(self.encode(src, src_mask), tgt_in)[0]

    def decode_step(self, state: State, prefix: Tensor) -> tuple[Tensor, State]:
        """Logits ``(B, V)`` of the token after ``prefix (B, t + 1)``. Incremental: only
        ``prefix[:, -1]`` is decoded, at position ``t``, and the convolution windows move on."""
        if not self.incremental:
            return self._decode(state, prefix)[0][:, -1], state
        t = prefix.shape[1] - 1
        if bool((state["steps"] != t).any()):
            raise ValueError(
                f"decode_step: the state has decoded {state['steps'].tolist()} tokens but the prefix has {t + 1}; "
                "call decode_step once per new token, starting from encode()"
            )
        logits, _, windows = self._decode(state, prefix[:, -1:], offset=t)
        return logits[:, -1], {**state, **windows, "steps": state["steps"] + 1}

    def alignments(self, src: Tensor, src_mask: Tensor, tgt_in: Tensor) -> Tensor:
        """The last decoder layer's attention ``(B, 1, T, S)``."""
        return self._decode(self.encode(src, src_mask), tgt_in, need_weights=True)[1]


# --------------------------------------------------------------------------- registry
def shared_embedding(vocab_size: int, dim: int, pad_id: int, std: float | None = None) -> nn.Embedding:
    """The joint source/target/output table: normal init (``std`` default ``dim ** -0.5``, so tied
    output logits start O(1)) and a zero padding row."""
    embed = nn.Embedding(vocab_size, dim, padding_idx=pad_id)
    nn.init.normal_(embed.weight, std=dim**-0.5 if std is None else std)
    with torch.no_grad():
        embed.weight[pad_id].zero_()
    return embed


def vocab_sizes(data_info: Mapping[str, Any]) -> dict[str, int]:
    """A builder's ``vocab_size`` and ``pad_id`` from the data module's info."""
    return {"vocab_size": int(data_info["vocab_size"]), "pad_id": int(data_info.get("pad_id", 0))}


# pattern and pattern_params came after the first records: left out of cell ids at their defaults
@register_model(family="attention", pattern="full", check=PatternCheck(**NEEDS),
                omit_when_default=("pattern", PATTERN_PARAMS))
def transformer(
    data_info: Mapping[str, Any], *, d_model: int = 256, num_heads: int = 4, enc_layers: int = 3, dec_layers: int = 3,
    dim_feedforward: int = 1024, dropout: float = 0.1, attn_dropout: float = 0.1, activation: str = "relu",
    norm_first: bool = True, pattern: str = "full", pattern_params: dict[str, Any] | None = None,
) -> TransformerSeq2Seq:
    """Transformer encoder-decoder (pre-LN, sinusoidal positions, tied embeddings)"""
    return TransformerSeq2Seq(**vocab_sizes(data_info), d_model=d_model, num_heads=num_heads, enc_layers=enc_layers,
                              dec_layers=dec_layers, dim_feedforward=dim_feedforward, dropout=dropout,
                              attn_dropout=attn_dropout, activation=activation, norm_first=norm_first,
                              pattern=pattern, pattern_params=pattern_params)


#: ``score``: the RNN decoder's attention score (not a :mod:`attn_core` pattern, not the graph
#: score), hence its own choices
@register_model(family="rnn", renamed={"emb_dim": "embedding_dim", "hidden": "hidden_size", "attention": "score"},
                bounds={"score": Bounds(choices=RNN_ATTENTIONS)})
def rnn_bahdanau(data_info: Mapping[str, Any], *, embedding_dim: int = 256, hidden_size: int = 256,
                 enc_layers: int = 1, dec_layers: int = 1, dropout: float = 0.2, score: str = "bahdanau") -> RNNSeq2Seq:
    """BiGRU encoder, GRU decoder, Bahdanau additive attention"""
    return RNNSeq2Seq(**vocab_sizes(data_info), emb_dim=embedding_dim, hidden=hidden_size, enc_layers=enc_layers,
                      dec_layers=dec_layers, dropout=dropout, attention=score)


register_preset("rnn_luong_dot", rnn_bahdanau, {"score": "luong_dot"},
                description="BiGRU encoder, GRU decoder, Luong dot attention (input feeding)")
register_preset("rnn_luong_general", rnn_bahdanau, {"score": "luong_general"},
                description="BiGRU encoder, GRU decoder, Luong general attention (input feeding)")
register_preset("rnn_noattn", rnn_bahdanau, {"score": "none"}, family="other",
                description="BiGRU encoder, GRU decoder without attention: the final encoder state only "
                            "(bottleneck ablation)")


@register_model(family="cnn", renamed={"emb_dim": "embedding_dim", "hidden": "d_model"})
def convs2s(data_info: Mapping[str, Any], *, embedding_dim: int = 256, d_model: int = 256, enc_layers: int = 4,
            dec_layers: int = 4, kernel_size: int = 3, dropout: float = 0.2) -> ConvS2S:
    """ConvS2S: GLU convolutions, attention in every decoder layer"""
    return ConvS2S(**vocab_sizes(data_info), emb_dim=embedding_dim, hidden=d_model, enc_layers=enc_layers, dec_layers=dec_layers,
                   kernel_size=kernel_size, dropout=dropout)


#: ``transformer_<pattern>`` presets of the efficient patterns that can be causal (not in
#: ``models: all``); local_global: 8 pieces either side and the first source/target piece global.
register_variants(transformer, allowed=lambda p: attn_core.get_pattern(p).supports(**NEEDS),
                  own={"local_global": {"window": 8, "global_tokens": 1}},
                  description="Transformer encoder-decoder with {pattern} self-attention")
