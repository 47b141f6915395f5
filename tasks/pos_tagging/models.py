"""Taggers: one shared input layer, one context encoder per family, one linear classifier.

:class:`Tagger` = :class:`TokenEmbedder` (word embedding over the train vocabulary + a
character CNN over each distinct form, for unknown and rare words) -> a context encoder ->
``Linear`` to the tags. Only the encoder differs between models, so the comparison is about
context modelling, not features. Every network maps the batch dict of
:class:`tasks.pos_tagging.data.TaggingDataModule` to logits ``(B, L, num_tags)``.

* ``transformer`` / ``transformer_truncated`` (attention): :class:`TransformerContext`, an
  :class:`attn_core.TransformerEncoder` (pre-LN) with sinusoidal positions, full attention or
  truncated attention (each word sees ``window`` words either side); ``pattern`` may be any
  registered sequence pattern that takes key padding, with its ``pattern_params``.
* ``bilstm`` (rnn): :class:`LSTMContext`, a packed bidirectional LSTM.
* ``cnn`` (cnn): :class:`ConvContext`, residual 1-D convolutions with dilations 1, 2, 4, ...
* ``mlp`` (other): :class:`NoContext`, a per-token MLP: the no-context floor.
"""

from __future__ import annotations

from typing import Any, Mapping

import torch
import torch.nn.functional as F
from torch import Tensor, nn

import attn_core
from tasks.common.patterns import PATTERN_PARAMS, PatternCheck, model_pattern, register_variants
from tasks.common.registry import register_model, register_preset
from tasks.common.rnn import run_padded

__all__ = ["TokenEmbedder", "TransformerContext", "LSTMContext", "ConvContext", "NoContext", "Tagger",
           "transformer", "bilstm", "cnn", "mlp"]


class TokenEmbedder(nn.Module):
    """Word embedding ``(B, L, word_dim)`` concatenated with a char-CNN vector ``(B, L, char_out)``.

    The char CNN embeds the characters of each distinct form of the batch (``chars (T, W)``,
    with begin/end markers), convolves (kernel 3) and max-pools over the real characters; the
    result is gathered back to the words through ``types (B, L)``."""

    def __init__(self, num_words: int, num_chars: int, *, word_dim: int = 100, char_dim: int = 32,
                 char_out: int = 64, dropout: float = 0.3) -> None:
        super().__init__()
        self.words = nn.Embedding(num_words, word_dim, padding_idx=0)
        self.chars = nn.Embedding(num_chars, char_dim, padding_idx=0)
        self.conv = nn.Conv1d(char_dim, char_out, 3, padding=1)
        self.drop = nn.Dropout(dropout)
        self.out_dim = word_dim + char_out

    def forward(self, batch: dict[str, Tensor]) -> Tensor:
        chars = batch["chars"]  # (T, W)
        c = self.conv(self.chars(chars).transpose(1, 2))  # (T, C, W)
        c = c.masked_fill((chars == 0)[:, None, :], float("-inf")).amax(-1)  # (T, C)
        c = torch.tanh(c)[batch["types"]]  # (B, L, C)
        return self.drop(torch.cat([self.words(batch["words"]), c], -1))  # (B, L, D)


#: The longest sentence (words) the positions and length-sized patterns (``linformer``) cover.
MAX_LEN = 2048


class TransformerContext(nn.Module):
    """Linear to ``d_model``, sinusoidal positions, ``num_layers`` pre-LN encoder layers from
    :mod:`attn_core` with ``pattern`` (any registered sequence pattern that takes key padding:
    "full", "truncated" with ``window``, "performer", ...) and its ``pattern_params``; padding is
    the ``key_padding_mask`` (True = real word), so it never enters attention."""

    def __init__(self, d_in: int, *, d_model: int = 256, num_heads: int = 8, num_layers: int = 4,
                 dim_feedforward: int = 512, dropout: float = 0.2, pattern: str = "full", window: int | None = None,
                 pattern_params: dict[str, Any] | None = None) -> None:
        super().__init__()
        params = model_pattern(pattern, pattern_params, window=window, padding=True)
        self.proj = nn.Linear(d_in, d_model)
        self.pos = attn_core.SinusoidalPositionalEncoding(d_model, max_len=MAX_LEN)
        self.encoder = attn_core.TransformerEncoder(d_model, num_heads, num_layers, dim_feedforward=dim_feedforward,
                                                    dropout=dropout, pattern=pattern, pattern_params=params,
                                                    max_len=MAX_LEN)
        self.out_dim = d_model

    def forward(self, x: Tensor, mask: Tensor, need_weights: bool = False):
        h = self.pos(self.proj(x))  # (B, L, d_model)
        return self.encoder(h, key_padding_mask=mask, need_weights=need_weights)


