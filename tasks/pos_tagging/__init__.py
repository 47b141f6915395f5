"""POS tagging: UPOS tags on Universal Dependencies treebanks (English EWT by default) and a
synthetic grammar with ambiguous words.

Registers the ``pos_tagging`` task (headline metric ``acc``, UPOS token accuracy, higher is
better) with its datasets (``ud``, ``synthetic``, ``synthetic_far``) and models (``transformer``,
``transformer_truncated``, ``bilstm``, ``cnn``, ``mlp``).
"""

from __future__ import annotations

from tasks.common.registry import Bounds, DatasetSpec, define_task
from tasks.pos_tagging import models, modern, module
from tasks.pos_tagging.data import SYNTHETIC_DEFAULTS, UD_DEFAULTS, build_synthetic, build_ud
from tasks.pos_tagging.far import FAR_DEFAULTS, build_far
from tasks.pos_tagging.module import PosTaggerModule

__all__ = ["TASK", "PosTaggerModule"]

TASK = define_task(
    "pos_tagging", metric="acc", mode="max", module=module, models=[models, modern],
    description="UPOS tagging with gold tokenisation: token, unseen-word and sentence accuracy",
    datasets=[DatasetSpec("ud", build_ud, UD_DEFAULTS,
                          description="Universal Dependencies treebank in CoNLL-U (default en_ewt), UPOS"),
              DatasetSpec("synthetic", build_synthetic, SYNTHETIC_DEFAULTS, synthetic=True,
                          description="synthetic grammar: ambiguous words whose tag follows from the neighbours"),
              DatasetSpec("synthetic_far", build_far, FAR_DEFAULTS, synthetic=True,
                          description="diagnostic: ambiguous words tagged by the sentence's first word, "
                                      "6+ words back (beyond a 2-layer CNN's reach)",
                          bounds={"gap": Bounds(kind="int", minimum=1, nullable=True)}, omit_when_default=("gap",))],
)
