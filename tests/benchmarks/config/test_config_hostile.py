"""Hostile suite configs and overrides (issue 15, items 2, 3a, 8): every bad value is refused
before any cell runs, with one error that lists every problem (key path, bad value, what is
allowed); the suite name is a name, never a path; a command-line --set wins over the cells'
own values (with a notice naming them) and reaches single cells (cells.2.x) or all (cells.*.x).
Everything here calls benchmarks.config.suite directly: no training."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from benchmarks.config.schema import ConfigError, apply_overrides
from benchmarks.config.suite import expand, load_suite, load_suite_with_notices, validate_suite
from tasks.common.registry import Bounds, param_bounds
from tests.helpers import toy_task
toy_task.register()
ROOT = Path(__file__).resolve().parents[3]
CONFIGS = ROOT / "benchmarks" / "configs"
REFERENCE = ROOT / "results" / "reference" / "cpu-2core-amd-epyc"


NAN, INF = float("nan"), float("inf")


def _suite(**extra):
    cfg = {"suite": "t", "seeds": 2, "trainer": {"max_epochs": 8, "accelerator": "cpu"},
           "cells": [{"task": "toy", "dataset": "points", "models": ["linear"]}]}
    cfg.update(extra)
    return cfg


def _cell(**kw):
    return {"task": "toy", "dataset": "points", "models": ["linear"], **kw}


def _graphs_cell(**kw):
    return {"task": "graphs", "dataset": "sbm", "models": ["graph_attention"], **kw}


# (name, config changes, the key path, the bad value as printed, what is allowed)
HOSTILE = [
    # suite name: a name, never a path
    ("suite-dotdot", {"suite": "../../x"}, "suite", "'../../x'", "not a path"),
    ("suite-abs", {"suite": "/abs"}, "suite", "'/abs'", "A-Za-z0-9"),
    ("suite-slash", {"suite": "a/b"}, "suite", "'a/b'", "not a path"),
    ("suite-dot", {"suite": "."}, "suite", "'.'", "not a path"),
    ("suite-empty", {"suite": ""}, "suite", "''", "not a path"),
    ("suite-int", {"suite": 3}, "suite", "3", "a name matching"),
    # seeds
    ("seeds-negative-count", {"seeds": -1}, "seeds", "-1", "a count in 1..10000"),
    ("seeds-negative-item", {"seeds": [0, -3]}, "seeds", "[0, -3]", "distinct ints >= 0"),
    ("seeds-bool", {"seeds": True}, "seeds", "True", "a count in 1..10000"),
    ("seeds-float", {"seeds": 2.5}, "seeds", "2.5", "a count in 1..10000"),
    ("seeds-huge", {"seeds": 10**9}, "seeds", "1000000000", "a count in 1..10000"),
    ("seeds-repeated", {"seeds": [1, 1]}, "seeds", "[1, 1]", "repeated seeds"),
    ("cell-seeds-negative", {"cells": [_cell(seeds=[-1])]}, "cells[0].seeds", "[-1]", "distinct ints >= 0"),
    # trainer keys
    ("devices-zero", {"trainer": {"devices": 0}}, "trainer.devices", "0", "an integer >= 1"),
    ("devices-negative-index", {"trainer": {"devices": [0, -1]}}, "trainer.devices", "[0, -1]", "'auto'"),
    ("devices-repeated", {"trainer": {"devices": [1, 1]}}, "trainer.devices", "[1, 1]", "distinct device indices"),
    ("devices-empty", {"trainer": {"devices": []}}, "trainer.devices", "[]", "non-empty list"),
    ("devices-string", {"trainer": {"devices": "gpu0"}}, "trainer.devices", "'gpu0'", "'auto'"),
    ("devices-bool", {"trainer": {"devices": True}}, "trainer.devices", "True", "'auto'"),
    ("max_steps-zero", {"trainer": {"max_steps": 0}}, "trainer.max_steps", "0", "-1 (no limit) or an integer >= 1"),
    ("max_steps-minus-two", {"trainer": {"max_steps": -2}}, "trainer.max_steps", "-2", "-1 (no limit)"),
    ("max_time-zero", {"trainer": {"max_time_s": 0}}, "trainer.max_time_s", "0", "a number > 0 or null"),
    ("max_epochs-float", {"trainer": {"max_epochs": 2.5}}, "trainer.max_epochs", "2.5", "an integer >= 1"),
    ("max_epochs-string", {"trainer": {"max_epochs": "10"}}, "trainer.max_epochs", "'10'", "an integer >= 1"),
    ("precision", {"trainer": {"precision": "fp8"}}, "trainer.precision", "'fp8'", "one of '32-true'"),
    ("accelerator", {"trainer": {"accelerator": "tpu"}}, "trainer.accelerator", "'tpu'", "one of 'auto'"),
    ("deterministic-string", {"trainer": {"deterministic": "yes"}}, "trainer.deterministic", "'yes'", "true or false"),
    ("clip-negative", {"trainer": {"gradient_clip_val": -1.0}}, "trainer.gradient_clip_val", "-1.0", "a number >= 0"),
    ("min-above-max", {"trainer": {"min_epochs": 9, "max_epochs": 3}}, "trainer.min_epochs", "9", "at most max_epochs=3"),
    ("cell-devices", {"cells": [_cell(trainer={"devices": -1})]}, "cells[0].trainer.devices", "-1", "'auto'"),
    # unknown keys at every level
    ("unknown-top", {"epochs": 3}, "'epochs'", "", "valid keys: suite"),
    ("unknown-trainer", {"trainer": {"max_epoch": 3}}, "'trainer.max_epoch'", "", "valid keys of trainer: max_epochs"),
    ("unknown-cell", {"cells": [_cell(modles=["linear"])]}, "'cells[0].modles'", "", "valid keys of cells[0]: task"),
    ("unknown-cell-trainer", {"cells": [_cell(trainer={"patience": 3})]}, "'cells[0].trainer.patience'", "",
     "early_stopping_patience"),
    ("unknown-model-param", {"cells": [_cell(model_params={"linear": {"depth": 2}})]},
     "'cells[0].model_params.linear.depth'", "", "valid model 'linear' parameters: hidden"),
    ("unknown-dataset-param", {"cells": [_cell(dataset_params={"size": 9})]}, "'cells[0].dataset_params.size'", "",
     "valid dataset 'points' parameters: n"),
    ("unknown-module-param", {"cells": [_cell(module_params={"lr_max": 1})]}, "'cells[0].module_params.lr_max'", "",
     "valid task 'toy' module parameters: lr"),
    # parameter types and ranges, from the registered defaults
    ("int-param-float", {"cells": [_cell(model_params={"linear": {"hidden": 1.5}})]},
     "cells[0].model_params.linear.hidden", "1.5", "an integer >= 0"),
    ("int-param-bool", {"cells": [_cell(dataset_params={"n": True})]}, "cells[0].dataset_params.n", "True",
     "an integer >= 1"),
    ("int-param-negative", {"cells": [_cell(dataset_params={"n": -5})]}, "cells[0].dataset_params.n", "-5",
     "an integer >= 1"),
    ("lr-string", {"cells": [_cell(module_params={"lr": "1e-3"})]}, "cells[0].module_params.lr", "'1e-3'",
     "a number > 0"),
    ("lr-zero", {"cells": [_cell(module_params={"lr": 0})]}, "cells[0].module_params.lr", "0", "a number > 0"),
    ("str-param-int", {"cells": [_cell(models=["broken"], model_params={"broken": {"kind": 3}})]},
     "cells[0].model_params.broken.kind", "3", "a string"),
    ("dropout-above-one", {"cells": [_graphs_cell(model_params={"graph_attention": {"dropout": 1.5}})]},
     "cells[0].model_params.graph_attention.dropout", "1.5", "a number in [0, 1]"),
    ("bool-param-int", {"cells": [_graphs_cell(model_params={"graph_attention": {"self_loops": 1}})]},
     "cells[0].model_params.graph_attention.self_loops", "1", "true or false"),
    ("pattern-choice", {"cells": [_graphs_cell(model_params={"graph_attention": {"pattern": "sparse"}})]},
     "cells[0].model_params.graph_attention.pattern", "'sparse'", "one of 'full', 'truncated', 'graph'"),
    ("score-choice", {"cells": [_graphs_cell(model_params={"graph_attention": {"score": "cosine"}})]},
     "cells[0].model_params.graph_attention.score", "'cosine'", "one of"),
    ("optimizer-choice", {"cells": [_graphs_cell(module_params={"optimizer": "lbfgs"})]},
     "cells[0].module_params.optimizer", "'lbfgs'", "one of 'adam', 'adamw', 'sgd'"),
    ("list-param-items", {"cells": [{"task": "speech", "dataset": "synthetic", "models": ["lstm"],
                                     "dataset_params": {"per_class": [16, "6", 0]}}]},
     "cells[0].dataset_params.per_class[1]", "'6'", "an integer >= 1"),
    ("list-param-not-list", {"cells": [{"task": "speech", "dataset": "synthetic", "models": ["lstm"],
                                        "dataset_params": {"per_class": 16}}]},
     "cells[0].dataset_params.per_class", "16", "a list, each item an integer >= 1"),
    ("params-not-mapping", {"cells": [_cell(module_params=[0.1])]}, "cells[0].module_params", "[0.1]", "a mapping"),
    # cell structure
    ("models-empty", {"cells": [_cell(models=[])]}, "cells[0].models", "[]", "'all' or a non-empty list"),
    ("train-fraction-zero", {"train_fraction": 0}, "train_fraction", "0", "a number in (0, 1]"),
    ("cells-not-list", {"cells": {"task": "toy"}}, "cells", "{'task': 'toy'}", "a list of mappings"),
    ("cell-not-mapping", {"cells": [3]}, "cells[0]", "3", "a mapping of keys (task, dataset"),
    ("trainer-not-mapping", {"trainer": 5}, "trainer", "5", "a mapping of keys (max_epochs"),
    ("cell-trainer-not-mapping", {"cells": [_cell(trainer=[1])]}, "cells[0].trainer", "[1]", "a mapping of keys"),
    # issue 33 item 1: non-finite numbers (YAML's .nan/.inf) wherever a float is read, seeds the RNGs refuse,
    # counts that make the task meaningless
    ("lr-nan", {"cells": [_cell(module_params={"lr": NAN})]}, "cells[0].module_params.lr", "nan",
     "a finite value: a number > 0"),
    ("lr-inf", {"cells": [_cell(module_params={"lr": INF})]}, "cells[0].module_params.lr", "inf",
     "a finite value: a number > 0"),
    ("clip-nan", {"trainer": {"gradient_clip_val": NAN}}, "trainer.gradient_clip_val", "nan",
     "a finite value: a number >= 0 or null"),
    ("clip-inf", {"trainer": {"gradient_clip_val": INF}}, "trainer.gradient_clip_val", "inf",
     "a finite value: a number >= 0 or null"),
    ("cell-clip-inf", {"cells": [_cell(trainer={"gradient_clip_val": INF})]}, "cells[0].trainer.gradient_clip_val",
     "inf", "a finite value"),
    ("max-time-inf", {"trainer": {"max_time_s": INF}}, "trainer.max_time_s", "inf", "a finite value"),
    ("dropout-nan", {"cells": [_graphs_cell(model_params={"graph_attention": {"dropout": NAN}})]},
     "cells[0].model_params.graph_attention.dropout", "nan", "a finite value: a number in [0, 1]"),
    ("weight-decay-inf", {"cells": [_graphs_cell(module_params={"weight_decay": INF})]},
     "cells[0].module_params.weight_decay", "inf", "a finite value: a number >= 0"),
    ("dataset-float-minus-inf", {"cells": [{"task": "speech", "dataset": "synthetic", "models": ["lstm"],
                                            "dataset_params": {"snr_db": -INF}}]},
     "cells[0].dataset_params.snr_db", "-inf", "a finite value: a number"),
    ("dataset-p-nan", {"cells": [_graphs_cell(dataset_params={"p_in": NAN})]}, "cells[0].dataset_params.p_in",
     "nan", "a finite value: a number in [0, 1]"),
    ("data-seed-beyond-rng", {"cells": [{"task": "speech", "dataset": "synthetic", "models": ["lstm"],
                                         "dataset_params": {"data_seed": 2**32}}]},
     "cells[0].dataset_params.data_seed", "4294967296", "an integer in [0, 4294967295]"),
    ("seeds-item-beyond-rng", {"seeds": [0, 2**32]}, "seeds", "[0, 4294967296]", "<= 4294967295"),
    ("cell-seeds-beyond-rng", {"cells": [_cell(seeds=[2**40])]}, "cells[0].seeds", "[1099511627776]",
     "seed 1099511627776 is beyond 4294967295"),
    ("num-classes-one", {"cells": [_graphs_cell(dataset_params={"num_classes": 1})]},
     "cells[0].dataset_params.num_classes", "1", "an integer >= 2"),
]


@pytest.mark.parametrize("changes,key,value,allowed", [h[1:] for h in HOSTILE], ids=[h[0] for h in HOSTILE])
def test_hostile_value_is_refused_naming_key_value_and_choices(changes, key, value, allowed):
    cfg = _suite(**{k: v for k, v in changes.items() if k != "trainer"})
    if isinstance(changes.get("trainer"), dict):
        cfg["trainer"].update(changes["trainer"])
    elif "trainer" in changes:
        cfg["trainer"] = changes["trainer"]
    with pytest.raises(ConfigError) as info:
        validate_suite(cfg, source="x.yaml")
    msg = str(info.value)
    # a bad value: "<key>=<value> is invalid: expected ..."; an unknown key: "unknown key '<key>'; valid ..."
    assert (f"x.yaml: {key}={value}" if value else f"x.yaml: unknown key {key}" if key.startswith("'")
            else f"x.yaml: {key}") in msg, msg
    assert allowed in msg, msg
    assert "Traceback" not in msg


def test_every_problem_is_listed_in_one_error():
    cfg = _suite(suite="../x", seeds=-2)
    cfg["trainer"].update(devices=0, bogus=1)
    cfg["cells"] = [_cell(dataset_params={"n": 1.5}), _cell(models=["nope"]), {"task": "chess", "dataset": "y"}]
    with pytest.raises(ConfigError) as info:
        validate_suite(cfg, source="x.yaml")
    lines = str(info.value).splitlines()
    assert lines[0] == "x.yaml: 7 problems:"
    for needle in ("suite='../x'", "seeds=-2", "trainer.devices=0", "unknown key 'trainer.bogus'",
                   "cells[0].dataset_params.n=1.5", "cells[1].models: unknown model of task 'toy' 'nope'",
                   "cells[2].task: unknown task 'chess'"):
        assert sum(needle in line for line in lines[1:]) == 1, (needle, lines)
    assert all(line.startswith("  x.yaml: ") for line in lines[1:])
    assert info.value.problems == [line.strip() for line in lines[1:]]


def test_a_single_problem_keeps_the_one_line_format():
    with pytest.raises(ConfigError) as info:
        validate_suite(_suite(seeds=0), source="x.yaml")
    assert str(info.value) == ("x.yaml: seeds=0 is invalid: expected a count in 1..10000 or a non-empty list of "
                               "distinct ints >= 0")


def test_declared_bounds_win_over_the_generic_rule():
    spec = toy_task.TASKS.get("toy").models.get("linear")  # a frozen dataclass: set and restore
    object.__setattr__(spec, "bounds", {"hidden": Bounds(choices=(0, 8, 16))})
    try:
        with pytest.raises(ConfigError, match=r"model_params.linear.hidden=4 is invalid: expected one of 0, 8, 16"):
            validate_suite(_suite(cells=[_cell(model_params={"linear": {"hidden": 4}})]))
        validate_suite(_suite(cells=[_cell(model_params={"linear": {"hidden": 8}})]))
    finally:
        object.__setattr__(spec, "bounds", {})


@pytest.mark.parametrize("name,default,allowed,refused", [
    ("hidden", 64, [1, 1000], [0, -1]),
    ("data_seed", 0, [0, 7], [-1]),
    ("dropout", 0.1, [0, 0.5, 1], [-0.1, 1.01]),
    ("lr", 0.01, [1e-9, 3], [0, -1e-3]),
    ("window", 4, [0, None, 9], [-1]),
    ("max_steps", -1, [-1, 5], []),
])
def test_generic_bounds_rule(name, default, allowed, refused):
    b = param_bounds(name, default)

    def ok(v):
        if v is None:
            return bool(b.nullable)
        lo = b.minimum is None or v > b.minimum or (v == b.minimum and not b.min_open)
        hi = b.maximum is None or v <= b.maximum
        return lo and hi

    assert all(ok(v) for v in allowed) and not any(ok(v) for v in refused)


def test_values_are_kept_as_given_so_cell_ids_do_not_move():
    cells = expand(validate_suite(_suite(cells=[_cell(module_params={"lr": 1})])))
    assert cells[0].config["module_params"]["lr"] == 1 and isinstance(cells[0].config["module_params"]["lr"], int)


# ----------------------------------------------------------------------------- overrides
def _write(tmp_path, cfg) -> Path:
    p = tmp_path / "s.yaml"
    p.write_text(json.dumps(cfg))
    return p


def _two_cells(tmp_path):
    return _write(tmp_path, _suite(cells=[_cell(trainer={"max_epochs": 3}, seeds=[4]),
                                          _cell(models=["broken"], train_fraction=0.5),
                                          _cell(trainer={"early_stopping_patience": None})]))


def test_suite_level_set_wins_over_cells_and_says_which(tmp_path):
    cfg, notices = load_suite_with_notices(_two_cells(tmp_path), ["trainer.max_epochs=1"])
    assert {c.config["trainer"]["max_epochs"] for c in expand(cfg)} == {1}
    assert len(notices) == 1 and "cells[0] (toy/points) had trainer.max_epochs=3" in notices[0]
    assert "cells[1]" not in notices[0] and "--set trainer.max_epochs=1" in notices[0]
    # without --set each cell keeps its own value, silently
    cfg, notices = load_suite_with_notices(_two_cells(tmp_path))
    assert notices == [] and sorted({c.config["trainer"]["max_epochs"] for c in expand(cfg)}) == [3, 8]


def test_set_seeds_and_train_fraction_win_over_cells(tmp_path):
    cfg, notices = load_suite_with_notices(_two_cells(tmp_path), ["seeds=[7]", "train_fraction=1.0"])
    cells = expand(cfg)
    assert {c.seed for c in cells} == {7} and {c.train_fraction for c in cells} == {1.0}
    assert "cells[0] (toy/points) had seeds=[4]" in notices[0]
    assert "cells[1] (toy/points) had train_fraction=0.5" in notices[1]


def test_set_a_null_trainer_key_replaces_a_cells_null(tmp_path):
    cfg, notices = load_suite_with_notices(_two_cells(tmp_path), ["trainer.early_stopping_patience=5"])
    assert {c.config["trainer"]["early_stopping_patience"] for c in expand(cfg)} == {5}
    assert "cells[2] (toy/points) had trainer.early_stopping_patience=None" in notices[0]


def test_per_cell_and_wildcard_sets(tmp_path):
    p = _two_cells(tmp_path)
    cells = expand(load_suite(p, ["cells.1.trainer.max_epochs=4"]))
    assert {(c.model, c.config["trainer"]["max_epochs"]) for c in cells} == {("linear", 3), ("broken", 4), ("linear", 8)}
    cells = expand(load_suite(p, ["cells.*.trainer.max_epochs=2"]))
    assert {c.config["trainer"]["max_epochs"] for c in cells} == {2}
    # left to right: a later --set wins
    cells = expand(load_suite(p, ["trainer.max_epochs=5", "cells.0.trainer.max_epochs=6"]))
    assert sorted(c.config["trainer"]["max_epochs"] for c in cells if c.model == "linear") == [5, 5, 6]


@pytest.mark.parametrize("sets,needle", [
    (["trainer.max_epochs"], "--set 'trainer.max_epochs': expected KEY=VALUE"),
    (["=3"], "--set '=3': empty key"),
    (["trainer..max_epochs=3"], "--set 'trainer..max_epochs=3': key 'trainer..max_epochs' has an empty part"),
    (["seeds=[1,"], "--set 'seeds=[1,': value is not valid YAML"),
    (["cells.3.seeds=1"], "'cells.3': '3' is not an index of cells; valid: 0..2, or '*'"),
    (["cells.-1.seeds=1"], "'cells.-1': '-1' is not an index of cells; valid: 0..2"),
    (["cells.x.seeds=1"], "'cells.x': 'x' is not an index of cells; valid: 0..2"),
    (["trainer.*=1"], "'*' stands for every item of a list"),
    (["seeds.x=1"], "--set 'seeds.x=1': 'seeds' is not a section"),
    (["cells.0.trainer.max_epochs=0"], "cells[0].trainer.max_epochs=0 is invalid: expected an integer >= 1"),
    (["cells.*.trainer.max_epoch=1"], "unknown key 'cells[2].trainer.max_epoch'"),
])
def test_bad_set_is_one_clear_error(tmp_path, sets, needle):
    with pytest.raises(ConfigError) as info:
        load_suite(_two_cells(tmp_path), sets)
    assert needle in str(info.value), str(info.value)


def test_every_bad_set_is_listed_at_once(tmp_path):
    with pytest.raises(ConfigError) as info:
        load_suite(_two_cells(tmp_path), ["a", "cells.9.seeds=1", "trainer.max_epochs=2"])
    msg = str(info.value)
    assert msg.startswith("--set: 2 problems:") and "--set 'a'" in msg and "cells.9" in msg


def test_generic_apply_overrides_reaches_list_items():
    assert apply_overrides({"xs": [1, 2, 3]}, ["xs.1=9"]) == {"xs": [1, 9, 3]}
    assert apply_overrides({"xs": [{"a": 1}, {"a": 2}]}, ["xs.*.a=0"]) == {"xs": [{"a": 0}, {"a": 0}]}


# ----------------------------------------------------------------------------- shipped configs
def _headline_folders() -> dict[str, Path]:
    import yaml

    spec = yaml.safe_load((ROOT / "results" / "page.yaml").read_text(encoding="utf-8"))
    return {h["config"]: ROOT / "results" / h["folder"] for h in spec["headline"]}


@pytest.mark.parametrize("suite", ["graphs", "pos_tagging", "speech", "translation", "vision"])
def test_shipped_cell_ids_match_the_headline_records(suite):
    """The results page's headline records are the shipped config's cells: the same ids (a changed
    budget, rate or model setting changes an id, so the records must be rerun or the page pointed at
    a rerun)."""
    folder = _headline_folders()[suite]
    records = [json.loads(p.read_text()) for p in sorted((folder / "runs").rglob("*.json"))]
    if not records:
        pytest.skip(f"no reference records for {suite}")
    cells = expand(load_suite(CONFIGS / f"{suite}.yaml"))
    assert sorted(c.cell_id for c in cells) == sorted(r["cell_id"] for r in records), (
        f"{suite}: the headline records ({folder}) are not the config's cells")


# --------------------------------------------------------------------------- YAML that is not what it looks like
_LAUGHS = "a: &a [1, 1, 1, 1, 1, 1, 1, 1, 1, 1]\n" + "".join(
    f"{n}: &{n} [{', '.join([f'*{p}'] * 10)}]\n" for p, n in zip("abcdefgh", "bcdefghi"))


@pytest.mark.parametrize("text,needle", [
    ("suite: t\nseeds: 2\ncells: []\nseeds: 3\n",
     "key 'seeds' is given twice in one mapping (lines 2 and 4); YAML would silently keep the last one"),
    ("suite: t\ntrainer:\n  max_epochs: 2\n  accelerator: cpu\n  max_epochs: 3\ncells: []\n",
     "key 'max_epochs' is given twice in one mapping (lines 3 and 5)"),
    ("suite: t\ncells:\n  - {task: toy, dataset: points, task: toy}\n", "key 'task' is given twice"),
    ("", "empty config: expected a mapping with at least `suite` and `cells`"),
    ("# only a comment\n", "empty config: expected a mapping with at least `suite` and `cells`"),
    (_LAUGHS, "line 6: aliases add more than 200000 values to the 23 written in the file"),
    ("suite: " + "[" * 100_000 + "]" * 100_000 + "\n", "line 1: nested deeper than 64 levels"),
    ("".join("  " * i + f"k{i}:\n" for i in range(300)), "line 64: nested deeper than 64 levels"),
], ids=["duplicate-top", "duplicate-nested", "duplicate-flow", "empty", "comment-only", "billion-laughs",
        "deep-flow", "deep-block"])
def test_yaml_that_is_not_what_it_looks_like_is_refused(text, needle, tmp_path):
    path = tmp_path / "x.yaml"
    path.write_text(text)
    with pytest.raises(ConfigError) as info:
        load_suite(path)
    assert str(info.value) == f"{path}: {needle}" or str(info.value).startswith(f"{path}: {needle}"), str(info.value)


def test_yaml_merge_keys_and_anchors_still_load(tmp_path):
    """An override of a '<<' merge is what merges are for, not a duplicate; a few aliases are fine."""
    path = tmp_path / "x.yaml"
    path.write_text("suite: t\nseeds: 1\ntrainer: &t {max_epochs: 2, accelerator: cpu}\ncells:\n"
                    "  - {task: toy, dataset: points, models: [linear], trainer: {<<: *t, max_epochs: 3}}\n")
    cfg = load_suite(path)
    assert cfg["cells"][0]["trainer"]["max_epochs"] == 3


def test_a_duplicate_key_in_a_set_value_is_refused():
    with pytest.raises(ConfigError, match=r"key 'a' is given twice in one mapping \(lines 1 and 1\)"):
        apply_overrides({}, ["trainer.x={a: 1, a: 2}"])
