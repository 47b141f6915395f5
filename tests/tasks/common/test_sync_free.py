"""No host-device synchronisation inside a training or validation step, for every registered
model of every domain (issue 30).

A sync (``.item()``, ``nonzero``, boolean-mask indexing, ``.tolist()`` ...) makes the CPU wait
for the GPU, which then idles while the CPU queues the next kernels. Each case trains the model
through a real ``lightning.Trainer`` on its task's synthetic data (tiny sizes) for a few batches
and validates a few, counting the ops that would sync on CUDA (:mod:`tests.helpers.sync`) inside
the module's ``training_step``, ``backward`` and ``validation_step`` (metric updates included;
the optimiser's own step is not model work and is not counted), after one warm-up training
step (:data:`WARMUP`). A failure lists each sync with
the line it came from. Epoch-level reads (``on_*_epoch_end``) are outside the steps and free.

The GPU test runs a few steps of each domain's attention model under
``torch.cuda.set_sync_debug_mode("error")``, which raises at any synchronising CUDA call.
"""

from __future__ import annotations

import functools
import warnings
from typing import Any

import lightning as L
import pytest
import torch

from tasks.common.registry import ModelSpec, get_task
from tests.helpers.domains import (GRAPHS_DATA, POS_DATA, POS_MODELS, SPEECH_DATA, SPEECH_FRAMES, TRANSLATION_DATA,
                                   TRANSLATION_MODELS, VISION_DATA, build_small)
from tests.helpers.sync import SyncCounter, count_syncs

#: task -> [(synthetic dataset, small data parameters)]: speech has both task forms
DATASETS: dict[str, list[tuple[str, dict[str, Any]]]] = {
    "graphs": [("sbm", GRAPHS_DATA)],
    "pos_tagging": [("synthetic", {**POS_DATA, "num_train": 48, "num_val": 48})],
    "translation": [("synthetic", {**TRANSLATION_DATA, "num_train": 64, "num_val": 24, "batch_size": 8})],
    "speech": [("synthetic", {**SPEECH_DATA, "batch_size": 4}), ("synthetic_frames", {**SPEECH_FRAMES, "batch_size": 4})],
    "vision": [("synthetic", {**VISION_DATA, "num_train": 64, "num_val": 64, "batch_size": 16})],
}
#: small model sizes by model name; a preset of a listed model gets its sizes too
SMALL_MODELS: dict[str, dict[str, dict[str, Any]]] = {
    "pos_tagging": POS_MODELS, "translation": TRANSLATION_MODELS,
    "vision": {"vit": {"d_model": 32, "num_layers": 2}, "resnet": {"base_channels": 8}},
}
#: what a preset sets itself (its pattern): not overridden by its base model's small sizes
_PRESET_KEYS = ("pattern", "score", "window", "pattern_params", "radius")
BATCHES = 3  # per stage
#: training steps not counted: a cache built once at the first step (GCN's normalised graph)
#: may sync there, once per run; every later training step and every validation step is counted
WARMUP = 1


def small_params(task_name: str, spec: ModelSpec) -> dict[str, Any]:
    """``spec``'s registered parameters with the test's small sizes."""
    small = SMALL_MODELS.get(task_name, {})
    own = small.get(spec.name)
    if own is None:
        base = next((b for b in small if spec.name.startswith(b + "_")), None)
        own = {k: v for k, v in small.get(base, {}).items() if k not in _PRESET_KEYS}
    return {**spec.params, **{k: v for k, v in own.items() if k in spec.params}}


def _cases(family: str | None = None) -> list:
    cases = []
    for task_name, datasets in DATASETS.items():
        for dataset, _ in datasets:
            for name, spec in get_task(task_name).models.items():
                if family is None or spec.family == family:
                    cases.append(pytest.param(task_name, dataset, name, id=f"{task_name}-{dataset}-{name}"))
    return cases


