"""Time budgets in a run: one module for the run layer's budget logic (the config layer's is
:mod:`benchmarks.config.budget`: what a budget may be; the report's :mod:`benchmarks.report.budget`:
how budgets are shown).

A **calibrated time budget** is ``trainer.max_time_s: {seconds: S, reference: NAME}``: S seconds
on the reference machine NAME (its fingerprint is in :data:`~benchmarks.config.budget.REFERENCES`),
scaled on this machine by its speed fingerprint (:mod:`benchmarks.run.fingerprint`):

    scale = geometric mean of (the kernels' geometric mean of reference rate / this rate,
                               reference train steps/s / this train steps/s)

One factor for every model of a suite, not a rate per model family: the suite's models keep
equal wall-clock budgets on every machine (the comparison stays "at equal cost"), and no single
kernel's quirk (say AVX-512 matmuls) decides the budget alone. A plain number stays a raw
wall-clock cap. Epoch and step budgets need none of this. Also here: what ended a cell's
training (:func:`stop_block`) and the wall limit of a cell's process (:func:`cell_timeout`).
"""

from __future__ import annotations

import math
from typing import Any, Mapping

from benchmarks.config.budget import REFERENCES, is_calibrated
from benchmarks.run.fingerprint import CORE_RATES, DEFAULT_SECONDS, RATES, configured_seconds, measure

__all__ = ["REFERENCES", "is_calibrated", "reference_seconds", "scale_factor", "resolve_budget", "expected_seconds",
           "comparable", "cell_budget", "cell_timeout", "stop_block"]


def reference_seconds(value: Any) -> float | None:
    """The seconds a budget states (on its reference machine for the calibrated form)."""
    if value is None:
        return None
    return float(value["seconds"]) if is_calibrated(value) else float(value)


def scale_factor(fingerprint: Mapping[str, Any], reference: Mapping[str, Any]) -> float:
    """How many seconds here are worth one second on ``reference`` (> 1 on a slower machine):
    the geometric mean of two halves, the kernels (geometric mean of reference rate / this rate
    over :data:`CORE_RATES`) and a whole training step (``train_steps_per_s``), since a training
    step is its big kernels plus everything around them. A fingerprint or reference without the
    training-step rate (stored before it existed) is scaled by its kernels alone."""
    def ratio(key: str) -> float:
        here, ref = fingerprint.get(key), reference.get(key)
        if not (isinstance(here, (int, float)) and here > 0 and isinstance(ref, (int, float)) and ref > 0):
            raise ValueError(f"fingerprint {key}={here!r} (reference {ref!r}): expected positive rates for "
                             f"{', '.join(RATES)}")
        return math.log(ref / here)

    kernels = sum(ratio(k) for k in CORE_RATES) / len(CORE_RATES)
    if "train_steps_per_s" not in fingerprint or "train_steps_per_s" not in reference:
        return math.exp(kernels)
    return math.exp((kernels + ratio("train_steps_per_s")) / 2)


def resolve_budget(value: Any, fingerprint: Mapping[str, Any] | None) -> tuple[float | None, dict[str, Any] | None]:
    """(seconds this cell may train, calibration detail or None) for a ``max_time_s`` value.
    The calibrated form needs ``fingerprint`` (measured like the reference: same device/dtype)."""
    if value is None or not is_calibrated(value):
        return reference_seconds(value), None
    ref = REFERENCES[value["reference"]]
    if fingerprint is None:
        raise ValueError(f"max_time_s={dict(value)!r} is calibrated but no speed fingerprint was measured")
    scale = scale_factor(fingerprint, ref)
    seconds = float(value["seconds"]) * scale
    return seconds, {"reference": value["reference"], "reference_s": float(value["seconds"]), "scale": round(scale, 4),
                     "rule": ("geometric mean of reference/this over " + ", ".join(CORE_RATES) +
                              (", then with train_steps_per_s at equal weight"
                               if "train_steps_per_s" in fingerprint and "train_steps_per_s" in ref else ""))}


