"""The decorator model registry (tasks.common.registry): the builder's signature is the one source
of a model's defaults, a preset re-registers the same builder with other defaults, specs pickle."""

from __future__ import annotations

import inspect
import pickle
import sys
import types
from typing import Any

import pytest

from tasks.common import registry as R
from tasks.common.patterns import PATTERN_PARAMS, register_variants
from tasks.common.registry import (DatasetSpec, ModelSpec, builder_of, builder_params, define_task, get_task,
                                   model_spec, register_model, register_preset, registered_models)


@register_model(family="attention", pattern="full", omit_when_default=(PATTERN_PARAMS,))
def toy_attention(data_info: dict, *, width: int = 8, sizes: list[int] = [1, 2],  # noqa: B006
                  pattern: str = "full", window: int | None = None,
                  pattern_params: dict[str, Any] | None = None) -> dict[str, Any]:
    """A toy attention model
    that returns what it was built with.

    Only the first paragraph is the description."""
    return {"info": data_info, "width": width, "sizes": sizes, "pattern": pattern, "window": window,
            "pattern_params": pattern_params}


TOY_W2 = register_preset("toy_attention_w2", toy_attention, {"pattern": "truncated", "window": 2},
                         description="the toy with a window of 2")
TOY_VARIANTS = register_variants(toy_attention, allowed=lambda p: p in ("linear", "performer"),
                                 own={"performer": {"features": 16}}, description="the toy with {pattern} attention")


@register_model(family="rnn", description="given, not the docstring")
def toy_rnn(data_info: dict, *, hidden: int = 4) -> tuple:
    """Ignored."""
    return (data_info, hidden)


def test_defaults_come_from_the_signature():
    spec = model_spec(toy_attention)
    assert spec.name == "toy_attention" and spec.family == "attention" and spec.pattern == "full"
    assert list(spec.params.items()) == [("width", 8), ("sizes", [1, 2]), ("pattern", "full"), ("window", None),
                                         ("pattern_params", None)]
    assert spec.description == "A toy attention model that returns what it was built with."
    assert model_spec(toy_rnn).description == "given, not the docstring"
    default = inspect.signature(toy_attention).parameters["sizes"].default
    assert spec.params["sizes"] is not default and builder_params(toy_attention)["sizes"] is not default  # copies
    assert spec.build({"n": 1}, width=3)["width"] == 3 and spec.build({"n": 1})["info"] == {"n": 1}
    assert builder_of(spec) is toy_attention and toy_attention({}, width=2)["width"] == 2  # returned unchanged


def test_unknown_build_params_list_the_valid_ones():
    with pytest.raises(ValueError, match=r"model 'toy_attention_w2': unknown parameter\(s\) heads; valid: .*width"):
        TOY_W2.build({}, heads=2)


def test_a_builder_must_name_every_parameter_with_a_default():
    def no_default(data_info, *, width): ...

    def var_kw(data_info, **params): ...

    def two_positional(data_info, extra, *, width=1): ...

    for fn, match in [(no_default, "needs a default"), (var_kw, r"\*params"), (two_positional, "one positional")]:
        with pytest.raises(TypeError, match=match):
            register_model(family="other")(fn)


def test_a_name_registered_twice_is_an_error():
    def twice(data_info, *, x=1): ...

    register_model(family="other")(twice)
    with pytest.raises(ValueError, match="'twice' is registered twice"):
        register_model(family="cnn")(twice)
    with pytest.raises(ValueError, match="'toy_attention_w2' is registered twice"):
        register_preset("toy_attention_w2", toy_attention, {}, description="again")


