"""What every recurrent layer shares: padded batches, the bidirectional wrapper and the
optimiser groups built from per-parameter hints.

Padding: batches are right-padded (each sequence's real positions come first), given as
``lengths (B,)`` or ``key_padding_mask (B, L)`` (``True`` = real token, as in attention). A
causal pass never lets a padded position reach a real one; padded inputs are zeroed before any
op (so NaN/garbage there cannot leak through ``0 * x``) and padded outputs are zeros. The
reverse direction reverses each sequence within its own length, so padding stays at the end.
"""

from __future__ import annotations

from typing import Any, Callable

import torch
from torch import Tensor, nn

from attn_core import _validate as V

__all__ = ["RecurrentLayer", "Bidirectional", "resolve_mask", "reverse_within", "param_groups", "set_optim_hint"]


def resolve_mask(x: Tensor, lengths: Tensor | None = None, key_padding_mask: Tensor | None = None) -> Tensor | None:
    """The ``(B, L)`` bool mask (``True`` = real) of a right-padded batch ``x (B, L, ...)``, from
    ``lengths`` or ``key_padding_mask`` (not both); ``None`` when neither is given. A mask with a
    real token after a padded one is refused: recurrences need each sequence to be a prefix."""
    batch, length = x.shape[0], x.shape[1]
    if lengths is not None and key_padding_mask is not None:
        raise ValueError("lengths and key_padding_mask were both given: pass lengths or key_padding_mask, not both")
    steps = torch.arange(length, device=x.device)
    if lengths is not None:
        V.check_tensor("lengths", lengths, 1, f"(B,) = ({batch},) integer tensor")
        if lengths.shape[0] != batch or lengths.dtype.is_floating_point or lengths.dtype.is_complex:
            raise ValueError(f"lengths has shape {tuple(lengths.shape)} and dtype {lengths.dtype}: "
                             f"expected (B,) = ({batch},) integers")
        if lengths.numel() and lengths.device.type == "cpu":
            _assert_or(((lengths >= 0) & (lengths <= length)).all(), lambda: ValueError(
                f"lengths span [{int(lengths.min())}, {int(lengths.max())}]: expected values in "
                f"[0, {length}] (the padded length L)"))
        return steps < lengths.to(x.device)[:, None]  # (B, L)
    mask = V.check_key_padding_mask(key_padding_mask, batch, length)
    if mask is None:
        return None
    if mask.device.type == "cpu":
        gaps = mask[:, 1:] & ~mask[:, :-1]  # (B, L-1): a real token right after a padded one
        _assert_or(~gaps.any(), lambda: ValueError(
            f"key_padding_mask row {int(gaps.any(1).nonzero()[0])} has a real token after a padded one: recurrent "
            "layers need right-padded batches (True for the first lengths[b] positions, then False)"))
    return mask


def _assert_or(ok: Tensor, error: Callable[[], Exception]) -> None:
    """Raise ``error()`` unless the bool tensor ``ok`` holds, without reading it back on the passing
    path (``torch._assert_async``: no host sync in a training step). CPU tensors only: on CUDA
    it would be a device-side assert that poisons the context, so CUDA inputs are not checked."""
    try:
        torch._assert_async(ok, "check failed")
    except RuntimeError:  # failing: reading the values is free now
        raise error() from None


def reverse_within(x: Tensor, mask: Tensor | None) -> Tensor:
    """``x (B, L, ...)`` with each sequence's real positions reversed in place and its padding
    left where it is: position ``t < n_b`` takes ``n_b - 1 - t``. Its own inverse."""
    length = x.shape[1]
    if mask is None:
        return x.flip(1)
    n = mask.sum(1, keepdim=True)  # (B, 1)
    t = torch.arange(length, device=x.device)[None, :]  # (1, L)
    idx = torch.where(t < n, n - 1 - t, t)  # (B, L)
    return x.gather(1, idx.view(*idx.shape, *([1] * (x.dim() - 2))).expand_as(x))


