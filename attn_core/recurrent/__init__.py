"""Modern recurrences for the "attention vs recurrence" question (issue 31), without Lightning:
linear recurrences that train in parallel over the length and decode one step at a time.

- one scan primitive, :func:`linear_scan` (``h_t = a_t * h_{t-1} + b_t``, real or complex, odd/even
  doubling, reverse-scan backward), plus :func:`fft_conv` (time-invariant kernels) and
  :func:`ssd_scan` (Mamba-2's chunked algorithm); optional fused GPU kernels for two of them
  (``backend="fla"``, :mod:`attn_core.recurrent.backends`);
- layers registered by name (:func:`register_recurrence`, :func:`list_recurrences`,
  :func:`build_recurrence`): ``min_rnn`` (minGRU/minLSTM), ``s4d``, ``mamba2``, ``lru``; each maps
  ``(B, L, d_model) -> (B, L, d_model)``, takes ``lengths``/``key_padding_mask`` for right-padded
  batches and has ``step(x_t, state) -> (y_t, state)``;
- :class:`Bidirectional`: two causal passes, one reversed within each sequence's length;
- :class:`RecurrentEncoder`: ``num_layers`` pre-norm residual blocks of one recurrence;
- :func:`param_groups`: optimiser groups from the per-parameter hints (``param._optim``) that
  mark state matrices and steps for no weight decay and their own learning rate.
"""

from attn_core.recurrent.base import (Bidirectional, RecurrentLayer, param_groups, resolve_mask, reverse_within,
                                      set_optim_hint)
from attn_core.recurrent.registry import (RecurrenceSpec, build_recurrence, get_recurrence, list_recurrences,
                                          register_recurrence, unregister_recurrence)
from attn_core.recurrent.scan import fft_conv, linear_scan, segsum, ssd_scan
from attn_core.recurrent.backends import BACKENDS
from attn_core.recurrent.min_rnn import MinRNN
from attn_core.recurrent.s4d import S4D
from attn_core.recurrent.mamba2 import Mamba2
from attn_core.recurrent.lru import LRU
from attn_core.recurrent.stack import RecurrentEncoder

__all__ = [
    "linear_scan", "fft_conv", "segsum", "ssd_scan", "BACKENDS",
    "RecurrenceSpec", "register_recurrence", "unregister_recurrence", "get_recurrence", "list_recurrences",
    "build_recurrence",
    "RecurrentLayer", "Bidirectional", "resolve_mask", "reverse_within", "param_groups", "set_optim_hint",
    "MinRNN", "S4D", "Mamba2", "LRU", "RecurrentEncoder",
]