def test_a_preset_is_the_same_builder_with_other_defaults():
    base = model_spec(toy_attention)
    assert builder_of(TOY_W2) is builder_of(base) is toy_attention
    assert TOY_W2.pattern == "truncated" and TOY_W2.family == "attention" and TOY_W2.in_all
    assert TOY_W2.params == {**base.params, "pattern": "truncated", "window": 2}
    assert list(TOY_W2.params) == list(base.params)  # the base's order
    built = TOY_W2.build({})  # what a cell leaves out keeps the preset's default, not the signature's
    assert (built["pattern"], built["window"]) == ("truncated", 2)
    assert TOY_W2.build({}, window=5)["window"] == 5
    of_preset = register_preset("toy_attention_w2_wide", TOY_W2, {"width": 32}, description="wider")
    assert of_preset.build({})["window"] == 2 and of_preset.build({})["width"] == 32
    with pytest.raises(ValueError, match="unknown parameter.*heads; valid: width"):
        register_preset("toy_bad", toy_attention, {"heads": 2}, description="x")
    with pytest.raises(ValueError, match="not a model builder registered"):
        register_preset("toy_bad", lambda info: None, {}, description="x")


def test_variant_presets_are_named_and_left_out_of_all():
    assert [s.name for s in TOY_VARIANTS] == ["toy_attention_linear", "toy_attention_performer"]
    linear, performer = TOY_VARIANTS
    assert not linear.in_all and linear.pattern == "linear" and linear.omit_when_default == (PATTERN_PARAMS,)
    assert linear.params[PATTERN_PARAMS] == {} and performer.params[PATTERN_PARAMS] == {"features": 16}
    assert performer.build({})["pattern_params"] == {"features": 16}


def test_registered_models_keep_their_order():
    names = [s.name for s in registered_models(__name__)]
    assert names[:5] == ["toy_attention", "toy_attention_w2", "toy_attention_linear", "toy_attention_performer",
                         "toy_rnn"]
    assert registered_models(sys.modules[__name__])[0] is model_spec(toy_attention)


@pytest.mark.parametrize("spec", [model_spec(toy_attention), TOY_W2, TOY_VARIANTS[1]], ids=lambda s: s.name)
def test_specs_pickle(spec):
    back = pickle.loads(pickle.dumps(spec))
    assert back.name == spec.name and back.params == spec.params and builder_of(back) is toy_attention
    assert back.build({}) == spec.build({})


def test_builtin_specs_pickle_and_build_after():
    for task in ("speech", "vision", "graphs"):
        for name, spec in get_task(task).models.items():
            back = pickle.loads(pickle.dumps(spec))
            assert (back.name, back.params, back.build.keywords) == (name, spec.params, spec.build.keywords)


def test_a_plugin_registers_into_a_task(monkeypatch):
    task = R.Task(name="plugged", metric="acc", mode="max", make_module=lambda *a, **k: None)
    monkeypatch.setattr(R, "get_task", lambda name: task)

    def plugin_model(data_info, *, depth=2):
        """a plug-in's model"""

    register_model(family="other", task="plugged")(plugin_model)
    register_preset("plugin_model_deep", plugin_model, {"depth": 6}, description="deeper", task="plugged")
    assert task.models.names() == ["plugin_model", "plugin_model_deep"]
    assert task.models.get("plugin_model_deep").params == {"depth": 6}
    # the old way still works: a ModelSpec made by hand
    task.models.register("by_hand", ModelSpec("by_hand", "cnn", lambda info, k=1: k, {"k": 1}))
    assert builder_of(task.models.get("by_hand"))(None) == 1


def test_define_task_collects_a_domain(monkeypatch):
    monkeypatch.setattr(R, "TASKS", R.Registry("task"))
    module = types.SimpleNamespace(make_module=lambda net, info, **kw: net, MODULE_DEFAULTS={"lr": 1e-3})
    defaults = {"n": 3}
    task = define_task("toy_domain", metric="acc", mode="max", description="a toy", module=module,
                       models=sys.modules[__name__], datasets=[DatasetSpec("d", lambda *a, **k: None, defaults)])
    assert R.TASKS.get("toy_domain") is task and task.module_params == {"lr": 1e-3}
    assert task.datasets.get("d").params == defaults and task.datasets.get("d").params is not defaults
    assert task.models.names()[:2] == ["toy_attention", "toy_attention_w2"]
    assert [n for n, s in task.models.items() if not s.in_all] == ["toy_attention_linear", "toy_attention_performer"]
