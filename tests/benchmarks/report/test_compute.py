"""Quality against training compute (issue 52, the compute axis): curves read off the records, the
frontier a running best, attention's overtaking point where it stays ahead to the common end."""

from __future__ import annotations

import pytest

from benchmarks.report.compute import frontier, model_curve, overtake
from benchmarks.report.results import ModelResult


def _model(curves: list[list[float]], fps: float = 1e6, size: int = 100) -> ModelResult:
    m = ModelResult("s", "t", "d", "m", "attention", None)
    m.ok = [{"cost": {"flops_per_sample": fps}, "data": {"train_size": size},
             "curve": [{"epoch": e, "val_metric": v} for e, v in enumerate(c)]} for c in curves]
    return m


def test_the_curve_is_compute_per_epoch_and_the_seed_mean():
    curve = model_curve(_model([[0.5, 0.7], [0.3, 0.9]]))
    assert curve == [(3e8, pytest.approx(0.4)), (6e8, pytest.approx(0.8))]
    assert model_curve(_model([[0.5]], fps=None)) == []  # no FLOPs: no curve


def test_frontier_is_the_running_best_over_curves():
    f = frontier([[(1, 0.5), (3, 0.4)], [(2, 0.6), (4, 0.7)]], "max")
    assert f == [(1, 0.5), (2, 0.6), (3, 0.6), (4, 0.7)]
    assert frontier([[(1, 2.0), (2, 1.0)]], "min") == [(1, 2.0), (2, 1.0)]


def test_overtake_needs_attention_ahead_to_the_common_end():
    base = [(1, 0.6), (2, 0.7), (8, 0.75)]
    late = [(1, 0.3), (2, 0.5), (4, 0.8), (8, 0.9)]
    assert overtake(late, base, "max") == 4
    behind_at_end = [(1, 0.9), (2, 0.9), (8, 0.7)]
    assert overtake(frontier([behind_at_end], "max"), base, "max") == 1  # a frontier never falls
    never = [(1, 0.1), (8, 0.2)]
    assert overtake(never, base, "max") is None
