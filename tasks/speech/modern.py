"""Modern-recurrence speech model (issue 31): feature frames -> ``Linear`` to ``d_model`` -> a
bidirectional recurrence (:class:`tasks.common.recurrence.RecurrenceContext`, ``cell``: mingru,
minlstm, s4d, mamba2, lru) -> the heads every speech model has (:class:`tasks.speech.models.SpeechNet`:
masked mean and a linear layer for ``classify``, a linear layer per frame for ``tag``).
Family ``rnn``, kind ``modern``.

Padding: the frame mask is the recurrence's ``key_padding_mask``; the backward direction is
reversed within each utterance's length, so padded frames never reach real ones and come out zero.
"""

from __future__ import annotations

from typing import Any, Mapping

from tasks.common.recurrence import RecurrenceContext, check_cell, register_cell_presets
from tasks.common.registry import register_model
from tasks.speech.models import SpeechNet

__all__ = ["ModernEncoder", "modern_rnn"]


class ModernEncoder(RecurrenceContext):
    """:class:`RecurrenceContext` as a speech encoder: ``forward(x (B, L, F), mask (B, L) True =
    real frame) -> (B, L, d_model)``, zero on padding, with the ``d_model`` :class:`SpeechNet` reads."""

    def __init__(self, num_features: int, **params: Any) -> None:
        super().__init__(num_features, **params)
        self.d_model = self.out_dim


@register_model(family="rnn", kind="modern", in_all=False, check=check_cell,
                omit_when_default=("backend",))  # cell ids from before `backend` stay valid
def modern_rnn(data_info: Mapping[str, Any], *, cell: str = "mingru", d_model: int = 96, d_state: int | None = None,
               num_layers: int = 2, dropout: float = 0.1, backend: str = "pure") -> SpeechNet:
    """bidirectional modern recurrence (cell: mingru, minlstm, s4d, mamba2, lru)"""
    enc = ModernEncoder(int(data_info["num_features"]), cell=cell, d_model=d_model, d_state=d_state,
                        num_layers=num_layers, dropout=dropout, backend=backend)
    return SpeechNet(enc, int(data_info["num_classes"]), str(data_info.get("form", "classify")))


register_cell_presets(modern_rnn, "bidirectional modern recurrence over speech frames")
