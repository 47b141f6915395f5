"""Translation: encoder-decoders on Multi30k, any parallel text files, and a synthetic task.

Registers the ``translation`` task (headline metric ``bleu``: sacreBLEU on the detokenised
test set, cased, higher is better) with its datasets (``multi30k``, ``parallel``,
``synthetic``) and models (``transformer``, ``rnn_bahdanau``, ``rnn_luong_dot``,
``rnn_luong_general``, ``rnn_noattn``, ``convs2s``).
"""

from __future__ import annotations

from tasks.common.registry import DatasetSpec, Task, register_task
from tasks.translation.data import (
    MULTI30K_DEFAULTS,
    PARALLEL_DEFAULTS,
    SYNTHETIC_DEFAULTS,
    build_multi30k,
    build_parallel,
    build_synthetic,
)
from tasks.translation.models import register_models
from tasks.translation.module import MODULE_DEFAULTS, TranslationModule, make_module

__all__ = ["TASK", "TranslationModule"]

TASK = Task(
    name="translation",
    metric="bleu",
    mode="max",
    make_module=make_module,
    module_params=dict(MODULE_DEFAULTS),
    description="sentence translation, encoder-decoder; sacreBLEU (cased, detokenised) of beam-4 output",
)
TASK.datasets.register(
    "multi30k",
    DatasetSpec(
        name="multi30k", build=build_multi30k, params=dict(MULTI30K_DEFAULTS), synthetic=False,
        description="Multi30k task 1 (29k/1014/1000 caption pairs), de->en by default (src_lang/tgt_lang)",
    ),
)
TASK.datasets.register(
    "parallel",
    DatasetSpec(
        name="parallel", build=build_parallel, params=dict(PARALLEL_DEFAULTS), synthetic=False,
        description="any language pair from line-aligned text files given by path (train/val/test _src/_tgt)",
    ),
)
TASK.datasets.register(
    "synthetic",
    DatasetSpec(
        name="synthetic", build=build_synthetic, params=dict(SYNTHETIC_DEFAULTS), synthetic=True,
        description="synthetic word mapping + reversal: alignment matters, a fixed-size summary is a bottleneck",
    ),
)
register_models(TASK.models)
register_task(TASK)
