"""Mamba-2 (Dao & Gu 2024, "Transformers are SSMs"): a selective state space layer whose decay
is one scalar per head, which makes the chunked state-space-duality algorithm
(:func:`~attn_core.recurrent.ssd_scan`) exact. Per head ``h`` with input ``x_t (P,)``:

    dt_t = softplus(W_dt u_t + dt_bias)        A = -exp(A_log)  (scalar)
    S_t  = exp(dt_t A) S_{t-1} + dt_t x_t B_t^T     (S (P, d_state))
    y_t  = S_t C_t + D x_t

``x``, ``B``, ``C`` come from one input projection through a causal depthwise convolution
(width ``d_conv``) and SiLU; the output is gated, ``RMSNorm(y * silu(z))``, and projected back.
Init as the paper's code: ``A`` uniform in ``[1, 16]``, ``dt`` log-uniform in ``[dt_min,
dt_max]`` stored as ``dt_bias = softplus^{-1}(dt)``. Pure PyTorch by default; ``backend="fla"``
runs the scan as flash-linear-attention's simple GLA on CUDA (:mod:`attn_core.recurrent.backends`).
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from attn_core import _validate as V
from attn_core.recurrent.base import RecurrentLayer, set_optim_hint
from attn_core.recurrent.backends import check_backend, ssd
from attn_core.recurrent.registry import register_recurrence

__all__ = ["Mamba2"]


@register_recurrence("mamba2", complex_state=False, step=True, cost="L*Q",
                     gpu_kernel="fla.chunk_simple_gla (backend='fla')",
                     description="Mamba-2 (Dao & Gu 2024): selective SSM, scalar decay per head, chunked SSD")
class Mamba2(RecurrentLayer):
    """Mamba-2 layer, ``(B, L, d_model) -> (B, L, d_model)``; ``d_inner = expand * d_model`` split
    into ``d_inner / headdim`` heads, ``ngroups`` groups of heads sharing ``B``/``C``; state per
    head ``(headdim, d_state)``. ``A_log``, ``dt_bias`` and ``D`` get no weight decay. ``backend``:
    the scan's path (``"pure"`` or ``"fla"`` on CUDA, :mod:`attn_core.recurrent.backends`)."""

    def __init__(self, d_model: int, d_state: int = 64, *, d_conv: int = 4, expand: int = 2, headdim: int = 64,
                 ngroups: int = 1, chunk_size: int = 64, A_init_range: tuple[float, float] = (1.0, 16.0),
                 dt_min: float = 1e-3, dt_max: float = 0.1, dt_init_floor: float = 1e-4, bias: bool = False,
                 conv_bias: bool = True, dropout: float = 0.0, lr: float | None = None, backend: str = "pure") -> None:
        super().__init__()
        check_backend(backend)
        self.backend = backend
        for name, val in (("d_model", d_model), ("d_state", d_state), ("d_conv", d_conv), ("expand", expand),
                          ("headdim", headdim), ("ngroups", ngroups), ("chunk_size", chunk_size)):
            V.check_positive_int(name, val)
        d_inner = expand * d_model
        if d_inner % headdim:
            V.fail("headdim", headdim, f"expected a divisor of expand * d_model = {d_inner}")
        nheads = d_inner // headdim
        if nheads % ngroups:
            V.fail("ngroups", ngroups, f"expected a divisor of the number of heads {nheads}")
        lo, hi = A_init_range if isinstance(A_init_range, (tuple, list)) and len(A_init_range) == 2 else (0, 0)
        if not 0 < lo <= hi:
            V.fail("A_init_range", A_init_range, "expected (low, high) with 0 < low <= high")
        if not 0 < dt_min < dt_max:
            V.fail("dt_min", dt_min, f"expected 0 < dt_min < dt_max = {dt_max}")
        V.check_dropout(dropout, "dropout")
        self.d_model, self.d_state, self.d_conv, self.headdim = d_model, d_state, d_conv, headdim
        self.d_inner, self.nheads, self.ngroups, self.chunk_size = d_inner, nheads, ngroups, chunk_size
        self.conv_dim = d_inner + 2 * ngroups * d_state  # x, B, C go through the convolution
        self.in_proj = nn.Linear(d_model, 2 * d_inner + 2 * ngroups * d_state + nheads, bias=bias)  # z, xBC, dt
        self.conv1d = nn.Conv1d(self.conv_dim, self.conv_dim, d_conv, groups=self.conv_dim, bias=conv_bias,
                                padding=d_conv - 1)
        dt = torch.exp(torch.rand(nheads) * (math.log(dt_max) - math.log(dt_min)) + math.log(dt_min))
        dt = dt.clamp_min(dt_init_floor)
        self.dt_bias = nn.Parameter(dt + torch.log(-torch.expm1(-dt)))  # (H,): softplus(dt_bias) = dt
        self.A_log = nn.Parameter(torch.log(torch.empty(nheads).uniform_(lo, hi)))  # (H,)
        self.D = nn.Parameter(torch.ones(nheads))  # (H,)
        hint = {"weight_decay": 0.0} if lr is None else {"weight_decay": 0.0, "lr": lr}
        for p in (self.dt_bias, self.A_log, self.D):
            set_optim_hint(p, **hint)
        self.norm = nn.RMSNorm(d_inner, eps=1e-5)
        self.out_proj = nn.Linear(d_inner, d_model, bias=bias)
        self.dropout = nn.Dropout(dropout)

    def _split(self, proj: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        """``z (..., d_inner)``, ``xBC (..., conv_dim)``, ``dt (..., nheads)`` from the input projection."""
        return proj.split([self.d_inner, self.conv_dim, self.nheads], -1)

    def _heads(self, xbc: Tensor, dt_raw: Tensor) -> tuple[Tensor, Tensor, Tensor, Tensor, Tensor]:
        """``x (..., H, P)``, ``B``/``C (..., H, N)`` (groups repeated over their heads), ``dt`` and
        ``dt A`` ``(..., H)`` from the convolved ``xBC`` and the raw ``dt``."""
        x, b, c = xbc.split([self.d_inner, self.ngroups * self.d_state, self.ngroups * self.d_state], -1)
        lead = x.shape[:-1]
        x = x.reshape(*lead, self.nheads, self.headdim)
        per_group = self.nheads // self.ngroups
        b = b.reshape(*lead, self.ngroups, self.d_state).repeat_interleave(per_group, -2)  # (..., H, N)
        c = c.reshape(*lead, self.ngroups, self.d_state).repeat_interleave(per_group, -2)  # (..., H, N)
        dt = F.softplus(dt_raw + self.dt_bias)  # (..., H)
        return x, b, c, dt, dt * -torch.exp(self.A_log)

    def _gate_out(self, y: Tensor, x: Tensor, z: Tensor) -> Tensor:
        """``y + D x`` (heads merged), gated by ``silu(z)``, RMS-normalised and projected."""
        y = y + x * self.D[:, None]  # (..., H, P)
        y = self.norm(y.flatten(-2) * F.silu(z))  # (..., d_inner)
        return self.dropout(self.out_proj(y))

    def _forward(self, u: Tensor, mask: Tensor | None, return_state: bool) -> tuple[Tensor, dict[str, Tensor]]:
        length = u.shape[1]
        z, xbc_in, dt_raw = self._split(self.in_proj(u))
        if mask is not None:  # zero padding before the convolution (its biased inputs)
            xbc_in = xbc_in.masked_fill(~mask[..., None], 0.0)
        xbc = F.silu(self.conv1d(xbc_in.transpose(1, 2))[..., :length].transpose(1, 2))  # (B, L, conv_dim), causal
        x, b, c, dt, log_a = self._heads(xbc, dt_raw)
        if mask is not None:  # padded steps change nothing: dt = 0 (decay 1, no input)
            dt = dt.masked_fill(~mask[..., None], 0.0)
            log_a = log_a.masked_fill(~mask[..., None], 0.0)
        y, ssm = ssd(x * dt[..., None], log_a, b, c, chunk_size=self.chunk_size, backend=self.backend)  # (B, L, H, P)
        state = {"conv": self._conv_state(xbc_in, mask), "ssm": ssm} if return_state else None
        return self._gate_out(y, x, z), state

    def _conv_state(self, xbc_in: Tensor, mask: Tensor | None) -> Tensor:
        """The convolution's inputs at each sequence's last ``d_conv - 1`` real positions (zeros
        before its start), ``(B, conv_dim, d_conv - 1)`` oldest first, as :meth:`step` keeps them."""
        bsz, length, _ = xbc_in.shape
        width = self.d_conv - 1
        n = torch.full((bsz,), length, device=xbc_in.device) if mask is None else mask.sum(1)  # (B,)
        padded = F.pad(xbc_in, (0, 0, width, 0))  # (B, width + L, conv_dim): position t at t + width
        idx = n[:, None] + torch.arange(width, device=xbc_in.device)  # (B, width): n - width + k, shifted
        return padded.gather(1, idx[..., None].expand(-1, -1, self.conv_dim)).transpose(1, 2)

    def init_state(self, batch: int, *, device: torch.device | None = None,
                   dtype: torch.dtype | None = None) -> dict[str, Tensor]:
        return {"conv": torch.zeros(batch, self.conv_dim, self.d_conv - 1, device=device, dtype=dtype),
                "ssm": torch.zeros(batch, self.nheads, self.headdim, self.d_state, device=device, dtype=dtype)}

    def step(self, x_t: Tensor, state: dict[str, Tensor] | None = None) -> tuple[Tensor, dict[str, Tensor]]:
        state = self._start(x_t, state)
        z, xbc, dt_raw = self._split(self.in_proj(x_t))
        window = torch.cat([state["conv"], xbc[..., None]], -1)  # (B, conv_dim, d_conv): oldest first
        xbc = (window * self.conv1d.weight[:, 0]).sum(-1)  # (B, conv_dim)
        if self.conv1d.bias is not None:
            xbc = xbc + self.conv1d.bias
        x, b, c, dt, log_a = self._heads(F.silu(xbc), dt_raw)  # x (B, H, P), b/c (B, H, N), dt (B, H)
        s = torch.exp(log_a)[..., None, None] * state["ssm"] + (dt[..., None] * x)[..., None] * b[..., None, :]
        y = torch.einsum("bhpn,bhn->bhp", s, c)  # (B, H, P)
        return self._gate_out(y, x, z), {"conv": window[..., 1:], "ssm": s}
