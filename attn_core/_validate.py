"""Argument checks shared by attn_core: every bad input becomes a ``ValueError`` that
names the argument, the value it got and what is allowed, before torch sees it."""

from __future__ import annotations

from typing import Iterable

import torch
from torch import Tensor


def fail(name: str, value: object, allowed: str) -> None:
    raise ValueError(f"{name}={value!r} is invalid: {allowed}")


def is_int(value: object, low: int) -> bool:
    """``value`` is an ``int`` (not a ``bool``) and ``>= low``: the one integer rule of every check."""
    return not isinstance(value, bool) and isinstance(value, int) and value >= low


def check_positive_int(name: str, value: object) -> None:
    if not is_int(value, 1):
        fail(name, value, "expected a positive int")


def check_choice(name: str, value: object, choices: Iterable[str]) -> None:
    choices = tuple(choices)
    if value not in choices:
        fail(name, value, "expected one of " + ", ".join(repr(c) for c in choices))


def check_tensor(name: str, t: object, ndim: int | tuple[int, ...], layout: str) -> Tensor:
    if not isinstance(t, Tensor):
        fail(name, type(t).__name__, f"expected a torch.Tensor of shape {layout}")
    ndims = (ndim,) if isinstance(ndim, int) else ndim
    if t.dim() not in ndims:
        raise ValueError(f"{name} has shape {tuple(t.shape)}: expected {layout}")
    return t


def check_window(window: object) -> None:
    if window is None:
        return
    if not is_int(window, 0):
        fail("window", window, "expected None (full attention) or an int >= 0")


def check_dropout(p: object, name: str = "dropout_p") -> None:
    if not isinstance(p, (int, float)) or not 0.0 <= float(p) < 1.0:
        fail(name, p, "expected a float in [0, 1)")


def check_scale(scale: object) -> None:
    if scale is not None and (not isinstance(scale, (int, float)) or scale <= 0):
        fail("scale", scale, "expected None (1/sqrt(head_dim)) or a positive float")


def check_same(name: str, tensors: dict[str, Tensor], attr: str) -> None:
    values = {k: getattr(t, attr) for k, t in tensors.items()}
    if len(set(values.values())) > 1:
        desc = ", ".join(f"{k}.{attr}={v}" for k, v in values.items())
        raise ValueError(f"{name}: {desc}; q, k and v must share {attr}")


def check_key_padding_mask(kpm: object, batch: int, k_len: int) -> Tensor | None:
    if kpm is None:
        return None
    check_tensor("key_padding_mask", kpm, 2, f"(B, Lk) = ({batch}, {k_len}) bool, True = real token")
    assert isinstance(kpm, Tensor)
    if kpm.dtype != torch.bool:
        raise ValueError(
            f"key_padding_mask has dtype {kpm.dtype}: expected torch.bool with True = real token"
        )
    if tuple(kpm.shape) != (batch, k_len):
        raise ValueError(
            f"key_padding_mask has shape {tuple(kpm.shape)}: expected (B, Lk) = ({batch}, {k_len})"
        )
    return kpm


def check_edge_index(edge_index: object, num_src: int, num_dst: int) -> Tensor:
    check_tensor("edge_index", edge_index, 2, "(2, E) integer tensor, row 0 = source, row 1 = target")
    assert isinstance(edge_index, Tensor)
    if edge_index.shape[0] != 2:
        raise ValueError(
            f"edge_index has shape {tuple(edge_index.shape)}: expected (2, E), row 0 = source, row 1 = target"
        )
    if edge_index.dtype not in (torch.int64, torch.int32):
        raise ValueError(f"edge_index has dtype {edge_index.dtype}: expected torch.long")
    if edge_index.numel() and edge_index.device.type == "cpu":
        _check_edge_range(edge_index, num_src, num_dst)
    return edge_index


def _check_edge_range(edge_index: Tensor, num_src: int, num_dst: int) -> None:
    """Index values in range, without a host sync on the passing path: the comparison stays a
    tensor and ``torch._assert_async`` raises from it (no ``.item()``, so a sync counter sees
    nothing). Done for CPU tensors only: on CUDA the assert would be a device-side assert that
    poisons the context, exactly like the out-of-range ``index_select`` it would pre-empt, and
    reading the values back would sync every step. Check CUDA graphs on CPU (at data load)."""
    ok = (edge_index.min() >= 0) & (edge_index[0].max() < num_src) & (edge_index[1].max() < num_dst)
    try:
        torch._assert_async(ok, "edge_index out of range")
    except RuntimeError:  # failing: reading the values is free now
        src, dst = edge_index[0], edge_index[1]
        raise ValueError(
            f"edge_index out of range: sources span [{int(src.min())}, {int(src.max())}] "
            f"(allowed [0, {num_src - 1}]), targets span [{int(dst.min())}, {int(dst.max())}] "
            f"(allowed [0, {num_dst - 1}])"
        ) from None
