"""Speech: spoken words as feature frames (log-mel / MFCC, 100 frames a second).

Registers the ``speech`` task (headline metric ``acc``, higher is better: utterance accuracy
for classification, frame accuracy for tagging) with its datasets (``fsdd``, ``fsdd_frames``,
``speech_commands``, ``synthetic``, ``synthetic_frames``; see :mod:`tasks.speech.data`) and
models (``transformer``, ``transformer_w8/_w16/_w32/_w64``, ``lstm``, ``cnn``, ``frame_mlp``;
see :mod:`tasks.speech.models`).
"""

from __future__ import annotations

from tasks.common.registry import Bounds, DatasetSpec, define_task
from tasks.speech import models, modern, module
from tasks.speech.data import DATASET_DEFAULTS, builder
from tasks.speech.module import SpeechModule

__all__ = ["TASK", "SpeechModule"]

TASK = define_task(
    "speech", metric="acc", mode="max", module=module, models=[models, modern],
    description="spoken words: utterance classification and frame tagging of long concatenations",
    datasets=[DatasetSpec(name, builder(name), params, synthetic=synthetic, description=desc,
                          omit_when_default=("phones_per_word", "phone_frames"),
                          bounds={"phones_per_word": Bounds(kind="int", minimum=1, nullable=True),
                                  "phone_frames": Bounds(kind="int", minimum=1, nullable=True)})
              for name, (_cls, _form, params, synthetic, desc) in DATASET_DEFAULTS.items()],
)
