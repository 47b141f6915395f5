"""Inputs and references the attention tests share (the CPU tests and their CUDA twins): random
q/k/v with padding, the dense reference of every mask, random weights everywhere, and a decoder
decoded one position at a time."""

from __future__ import annotations

import torch
from torch import nn

from attn_core import reference_attention
from attn_core.functional import _dense_mask
from attn_core.transformer import TransformerDecoder


def randomise(module: nn.Module, seed: int) -> None:
    """Random values everywhere (zero-initialised biases and unit LayerNorms would hide bugs)."""
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for p in module.parameters():
            p.copy_(torch.randn(p.shape, generator=g, dtype=p.dtype) * 0.5)


def attention_inputs(b, h, lq, lk, d, dv, dtype, seed, pad=False, requires_grad=False):
    g = torch.Generator().manual_seed(seed)
    q = torch.randn(b, h, lq, d, generator=g, dtype=torch.float64).to(dtype)
    k = torch.randn(b, h, lk, d, generator=g, dtype=torch.float64).to(dtype)
    v = torch.randn(b, h, lk, dv, generator=g, dtype=torch.float64).to(dtype)
    kpm = None
    if pad:
        kpm = torch.rand(b, lk, generator=g) > 0.4
        kpm[0, :] = False  # one sequence with nothing real: its rows must be zeros
        kpm[-1, :] = True
    for t in (q, k, v):
        t.requires_grad_(requires_grad)
    return q, k, v, kpm


def expected_attention(q, k, v, causal, window, kpm):
    lq, lk = q.shape[2], k.shape[2]
    w = window if window is not None and window < max(lq, lk) - 1 else None
    return reference_attention(q, k, v, _dense_mask(q.shape[0], lq, lk, causal, w, kpm, q.device))


#: the incremental-decoding tests' sizes: width, heads, feed-forward, layers; batch, target, source
DEC_E, DEC_H, DEC_FF, DEC_LAYERS = 16, 4, 32, 2
DEC_B, DEC_T, DEC_S = 3, 9, 7


def make_decoder(dtype: torch.dtype, norm_first: bool, pattern: str, window: int | None,
                 seed: int = 0, pattern_params: dict | None = None) -> TransformerDecoder:
    dec = TransformerDecoder(DEC_E, DEC_H, DEC_LAYERS, dim_feedforward=DEC_FF, dropout=0.0, norm_first=norm_first,
                             pattern=pattern, window=window, pattern_params=pattern_params).to(dtype)
    randomise(dec, seed)
    return dec.eval()


def decoder_inputs(dtype: torch.dtype, seed: int = 1) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(DEC_B, DEC_T, DEC_E, generator=g, dtype=dtype)  # (B, T, E)
    memory = torch.randn(DEC_B, DEC_S, DEC_E, generator=g, dtype=dtype)  # (B, S, E)
    mask = torch.ones(DEC_B, DEC_S, dtype=torch.bool)  # True = real source token
    mask[0, 4:] = False
    mask[2, 6:] = False
    return x, memory, mask


def step_all(dec: TransformerDecoder, x: torch.Tensor, memory: torch.Tensor, mask: torch.Tensor):
    """Outputs ``(B, T, E)`` of decoding ``x`` one position at a time, and the final cache."""
    cache = dec.init_cache(memory)
    outs = []
    for t in range(x.shape[1]):
        assert dec.cache_length(cache) == t
        out, cache = dec.step(x[:, t : t + 1], cache, memory_key_padding_mask=mask)
        outs.append(out)
    return torch.cat(outs, 1), cache
