"""LRU, the Linear Recurrent Unit (Orvieto et al. 2023, "Resurrecting recurrent neural networks
for long sequences"): a complex diagonal linear recurrence, stable by construction,

    h_t = lambda * h_{t-1} + gamma * (B x_t)     (h (hidden_size,) complex)
    y_t = Re(C h_t) + D * x_t

with ``lambda = exp(-exp(nu_log) + i exp(theta_log))`` (so ``|lambda| < 1``), initialised
uniformly on the ring ``r_min <= |lambda| <= r_max`` with phase in ``[0, max_phase]``, and
``gamma = sqrt(1 - |lambda|^2)`` normalising each mode's input so its state keeps unit variance
(learned from that init, ``gamma_log``). Trains in parallel with
:func:`~attn_core.recurrent.linear_scan` on complex inputs.
"""

from __future__ import annotations

import math

import torch
from torch import Tensor, nn

from attn_core import _validate as V
from attn_core.recurrent.base import RecurrentLayer, set_optim_hint
from attn_core.recurrent.registry import register_recurrence
from attn_core.recurrent.scan import linear_scan

__all__ = ["LRU"]


@register_recurrence("lru", complex_state=True, step=True, cost="L",
                     description="LRU (Orvieto et al. 2023): complex diagonal recurrence, ring init, linear scan")
class LRU(RecurrentLayer):
    """LRU layer, ``(B, L, d_model) -> (B, L, d_model)``, state ``(B, hidden_size)`` complex.

    ``nu_log``, ``theta_log`` (``lambda``) and ``gamma_log`` are marked for no weight decay and
    learning rate ``lr`` (:func:`param_groups`)."""

    def __init__(self, d_model: int, hidden_size: int = 256, *, r_min: float = 0.0, r_max: float = 1.0,
                 max_phase: float = 2 * math.pi, dropout: float = 0.0, lr: float | None = 1e-3) -> None:
        super().__init__()
        V.check_positive_int("d_model", d_model)
        V.check_positive_int("hidden_size", hidden_size)
        if not 0.0 <= r_min < r_max <= 1.0:
            V.fail("r_min", r_min, f"expected 0 <= r_min < r_max <= 1 (r_max = {r_max})")
        V.check_dropout(dropout, "dropout")
        self.d_model, self.hidden_size = d_model, hidden_size
        u1, u2 = torch.rand(hidden_size), torch.rand(hidden_size)
        # |lambda|^2 uniform on [r_min^2, r_max^2] (uniform on the ring's area); clamp keeps r_max = 1 finite
        nu = -0.5 * torch.log((u1 * (r_max**2 - r_min**2) + r_min**2).clamp_min(1e-12))
        nu = nu.clamp_min(1e-8)  # |lambda| < 1 strictly
        self.nu_log = nn.Parameter(torch.log(nu))  # (N,)
        self.theta_log = nn.Parameter(torch.log((max_phase * u2).clamp_min(1e-8)))  # (N,)
        mod = torch.exp(-nu)
        self.gamma_log = nn.Parameter(torch.log(torch.sqrt((1 - mod**2).clamp_min(1e-12))))  # (N,)
        self.B = nn.Parameter(torch.view_as_real(torch.randn(hidden_size, d_model, dtype=torch.cfloat)
                                                 / math.sqrt(2 * d_model)))  # (N, H, 2)
        self.C = nn.Parameter(torch.view_as_real(torch.randn(d_model, hidden_size, dtype=torch.cfloat)
                                                 / math.sqrt(hidden_size)))  # (H, N, 2)
        self.D = nn.Parameter(torch.randn(d_model))  # (H,)
        hint = {"weight_decay": 0.0} if lr is None else {"weight_decay": 0.0, "lr": lr}
        for p in (self.nu_log, self.theta_log, self.gamma_log):
            set_optim_hint(p, **hint)
        self.dropout = nn.Dropout(dropout)

    def eigenvalues(self) -> Tensor:
        """``lambda (hidden_size,)`` complex, ``|lambda| < 1``."""
        return torch.exp(torch.complex(-torch.exp(self.nu_log), torch.exp(self.theta_log)))

    def _input(self, x: Tensor) -> Tensor:
        """``gamma * (B x)``: ``(..., d_model)`` real -> ``(..., hidden_size)`` complex."""
        b = torch.view_as_complex(self.B)  # (N, H)
        return (x.to(b.dtype) @ b.transpose(0, 1)) * torch.exp(self.gamma_log)

    def _output(self, h: Tensor, x: Tensor) -> Tensor:
        """``Re(C h) + D x``: ``(..., hidden_size)`` complex -> ``(..., d_model)`` real."""
        y = (h @ torch.view_as_complex(self.C).transpose(0, 1)).real + self.D * x
        return self.dropout(y)

    def _forward(self, x: Tensor, mask: Tensor | None, return_state: bool) -> tuple[Tensor, dict[str, Tensor]]:
        lam = self.eigenvalues()  # (N,)
        b = self._input(x)  # (B, L, N)
        a = lam.expand_as(b)
        if mask is not None:  # padded steps carry the state unchanged: a = 1 (b is 0: x is)
            a = a.masked_fill(~mask[..., None], 1.0)
        h = linear_scan(a, b, dim=1)  # (B, L, N)
        return self._output(h, x), {"h": h[:, -1]}

    def init_state(self, batch: int, *, device: torch.device | None = None,
                   dtype: torch.dtype | None = None) -> dict[str, Tensor]:
        cdtype = torch.view_as_complex(self.C).dtype
        return {"h": torch.zeros(batch, self.hidden_size, device=device, dtype=cdtype)}

    def step(self, x_t: Tensor, state: dict[str, Tensor] | None = None) -> tuple[Tensor, dict[str, Tensor]]:
        state = self._start(x_t, state)
        h = self.eigenvalues() * state["h"] + self._input(x_t)  # (B, N)
        return self._output(h, x_t), {"h": h}
