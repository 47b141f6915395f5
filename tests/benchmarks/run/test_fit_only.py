"""``RunOptions.fit_only`` (``bench train``, ``attnbench profile``): the cell trains as
configured (validation included) and stops there: no test, and its record says so."""

from __future__ import annotations

import copy
import dataclasses

from benchmarks.config.suite import expand, validate_suite
from benchmarks.run.cell import RunOptions, run_cell
from tests.helpers import toy_task

toy_task.register()

TOY = {"suite": "toy", "seeds": 1, "trainer": {"max_epochs": 2, "accelerator": "cpu"},
       "cells": [{"task": "toy", "dataset": "points", "models": ["linear"]}]}


def test_fit_only_trains_as_configured_and_is_not_tested(tmp_path):
    cell = expand(validate_suite(copy.deepcopy(TOY)))[0]
    opts = RunOptions(out=tmp_path, cache_dir=tmp_path / "c", log=lambda s: None)
    full = run_cell(cell, "toy", opts)
    assert full["status"] == "ok", full.get("reason")
    assert full["test"] and full["curve"] and not full.get("fit_only")  # the reference: validated and tested

    rec = run_cell(cell, "toy", dataclasses.replace(opts, fit_only=True))
    assert rec["status"] == "ok", rec.get("reason")
    assert rec["fit_only"] is True and rec["epochs_run"] == 2
    assert not rec.get("test") and not rec.get("best_val")  # nothing tested
    assert len(rec["curve"]) == len(full["curve"]) == 2  # validated each epoch, as the full cell
    assert rec["env"] and rec["finished"]
    assert not (tmp_path / ".checkpoints").exists() or not any((tmp_path / ".checkpoints").iterdir())