#: other forms of a model than its registered one (parameters over its defaults): vision's
#: modern_rnn reads patches or pixels (psMNIST's fixed permutation too); translation's decodes
#: without attention (score none)
FORMS: list[tuple[str, str, str, dict[str, Any]]] = [
    ("vision", "synthetic", "mamba2", {"mode": "patches", "patch_size": None, "patch_grid": 4}),
    ("vision", "synthetic", "s4d", {"mode": "pixel"}),
    ("vision", "synthetic", "mingru", {"mode": "pixel", "permute": True, "perm_seed": 0}),
    ("translation", "synthetic", "mingru", {"score": "none"}),
]


def build(task_name: str, dataset: str, model: str, cache_dir: str,
          form: dict[str, Any] | None = None) -> tuple[Any, Any]:
    """``(task module around the small model (``form`` over its parameters), its synthetic DataModule)``."""
    spec = get_task(task_name).models.get(model)
    data_params = dict(next(p for d, p in DATASETS[task_name] if d == dataset))
    return build_small(task_name, dataset, model, cache_dir, data_params=data_params,
                       model_params={**small_params(task_name, spec), **(form or {})})


def _counted(counter: SyncCounter, fn: Any, locate: bool, calls: list[int] | None = None) -> Any:
    """``fn`` recording its syncs in ``counter``; with ``calls`` (the training steps so far, a
    one-item list): not while the first training step runs (the warm-up)."""
    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        if calls is not None and fn.__name__ == "training_step":
            calls[0] += 1
        if calls is not None and calls[0] <= WARMUP:
            return fn(*args, **kwargs)
        with count_syncs(locate_backward=locate) as c:
            out = fn(*args, **kwargs)
        counter.syncs.extend(c.syncs)
        return out

    return wrapper


def step_syncs(task_name: str, dataset: str, model: str, cache_dir: str, *,
               locate: bool = False, form: dict[str, Any] | None = None) -> dict[str, SyncCounter]:
    """The syncs of the training steps (forward, loss, backward) after the ``WARMUP`` first and of
    the validation steps of ``model`` fitted by a CPU Trainer for 2 epochs of ``BATCHES`` batches, by stage; ``locate``: name the forward line of a sync in
    backward (slower)."""
    module, dm = build(task_name, dataset, model, cache_dir, form)
    counts = {"train": SyncCounter(), "val": SyncCounter()}
    calls = [0]
    module.training_step = _counted(counts["train"], module.training_step, locate, calls)
    module.backward = _counted(counts["train"], module.backward, locate, calls)
    module.validation_step = _counted(counts["val"], module.validation_step, locate)
    # two epochs: a full-batch graph has one training step an epoch, the first is the warm-up
    trainer = L.Trainer(accelerator="cpu", devices=1, max_epochs=2, limit_train_batches=BATCHES,
                        limit_val_batches=BATCHES, num_sanity_val_steps=0, logger=False, enable_checkpointing=False,
                        enable_progress_bar=False, enable_model_summary=False, deterministic=False)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        trainer.fit(module, datamodule=dm)
    return counts


_FORM_CASES = [pytest.param(t, d, m, f, id=f"{t}-{d}-{m}-" + "-".join(f"{k}={v}" for k, v in f.items()))
               for t, d, m, f in FORMS]


@pytest.mark.parametrize("task_name,dataset,model,form",
                         [pytest.param(*c.values, None, id=c.id) for c in _cases()] + _FORM_CASES)
def test_training_and_validation_steps_do_not_sync(task_name: str, dataset: str, model: str, form, tmp_path) -> None:
    counts = step_syncs(task_name, dataset, model, str(tmp_path), form=form)
    if any(c.syncs for c in counts.values()):  # again, naming the forward line of syncs in backward
        counts = step_syncs(task_name, dataset, model, str(tmp_path / "again"), locate=True, form=form)
    bad = {stage: c for stage, c in counts.items() if c.syncs}
    assert not bad, f"host-device syncs in 2 epochs of {BATCHES} batches a stage (first training step not counted):\n" + "\n".join(
        f"{stage} ({len(c.syncs)}):\n{c.summary()}" for stage, c in bad.items())


