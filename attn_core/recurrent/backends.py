"""Optional fused GPU kernels for two of the scans (issue 31 item 9), from flash-linear-attention
(``fla``, Triton), chosen per layer by ``backend=``:

- ``"pure"`` (the default): :func:`~attn_core.recurrent.linear_scan` and
  :func:`~attn_core.recurrent.ssd_scan`, pure PyTorch, the same code on every device;
- ``"fla"``: the gated scan ``h_t = a_t h_{t-1} + b_t`` with ``0 < a_t <= 1`` elementwise as fla's
  HGRN kernel (``chunk_hgrn``, decay given as ``log a``), and Mamba-2's SSD as fla's simple GLA
  (``chunk_simple_gla``: queries ``C``, keys ``B``, values ``dt x``, per-head decay ``log a``,
  scale 1). CUDA only; asking for it without CUDA or without ``fla`` installed is one error
  naming what is missing, never a silent fallback, so a record's ``backend`` is the path that ran.

Both are checked against the pure path on a GPU (values and gradients, tests/attn_core/recurrent/
test_cuda.py). fla's layouts are ``(B, T, D)`` and ``(B, T, H, K)``, ours too.
"""

from __future__ import annotations

import functools
from typing import Any

import torch
from torch import Tensor

from attn_core import _validate as V
from attn_core.recurrent.scan import linear_scan, ssd_scan

__all__ = ["BACKENDS", "check_backend", "gated_scan", "ssd", "fla_backward_refused"]

BACKENDS = ("pure", "fla")


def check_backend(backend: object) -> None:
    """``backend`` is one of :data:`BACKENDS` (a layer's constructor check; no import happens here)."""
    V.check_choice("backend", backend, BACKENDS)


def _fla(module: str, device: torch.device) -> Any:
    """fla's ``module`` (``fla.ops.hgrn``, ``fla.ops.simple_gla``), or a one-line error."""
    if device.type != "cuda":
        raise ValueError(f"backend='fla' runs on CUDA only, and the input is on {device}: use backend='pure' there")
    try:
        import importlib

        return importlib.import_module(module)
    except ImportError as e:
        raise ValueError(f"backend='fla' needs flash-linear-attention ({module}): {e}; "
                         "install it (pip install fla-core, or attnbench's extra: pip install -e '.[fla]') "
                         "or use backend='pure'") from None


@functools.lru_cache(maxsize=None)
def _machine(index: int) -> tuple[tuple[int, int], str | None, bool]:
    """``(compute capability of CUDA device index, Triton's version or None, tilelang importable)``,
    read once per device: :func:`fla_backward_refused` runs at every training forward pass."""
    import importlib.util

    try:
        import triton

        version = triton.__version__
    except ImportError:
        version = None
    return torch.cuda.get_device_capability(index), version, importlib.util.find_spec("tilelang") is not None


def fla_backward_refused(device: torch.device, *, triton_version: str | None = None,
                         capability: tuple[int, int] | None = None, tilelang: bool | None = None) -> str | None:
    """Why fla refuses the backward of its gated chunk kernels (simple GLA, Mamba-2's path) on
    ``device``, or ``None``: on Hopper (compute capability 9.x) Triton 3.4 to 3.7.0 computes wrong
    gradients there, so fla raises in the backward pass unless tilelang is installed (fla #640,
    #983, #984; seen on an H100 with Triton 3.6, 2026-11-27). Checked before the forward pass so
    that a training step fails at once with one line, not halfway through. The keyword arguments
    replace what is read from the machine (tests)."""
    from packaging.version import Version

    if device.type != "cuda":
        return None
    if capability is None or triton_version is None or tilelang is None:
        cap, version, has_tilelang = _machine(device.index if device.index is not None else torch.cuda.current_device())
        capability = cap if capability is None else capability
        triton_version = version if triton_version is None else triton_version
        tilelang = has_tilelang if tilelang is None else tilelang
    if triton_version is None:
        return None
    if capability[0] == 9 and (3, 4) <= Version(triton_version).release[:3] < (3, 7, 1) and not tilelang:
        return (f"fla refuses the backward of its gated chunk kernels on Hopper (sm_{capability[0]}{capability[1]}) "
                f"with Triton {triton_version} (3.4 to 3.7.0 give wrong gradients there, fla #640) unless tilelang "
                "is installed: pip install tilelang, or Triton >= 3.7.1")
    return None


def gated_scan(a: Tensor, b: Tensor, log_a: Tensor, backend: str = "pure") -> Tensor:
    """``h`` of ``h_t = a_t h_{t-1} + b_t`` along dim 1, ``a``, ``b``, ``log_a`` ``(B, L, D)`` with
    ``log_a = log(a)`` computed by the caller (stably, e.g. ``logsigmoid``); the pure path reads
    ``a``, the fla path ``log_a``."""
    if backend == "pure":
        return linear_scan(a, b, dim=1)
    hgrn = _fla("fla.ops.hgrn", b.device)
    h, _ = hgrn.chunk_hgrn(b, log_a)  # (B, L, D): h_t = exp(g_t) h_{t-1} + x_t
    return h


def ssd(x: Tensor, log_a: Tensor, B: Tensor, C: Tensor, *, chunk_size: int, backend: str = "pure"
        ) -> tuple[Tensor, Tensor]:
    """Mamba-2's scan ``y (Bt, L, H, P)`` and final state ``(Bt, H, P, N)`` (see
    :func:`~attn_core.recurrent.ssd_scan`) on the path ``backend`` names."""
    if backend == "pure":
        return ssd_scan(x, log_a, B, C, chunk_size=chunk_size)
    gla = _fla("fla.ops.simple_gla", x.device)
    if torch.is_grad_enabled() and any(t.requires_grad for t in (x, log_a, B, C)):
        refused = fla_backward_refused(x.device)
        if refused:
            raise ValueError(f"backend='fla' cannot train Mamba-2 here: {refused}; use backend='pure' "
                             "(fla's forward alone, e.g. under torch.no_grad(), runs)")
    # simple GLA: S_t = exp(g_t) S_{t-1} + k_t v_t^T (K x V), o_t = scale * q_t^T S_t; ours is its
    # transpose (h = S^T, P x N) with k = B, v = x, q = C, g = log a, scale 1
    y, state = gla.chunk_simple_gla(q=C, k=B, v=x, g=log_a, scale=1.0, output_final_state=True)
    return y, state.transpose(-1, -2)  # (Bt, H, N, P) -> (Bt, H, P, N)