class RecurrentLayer(nn.Module):
    """Base of the recurrent layers: ``forward(x (B, L, d_model), *, lengths=None,
    key_padding_mask=None, return_state=False) -> (B, L, d_model)``, causal; with
    ``return_state`` also the state after each sequence's last real position (the one ``step``
    continues from: a prompt is read in parallel, then decoded one token at a time).
    Subclasses implement ``_forward(x, mask, return_state) -> (y, state or None)`` (``x``
    already zero at padded positions, ``mask (B, L)`` or ``None``) and, for decoding,
    ``init_state(batch, *, device, dtype)`` and ``step``."""

    d_model: int

    def forward(self, x: Tensor, *, lengths: Tensor | None = None, key_padding_mask: Tensor | None = None,
                return_state: bool = False) -> Tensor | tuple[Tensor, dict[str, Tensor]]:
        V.check_tensor("x", x, 3, f"(B, L, d_model) = (B, L, {self.d_model})")
        if x.shape[-1] != self.d_model:
            raise ValueError(f"x has shape {tuple(x.shape)}: expected (B, L, d_model) with d_model={self.d_model}")
        mask = resolve_mask(x, lengths, key_padding_mask)
        if mask is not None:
            x = x.masked_fill(~mask[..., None], 0.0)  # (B, L, d_model)
        y, state = self._forward(x, mask, return_state)
        y = y if mask is None else y.masked_fill(~mask[..., None], 0.0)
        if not return_state:
            return y
        if state is None:
            raise NotImplementedError(f"{type(self).__name__} cannot return its state")
        return y, state

    def _forward(self, x: Tensor, mask: Tensor | None, return_state: bool) -> tuple[Tensor, dict[str, Tensor] | None]:
        raise NotImplementedError

    def init_state(self, batch: int, *, device: torch.device | None = None,
                   dtype: torch.dtype | None = None) -> dict[str, Tensor]:
        """The state before the first position: a dict of batch-first tensors."""
        raise NotImplementedError(f"{type(self).__name__} has no step()")

    def step(self, x_t: Tensor, state: dict[str, Tensor] | None = None) -> tuple[Tensor, dict[str, Tensor]]:
        """One position ``x_t (B, d_model) -> y_t (B, d_model)`` and the next state, equal to the
        causal forward's output at that position (``state=None``: the initial state)."""
        raise NotImplementedError(f"{type(self).__name__} has no step()")

    def _start(self, x_t: Tensor, state: dict[str, Tensor] | None) -> dict[str, Tensor]:
        V.check_tensor("x_t", x_t, 2, f"(B, d_model) = (B, {self.d_model})")
        return self.init_state(x_t.shape[0], device=x_t.device, dtype=x_t.dtype) if state is None else state


class Bidirectional(nn.Module):
    """Two causal recurrences with their own parameters, one over each sequence reversed within
    its length; their outputs are summed (``merge="sum"``) or concatenated and projected back to
    ``d_model`` (``merge="concat"``). ``layer_factory()`` builds one direction."""

    def __init__(self, layer_factory: Callable[[], nn.Module], *, merge: str = "sum") -> None:
        super().__init__()
        V.check_choice("merge", merge, ("sum", "concat"))
        self.forward_layer = layer_factory()
        self.backward_layer = layer_factory()
        self.d_model = int(self.forward_layer.d_model)
        self.merge = merge
        self.proj = nn.Linear(2 * self.d_model, self.d_model) if merge == "concat" else None

    def forward(self, x: Tensor, *, lengths: Tensor | None = None, key_padding_mask: Tensor | None = None) -> Tensor:
        mask = resolve_mask(x, lengths, key_padding_mask)
        fwd = self.forward_layer(x, key_padding_mask=mask)  # (B, L, d_model)
        bwd = reverse_within(self.backward_layer(reverse_within(x, mask), key_padding_mask=mask), mask)
        if self.proj is None:
            return fwd + bwd
        y = self.proj(torch.cat([fwd, bwd], -1))  # (B, L, d_model)
        return y if mask is None else y.masked_fill(~mask[..., None], 0.0)


def set_optim_hint(param: nn.Parameter, **hint: Any) -> nn.Parameter:
    """Mark ``param`` with optimiser settings of its own (``weight_decay=0.0``, ``lr=1e-3``), read by
    :func:`param_groups` (the ``_optim`` attribute, as in the S4 code)."""
    param._optim = dict(hint)  # type: ignore[attr-defined]
    return param


def param_groups(module: nn.Module, base_lr: float, weight_decay: float) -> list[dict[str, Any]]:
    """Optimiser parameter groups for ``module``: one group with ``base_lr``/``weight_decay`` for
    the parameters without a hint, one per distinct ``_optim`` hint (its keys override the
    defaults: a state matrix gets no weight decay and its own lr). Frozen parameters are left
    out; empty groups are dropped. Pass the result to any ``torch.optim`` optimiser."""
    if not isinstance(base_lr, (int, float)) or isinstance(base_lr, bool) or base_lr <= 0:
        V.fail("base_lr", base_lr, "expected a positive float")
    if not isinstance(weight_decay, (int, float)) or isinstance(weight_decay, bool) or weight_decay < 0:
        V.fail("weight_decay", weight_decay, "expected a float >= 0")
    groups: dict[tuple, dict[str, Any]] = {(): {"params": [], "lr": float(base_lr), "weight_decay": float(weight_decay)}}
    for name, p in module.named_parameters():
        if not p.requires_grad:
            continue
        hint = getattr(p, "_optim", None) or {}
        key = tuple(sorted(hint.items()))
        if key not in groups:
            groups[key] = {"params": [], "lr": float(base_lr), "weight_decay": float(weight_decay), **hint}
        groups[key]["params"].append(p)
    return [g for g in groups.values() if g["params"]]