class LSTMContext(nn.Module):
    """A bidirectional LSTM over the real words only (padding is never read; :func:`run_padded`)."""

    def __init__(self, d_in: int, *, hidden: int = 200, num_layers: int = 2, dropout: float = 0.3) -> None:
        super().__init__()
        self.lstm = nn.LSTM(d_in, hidden, num_layers, batch_first=True, bidirectional=True,
                            dropout=dropout if num_layers > 1 else 0.0)
        self.drop = nn.Dropout(dropout)
        self.out_dim = 2 * hidden

    def forward(self, x: Tensor, mask: Tensor) -> Tensor:
        out, _ = run_padded(self.lstm, x, mask)  # (B, L, 2H), as packed (no host-device sync)
        return self.drop(out)


class ConvContext(nn.Module):
    """``num_layers`` residual blocks ``x + drop(GELU(conv(LN(x) * mask)))``, dilation
    ``dilation_base ** i`` (1: plain stacked convolutions); padding positions are zeroed
    before every convolution, so they never leak into real words."""

    def __init__(self, d_in: int, *, channels: int = 256, num_layers: int = 4, kernel: int = 3,
                 dilation_base: int = 2, dropout: float = 0.2) -> None:
        super().__init__()
        if kernel % 2 == 0:
            raise ValueError(f"kernel={kernel}; must be odd (centred convolution)")
        self.proj = nn.Linear(d_in, channels)
        dil = [dilation_base ** i for i in range(num_layers)]
        self.convs = nn.ModuleList(nn.Conv1d(channels, channels, kernel, padding=d * (kernel // 2), dilation=d)
                                   for d in dil)
        self.norms = nn.ModuleList(nn.LayerNorm(channels) for _ in dil)
        self.drop = nn.Dropout(dropout)
        self.out_dim = channels

    def forward(self, x: Tensor, mask: Tensor) -> Tensor:
        m = mask[..., None].to(x.dtype)  # (B, L, 1)
        h = self.proj(x)  # (B, L, C)
        for conv, norm in zip(self.convs, self.norms):
            z = conv((norm(h) * m).transpose(1, 2)).transpose(1, 2)  # (B, L, C)
            h = h + self.drop(F.gelu(z))
        return h * m


class NoContext(nn.Module):
    """A per-token MLP: sees one word at a time (the floor every context model must beat)."""

    def __init__(self, d_in: int, *, hidden: int = 256, num_layers: int = 2, dropout: float = 0.2) -> None:
        super().__init__()
        mods: list[nn.Module] = []
        d = d_in
        for _ in range(num_layers):
            mods += [nn.Linear(d, hidden), nn.GELU(), nn.Dropout(dropout)]
            d = hidden
        self.mlp = nn.Sequential(*mods)
        self.out_dim = d

    def forward(self, x: Tensor, mask: Tensor) -> Tensor:
        return self.mlp(x)


_EMBED_KEYS = ("word_dim", "char_dim", "char_out", "emb_dropout")


class Tagger(nn.Module):
    """Shared input layer -> ``encoder`` class (built with the remaining params) -> tags."""

    def __init__(self, num_words: int, num_chars: int, num_tags: int, encoder: type[nn.Module], **params: Any) -> None:
        super().__init__()
        emb = {k: params.pop(k) for k in _EMBED_KEYS if k in params}
        if "emb_dropout" in emb:
            emb["dropout"] = emb.pop("emb_dropout")
        self.embed = TokenEmbedder(num_words, num_chars, **emb)
        self.encoder = encoder(self.embed.out_dim, **params)
        self.out = nn.Linear(self.encoder.out_dim, num_tags)

    def forward(self, batch: dict[str, Tensor]) -> Tensor:
        """batch dict -> logits ``(B, L, num_tags)``."""
        return self.out(self.encoder(self.embed(batch), batch["mask"]))

    def attention_weights(self, batch: dict[str, Tensor]) -> list[Tensor]:
        """Per-layer attention ``(B, H, L, L)`` of a Transformer tagger (for inspection)."""
        if not isinstance(self.encoder, TransformerContext):
            raise TypeError(f"{type(self.encoder).__name__} has no attention weights")
        return self.encoder(self.embed(batch), batch["mask"], need_weights=True)[1]


def _tagger(data_info: Mapping[str, Any], encoder: type[nn.Module], **params: Any) -> Tagger:
    sizes = int(data_info["num_words"]), int(data_info["num_chars"]), int(data_info["num_tags"])
    return Tagger(*sizes, encoder, **params)


#: the names these parameters had before they took torch.nn's (as translation, speech and vision):
#: still accepted with a deprecation notice, and what cell ids hash (tasks/common/params.py)
_RENAMED = {"heads": "num_heads", "layers": "num_layers", "ff": "dim_feedforward"}
_RENAMED_LAYERS = {"layers": "num_layers"}
_RENAMED_WIDTH = {**_RENAMED_LAYERS, "hidden": "d_model"}


@register_model(family="attention", pattern="full", check=PatternCheck(padding=True),
                omit_when_default=(PATTERN_PARAMS,), renamed=_RENAMED)
def transformer(
    data_info: Mapping[str, Any], *, word_dim: int = 100, char_dim: int = 32, char_out: int = 64,
    emb_dropout: float = 0.3, d_model: int = 256, num_heads: int = 8, num_layers: int = 4,
    dim_feedforward: int = 512, dropout: float = 0.2, pattern_params: dict[str, Any] | None = None,
    pattern: str = "full", window: int | None = None,
) -> Tagger:
    """Transformer encoder (attn_core, pre-LN, sinusoidal positions), full attention"""
    return _tagger(data_info, TransformerContext, word_dim=word_dim, char_dim=char_dim, char_out=char_out,
                   emb_dropout=emb_dropout, d_model=d_model, num_heads=num_heads, num_layers=num_layers,
                   dim_feedforward=dim_feedforward, dropout=dropout, pattern_params=pattern_params, pattern=pattern,
                   window=window)


register_preset("transformer_truncated", transformer, {"pattern": "truncated", "window": 4},
                description="the same with truncated attention (window words either side)")


@register_model(family="rnn", renamed={**_RENAMED_LAYERS, "hidden": "hidden_size"})
def bilstm(data_info: Mapping[str, Any], *, word_dim: int = 100, char_dim: int = 32, char_out: int = 64,
           emb_dropout: float = 0.3, hidden_size: int = 200, num_layers: int = 2, dropout: float = 0.3) -> Tagger:
    """2-layer BiLSTM tagger"""
    return _tagger(data_info, LSTMContext, word_dim=word_dim, char_dim=char_dim, char_out=char_out,
                   emb_dropout=emb_dropout, hidden=hidden_size, num_layers=num_layers, dropout=dropout)


@register_model(family="cnn", renamed={**_RENAMED_LAYERS, "channels": "d_model", "kernel": "kernel_size"})
def cnn(data_info: Mapping[str, Any], *, word_dim: int = 100, char_dim: int = 32, char_out: int = 64,
        emb_dropout: float = 0.3, d_model: int = 256, num_layers: int = 4, kernel_size: int = 3, dilation_base: int = 2,
        dropout: float = 0.2) -> Tagger:
    """residual dilated 1-D CNN (dilations 1, 2, 4, 8)"""
    return _tagger(data_info, ConvContext, word_dim=word_dim, char_dim=char_dim, char_out=char_out,
                   emb_dropout=emb_dropout, channels=d_model, num_layers=num_layers, kernel=kernel_size,
                   dilation_base=dilation_base, dropout=dropout)


@register_model(family="other", renamed=_RENAMED_WIDTH)
def mlp(data_info: Mapping[str, Any], *, word_dim: int = 100, char_dim: int = 32, char_out: int = 64,
        emb_dropout: float = 0.3, d_model: int = 256, num_layers: int = 2, dropout: float = 0.2) -> Tagger:
    """per-token MLP, no context (floor)"""
    return _tagger(data_info, NoContext, word_dim=word_dim, char_dim=char_dim, char_out=char_out,
                   emb_dropout=emb_dropout, hidden=d_model, num_layers=num_layers, dropout=dropout)


#: ``transformer_<pattern>`` presets of the efficient patterns (not in ``models: all``); local_global
#: gets transformer_truncated's window and the first word as its global token.
register_variants(transformer, allowed=lambda p: attn_core.get_pattern(p).padding,
                  own={"local_global": {"window": 4, "global_tokens": 1}},
                  description="the Transformer tagger with {pattern} attention")
