"""Modern-recurrence tagger (issue 31): the shared :class:`TokenEmbedder` -> a bidirectional
recurrence (:class:`tasks.common.recurrence.RecurrenceContext`, ``cell``: mingru, minlstm,
s4d, mamba2, lru) -> ``Linear`` to the tags. Family ``rnn``, kind ``modern``; one preset per
cell (``mingru``, ``s4d``, ...) so that a suite compares cells as models.
"""

from __future__ import annotations

from typing import Any, Mapping

from tasks.common.recurrence import RecurrenceContext, check_cell, register_cell_presets
from tasks.common.registry import register_model
from tasks.pos_tagging.models import Tagger

__all__ = ["modern_rnn"]


@register_model(family="rnn", kind="modern", in_all=False, check=check_cell,
                omit_when_default=("backend",))  # cell ids from before `backend` stay valid
def modern_rnn(data_info: Mapping[str, Any], *, word_dim: int = 100, char_dim: int = 32, char_out: int = 64,
               emb_dropout: float = 0.3, cell: str = "mingru", d_model: int = 256, d_state: int | None = None,
               num_layers: int = 2, dropout: float = 0.2, backend: str = "pure") -> Tagger:
    """bidirectional modern recurrence (cell: mingru, minlstm, s4d, mamba2, lru)"""
    sizes = int(data_info["num_words"]), int(data_info["num_chars"]), int(data_info["num_tags"])
    return Tagger(*sizes, RecurrenceContext, word_dim=word_dim, char_dim=char_dim, char_out=char_out,
                  emb_dropout=emb_dropout, cell=cell, d_model=d_model, d_state=d_state, num_layers=num_layers,
                  dropout=dropout, backend=backend)


register_cell_presets(modern_rnn, "bidirectional modern recurrence tagger")
