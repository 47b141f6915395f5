"""Positional information for attention, which is otherwise permutation-invariant.

* :class:`SinusoidalPositionalEncoding`: the fixed table of "Attention Is All You Need",
  ``PE[p, 2i] = sin(p / 10000^(2i/d))``, ``PE[p, 2i+1] = cos(p / 10000^(2i/d))``.
* :class:`LearnedPositionalEmbedding`: one trained vector per position (BERT/GPT style).

Both take ``(d_model, max_len, dropout)`` in that order (the width first, as ``nn.Embedding``'s
table is read), add to a batch-first ``(B, L, E)`` input and take ``offset`` so incremental
decoding can encode position ``offset + t`` for the ``t``-th new token.
"""

from __future__ import annotations

import math

import torch
import torch.nn as nn
from torch import Tensor

from attn_core import _validate as V

__all__ = ["SinusoidalPositionalEncoding", "LearnedPositionalEmbedding", "sinusoidal_table"]


def _check_input(x: object, d_model: int, offset: object, max_len: int) -> Tensor:
    """``x (B, L, E)`` with ``E == d_model`` and ``0 <= offset``, ``offset + L <= max_len``."""
    t = V.check_tensor("x", x, 3, f"(B, L, E) with E = d_model = {d_model}")
    if t.shape[-1] != d_model:
        raise ValueError(f"x has shape {tuple(t.shape)}: expected (B, L, E) with E = d_model = {d_model}")
    if not V.is_int(offset, 0):
        V.fail("offset", offset, "expected an int >= 0")
    assert isinstance(offset, int)
    if offset + t.shape[1] > max_len:
        raise ValueError(
            f"max_len={max_len} is too small: positions {offset}..{offset + t.shape[1] - 1} requested "
            f"(offset={offset}, L={t.shape[1]}); build the module with a larger max_len"
        )
    return t


def sinusoidal_table(max_len: int, d_model: int, dtype: torch.dtype = torch.float64) -> Tensor:
    """The ``(max_len, d_model)`` sinusoidal table, computed in float64 then cast to ``dtype``.

    Even columns ``2i`` hold ``sin(p * w_i)``, odd columns ``2i+1`` hold ``cos(p * w_i)`` with
    ``w_i = 10000^(-2i/d_model)``; for odd ``d_model`` the last column is a sine."""
    pos = torch.arange(max_len, dtype=torch.float64)[:, None]  # (L, 1)
    two_i = torch.arange(0, d_model, 2, dtype=torch.float64)  # (ceil(d/2),)
    angles = pos * torch.exp(two_i * (-math.log(10000.0) / d_model))  # (L, ceil(d/2))
    pe = torch.empty(max_len, d_model, dtype=torch.float64)
    pe[:, 0::2] = torch.sin(angles)
    pe[:, 1::2] = torch.cos(angles[:, : d_model // 2])
    return pe.to(dtype)


class SinusoidalPositionalEncoding(nn.Module):
    """``x + PE[offset : offset + L]`` then dropout, with the fixed sinusoidal table.

    The table is a non-persistent buffer (not in ``state_dict``: it is a function of
    ``max_len`` and ``d_model``), built in float64 and stored in the default dtype; it follows
    the module's ``.to(device/dtype)`` and is cast to ``x``'s dtype in ``forward``.
    """

    pe: Tensor

    def __init__(self, d_model: int, max_len: int = 10000, dropout: float = 0.0) -> None:
        super().__init__()
        V.check_positive_int("d_model", d_model)
        V.check_positive_int("max_len", max_len)
        V.check_dropout(dropout, "dropout")
        self.d_model, self.max_len = d_model, max_len
        self.register_buffer("pe", sinusoidal_table(max_len, d_model, torch.get_default_dtype()), persistent=False)
        self.dropout = nn.Dropout(dropout)

    def forward(self, x: Tensor, *, offset: int = 0) -> Tensor:
        """``x (B, L, E)`` -> ``(B, L, E)``; positions are ``offset, ..., offset + L - 1``."""
        x = _check_input(x, self.d_model, offset, self.max_len)
        pe = self.pe[offset : offset + x.shape[1]].to(x.dtype)  # (L, E)
        return self.dropout(x + pe[None])  # (B, L, E)

    def extra_repr(self) -> str:
        return f"d_model={self.d_model}, max_len={self.max_len}"


class LearnedPositionalEmbedding(nn.Module):
    """``x + emb(offset ... offset + L - 1)`` then dropout, with a trained ``(max_len, d_model)`` table.

    Initialised ``N(0, 0.02^2)`` (as BERT/GPT-2): small next to unit-scale token embeddings,
    where ``nn.Embedding``'s default ``N(0, 1)`` would drown them."""

    def __init__(self, d_model: int, max_len: int, dropout: float = 0.0) -> None:
        super().__init__()
        V.check_positive_int("d_model", d_model)
        V.check_positive_int("max_len", max_len)
        V.check_dropout(dropout, "dropout")
        self.d_model, self.max_len = d_model, max_len
        self.embedding = nn.Embedding(max_len, d_model)
        nn.init.normal_(self.embedding.weight, std=0.02)
        self.dropout = nn.Dropout(dropout)

    def forward(self, x: Tensor, *, offset: int = 0) -> Tensor:
        """``x (B, L, E)`` -> ``(B, L, E)``; positions are ``offset, ..., offset + L - 1``."""
        x = _check_input(x, self.d_model, offset, self.max_len)
        positions = torch.arange(offset, offset + x.shape[1], device=x.device)  # (L,)
        return self.dropout(x + self.embedding(positions).to(x.dtype)[None])  # (B, L, E)

    def extra_repr(self) -> str:
        return f"d_model={self.d_model}, max_len={self.max_len}"
