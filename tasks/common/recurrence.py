"""Modern recurrence for the task models (issue 31): the ``cell`` table every domain's
``modern_rnn`` shares, its config check, and the bidirectional encoder block.

``cell`` picks the recurrence from the :mod:`attn_core.recurrent` registry: ``mingru`` /
``minlstm`` (``min_rnn`` with kind gru/lstm), ``s4d``, ``mamba2``, ``lru``. Bidirectional =
:class:`attn_core.recurrent.Bidirectional`, two causal passes, one reversed within each
sequence's length, so padding never reaches a real position.
"""

from __future__ import annotations

from typing import Any, Callable, Mapping

import torch
from torch import Tensor, nn

from attn_core.recurrent import BACKENDS, RecurrentEncoder, build_recurrence, get_recurrence
from tasks.common.registry import register_preset

__all__ = ["CELLS", "recurrence_params", "check_cell", "register_cell_presets", "RecurrenceContext"]

#: ``cell`` -> (registered recurrence, its fixed params, the name of its state-size param)
CELLS: dict[str, tuple[str, dict[str, Any], str]] = {
    "mingru": ("min_rnn", {"kind": "gru"}, "hidden_size"),
    "minlstm": ("min_rnn", {"kind": "lstm"}, "hidden_size"),
    "s4d": ("s4d", {}, "d_state"),
    "mamba2": ("mamba2", {}, "d_state"),
    "lru": ("lru", {}, "hidden_size"),
}


def recurrence_params(cell: str, d_state: int | None, backend: str = "pure") -> tuple[str, dict[str, Any]]:
    """``(recurrence name, params)`` for ``cell``; ``d_state`` (None: the recurrence's default)
    is passed as the recurrence's state size (``hidden_size`` or ``d_state``), ``backend`` (the
    scan's path, :data:`attn_core.recurrent.BACKENDS`) to the cells that have a fused one."""
    if cell not in CELLS:
        raise ValueError(f"cell={cell!r}; valid: {', '.join(CELLS)}")
    if backend not in BACKENDS:
        raise ValueError(f"backend={backend!r}; valid: {', '.join(BACKENDS)}")
    name, fixed, state_key = CELLS[cell]
    params = {**fixed, **({} if d_state is None else {state_key: int(d_state)})}
    if backend != "pure":
        fused = [c for c, (n, _, _) in CELLS.items() if get_recurrence(n).gpu_kernel]
        if cell not in fused:
            raise ValueError(f"backend={backend!r}: cell {cell!r} has no fused kernel (pure PyTorch only); "
                             f"cells with one: {', '.join(fused)}")
        params["backend"] = backend
    return name, params


def check_cell(params: Mapping[str, Any]) -> None:
    """A registration's config check, before any cell runs: an unknown ``cell``, and what the
    recurrence itself refuses at the model's width (e.g. Mamba-2's heads must divide
    ``expand * d_model``): one layer is built on the meta device (no memory, no init work) to ask it."""
    name, rp = recurrence_params(params["cell"], params.get("d_state"), params.get("backend", "pure"))
    d_model = params.get("d_model")
    if isinstance(d_model, int) and not isinstance(d_model, bool) and d_model > 0:
        with torch.device("meta"):
            build_recurrence(name, d_model, **rp)


def register_cell_presets(base: Callable[..., Any], what: str) -> None:
    """One preset of ``base`` (a domain's ``modern_rnn``) per cell, named after it (``mingru``,
    ``s4d``, ...; ``in_all=False``, family and kind from ``base``): a suite lists the cells it
    compares as models, and every record and report row names its recurrence."""
    for cell in CELLS:
        register_preset(cell, base, {"cell": cell}, in_all=False, description=f"{what}, {cell} cells")


class RecurrenceContext(nn.Module):
    """Linear to ``d_model`` -> ``num_layers`` bidirectional blocks of recurrence ``cell``
    (padded positions stay zero; ``backend``: the scan's path) -> dropout."""

    def __init__(self, d_in: int, *, cell: str = "mingru", d_model: int = 256, d_state: int | None = None,
                 num_layers: int = 2, dropout: float = 0.2, backend: str = "pure") -> None:
        super().__init__()
        name, params = recurrence_params(cell, d_state, backend)
        self.proj = nn.Linear(d_in, d_model)
        self.encoder = RecurrentEncoder(name, d_model, num_layers, bidirectional=True, dropout=dropout,
                                        params=params)
        self.drop = nn.Dropout(dropout)
        self.out_dim = d_model

    def forward(self, x: Tensor, mask: Tensor) -> Tensor:
        """``x`` (B, L, d_in), ``mask`` (B, L) True at real positions (``key_padding_mask``'s
        convention) -> (B, L, d_model), padded positions zero."""
        return self.drop(self.encoder(self.proj(x), key_padding_mask=mask))
