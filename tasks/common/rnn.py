"""A recurrent network over padded sequences that never reads padding and never synchronises.

``nn.utils.rnn.pack_padded_sequence`` needs the lengths on the host: with a GPU batch that is a
device-to-host copy (a sync) every step. :func:`run_padded` gives the outputs of packing
without it. Padding comes after the real steps, so a forward direction run over the padded
batch already has the right outputs at real positions; a backward direction runs forward over
each sequence reversed *within its length* (a gather with device indices) and is reversed back.
Each layer and direction is one call of the module's own kernel (``torch._VF.lstm`` / ``gru``,
cuDNN on a GPU) with the module's own weights, so parameters and checkpoints are unchanged;
between layers the module's ``dropout`` applies as in ``nn.LSTM``/``nn.GRU``.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor, nn

__all__ = ["reverse_within", "run_padded"]


def reverse_within(x: Tensor, lengths: Tensor) -> Tensor:
    """``x (B, L, D)`` with each sequence's first ``lengths[b]`` steps reversed; padding stays."""
    steps = torch.arange(x.shape[1], device=x.device)  # (L,)
    idx = torch.where(steps < lengths[:, None], lengths[:, None] - 1 - steps, steps)  # (B, L)
    return x.gather(1, idx[..., None].expand(-1, -1, x.shape[2]))


def _direction(rnn: nn.RNNBase, x: Tensor, layer: int, reverse: bool) -> Tensor:
    """One layer, one direction of ``rnn`` over ``x (B, L, D)`` from a zero state -> ``(B, L, H)``."""
    sfx = f"_l{layer}" + ("_reverse" if reverse else "")
    weights = [getattr(rnn, f"weight_ih{sfx}"), getattr(rnn, f"weight_hh{sfx}")]
    if rnn.bias:
        weights += [getattr(rnn, f"bias_ih{sfx}"), getattr(rnn, f"bias_hh{sfx}")]
    h0 = x.new_zeros(1, x.shape[0], rnn.hidden_size)
    if isinstance(rnn, nn.LSTM):
        out = torch._VF.lstm(x, (h0, h0), weights, rnn.bias, 1, 0.0, rnn.training, False, True)[0]
    elif isinstance(rnn, nn.GRU):
        out = torch._VF.gru(x, h0, weights, rnn.bias, 1, 0.0, rnn.training, False, True)[0]
    else:
        raise TypeError(f"run_padded: {type(rnn).__name__} is not supported; valid: LSTM, GRU")
    return out


def run_padded(rnn: nn.RNNBase, x: Tensor, mask: Tensor) -> tuple[Tensor, Tensor]:
    """``rnn`` (batch-first LSTM or GRU, one or two directions, no projections) over ``x (B, L, D)``
    whose real steps are ``mask (B, L)`` (True, a prefix of each row) -> ``(out (B, L, dirs * H),
    final (B, dirs * H))``: the outputs at real steps equal packing's (padding rows are zeroed),
    ``final`` is the last layer's state after each sequence (forward: its last real step,
    backward: its first), as ``h_n`` of a packed run. An empty sequence gives zeros."""
    if not rnn.batch_first or getattr(rnn, "proj_size", 0):
        raise ValueError("run_padded: expected a batch_first rnn without proj_size")
    lengths = mask.sum(1)  # (B,) on the device
    keep = mask[..., None].to(x.dtype)  # (B, L, 1)
    h = x
    for layer in range(rnn.num_layers):
        if layer and rnn.dropout:
            h = F.dropout(h, rnn.dropout, rnn.training)
        outs = [_direction(rnn, h, layer, False)]
        if rnn.bidirectional:
            outs.append(reverse_within(_direction(rnn, reverse_within(h, lengths), layer, True), lengths))
        h = torch.cat(outs, -1) * keep  # (B, L, dirs * H)
    last = (lengths - 1).clamp(min=0)  # (B,)
    hid = rnn.hidden_size
    fwd = h[:, :, :hid].gather(1, last[:, None, None].expand(-1, 1, hid))[:, 0]  # (B, H)
    final = torch.cat([fwd, h[:, 0, hid:]], -1) if rnn.bidirectional else fwd
    return h, final * (lengths > 0)[:, None].to(x.dtype)
