"""Vision: image classification on patches (ViT), convolutions (ResNet, CNN) and rows (RNN).

Registers the ``vision`` task (headline metric ``acc``, top-1, higher is better) with its datasets
(``mnist``, ``fashion_mnist``, ``cifar10`` through torchvision, one class; ``synthetic``, the
arrangement task generated in code) and models (``vit``, ``vit_local``, ``resnet``, ``cnn``,
``row_rnn``, ``patch_bag``).
"""

from __future__ import annotations

from tasks.common.registry import DatasetSpec, Task, register_task
from tasks.vision.data import SYNTHETIC_DEFAULTS, TORCHVISION_DEFAULTS, build_synthetic, torchvision_builder
from tasks.vision.models import register_models
from tasks.vision.module import MODULE_DEFAULTS, ImageClassifier, make_module

__all__ = ["TASK", "ImageClassifier"]

TASK = Task(
    name="vision",
    metric="acc",
    mode="max",
    make_module=make_module,
    module_params=dict(MODULE_DEFAULTS),
    description="image classification: patches (ViT) vs convolution (ResNet, CNN) vs rows (RNN)",
)
_DESCRIPTIONS = {
    "mnist": "MNIST digits (28x28 grey), 55k train / 5k val carved from train / 10k test",
    "fashion_mnist": "Fashion-MNIST (28x28 grey, 10 garments), 55k / 5k / 10k",
    "cifar10": "CIFAR-10 (32x32 RGB, 10 classes), 45k / 5k / 10k",
}
for _name, _desc in _DESCRIPTIONS.items():
    TASK.datasets.register(_name, DatasetSpec(name=_name, build=torchvision_builder(_name),
                                              params=dict(TORCHVISION_DEFAULTS), synthetic=False, description=_desc))
TASK.datasets.register(
    "synthetic",
    DatasetSpec(name="synthetic", build=build_synthetic, params=dict(SYNTHETIC_DEFAULTS), synthetic=True,
                description="12x12 noise with a plus and a ring far apart; the class is their arrangement"),
)
register_models(TASK.models)
register_task(TASK)
