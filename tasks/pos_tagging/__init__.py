"""POS tagging: UPOS tags on Universal Dependencies treebanks (English EWT by default) and a
synthetic grammar with ambiguous words.

Registers the ``pos_tagging`` task (headline metric ``acc``, UPOS token accuracy, higher is
better) with its datasets (``ud``, ``synthetic``) and models (``transformer``,
``transformer_truncated``, ``bilstm``, ``cnn``, ``mlp``).
"""

from __future__ import annotations

from tasks.common.registry import DatasetSpec, Task, register_task
from tasks.pos_tagging.data import SYNTHETIC_DEFAULTS, UD_DEFAULTS, build_synthetic, build_ud
from tasks.pos_tagging.models import register_models
from tasks.pos_tagging.module import MODULE_DEFAULTS, PosTaggerModule, make_module

__all__ = ["TASK", "PosTaggerModule"]

TASK = Task(
    name="pos_tagging",
    metric="acc",
    mode="max",
    make_module=make_module,
    module_params=dict(MODULE_DEFAULTS),
    description="UPOS tagging with gold tokenisation: token, unseen-word and sentence accuracy",
)
TASK.datasets.register("ud", DatasetSpec(
    name="ud", build=build_ud, params=dict(UD_DEFAULTS), synthetic=False,
    description="Universal Dependencies treebank in CoNLL-U (default en_ewt), UPOS",
))
TASK.datasets.register("synthetic", DatasetSpec(
    name="synthetic", build=build_synthetic, params=dict(SYNTHETIC_DEFAULTS), synthetic=True,
    description="synthetic grammar: ambiguous words whose tag follows from the neighbours",
))
register_models(TASK.models)
register_task(TASK)