def test_model_kind_defaults_per_family_and_is_checked():
    """rnn models are ``classic`` unless registered ``modern``; a kind outside the family's list,
    or any kind for a family without kinds, is a one-line error naming the valid kinds."""
    from tasks.common.registry import ModelSpec

    build = lambda info: None  # noqa: E731
    assert ModelSpec("a", "rnn", build).kind == "classic"
    assert ModelSpec("b", "rnn", build, kind="modern").kind == "modern"
    assert ModelSpec("c", "cnn", build).kind is None
    with pytest.raises(ValueError, match=r"kind='fancy'; valid: classic, modern"):
        ModelSpec("d", "rnn", build, kind="fancy")
    with pytest.raises(ValueError, match=r"kind='modern'; valid: none for family 'cnn'"):
        ModelSpec("e", "cnn", build, kind="modern")


def test_heads_that_do_not_split_the_width_are_refused_before_any_cell():
    """num_heads must divide d_model: the suite config says so on one line with valid choices,
    instead of every such cell failing at build time."""
    from benchmarks.config.schema import ConfigError
    from benchmarks.config.suite import validate_suite

    cfg = {"suite": "t", "seeds": 1, "cells": [{"task": "pos_tagging", "dataset": "synthetic", "models": ["transformer"],
                                                "model_params": {"transformer": {"d_model": 16, "num_heads": 3}}}]}
    with pytest.raises(ConfigError, match=r"model_params\.transformer: num_heads=3 does not divide d_model=16 .*"
                                          r"pick num_heads among \[1, 2, 4, 8, 16\]"):
        validate_suite(cfg)
    cfg["cells"][0]["model_params"]["transformer"]["num_heads"] = 4
    validate_suite(cfg)


# ----------------------------------------------------------------------------- what a lookup imports
def test_a_task_lookup_imports_its_own_domain_only() -> None:
    """``get_task(name)`` imports that task's package, not the other four: a config of one
    plug-in task validates in a fresh interpreter without torch or Lightning (a test's driver
    process pays no import for them), and an unknown name still lists every task."""
    import json
    import subprocess

    code = ("import json, sys\n"
            "from tests.helpers.toy_task import register; register()\n"
            "from benchmarks.config.suite import expand, validate_suite\n"
            "expand(validate_suite({'suite': 's', 'seeds': 1, 'trainer': {'max_epochs': 1, 'accelerator': 'cpu'},\n"
            "    'cells': [{'task': 'toy', 'dataset': 'points', 'models': ['linear']}]}, source='t.yaml'))\n"
            "from tasks.common.registry import get_task\n"
            "loaded = sorted({m.split('.')[0] for m in sys.modules} & {'torch', 'lightning'})\n"
            "domains = sorted(m for m in sys.modules if m.count('.') == 1 and m.startswith('tasks.')\n"
            "                 and m.split('.')[1] in ('graphs', 'pos_tagging', 'translation', 'speech', 'vision'))\n"
            "get_task('graphs')\n"
            "one = sorted(m for m in ('tasks.pos_tagging', 'tasks.translation', 'tasks.speech', 'tasks.vision') if m in sys.modules)\n"
            "try:\n"
            "    get_task('nope')\n"
            "except Exception as err:\n"
            "    unknown = str(err)\n"
            "print(json.dumps([loaded, domains, one, unknown]))\n")
    root = str(__import__("pathlib").Path(__file__).resolve().parents[3])
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=root, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    loaded, domains, one, unknown = json.loads(out.stdout.splitlines()[-1])
    assert loaded == [] and domains == [] and one == []
    assert all(t in unknown for t in ("graphs", "pos_tagging", "translation", "speech", "vision", "toy")), unknown