# ----------------------------------------------------------------------------- the counter itself
def test_the_counter_sees_each_kind_of_sync() -> None:
    """Every op the brief names is caught, with this file's line; sync-free twins are not."""
    x, m = torch.randn(6), torch.tensor([True, False, True, True, False, False])
    caught = {}
    checks = {
        "item": lambda: x.sum().item(), "int": lambda: int(x.argmax()), "bool": lambda: bool(x.sum() > 0),
        "nonzero": lambda: m.nonzero(), "mask index": lambda: x[m], "mask put": lambda: x.clone().__setitem__(m, 0.0),
        "masked_select": lambda: x.masked_select(m), "unique": lambda: x.unique(),
        "repeat_interleave": lambda: x.repeat_interleave(torch.tensor([1, 2, 0, 1, 1, 1])), "tolist": lambda: x.tolist(),
        "cpu": lambda: x.cpu(), "to cpu": lambda: x.to("cpu"),
    }
    for name, fn in checks.items():
        with count_syncs() as c:
            fn()
        caught[name] = [str(s) for s in c.syncs]
    missed = [n for n, s in caught.items() if not s]
    assert not missed, f"not caught: {missed}"
    assert all(__file__.rsplit("/", 1)[-1] in s[0] for s in caught.values()), caught
    with count_syncs() as c:
        x.masked_fill(~m, 0.0).sum()
        x.repeat_interleave(torch.tensor([1, 2, 0, 1, 1, 1]), output_size=6)
        x[torch.tensor([0, 2])]
        x.to(torch.float64)
    assert not c.syncs, c.summary()


def test_a_sync_in_backward_names_its_forward_line() -> None:
    x, m = torch.randn(6, requires_grad=True), torch.tensor([True, False, True, True, False, False])
    with count_syncs() as c:
        y = x[m]  # the forward line the report must name
        y.sum().backward()
    where = [s.where for s in c.syncs if s.where.startswith("backward")]
    assert where and "test_sync_free.py" in where[0] and "in test_a_sync_in_backward" in where[0], c.summary()


# ----------------------------------------------------------------------------- GPU
@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
@pytest.mark.parametrize("task_name,dataset,model", [
    pytest.param(t, d, m, id=f"{t}-{d}-{m}") for t, ds in DATASETS.items() for d, _ in ds
    for m in [n for n, s in get_task(t).models.items() if s.family == "attention" and s.in_all]])
def test_cuda_steps_under_sync_debug_mode_error(task_name: str, dataset: str, model: str, tmp_path) -> None:
    """Training and validation steps on CUDA with every synchronising CUDA call an error (a
    copy to or from the host included), after the first training step (:data:`WARMUP`, as on
    CPU), over 2 epochs so that a full-batch graph has a counted training step too."""
    module, dm = build(task_name, dataset, model, str(tmp_path))

    train_calls = [0]

    def strict(fn: Any) -> Any:
        @functools.wraps(fn)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            if fn.__name__ == "step" and args[-1] == "train":
                train_calls[0] += 1
            if train_calls[0] <= WARMUP:  # as on CPU: a once-per-run cache may sync at the first step
                return fn(*args, **kwargs)
            torch.cuda.set_sync_debug_mode("error")
            try:
                return fn(*args, **kwargs)
            finally:
                torch.cuda.set_sync_debug_mode("default")

        return wrapper

    # the module's own work (forward, loss, metric updates: ``step``) and backward; Lightning's
    # logging around them is not model work (it may copy a first value to the device)
    module.step = strict(module.step)
    module.backward = strict(module.backward)
    trainer = L.Trainer(accelerator="gpu", devices=1, max_epochs=2, limit_train_batches=BATCHES,
                        limit_val_batches=BATCHES, num_sanity_val_steps=0, logger=False, enable_checkpointing=False,
                        enable_progress_bar=False, enable_model_summary=False)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        trainer.fit(module, datamodule=dm)
