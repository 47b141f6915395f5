"""Padding a batch of variable-length examples into rectangular tensors with a mask (the
collation every sequence domain shares)."""

from __future__ import annotations

from typing import Sequence

import torch
from torch import Tensor

__all__ = ["pad_fields", "pad_sequences"]


def pad_fields(items: Sequence[Sequence[Tensor]], pads: Sequence[float | int | bool],
               length: int | None = None) -> tuple[list[Tensor], Tensor]:
    """Right-pad several aligned fields at once: ``items[b][k]`` is field ``k`` of example ``b``,
    1-D or ``(L_b, F)``, every field of an example of length ``L_b``; field ``k`` is padded with
    ``pads[k]``. Returns ``([padded_k (B, L, ...)], mask (B, L))``, ``mask`` True at real
    positions (the attn_core ``key_padding_mask`` convention); ``length``: pad to at least this
    many positions (a length bucket, :mod:`tasks.common.buckets`). One concatenation and one scatter
    per field, one mask for all (``pad_sequence`` copies each example of each field: the POS
    collate of 4 fields at B=32 took 1.08 ms with it, 0.30 ms with this, on a 2-core CPU;
    collation runs between training steps, on the host)."""
    if not items:
        raise ValueError("pad_fields: empty batch (no examples to pad)")
    lengths = torch.tensor([it[0].shape[0] for it in items])  # (B,)
    mask = torch.arange(max(int(lengths.max()), length or 0))[None, :] < lengths[:, None]  # (B, L)
    where = mask.nonzero(as_tuple=True)  # host tensors: no device involved
    out = []
    for k, pad in enumerate(pads):
        flat = torch.cat([it[k] for it in items])  # (sum L_b, ...)
        padded = flat.new_full((len(items), mask.shape[1], *flat.shape[1:]), pad)
        padded[where] = flat
        out.append(padded)
    return out, mask


def pad_sequences(seqs: Sequence[Tensor], pad_value: float | int = 0,
                  length: int | None = None) -> tuple[Tensor, Tensor]:
    """Right-pad 1-D or ``(L, F)`` tensors to the longest (at least ``length``): ``(padded (B, L, ...),
    mask (B, L))`` with ``mask`` True at real positions (:func:`pad_fields` with one field)."""
    (out,), mask = pad_fields([(s,) for s in seqs], (pad_value,), length)
    return out, mask
