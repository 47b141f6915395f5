"""S4D (Gu et al. 2022, "On the parameterization and initialization of diagonal state space
models"): per channel a diagonal complex linear time-invariant system, discretised by
zero-order hold with a learned step ``dt``:

    x_t = exp(dt A) x_{t-1} + (exp(dt A) - 1) / A * u_t        (x (N/2,) complex)
    y_t = 2 Re(C x_t) + D u_t

The ``N/2`` modes stand for ``N`` in conjugate pairs (hence ``2 Re``). Time-invariant, so the
whole output is the causal convolution of ``u`` with the kernel ``K_l = 2 Re(C diag(exp(dt A))^l
(exp(dt A) - 1) / A)`` (a Vandermonde product), computed in O(L log L) with
:func:`~attn_core.recurrent.fft_conv`. Init S4D-Lin: ``A_n = -1/2 + i pi n``, ``dt`` log-uniform
in ``[dt_min, dt_max]``, ``C`` complex normal. Then GELU, dropout and a GLU output projection.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from attn_core import _validate as V
from attn_core.recurrent.base import RecurrentLayer, reverse_within, set_optim_hint
from attn_core.recurrent.registry import register_recurrence
from attn_core.recurrent.scan import fft_conv

__all__ = ["S4D"]


def _power_blocks(dta: Tensor, length: int) -> tuple[Tensor, Tensor, int]:
    """``(z^r, z^(q M), M)`` for ``z = exp(dta)`` ``(H, N/2)``, ``r < M``, ``q < Q``, ``Q M >= length``,
    ``M ~ sqrt(length)``: every power ``z^l = z^(q M) z^(l - q M)`` is one product of the two, so a
    Vandermonde sum over ``l`` is a matmul over blocks and takes ``H N (Q + M)`` exponentials
    instead of ``H N L`` (at L=5000: 142 per mode instead of 5000)."""
    m = math.isqrt(max(length - 1, 0)) + 1  # (M - 1)^2 < length <= M^2
    q = -(-length // m)  # Q <= M
    steps = torch.arange(m, device=dta.device, dtype=dta.real.dtype)  # (M,)
    return torch.exp(dta[..., None] * steps), torch.exp(dta[..., None] * (steps[:q] * m)), m


@register_recurrence("s4d", complex_state=True, step=True, cost="L log L", time_invariant=True,
                     description="S4D (Gu et al. 2022): diagonal LTI state space, FFT convolution")
class S4D(RecurrentLayer):
    """S4D layer, ``(B, L, d_model) -> (B, L, d_model)``, state ``(B, d_model, d_state / 2)`` complex.

    ``A``, ``dt`` are marked for no weight decay and learning rate ``lr`` (:func:`param_groups`)."""

    def __init__(self, d_model: int, d_state: int = 64, *, dropout: float = 0.0, dt_min: float = 1e-3,
                 dt_max: float = 0.1, lr: float | None = 1e-3) -> None:
        super().__init__()
        V.check_positive_int("d_model", d_model)
        if not V.is_int(d_state, 2) or d_state % 2:
            V.fail("d_state", d_state, "expected an even int >= 2 (modes come in conjugate pairs)")
        V.check_dropout(dropout, "dropout")
        if not 0 < dt_min < dt_max:
            V.fail("dt_min", dt_min, f"expected 0 < dt_min < dt_max = {dt_max}")
        self.d_model, self.d_state = d_model, d_state
        h, n = d_model, d_state // 2
        log_dt = torch.rand(h) * (math.log(dt_max) - math.log(dt_min)) + math.log(dt_min)  # (H,)
        self.log_dt = nn.Parameter(log_dt)
        self.C = nn.Parameter(torch.view_as_real(torch.randn(h, n, dtype=torch.cfloat)))  # (H, N/2, 2)
        self.log_A_real = nn.Parameter(torch.log(0.5 * torch.ones(h, n)))  # (H, N/2)
        self.A_imag = nn.Parameter(math.pi * torch.arange(n, dtype=torch.float).repeat(h, 1))  # (H, N/2)
        self.D = nn.Parameter(torch.randn(h))  # (H,)
        hint = {"weight_decay": 0.0} if lr is None else {"weight_decay": 0.0, "lr": lr}
        for p in (self.log_dt, self.log_A_real, self.A_imag):
            set_optim_hint(p, **hint)
        self.dropout = nn.Dropout(dropout)
        self.out_proj = nn.Linear(d_model, 2 * d_model)

    def _discrete(self) -> tuple[Tensor, Tensor, Tensor]:
        """``(dtA, A, C)``: ``(H, N/2)`` complex each; ``C`` already times ``(exp(dtA) - 1) / A``."""
        a = -torch.exp(self.log_A_real) + 1j * self.A_imag  # (H, N/2)
        dta = a * torch.exp(self.log_dt)[:, None]  # (H, N/2)
        c = torch.view_as_complex(self.C) * (torch.exp(dta) - 1.0) / a  # (H, N/2)
        return dta, a, c

    def kernel(self, length: int) -> Tensor:
        """The convolution kernel ``K (d_model, length)``, ``K_l = 2 Re(sum_n c_n z_n^l)``: a
        Vandermonde product, computed as one batched complex matmul over blocks of ``l``
        (:func:`_power_blocks`) instead of an ``exp`` of every ``(channel, mode, l)``."""
        dta, _, c = self._discrete()
        zr, zq, m = _power_blocks(dta, length)  # (H, N/2, M): z^r, (H, N/2, Q): z^(q M)
        k = torch.matmul((c[..., None] * zq).transpose(1, 2), zr)  # (H, Q, M): sum_n c z^(qM) z^r
        return 2 * k.reshape(k.shape[0], -1)[:, :length].real  # (H, L)

    def _head(self, y: Tensor) -> Tensor:
        """GELU, dropout, then the GLU output projection: ``(..., d_model) -> (..., d_model)``."""
        return F.glu(self.out_proj(self.dropout(F.gelu(y))), -1)

    def _forward(self, x: Tensor, mask: Tensor | None, return_state: bool) -> tuple[Tensor, dict[str, Tensor] | None]:
        u = x.transpose(1, 2)  # (B, H, L)
        y = fft_conv(u, self.kernel(u.shape[-1]).to(u.dtype)) + u * self.D[:, None]  # (B, H, L)
        return self._head(y.transpose(1, 2)), (self._final_state(x, mask) if return_state else None)

    def _final_state(self, x: Tensor, mask: Tensor | None) -> dict[str, Tensor]:
        """The state after each sequence's last real position, ``sum_s A_bar^s B_bar u_{n-1-s}``:
        the input reversed within its length against the kernel's Vandermonde matrix, in the
        blocks of :func:`_power_blocks`."""
        dta, a, _ = self._discrete()
        zr, zq, m = _power_blocks(dta, x.shape[1])  # (H, N/2, M), (H, N/2, Q)
        u_rev = reverse_within(x, mask).transpose(1, 2).to(zr.dtype)  # (B, H, L): u_{n-1-s}, 0 past n
        u_rev = F.pad(u_rev, (0, zq.shape[-1] * m - u_rev.shape[-1]))  # (B, H, Q * M)
        inner = torch.matmul(u_rev.unflatten(-1, (zq.shape[-1], m)), zr.transpose(1, 2))  # (B, H, Q, N/2)
        return {"x": torch.einsum("bhqn,hnq->bhn", inner, zq) * (torch.exp(dta) - 1.0) / a}

    def init_state(self, batch: int, *, device: torch.device | None = None,
                   dtype: torch.dtype | None = None) -> dict[str, Tensor]:
        cdtype = (torch.ones((), dtype=dtype or torch.get_default_dtype()) * 1j).dtype
        return {"x": torch.zeros(batch, self.d_model, self.d_state // 2, device=device, dtype=cdtype)}

    def step(self, x_t: Tensor, state: dict[str, Tensor] | None = None) -> tuple[Tensor, dict[str, Tensor]]:
        state = self._start(x_t, state)
        dta, a, c = self._discrete()
        s = torch.exp(dta) * state["x"] + (torch.exp(dta) - 1.0) / a * x_t[..., None]  # (B, H, N/2)
        # c carries the input factor already: the kernel is Re(C A_bar^l B_bar); the state uses C alone
        y = 2 * torch.einsum("hn,bhn->bh", torch.view_as_complex(self.C), s).real + self.D * x_t  # (B, H)
        return self._head(y), {"x": s}
