"""What a time budget in a config may be (``trainer.max_time_s``), and the reference machines a
calibrated budget names. Pure data and checks: the suite validates budgets with these before
anything runs; :mod:`benchmarks.run.fingerprint` measures a machine and scales them."""

from __future__ import annotations

import math
from typing import Any, Mapping

__all__ = ["REFERENCES", "BUDGET_EXPECT", "is_calibrated", "budget_ok"]

#: Reference machines a calibrated budget may name. Measured with ``attnbench env`` (2 threads,
#: float32), best of 5 fingerprints on a machine shared with other jobs (see
#: results/reference/cpu-2core-amd-epyc-avx2/budgets/README.md).
REFERENCES: dict[str, dict[str, Any]] = {
    "cpu-2core-amd-epyc-avx2": {
        "device": "cpu", "dtype": "float32", "threads": 2,
        "cpu_model": "AMD EPYC (2 cores, AVX2, no AVX-512)", "torch": "2.14.1",
        "matmul_gflops": 183.6, "conv_gflops": 163.2, "lstm_steps_per_s": 23820.0, "measured": "2026-11-24",
        # measured the same way later the same day (best of 5, quiet cores)
        "train_steps_per_s": 95.4,
    },
}

BUDGET_EXPECT = ("a number > 0 or null (wall-clock seconds), or {seconds: S > 0, reference: NAME} (S seconds on "
                 "the reference machine NAME, scaled by this machine's speed fingerprint; NAME one of "
                 + ", ".join(REFERENCES) + ")")


def is_calibrated(value: Any) -> bool:
    """Whether a ``max_time_s`` value is the calibrated form (a mapping)."""
    return isinstance(value, Mapping)


def budget_ok(value: Any) -> bool:
    """Whether ``value`` is a valid non-null ``trainer.max_time_s`` (see :data:`BUDGET_EXPECT`)."""
    def seconds(v: Any) -> bool:
        return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) and v > 0

    if is_calibrated(value):
        return set(value) == {"seconds", "reference"} and seconds(value["seconds"]) and value["reference"] in REFERENCES
    return seconds(value)
