"""The ``trainer`` section of a suite config: its keys, which of them stay out of cell ids while
they keep their default, and the device a cell's accelerator resolves to."""

from __future__ import annotations

from typing import Any

from benchmarks.config.budget import BUDGET_EXPECT, budget_ok
from benchmarks.config.schema import Field

__all__ = ["TRAINER_FIELDS", "OMIT_WHEN_DEFAULT", "COMPILE_MODES", "resolve_device"]


def _devices_ok(v: Any) -> bool:
    if v == "auto":
        return True
    if isinstance(v, int) and not isinstance(v, bool):
        return v >= 1
    ints = isinstance(v, list) and all(isinstance(d, int) and not isinstance(d, bool) for d in v)
    return ints and bool(v) and min(v) >= 0 and len(set(v)) == len(v)


#: ``trainer.compile``'s modes besides true/false (torch.compile's ``mode``)
COMPILE_MODES = ("default", "reduce-overhead")
BUCKETS_EXPECT = "an integer >= 1 (bucket count), a non-empty list of increasing integers >= 1 (padded lengths) or null"


def _buckets_ok(v: Any) -> bool:
    def pos(x: Any) -> bool:
        return isinstance(x, int) and not isinstance(x, bool) and x >= 1
    return pos(v) or (isinstance(v, list) and bool(v) and all(pos(x) for x in v) and v == sorted(set(v)))


TRAINER_FIELDS = {
    "max_epochs": Field("int", 100, minimum=1, doc="epochs at most"),
    "max_steps": Field("int", -1, test=lambda v: v == -1 or v >= 1, expect="-1 (no limit) or an integer >= 1",
                       doc="optimiser steps at most (-1: no limit)"),
    "max_time_s": Field("any", None, nullable=True, test=budget_ok, expect=BUDGET_EXPECT,
                        doc="time budget per cell: wall-clock seconds, or {seconds, reference}: seconds on a "
                        "reference machine, scaled by this machine's speed fingerprint (benchmarks/run/budget.py)"),
    "early_stopping_patience": Field("int", None, nullable=True, minimum=1, doc="epochs without improvement; null: off"),
    "min_epochs": Field("int", 1, minimum=0),
    "precision": Field("str", "32-true", choices=("32-true", "32", "bf16-mixed", "16-mixed", "64-true", "bf16-true")),
    "accelerator": Field("str", "auto", choices=("auto", "cpu", "gpu", "cuda")),
    "devices": Field("any", 1, test=_devices_ok, doc="as lightning.Trainer's devices",
                     expect="an integer >= 1, a non-empty list of distinct device indices >= 0, or 'auto'"),
    "gradient_clip_val": Field("float", None, nullable=True, minimum=0),
    "check_val_every_n_epoch": Field("int", 1, minimum=1),
    "deterministic": Field("bool", False),
    "tf32": Field("bool", False, doc="CUDA: TF32 for float32 matmuls and cuDNN convolutions alike (one switch, "
                  "so no model family gets a faster float32 than another); false: true float32 everywhere"),
    "compile": Field("any", False, test=lambda v: any(v is c for c in (False, True)) or v in COMPILE_MODES,
                     expect="false, true or one of " + ", ".join(repr(m) for m in COMPILE_MODES),
                     doc="torch.compile the network (in the worker): true or 'default' (graph breaks allowed), "
                     "'reduce-overhead' (CUDA graphs over forward and backward: one graph per batch shape, the "
                     "whole network captured, sequence batches padded to trainer.length_buckets); its compile "
                     "time is recorded apart from the train time (cost.compile_s); a network that cannot compile "
                     "(or, for reduce-overhead, be captured whole) fails its cell with the reason"),
    "length_buckets": Field("any", None, nullable=True, test=_buckets_ok, expect=BUCKETS_EXPECT,
                            doc="sequence domains: pad every batch to one of a few fixed lengths so shapes repeat: "
                            "a count K (the K lengths with the fewest padded positions) or the lengths; null: none, or "
                            "4 with compile: reduce-overhead (tasks/common/buckets.py; cost.padding says what "
                            "they cost)"),
}

#: Trainer keys added after records were first written: left out of a cell's resolved config
#: (and so of its id) while they keep their default, so existing cell ids stay valid.
OMIT_WHEN_DEFAULT = {"tf32": False, "compile": False, "length_buckets": None}


def resolve_device(accelerator: str) -> str:
    """The device type a cell will train on: ``cpu`` or ``cuda`` (``auto`` asks torch)."""
    if accelerator == "cpu":
        return "cpu"
    if accelerator in ("gpu", "cuda"):
        return "cuda"
    import torch

    return "cuda" if torch.cuda.is_available() else "cpu"


def bucket_spec(trainer: dict[str, Any]) -> int | list[int] | None:
    """The length buckets a cell's batches are padded to: ``trainer.length_buckets``, else the default
    count with ``compile: reduce-overhead`` (CUDA graphs need repeated shapes), else None (none)."""
    from tasks.common.buckets import DEFAULT_COUNT

    given = trainer.get("length_buckets")
    if given is not None:
        return given
    return DEFAULT_COUNT if trainer.get("compile") == "reduce-overhead" else None
