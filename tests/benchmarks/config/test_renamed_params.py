"""Renamed model parameters (issue 17: one name per concept across domains). pos_tagging's
``heads/layers/ff`` and graphs' ``heads/layers`` became ``num_heads/num_layers/dim_feedforward``;
the old names still work in configs (one notice per name, naming the new name and the cells), in
records (``attnbench eval`` builds from a record's config) and in ``build``, and cell ids hash the
names first recorded, so no id changes. Calls benchmarks.config directly: no training."""

from __future__ import annotations

import json
import warnings
from pathlib import Path

import pytest

from benchmarks.config.schema import ConfigError
from benchmarks.config.suite import cell_id, expand, load_suite_with_notices, validate_suite
from tasks.common.registry import get_task

REFERENCE = Path(__file__).resolve().parents[3] / "results" / "reference" / "cpu-2core-amd-epyc"

# (task, dataset, model, old-name params, the same under the new names)
DOMAINS = [
    ("pos_tagging", "synthetic", "transformer", {"heads": 2, "layers": 1, "ff": 32},
     {"num_heads": 2, "num_layers": 1, "dim_feedforward": 32}),
    ("graphs", "sbm", "graph_attention", {"heads": 2, "layers": 3}, {"num_heads": 2, "num_layers": 3}),
]


def _suite(task: str, dataset: str, model: str, params: dict) -> dict:
    return {"suite": "t", "seeds": 1, "trainer": {"max_epochs": 1, "accelerator": "cpu"},
            "cells": [{"task": task, "dataset": dataset, "models": [model], "model_params": {model: params}}]}


@pytest.mark.parametrize("task,dataset,model,old,new", DOMAINS, ids=[d[0] for d in DOMAINS])
def test_old_names_still_work_with_a_notice_and_the_same_cell_id(tmp_path, task, dataset, model, old, new):
    path = tmp_path / "old.yaml"
    path.write_text(json.dumps(_suite(task, dataset, model, old)))
    cfg, notices = load_suite_with_notices(path)
    assert len(notices) == len(old)  # one line per old name, each naming the new name and the cell
    for (o, n), line in zip(zip(old, new), notices):
        assert f"'{o}' is deprecated, use '{n}'" in line and f"cells[0].model_params.{model}" in line
        assert "\n" not in line
    [cell_old] = expand(cfg)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # the new names: no warning
        [cell_new] = expand(validate_suite(_suite(task, dataset, model, new)))
    assert cell_old.cell_id == cell_new.cell_id
    assert cell_old.config == cell_new.config  # stored under the new names
    assert all(k in cell_old.config["model_params"] for k in new) and not set(old) & set(cell_old.config["model_params"])
    # the id hashes the old names: the config as a record written before the rename has the same id
    recorded = {k: v for k, v in cell_new.config["model_params"].items() if k not in new}
    recorded.update(old)
    assert cell_id({**cell_new.config, "model_params": recorded}) == cell_new.cell_id
    assert cell_id(cell_new.config) == cell_new.cell_id
    with pytest.warns(FutureWarning) as caught:
        validate_suite(_suite(task, dataset, model, old))  # without a notices list: a warning per old name
    assert [str(w.message) for w in caught] == [line.replace(str(path), "config") for line in notices]


@pytest.mark.parametrize("task,dataset,model,old,new", DOMAINS, ids=[d[0] for d in DOMAINS])
def test_old_and_new_name_together_is_one_line_error(task, dataset, model, old, new):
    o, n = next(iter(old)), next(iter(new))
    with pytest.raises(ConfigError) as err:
        validate_suite(_suite(task, dataset, model, {o: 2, n: 2}))
    lines = str(err.value).splitlines()
    assert len([line for line in lines if o in line]) == 1, lines
    assert f"cells[0].model_params.{model}" in str(err.value) and f"'{o}' and '{n}'" in str(err.value)


def test_one_notice_per_old_name_across_cells_and_presets(tmp_path):
    cfg = _suite("pos_tagging", "synthetic", "transformer", {"heads": 2})
    cfg["cells"][0]["models"] = ["transformer", "transformer_truncated", "bilstm"]
    cfg["cells"][0]["model_params"].update(transformer_truncated={"heads": 2}, bilstm={"layers": 1})
    path = tmp_path / "s.yaml"
    path.write_text(json.dumps(cfg))
    _, notices = load_suite_with_notices(path)
    assert len(notices) == 2, notices
    assert "cells[0].model_params.transformer, cells[0].model_params.transformer_truncated" in notices[0]
    assert "'layers' is deprecated, use 'num_layers'" in notices[1] and "model_params.bilstm" in notices[1]


@pytest.mark.parametrize("params,where,expect", [
    ({"num_heads": 0}, "num_heads=0", ">= 1"),
    ({"heads": 0}, "num_heads=0", ">= 1"),  # an old name is checked under its new one
    ({"layers": 1.5}, "num_layers=1.5", "int"),
    ({"ff": "big"}, "dim_feedforward='big'", "int"),
])
def test_a_renamed_parameter_keeps_its_default_and_bounds(params, where, expect):
    spec = get_task("pos_tagging").models.get("transformer")
    assert (spec.params["num_heads"], spec.params["num_layers"], spec.params["dim_feedforward"]) == (8, 4, 512)
    with pytest.raises(ConfigError, match=f"{where}.*{expect}"), warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)
        validate_suite(_suite("pos_tagging", "synthetic", "transformer", params))


def test_an_unknown_key_lists_the_new_names():
    with pytest.raises(ConfigError) as err:
        validate_suite(_suite("graphs", "sbm", "gcn", {"depth": 2}))
    assert "valid model 'gcn' parameters: d_model, dropout, num_layers" in str(err.value)


def test_build_takes_old_names():
    spec = get_task("graphs").models.get("full_attention")  # a preset of graph_attention
    info = {"num_features": 5, "num_classes": 3}
    assert spec.build(info, heads=2, layers=3).layers[0].heads == 2
    assert len(spec.build(info, heads=2, layers=3).layers) == 2 and len(spec.build(info).layers) == 1
    with pytest.raises(ValueError, match="'heads' and 'num_heads' name the same parameter"):
        spec.build(info, heads=2, num_heads=2)


@pytest.mark.parametrize("suite", ["pos_tagging", "graphs"])
def test_committed_records_keep_their_ids_and_build_from_their_old_names(suite):
    records = sorted((REFERENCE / suite / "runs").rglob("*.json"))
    if not records:
        pytest.skip(f"no reference records for {suite}")
    old_named = 0
    for path in records:
        rec = json.loads(path.read_text())
        spec = get_task(rec["task"]).models.get(rec["model"])
        params, old = spec.current_names(rec["config"]["model_params"])
        old_named += bool(old)
        assert cell_id(rec["config"]) == rec["cell_id"]  # as written, old names
        assert cell_id({**rec["config"], "model_params": params}) == rec["cell_id"]  # under the new names
    assert old_named  # the reference records were written under the old names
