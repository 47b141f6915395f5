"""A sweep is a config list (issue 52 item 1): one cell per value, the value in the cell's id, every
combination of several swept keys; a swept point is the cell written with that value; a list for a
list parameter is its value, a list of lists sweeps it; a diagnostic's sweep axis is checked."""

from __future__ import annotations

import pytest

from benchmarks.config.schema import ConfigError
from benchmarks.config.suite import expand, validate_suite


def _cfg(entry: dict, diagnostics: dict | None = None) -> dict:
    cfg = {"suite": "s", "seeds": 2, "trainer": {"max_epochs": 1, "accelerator": "cpu"},
           "cells": [{"task": "graphs", "dataset": "sbm", "models": ["gcn", "mlp"], **entry}]}
    if diagnostics:
        cfg["diagnostics"] = diagnostics
    return cfg


def _cells(entry: dict, diagnostics: dict | None = None):
    return expand(validate_suite(_cfg(entry, diagnostics), source="s.yaml"))


def test_a_list_sweeps_a_one_value_parameter_and_each_point_is_the_written_cell():
    swept = _cells({"dataset_params": {"homophily": [0.1, 0.5, 0.9]}})
    assert len(swept) == 3 * 2 * 2
    assert sorted({c.config["dataset_params"]["homophily"] for c in swept}) == [0.1, 0.5, 0.9]
    single = _cells({"dataset_params": {"homophily": 0.5}})
    assert {c.cell_id for c in single} < {c.cell_id for c in swept}  # a point reuses the written cell's id


def test_several_keys_give_every_combination_and_model_and_module_params_sweep_too():
    cells = _cells({"dataset_params": {"homophily": [0.2, 0.8], "feature_noise": [0.5, 1.0, 2.0]},
                    "module_params": {"lr": [0.001, 0.01]}, "model_params": {"gcn": {"d_model": [16, 32]}}})
    points = {(c.model, c.config["dataset_params"]["homophily"], c.config["dataset_params"]["feature_noise"],
               c.config["module_params"]["lr"], c.config["model_params"].get("d_model"), c.seed) for c in cells}
    assert len(cells) == len(points) == 2 * 3 * 2 * (2 + 1) * 2  # gcn: 2 widths, mlp: 1


def test_a_list_parameter_takes_a_list_as_its_value_and_a_list_of_lists_sweeps_it():
    base = {"task": "speech", "dataset": "synthetic", "models": ["cnn"]}
    one = expand(validate_suite({**_cfg({}), "cells": [{**base, "dataset_params": {"per_class": [12, 6, 12]}}]},
                                source="s.yaml"))
    assert {tuple(c.config["dataset_params"]["per_class"]) for c in one} == {(12, 6, 12)}
    two = expand(validate_suite({**_cfg({}), "cells": [{**base, "dataset_params": {"per_class": [[12, 6, 12], [24, 6, 12]]}}]},
                                source="s.yaml"))
    assert {tuple(c.config["dataset_params"]["per_class"]) for c in two} == {(12, 6, 12), (24, 6, 12)}


def test_a_bad_value_inside_a_sweep_is_one_line_naming_it():
    with pytest.raises(ConfigError) as info:
        _cells({"dataset_params": {"homophily": [0.1, 1.5]}})
    assert "homophily=1.5 is invalid" in str(info.value)


def test_a_diagnostic_sweep_axis_must_be_swept_by_its_cells():
    diag = {"d": {"tests": "t", "why": "w", "expect": ["cnn > other"], "sweep": "homophily"}}
    ok = _cells({"diagnostic": "d", "dataset_params": {"homophily": [0.1, 0.9]}}, diag)
    assert len(ok) == 8
    with pytest.raises(ConfigError) as info:
        _cells({"diagnostic": "d", "dataset_params": {"homophily": 0.5}}, diag)
    assert "diagnostics.d.sweep='homophily': its cells do not run 'homophily' at two or more values" in str(info.value)
