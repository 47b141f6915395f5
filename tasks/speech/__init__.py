"""Speech: spoken words as feature frames (log-mel / MFCC, 100 frames a second).

Registers the ``speech`` task (headline metric ``acc``, higher is better: utterance accuracy
for classification, frame accuracy for tagging) with its datasets (``fsdd``, ``fsdd_frames``,
``speech_commands``, ``synthetic``, ``synthetic_frames``; see :mod:`tasks.speech.data`) and
models (``transformer``, ``transformer_w8/_w16/_w32/_w64``, ``lstm``, ``cnn``, ``frame_mlp``;
see :mod:`tasks.speech.models`).
"""

from __future__ import annotations

from tasks.common.registry import DatasetSpec, Task, register_task
from tasks.speech.data import DATASET_DEFAULTS, builder
from tasks.speech.models import register_models
from tasks.speech.module import MODULE_DEFAULTS, SpeechModule, make_module

__all__ = ["TASK", "SpeechModule"]

TASK = Task(
    name="speech",
    metric="acc",
    mode="max",
    make_module=make_module,
    module_params=dict(MODULE_DEFAULTS),
    description="spoken words: utterance classification and frame tagging of long concatenations",
)
for _name, (_cls, _form, _params, _synthetic, _desc) in DATASET_DEFAULTS.items():
    TASK.datasets.register(
        _name, DatasetSpec(name=_name, build=builder(_name), params=dict(_params), synthetic=_synthetic, description=_desc)
    )
register_models(TASK.models)
register_task(TASK)
