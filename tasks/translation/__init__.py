"""Translation: encoder-decoders on Multi30k, any parallel text files, and a synthetic task.

Registers the ``translation`` task (headline metric ``bleu``: sacreBLEU on the detokenised
test set, cased, higher is better) with its datasets (``multi30k``, ``parallel``,
``synthetic``) and models (``transformer``, ``rnn_bahdanau``, ``rnn_luong_dot``,
``rnn_luong_general``, ``rnn_noattn``, ``convs2s``).
"""

from __future__ import annotations

from tasks.common.registry import DatasetSpec, define_task
from tasks.translation import models, modern, module
from tasks.translation.data import (
    MULTI30K_DEFAULTS,
    PARALLEL_DEFAULTS,
    SYNTHETIC_DEFAULTS,
    build_multi30k,
    build_parallel,
    build_synthetic,
)
from tasks.translation.module import TranslationModule

__all__ = ["TASK", "TranslationModule"]

_MULTI30K = "Multi30k task 1 (29k/1014/1000 caption pairs), de->en by default (src_lang/tgt_lang)"
_PARALLEL = "any language pair from line-aligned text files given by path (train/val/test _src/_tgt)"
_SYNTHETIC = "synthetic word mapping + reversal: alignment matters, a fixed-size summary is a bottleneck"
TASK = define_task(
    "translation", metric="bleu", mode="max", module=module, models=[models, modern],
    description="sentence translation, encoder-decoder; sacreBLEU (cased, detokenised) of beam-4 output",
    datasets=[DatasetSpec("multi30k", build_multi30k, MULTI30K_DEFAULTS, description=_MULTI30K),
              DatasetSpec("parallel", build_parallel, PARALLEL_DEFAULTS, description=_PARALLEL),
              DatasetSpec("synthetic", build_synthetic, SYNTHETIC_DEFAULTS, synthetic=True, description=_SYNTHETIC)],
)
