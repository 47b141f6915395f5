"""Vision: image classification on patches (ViT), convolutions (ResNet, CNN) and rows (RNN).

Registers the ``vision`` task (headline metric ``acc``, top-1, higher is better) with its datasets
(``mnist``, ``fashion_mnist``, ``cifar10`` through torchvision, one class; ``synthetic``, the
arrangement task generated in code) and models (``vit``, ``vit_local``, ``resnet``, ``cnn``,
``row_rnn``, ``patch_bag``).
"""

from __future__ import annotations

from tasks.common.registry import DatasetSpec, define_task
from tasks.vision import models, modern, module
from tasks.vision.data import SYNTHETIC_DEFAULTS, TORCHVISION_DEFAULTS, build_synthetic, torchvision_builder
from tasks.vision.module import ImageClassifier

__all__ = ["TASK", "ImageClassifier"]

_TORCHVISION = {
    "mnist": "MNIST digits (28x28 grey), 55k train / 5k val carved from train / 10k test",
    "fashion_mnist": "Fashion-MNIST (28x28 grey, 10 garments), 55k / 5k / 10k",
    "cifar10": "CIFAR-10 (32x32 RGB, 10 classes), 45k / 5k / 10k",
}
TASK = define_task(
    "vision", metric="acc", mode="max", module=module, models=[models, modern],
    description="image classification: patches (ViT) vs convolution (ResNet, CNN) vs rows (RNN)",
    datasets=[*(DatasetSpec(name, torchvision_builder(name), TORCHVISION_DEFAULTS, description=desc)
                for name, desc in _TORCHVISION.items()),
              DatasetSpec("synthetic", build_synthetic, SYNTHETIC_DEFAULTS, synthetic=True,
                          description="12x12 noise with a plus and a ring far apart; the class is their arrangement")],
)
