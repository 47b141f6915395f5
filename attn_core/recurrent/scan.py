"""The parallel paths every recurrence here runs on, in pure PyTorch (no compiled kernel, same
code on CPU and GPU):

- :func:`linear_scan`: ``h_t = a_t * h_{t-1} + b_t`` (real or complex, elementwise) by odd/even
  recursive doubling: O(L) work, O(log L) depth, no logarithms (so negative and complex ``a``
  are fine). Its backward is the same scan run in reverse (a custom autograd Function), so
  training never stores the doubling's intermediate levels.
- :func:`fft_conv`: the causal convolution ``y = k * u`` of a time-invariant model (S4D) in
  O(L log L) through the FFT.
- :func:`ssd_scan`: the chunked state-space-duality algorithm of Mamba-2 (Dao & Gu 2024) for a
  scalar decay per head: quadratic "attention form" inside chunks, :func:`linear_scan` across
  chunk states.

``torch.associative_scan`` is not used: it is a prototype, compiled only on CUDA/XPU and its
autograd is still changing.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor

from attn_core import _validate as V

__all__ = ["linear_scan", "fft_conv", "segsum", "ssd_scan"]


def _doubling(a: Tensor, b: Tensor) -> Tensor:
    """``h`` of ``h_t = a_t h_{t-1} + b_t`` (``h_{-1} = 0``) along dim 0, by odd/even doubling:
    pairs ``(2i, 2i+1)`` compose into one step ``(a_{2i+1} a_{2i}, a_{2i+1} b_{2i} + b_{2i+1})``,
    the half-length scan gives ``h`` at the odd positions, one more step the even ones."""
    length = a.shape[0]
    if length == 1:
        return b.clone()
    n = length // 2  # pairs
    a_e, a_o = a[0 : 2 * n : 2], a[1 : 2 * n : 2]  # (n, ...)
    h_odd = _doubling(a_o * a_e, a_o * b[0 : 2 * n : 2] + b[1 : 2 * n : 2])  # h_1, h_3, ..., h_{2n-1}
    h = torch.empty_like(b)
    h[1 : 2 * n : 2] = h_odd
    h[0] = b[0]
    n_even = (length - 1) // 2  # even positions 2, 4, ... below length
    if n_even:
        h[2:length:2] = a[2:length:2] * h_odd[:n_even] + b[2:length:2]
    return h


class _LinearScan(torch.autograd.Function):
    """``h = scan(a, b)`` along dim 0. Backward (PyTorch's conjugate convention for complex):
    ``g_t = dL/dh_t + conj(a_{t+1}) g_{t+1}`` is the reverse scan with ``a`` shifted by one;
    ``dL/db = g`` and ``dL/da_t = g_t conj(h_{t-1})``. Built from ``apply`` itself, so it is
    differentiable again (double backward)."""

    @staticmethod
    def forward(ctx, a: Tensor, b: Tensor) -> Tensor:  # type: ignore[override]
        h = _doubling(a, b)
        ctx.save_for_backward(a, h)
        return h

    @staticmethod
    def backward(ctx, grad_h: Tensor):  # type: ignore[override]
        a, h = ctx.saved_tensors
        a_next = torch.cat([a[1:], torch.zeros_like(a[:1])]).conj()  # (L, ...): a_{t+1}, 0 at the end
        g = _LinearScan.apply(a_next.flip(0), grad_h.flip(0)).flip(0)  # (L, ...)
        grad_a = grad_b = None
        if ctx.needs_input_grad[0]:
            h_prev = torch.cat([torch.zeros_like(h[:1]), h[:-1]])  # h_{t-1}, h_{-1} = 0
            grad_a = g * h_prev.conj()
        if ctx.needs_input_grad[1]:
            grad_b = g
        return grad_a, grad_b


def linear_scan(a: Tensor, b: Tensor, h0: Tensor | None = None, *, dim: int = 1) -> Tensor:
    """All states of the linear recurrence ``h_t = a_t * h_{t-1} + b_t`` along ``dim``.

    ``a`` and ``b`` broadcast to one shape (e.g. ``a (B, L, H, 1)``, ``b (B, L, H, N)``); either
    may be complex (the other is promoted). ``h0``: the state before the first step, the shape
    of one time slice (``dim`` removed), default zeros. Returns ``h``, the broadcast shape.
    O(L) work and memory, O(log L) sequential depth; differentiable in ``a``, ``b`` and ``h0``."""
    V.check_tensor("a", a, tuple(range(1, 9)), "a tensor with a time dimension")
    V.check_tensor("b", b, tuple(range(1, 9)), "a tensor with a time dimension")
    dtype = torch.promote_types(a.dtype, b.dtype)
    a, b = torch.broadcast_tensors(a.to(dtype), b.to(dtype))
    dim = dim % a.dim()
    if a.shape[dim] == 0:
        return b.clone()
    a, b = a.movedim(dim, 0), b.movedim(dim, 0)  # (L, ...)
    if h0 is not None:
        first = b[:1] + a[:1] * h0.to(dtype).unsqueeze(0)  # h_0 = a_0 h0 + b_0
        b = torch.cat([first, b[1:]])
    return _LinearScan.apply(a, b).movedim(0, dim)


def fft_conv(u: Tensor, k: Tensor) -> Tensor:
    """The causal convolution ``y_t = sum_{s <= t} k_s u_{t-s}`` along the last dim, O(L log L).

    ``u (..., L)``, ``k (..., Lk)`` broadcasting over the leading dims (e.g. ``u (B, H, L)``,
    ``k (H, L)``). Zero-padded to ``L + Lk`` so the circular FFT convolution is linear: nothing
    wraps from the end of the sequence to its start."""
    length = u.shape[-1]
    n = length + k.shape[-1]
    y = torch.fft.irfft(torch.fft.rfft(u, n=n) * torch.fft.rfft(k, n=n), n=n)  # (..., n)
    return y[..., :length]


def segsum(x: Tensor) -> Tensor:
    """``out[..., i, j] = x_{j+1} + ... + x_i`` for ``i >= j`` (0 on the diagonal) and ``-inf``
    above it: ``exp(segsum(log_a))`` is the decay from step ``j`` to step ``i``.

    ``x (..., T) -> (..., T, T)``. Stable: each sum is a cumulative sum of the masked terms
    themselves, never a difference of two long cumulative sums (which cancels catastrophically)."""
    t = x.shape[-1]
    rows = x.unsqueeze(-1).expand(*x.shape, t)  # (..., T, T): rows[..., i, j] = x_i
    strict = torch.ones(t, t, dtype=torch.bool, device=x.device).tril(-1)  # i > j
    out = rows.masked_fill(~strict, 0).cumsum(-2)  # (..., T, T): sum over j < k <= i
    return out.masked_fill(~strict.logical_or(torch.eye(t, dtype=torch.bool, device=x.device)), float("-inf"))


def ssd_scan(
    x: Tensor, log_a: Tensor, B: Tensor, C: Tensor, *, chunk_size: int = 64, initial_state: Tensor | None = None
) -> tuple[Tensor, Tensor]:
    """Mamba-2's selective scan with a scalar decay per head, by chunks (SSD):

        h_t = exp(log_a_t) h_{t-1} + x_t B_t^T     (per head: h (P, N))
        y_t = h_t C_t

    ``x (Bt, L, H, P)``, ``log_a (Bt, L, H)`` (``<= 0``: ``A dt``), ``B``/``C (Bt, L, H, N)``,
    ``initial_state (Bt, H, P, N)``. Returns ``y (Bt, L, H, P)`` and the final state
    ``(Bt, H, P, N)``. Inside a chunk of ``Q`` positions the output is the masked quadratic form
    ``(C B^T * exp(segsum(log_a))) x`` (O(L Q) work, matmuls); chunk states pass on through
    :func:`linear_scan` (O(L / Q) steps). ``L`` need not divide by ``Q``: the tail is padded with
    steps that change nothing (``log_a = 0``, ``x = 0``)."""
    V.check_positive_int("chunk_size", chunk_size)
    bt, length, h, p = x.shape
    q = min(chunk_size, max(length, 1))
    pad = (-length) % q
    if pad:
        x, B, C = (F.pad(t, (0, 0, 0, 0, 0, pad)) for t in (x, B, C))
        log_a = F.pad(log_a, (0, 0, 0, pad))
    c = x.shape[1] // q
    x, B, C = (t.reshape(bt, c, q, h, t.shape[-1]) for t in (x, B, C))  # (Bt, c, Q, H, .)
    a = log_a.reshape(bt, c, q, h).permute(0, 3, 1, 2)  # (Bt, H, c, Q)
    a_cum = a.cumsum(-1)  # (Bt, H, c, Q)
    # 1. within chunks: the attention form
    decay = torch.exp(segsum(a))  # (Bt, H, c, Q, Q)
    scores = torch.einsum("bclhn,bcshn->bhcls", C, B) * decay  # (Bt, H, c, Q, Q)
    y_diag = torch.einsum("bhcls,bcshp->bclhp", scores, x)  # (Bt, c, Q, H, P)
    # 2. each chunk's own final state (from zero)
    to_end = torch.exp(a_cum[..., -1:] - a_cum)  # (Bt, H, c, Q): decay from step l to chunk end
    states = torch.einsum("bclhn,bhcl,bclhp->bchpn", B, to_end, x)  # (Bt, c, H, P, N)
    # 3. across chunks: S_c = exp(sum of chunk c's log_a) S_{c-1} + states_c
    chunk_decay = torch.exp(a_cum[..., -1]).permute(0, 2, 1)[..., None, None]  # (Bt, c, H, 1, 1)
    ends = linear_scan(chunk_decay, states, initial_state, dim=1)  # (Bt, c, H, P, N)
    start = torch.zeros_like(states[:, :1]) if initial_state is None else initial_state.unsqueeze(1).to(states)
    entering = torch.cat([start, ends[:, :-1]], 1)  # (Bt, c, H, P, N): state before each chunk
    # 4. the entering state's contribution inside each chunk
    y_off = torch.einsum("bclhn,bchpn,bhcl->bclhp", C, entering, torch.exp(a_cum))  # (Bt, c, Q, H, P)
    y = (y_diag + y_off).reshape(bt, c * q, h, p)[:, :length]
    return y, ends[:, -1]
