"""minGRU and minLSTM (Feng et al. 2024, "Were RNNs all we needed?"): a GRU/LSTM whose gates read
the input only, never the previous state, so the recurrence is linear in ``h`` and trains in
parallel over ``L`` with :func:`~attn_core.recurrent.linear_scan`:

    minGRU:  z_t = sigmoid(W_z x_t),  h~_t = W_h x_t,  h_t = (1 - z_t) h_{t-1} + z_t h~_t
    minLSTM: f_t = sigmoid(W_f x_t),  i_t = sigmoid(W_i x_t),  h~_t = W_h x_t,
             f'_t = f_t / (f_t + i_t),  i'_t = i_t / (f_t + i_t),  h_t = f'_t h_{t-1} + i'_t h~_t

The scan runs on ``(a, b)`` directly (the paper's log-space form, with its positive ``g(.)``
candidate, is one way to avoid overflow; the odd/even scan needs no logarithms). ``h`` of size
``hidden_size`` is projected back to ``d_model`` when the two differ.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from attn_core import _validate as V
from attn_core.recurrent.base import RecurrentLayer
from attn_core.recurrent.backends import check_backend, gated_scan
from attn_core.recurrent.registry import register_recurrence

__all__ = ["MinRNN"]

KINDS = ("gru", "lstm")


@register_recurrence("min_rnn", complex_state=False, step=True, cost="L",
                     gpu_kernel="fla.chunk_hgrn (backend='fla')",
                     description="minGRU/minLSTM (Feng et al. 2024): input-only gates, a linear scan")
class MinRNN(RecurrentLayer):
    """minGRU (``kind="gru"``) or minLSTM (``kind="lstm"``), ``(B, L, d_model) -> (B, L, d_model)``,
    state ``(B, hidden_size)`` (default ``d_model``); ``backend``: the scan's path
    (:mod:`attn_core.recurrent.backends`: ``"pure"`` or ``"fla"``'s HGRN kernel on CUDA)."""

    def __init__(self, d_model: int, hidden_size: int | None = None, *, kind: str = "gru", bias: bool = True,
                 dropout: float = 0.0, backend: str = "pure") -> None:
        super().__init__()
        V.check_positive_int("d_model", d_model)
        hidden_size = d_model if hidden_size is None else hidden_size
        V.check_positive_int("hidden_size", hidden_size)
        V.check_choice("kind", kind, KINDS)
        V.check_dropout(dropout, "dropout")
        check_backend(backend)
        self.d_model, self.hidden_size, self.kind, self.backend = d_model, hidden_size, kind, backend
        gates = 2 if kind == "gru" else 3  # (z, h~) or (f, i, h~)
        self.in_proj = nn.Linear(d_model, gates * hidden_size, bias=bias)
        self.out_proj = nn.Linear(hidden_size, d_model, bias=bias) if hidden_size != d_model else nn.Identity()
        self.dropout = nn.Dropout(dropout)

    def _coefficients(self, x: Tensor, log: bool = False) -> tuple[Tensor, Tensor, Tensor | None]:
        """``(a, b, log a)`` of ``h_t = a_t h_{t-1} + b_t`` from ``x (..., d_model)``, each
        ``(..., hidden_size)``; ``log a`` (from log-sigmoids, finite where ``a`` underflows) only
        with ``log``."""
        parts = self.in_proj(x).chunk(2 if self.kind == "gru" else 3, -1)
        if self.kind == "gru":
            z, cand = torch.sigmoid(parts[0]), parts[1]
            return 1.0 - z, z * cand, F.logsigmoid(-parts[0]) if log else None  # log(1 - z)
        f, i, cand = torch.sigmoid(parts[0]), torch.sigmoid(parts[1]), parts[2]
        total = f + i
        log_a = None
        if log:  # log f - log(f + i)
            log_f = F.logsigmoid(parts[0])
            log_a = log_f - torch.logaddexp(log_f, F.logsigmoid(parts[1]))
        return f / total, (i / total) * cand, log_a

    def _forward(self, x: Tensor, mask: Tensor | None, return_state: bool) -> tuple[Tensor, dict[str, Tensor]]:
        a, b, log_a = self._coefficients(x, log=self.backend != "pure")  # (B, L, hidden_size) each
        if mask is not None:  # padded steps carry the state unchanged: a = 1, b = 0
            pad = ~mask[..., None]
            a, b = a.masked_fill(pad, 1.0), b.masked_fill(pad, 0.0)
            log_a = None if log_a is None else log_a.masked_fill(pad, 0.0)
        h = gated_scan(a, b, log_a, self.backend)  # (B, L, hidden_size)
        return self.dropout(self.out_proj(h)), {"h": h[:, -1]}

    def init_state(self, batch: int, *, device: torch.device | None = None,
                   dtype: torch.dtype | None = None) -> dict[str, Tensor]:
        return {"h": torch.zeros(batch, self.hidden_size, device=device, dtype=dtype)}

    def step(self, x_t: Tensor, state: dict[str, Tensor] | None = None) -> tuple[Tensor, dict[str, Tensor]]:
        state = self._start(x_t, state)
        a, b, _ = self._coefficients(x_t)  # (B, hidden_size)
        h = a * state["h"] + b
        return self.dropout(self.out_proj(h)), {"h": h}
