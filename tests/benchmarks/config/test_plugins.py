"""Plug-ins: the config's ``plugins:`` key, loading once per process, one-line errors, and where
a registered name comes from (``attnbench list``)."""

from __future__ import annotations

import sys
import types

import pytest

from benchmarks.config import plugins as P
from benchmarks.config.schema import ConfigError
from benchmarks.config.suite import expand, validate_suite
from benchmarks.run.worker import PLUGINS_ENV


@pytest.fixture(autouse=True)
def _clean(monkeypatch):
    # setenv first so that monkeypatch restores the variable's absence at teardown: load_plugins writes
    # os.environ itself, and a delenv of an absent variable records nothing to undo (the test's plug-ins
    # then leaked into later tests of the same xdist worker: 27 failures in one full run)
    monkeypatch.setenv(PLUGINS_ENV, "")
    monkeypatch.delenv(PLUGINS_ENV)
    monkeypatch.setattr(P, "_LOADED", {})
    monkeypatch.setenv("ATTNBENCH_NO_ENTRY_POINTS", "1")


def _fake_module(monkeypatch, name: str, **attrs) -> types.ModuleType:
    mod = types.ModuleType(name)
    mod.__dict__.update(attrs)
    monkeypatch.setitem(sys.modules, name, mod)
    return mod


def test_config_plugins_are_loaded_before_the_cells_and_handed_to_workers(monkeypatch):
    from tests.helpers import toy_task
    cfg = {"suite": "p", "plugins": ["tests.helpers.toy_task"], "trainer": {"accelerator": "cpu"},
           "cells": [{"task": "toy", "dataset": "points", "models": ["linear"]}]}
    toy_task.register()
    cells = expand(validate_suite(cfg))
    assert [c.model for c in cells] == ["linear", "linear", "linear"]
    assert "plugins" not in cells[0].config  # not part of the cell ids
    import os

    assert os.environ[PLUGINS_ENV] == "tests.helpers.toy_task"


def test_a_config_plugin_that_does_not_import_is_one_problem_naming_it():
    cfg = {"suite": "p", "plugins": ["no_such_plugin_mod"], "cells": [{"task": "graphs", "dataset": "sbm"}]}
    with pytest.raises(ConfigError) as err:
        validate_suite(cfg, source="x.yaml")
    assert err.value.problems == ["x.yaml: plugins: plug-in 'no_such_plugin_mod' could not be imported: "
                                  "ModuleNotFoundError: No module named 'no_such_plugin_mod'"]


def test_register_runs_once_per_process_and_its_failure_is_one_line(monkeypatch):
    calls = []
    _fake_module(monkeypatch, "fake_plugin_ok", register=lambda: calls.append(1))
    assert P.load_plugins(["fake_plugin_ok"]) == ["fake_plugin_ok"]
    P.load_plugins(["fake_plugin_ok"])
    assert calls == [1]
    assert [(p.label, p.source) for p in P.loaded_plugins()] == [("fake_plugin_ok", "--plugin/config")]

    def broken():
        raise KeyError("oops\nsecond line")

    _fake_module(monkeypatch, "fake_plugin_bad", register=broken)
    with pytest.raises(P.PluginError) as err:
        P.load_plugins(["fake_plugin_bad"])
    assert str(err.value) == "plug-in 'fake_plugin_bad': register() failed: KeyError: 'oops\\nsecond line'"


def test_entry_points_are_loaded_module_or_callable(monkeypatch):
    from importlib.metadata import EntryPoint

    calls = []
    _fake_module(monkeypatch, "fake_ep_mod", register=lambda: calls.append("module"))
    def reg() -> None:
        calls.append("callable")

    reg.__module__ = "fake_ep_fn"  # as if defined there
    _fake_module(monkeypatch, "fake_ep_fn", reg=reg)
    eps = [EntryPoint("a", "fake_ep_mod", P.ENTRY_POINT_GROUP), EntryPoint("b", "fake_ep_fn:reg", P.ENTRY_POINT_GROUP)]
    monkeypatch.setattr(P, "_entry_points", lambda: eps)
    P.load_plugins()
    P.load_plugins()
    assert calls == ["module", "callable"]
    assert P.origin(sys.modules["fake_ep_fn"].reg) == "plug-in entry point 'b'"


def test_origin_of_registered_names():
    import functools

    import attn_core
    from tasks.common.registry import get_task

    assert P.origin(attn_core.get_pattern("performer").fn) == P.BUILTIN
    assert P.origin(get_task("vision").models.get("vit").build) == P.BUILTIN

    class Mine:  # a plug-in's class under a built-in builder counts as the plug-in's
        pass

    Mine.__module__ = "someone_else.models"
    build = functools.partial(get_task("graphs").models.get("gcn").build.func, Mine)
    assert P.origin(build) == "module someone_else.models"


def test_list_shows_patterns_and_origins(capsys):
    from benchmarks.cli import main

    assert main(["list"]) == 0
    out = capsys.readouterr().out
    assert "attention patterns" in out and "plug-ins" in out
    line = next(ln for ln in out.splitlines() if ln.strip().startswith("nystrom "))
    assert "padding" in line and "causal" not in line and "[built-in]" in line
    line = next(ln for ln in out.splitlines() if ln.strip().startswith("performer "))
    assert "causal,padding,cross,cache,recurrent " in line  # decodes from a cache or a state
    line = next(ln for ln in out.splitlines() if ln.strip().startswith("local_global "))
    assert "cache " in line and "recurrent" not in line
    assert "model   transformer" in out and "[built-in]" in next(
        ln for ln in out.splitlines() if "model   transformer " in ln)