def expected_seconds(value: Any, fingerprint: Mapping[str, Any] | None) -> float:
    """The seconds a non-null budget will allow here: scaled when ``fingerprint`` is comparable
    to its reference, else (calibrated, not known yet) 4x its reference seconds, to be safe."""
    if is_calibrated(value) and not comparable(fingerprint, REFERENCES[value["reference"]]):
        return 4 * float(value["seconds"])
    return float(resolve_budget(value, fingerprint)[0] or 0)


def comparable(fingerprint: Mapping[str, Any] | None, reference: Mapping[str, Any]) -> bool:
    """Whether ``fingerprint`` was measured like ``reference`` (device type and dtype)."""
    return bool(fingerprint) and fingerprint.get("device") == reference["device"] and fingerprint.get("dtype") == reference["dtype"]


def stop_block(trainer: Any, time_cap_s: float | None, calibration: dict[str, Any] | None) -> dict[str, Any]:
    """What ended a finished ``fit``: ``reason`` (early_stopping, max_steps, max_epochs or
    time_cap), epochs begun (the last may be cut short by the time cap) and optimiser steps
    done against their budgets, whether the time cap was hit, the 0-based epoch training
    stopped in (``at_epoch``) and the calibration of a calibrated time budget."""
    from lightning.pytorch.callbacks import EarlyStopping, Timer

    timer = next((c for c in trainer.callbacks if isinstance(c, Timer)), None)
    remaining = timer.time_remaining("train") if timer is not None else None
    cap_hit = remaining is not None and remaining <= 0
    es = next((c for c in trainer.callbacks if isinstance(c, EarlyStopping)), None)
    es_epoch = es.stopped_epoch if es is not None and es.stopped_epoch > 0 else None
    epochs, steps = int(trainer.current_epoch), int(trainer.global_step)
    max_epochs, max_steps = trainer.max_epochs, trainer.max_steps
    if es_epoch is not None:
        reason, at = "early_stopping", es_epoch
    elif max_steps not in (None, -1) and steps >= max_steps:
        reason, at = "max_steps", max(epochs - 1, 0)
    elif max_epochs is not None and epochs >= max_epochs:
        reason, at = "max_epochs", max(epochs - 1, 0)
    else:  # the last epoch (possibly cut short) is current_epoch - 1
        reason, at = "time_cap" if cap_hit else "other", max(epochs - 1, 0)
    per_epoch = trainer.num_training_batches
    return {"reason": reason, "epochs": epochs, "max_epochs": max_epochs, "steps": steps, "max_steps": max_steps,
            "steps_per_epoch": int(per_epoch) if isinstance(per_epoch, int) or float(per_epoch).is_integer() else None,
            "time_cap_s": None if time_cap_s is None else round(time_cap_s, 3), "time_cap_hit": cap_hit,
            "at_epoch": at, "calibration": calibration}


def cell_budget(value: Any, fingerprint: dict[str, Any] | None) -> tuple[float | None, dict[str, Any] | None]:
    """:func:`resolve_budget` for a cell about to train: a calibrated budget whose reference was
    measured otherwise than the run's fingerprint (device, dtype) or a run without one gets a
    fingerprint of its own, measured now like the reference (named in the calibration detail)."""
    if not is_calibrated(value):
        return resolve_budget(value, fingerprint)
    ref = REFERENCES[value["reference"]]
    source = "run"
    if not comparable(fingerprint, ref):
        fingerprint = measure(ref["device"], ref["dtype"], None, configured_seconds() or DEFAULT_SECONDS)
        source = "cell"
    seconds, detail = resolve_budget(value, fingerprint)
    assert detail is not None
    detail["fingerprint"] = source if source == "run" else fingerprint
    return seconds, detail


def cell_timeout(config: dict[str, Any], fingerprint: dict[str, Any] | None = None) -> float | None:
    """Wall limit of a cell's process: its time budget with room for data, testing and a slow
    start (2x + 10 min); none for a cell without ``max_time_s`` (it ends by its epochs). A
    calibrated budget is scaled by ``fingerprint`` (without one: 4x its reference seconds)."""
    budget = (config.get("trainer") or {}).get("max_time_s")
    return 2 * expected_seconds(budget, fingerprint) + 600 if budget else None
