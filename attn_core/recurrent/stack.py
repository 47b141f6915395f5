"""A stack of recurrent layers, the recurrent counterpart of :class:`attn_core.TransformerEncoder`:
``num_layers`` pre-norm residual blocks ``x + dropout(layer(norm(x)))`` of one registered
recurrence, then a final norm. What a task's recurrent model is built from."""

from __future__ import annotations

from typing import Any

import torch
from torch import Tensor, nn

from attn_core import _validate as V
from attn_core.recurrent.base import resolve_mask
from attn_core.recurrent.registry import build_recurrence, get_recurrence

__all__ = ["RecurrentEncoder"]

NORMS = {"layer": nn.LayerNorm, "rms": nn.RMSNorm}


class RecurrentEncoder(nn.Module):
    """``num_layers`` blocks of recurrence ``recurrence`` (its own ``params``), ``(B, L, d_model) ->
    (B, L, d_model)``, with ``lengths``/``key_padding_mask`` for right-padded batches (padded
    outputs are zeros). ``bidirectional``: each layer is :class:`~attn_core.recurrent.Bidirectional`
    (then there is no ``step``). ``norm``: ``"layer"`` (LayerNorm) or ``"rms"`` (RMSNorm)."""

    def __init__(self, recurrence: str, d_model: int, num_layers: int = 1, *, bidirectional: bool = False,
                 dropout: float = 0.0, norm: str = "layer", params: dict[str, Any] | None = None) -> None:
        super().__init__()
        spec = get_recurrence(recurrence)
        V.check_positive_int("d_model", d_model)
        V.check_positive_int("num_layers", num_layers)
        V.check_dropout(dropout, "dropout")
        V.check_choice("norm", norm, NORMS)
        self.d_model, self.num_layers, self.bidirectional = d_model, num_layers, bidirectional
        self.has_step = spec.step and not bidirectional
        self.layers = nn.ModuleList(build_recurrence(recurrence, d_model, bidirectional=bidirectional, **(params or {}))
                                    for _ in range(num_layers))
        self.norms = nn.ModuleList(NORMS[norm](d_model) for _ in range(num_layers))
        self.final_norm = NORMS[norm](d_model)
        self.dropout = nn.Dropout(dropout)

    def forward(self, x: Tensor, *, lengths: Tensor | None = None, key_padding_mask: Tensor | None = None,
                return_state: bool = False) -> Tensor | tuple[Tensor, dict[str, Tensor]]:
        """``x (B, L, d_model)``; with ``return_state`` also the state :meth:`step` continues from."""
        V.check_tensor("x", x, 3, f"(B, L, d_model) = (B, L, {self.d_model})")
        mask = resolve_mask(x, lengths, key_padding_mask)
        if return_state and not self.has_step:
            raise ValueError("return_state=True needs a causal stack of a recurrence with step(): "
                             "this one is bidirectional or its recurrence has no step()")
        if mask is not None:  # padded positions zero from the start: nothing there reaches the norms' gradients
            x = x.masked_fill(~mask[..., None], 0.0)
        state: dict[str, Tensor] = {}
        for i, (layer, norm) in enumerate(zip(self.layers, self.norms)):
            out = layer(norm(x), key_padding_mask=mask, **({"return_state": True} if return_state else {}))
            if return_state:
                out, own = out
                state.update({f"{i}.{k}": v for k, v in own.items()})
            x = x + self.dropout(out)  # (B, L, d_model)
        y = self.final_norm(x)
        y = y if mask is None else y.masked_fill(~mask[..., None], 0.0)
        return (y, state) if return_state else y

    def init_state(self, batch: int, *, device: torch.device | None = None,
                   dtype: torch.dtype | None = None) -> dict[str, Tensor]:
        """Every layer's initial state, keys ``"<layer>.<key>"``."""
        self._need_step()
        return {f"{i}.{k}": v for i, layer in enumerate(self.layers)
                for k, v in layer.init_state(batch, device=device, dtype=dtype).items()}

    def step(self, x_t: Tensor, state: dict[str, Tensor] | None = None) -> tuple[Tensor, dict[str, Tensor]]:
        """One position ``x_t (B, d_model) -> (B, d_model)``, equal to the causal forward there."""
        self._need_step()
        V.check_tensor("x_t", x_t, 2, f"(B, d_model) = (B, {self.d_model})")
        new: dict[str, Tensor] = {}
        for i, (layer, norm) in enumerate(zip(self.layers, self.norms)):
            own = None if state is None else {k.split(".", 1)[1]: v for k, v in state.items()
                                              if k.split(".", 1)[0] == str(i)}
            out, own = layer.step(norm(x_t), own)
            new.update({f"{i}.{k}": v for k, v in own.items()})
            x_t = x_t + self.dropout(out)
        return self.final_norm(x_t), new

    def _need_step(self) -> None:
        if not self.has_step:
            raise NotImplementedError("this RecurrentEncoder has no step(): it is bidirectional or its recurrence "
                                      "has none")
