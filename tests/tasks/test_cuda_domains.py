"""One training step of every domain's attention model on CUDA, in fp32 and under bf16 autocast:
``python -m pytest -m gpu`` on a GPU machine. Skips with "needs CUDA" elsewhere.

Each case builds the task's synthetic DataModule and the model through the registries (small
sizes, the ones the domain's own tests use), wraps it in the task's LightningModule, moves it to
CUDA and runs forward, loss, backward and one step of the task's own optimiser. It checks the loss
is finite, every trainable parameter gets a finite gradient, and the parameters moved.
"""

from __future__ import annotations

import contextlib
from typing import Any

import pytest
import torch

from tasks.common.registry import get_task
from tests.helpers.domains import (GRAPHS_DATA as SMALL_SBM, POS_DATA, POS_MODELS, SPEECH_DATA, SPEECH_FRAMES,
                                   TRANSLATION_DATA, TRANSLATION_MODELS, VISION_DATA, build_small)

DEVICE = "cuda"
pytestmark = [pytest.mark.gpu, pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")]

#: task -> [(synthetic dataset, its small parameters, small model parameters by model name)];
#: a model missing from the last dict keeps its registered (already small) defaults.
SMALL: dict[str, list[tuple[str, dict[str, Any], dict[str, dict[str, Any]]]]] = {
    "graphs": [("sbm", SMALL_SBM, {})],
    "pos_tagging": [("synthetic", POS_DATA, POS_MODELS)],
    "translation": [("synthetic", TRANSLATION_DATA, TRANSLATION_MODELS)],
    # both task forms: utterance classification and frame tagging (long inputs, truncated attention)
    "speech": [("synthetic", SPEECH_DATA, {}), ("synthetic_frames", SPEECH_FRAMES, {})],
    "vision": [("synthetic", VISION_DATA, {})],
}
DTYPES = {"fp32": None, "bf16": torch.bfloat16}


def _cases() -> list:
    """(task, dataset, model, dtype) for every attention model of every domain."""
    cases = []
    for task_name, datasets in SMALL.items():
        models = [n for n, s in get_task(task_name).models.items() if s.family == "attention"]
        for dataset, _, _ in datasets:
            for model in models:
                for dt in DTYPES:
                    cases.append(pytest.param(task_name, dataset, model, dt, id=f"{task_name}-{dataset}-{model}-{dt}"))
    return cases


def _setup(task_name: str, dataset: str, model: str, cache_dir: str) -> tuple[Any, Any]:
    """The task's LightningModule around ``model`` on ``DEVICE`` and one training batch there.

    The schedule is switched off (``scheduler="none"``, no warm-up) so ``configure_optimizers``
    returns the task's bare optimiser without a Trainer; everything else is the task's default."""
    data_params, model_params = next((p, m) for d, p, m in SMALL[task_name] if d == dataset)
    module, dm = build_small(task_name, dataset, model, cache_dir, data_params=data_params,
                             model_params=model_params.get(model, {}),
                             module_params={"scheduler": "none", "warmup_steps": 0})
    module.to(DEVICE).train()
    batch = module.transfer_batch_to_device(next(iter(dm.train_dataloader())), torch.device(DEVICE), 0)
    return module, batch


@pytest.mark.parametrize("task_name,dataset,model,dtype", _cases())
def test_one_training_step(task_name: str, dataset: str, model: str, dtype: str, tmp_path) -> None:
    """Forward, loss, backward, optimiser step: finite loss and gradients, parameters updated."""
    module, batch = _setup(task_name, dataset, model, str(tmp_path))
    opt = module.configure_optimizers()
    params = {n: p for n, p in module.named_parameters() if p.requires_grad}
    before = {n: p.detach().clone() for n, p in params.items()}

    opt.zero_grad(set_to_none=True)
    amp = DTYPES[dtype]
    with torch.autocast(DEVICE, dtype=amp) if amp is not None else contextlib.nullcontext():
        loss = module.step(batch, "train").loss
    assert loss.ndim == 0 and torch.isfinite(loss), f"loss {loss.item()}"
    loss.backward()

    no_grad = [n for n, p in params.items() if p.grad is None]
    assert not no_grad, f"parameters without a gradient: {no_grad}"
    bad = [n for n, p in params.items() if not torch.isfinite(p.grad).all()]
    assert not bad, f"non-finite gradients: {bad}"
    opt.step()

    with_grad = [n for n, p in params.items() if p.grad.count_nonzero() > 0]
    assert with_grad, "every gradient is zero"
    unchanged = [n for n in with_grad if torch.equal(before[n], params[n].detach())]
    assert not unchanged, f"parameters with a gradient that the step left unchanged: {unchanged}"
