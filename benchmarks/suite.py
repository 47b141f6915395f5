"""Benchmark suite configs: the typed schema, validation against the task registries, and
the expansion into a matrix of cells (task x dataset x model x seed), each with an id that
is a hash of its resolved config.

A suite config (``benchmarks/configs/*.yaml``)::

    suite: graphs                 # output goes to results/<suite>/ unless --out is given
    seeds: 10                     # a count (0..n-1) or an explicit list [0, 1, 2]
    trainer:                      # defaults for every cell
      max_epochs: 300
      early_stopping_patience: 100
    cells:
      - task: graphs
        dataset: planetoid
        dataset_params: {name: Cora}
        models: [graph_attention, gcn, ggnn, mlp]   # or "all"
        model_params: {gcn: {hidden: 64}}           # per model, checked against its defaults
        module_params: {lr: 0.005}                  # optimiser etc., checked against the task
        trainer: {max_epochs: 200}                  # per-cell trainer overrides (an absent key
                                                    # inherits; null switches off, e.g.
                                                    # early_stopping_patience: null)
        train_fraction: [0.1, 1.0]                  # data-size sweep (any task); default 1.0
"""

from __future__ import annotations

import copy
import hashlib
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from benchmarks.schema import ConfigError, Field, Section, apply_overrides, load_yaml, validate

TRAINER_FIELDS = {
    "max_epochs": Field("int", 100, minimum=1, doc="epochs at most"),
    "max_steps": Field("int", -1, doc="optimiser steps at most (-1: no limit)"),
    "max_time_s": Field("float", None, nullable=True, minimum=1, doc="wall-clock budget per cell, seconds"),
    "early_stopping_patience": Field("int", None, nullable=True, minimum=1, doc="epochs without improvement; null: off"),
    "min_epochs": Field("int", 1, minimum=0),
    "precision": Field("str", "32-true", choices=("32-true", "32", "bf16-mixed", "16-mixed", "64-true", "bf16-true")),
    "accelerator": Field("str", "auto", choices=("auto", "cpu", "gpu", "cuda")),
    "devices": Field("any", 1, doc="as lightning.Trainer's devices"),
    "gradient_clip_val": Field("float", None, nullable=True, minimum=0),
    "check_val_every_n_epoch": Field("int", 1, minimum=1),
    "deterministic": Field("bool", False),
}

CELL_FIELDS = {
    "task": Field("str", doc="task name (attnbench list)"),
    "dataset": Field("str", doc="dataset of the task"),
    "dataset_params": Field("any", {}, doc="overrides of the dataset's defaults"),
    "models": Field("any", "all", doc="list of model names, or 'all'"),
    "model_params": Field("any", {}, doc="{model: {param: value}} overrides"),
    "module_params": Field("any", {}, doc="overrides of the task module's defaults (lr, ...)"),
    # only the keys a cell gives: absent ones inherit the suite's, an explicit null switches off
    "trainer": Section({k: Field(f.kind, None, f.choices, f.minimum, f.nullable, f.doc) for k, f in TRAINER_FIELDS.items()},
                       partial=True),
    "seeds": Field("any", None, nullable=True, doc="overrides the suite's seeds for this cell"),
    "train_fraction": Field("any", None, nullable=True, doc="overrides the suite's train_fraction for this cell"),
}

SUITE_SCHEMA = {
    "suite": Field("str", doc="suite name: output goes to results/<suite>/"),
    "description": Field("str", ""),
    "seeds": Field("any", 3, doc="a count n (seeds 0..n-1) or a list of ints"),
    "train_fraction": Field("any", 1.0, doc="fraction of the training set each cell trains on, in (0, 1]; "
                            "a list sweeps it (one cell per value). The subset is drawn with the run seed, "
                            "so every model with the same seed sees the same examples"),
    "trainer": Section(TRAINER_FIELDS),
    "cells": Section(CELL_FIELDS, many=True),
    "micro_benchmarks": Field("list[str]", [], doc="micro-benchmarks (attnbench bench NAME) run after the cells, "
                              "with their default configs; output in <out>/bench/NAME"),
}


@dataclass(frozen=True)
class Cell:
    """One unit of work: a resolved config and its id."""

    cell_id: str
    task: str
    dataset: str
    model: str
    family: str
    pattern: str | None
    seed: int
    config: dict[str, Any]

    @property
    def train_fraction(self) -> float:
        return float(self.config.get("train_fraction", 1.0))

    @property
    def label(self) -> str:
        frac = f" train={self.train_fraction:.4g}" if self.train_fraction < 1 else ""
        return f"{self.task}/{self.dataset}/{self.model} seed={self.seed}{frac}"


def _seeds(value: Any, where: str, source: str) -> list[int]:
    if isinstance(value, bool):
        raise ConfigError(f"{source}: {where}={value!r} is invalid: expected a count or a list of ints")
    if isinstance(value, int) and value >= 1:
        return list(range(value))
    if isinstance(value, list) and value and all(isinstance(s, int) and not isinstance(s, bool) for s in value):
        if len(set(value)) != len(value):
            raise ConfigError(f"{source}: {where}={value!r} has repeated seeds")
        return list(value)
    raise ConfigError(f"{source}: {where}={value!r} is invalid: expected a count >= 1 or a non-empty list of ints")


def _fractions(value: Any, where: str, source: str) -> list[float]:
    """``train_fraction``: one number in (0, 1] or a non-empty list of them (no repeats)."""
    vals = value if isinstance(value, list) else [value]
    ok = bool(vals) and all(
        isinstance(v, (int, float)) and not isinstance(v, bool) and 0 < v <= 1 for v in vals
    )
    if not ok:
        raise ConfigError(f"{source}: {where}={value!r} is invalid: expected a number in (0, 1] or a non-empty list of them")
    if len(set(vals)) != len(vals):
        raise ConfigError(f"{source}: {where}={value!r} has repeated values")
    return [float(v) for v in vals]


def _merge_params(defaults: dict, overrides: Any, where: str, source: str, what: str) -> dict:
    if overrides is None:
        overrides = {}
    if not isinstance(overrides, dict):
        raise ConfigError(f"{source}: {where} must be a mapping of {what} parameters")
    unknown = [k for k in overrides if k not in defaults]
    if unknown:
        valid = ", ".join(sorted(defaults)) or "(none)"
        raise ConfigError(f"{source}: unknown key '{where}.{unknown[0]}'; valid {what} parameters: {valid}")
    out = copy.deepcopy(defaults)
    out.update(copy.deepcopy(overrides))
    return out


def cell_id(config: dict[str, Any]) -> str:
    """A stable 12-hex-digit hash of the resolved config (key order does not matter)."""
    blob = json.dumps(config, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(blob.encode()).hexdigest()[:12]


def load_suite(path: str | Path, overrides: list[str] | tuple[str, ...] = ()) -> dict[str, Any]:
    """Read, override (``--set``) and validate a suite config; returns the validated dict."""
    raw = load_yaml(path)
    raw = apply_overrides(raw, list(overrides))
    return validate_suite(raw, source=str(path))


def validate_suite(raw: Any, source: str = "config") -> dict[str, Any]:
    cfg = validate(raw, SUITE_SCHEMA, source=source)
    if not cfg["cells"]:
        raise ConfigError(f"{source}: 'cells' is empty: a suite needs at least one cell")
    _seeds(cfg["seeds"], "seeds", source)
    _fractions(cfg["train_fraction"], "train_fraction", source)
    from benchmarks.cli import MICRO_BENCHMARKS

    for i, name in enumerate(cfg["micro_benchmarks"]):
        if name not in MICRO_BENCHMARKS:
            raise ConfigError(
                f"{source}: micro_benchmarks[{i}]={name!r} is invalid: expected one of {', '.join(MICRO_BENCHMARKS)}"
            )
    expand(cfg, source=source)  # resolves every cell against the registries: fails early
    return cfg


def expand(cfg: dict[str, Any], source: str = "config") -> list[Cell]:
    """The matrix of cells, in config order (cell entry, model, seed)."""
    from tasks.common.registry import UnknownNameError, get_task

    cells: list[Cell] = []
    seen: set[str] = set()
    for i, entry in enumerate(cfg["cells"]):
        where = f"cells[{i}]"
        try:
            task = get_task(entry["task"])
        except UnknownNameError as err:
            raise ConfigError(f"{source}: {where}.task: {err}") from None
        try:
            ds = task.datasets.get(entry["dataset"])
        except UnknownNameError as err:
            raise ConfigError(f"{source}: {where}.dataset: {err}") from None
        names = entry["models"]
        if names == "all":
            names = task.models.names()
        if isinstance(names, str):
            names = [names]
        if not isinstance(names, list) or not names or not all(isinstance(n, str) for n in names):
            raise ConfigError(f"{source}: {where}.models={entry['models']!r} is invalid: expected 'all' or a list of names")
        model_params = entry["model_params"] or {}
        if not isinstance(model_params, dict):
            raise ConfigError(f"{source}: {where}.model_params must map model names to parameters")
        for name in model_params:
            if name not in names:
                raise ConfigError(
                    f"{source}: unknown key '{where}.model_params.{name}': not among this cell's models ({', '.join(names)})"
                )
        dataset_params = _merge_params(ds.params, entry["dataset_params"], f"{where}.dataset_params", source, f"dataset {ds.name!r}")
        module_params = _merge_params(task.module_params, entry["module_params"], f"{where}.module_params", source, f"task {task.name!r} module")
        trainer = dict(cfg["trainer"])
        trainer.update(entry["trainer"])  # only the keys the cell gives; null = off (e.g. max_time_s)
        seeds = _seeds(entry["seeds"] if entry["seeds"] is not None else cfg["seeds"], f"{where}.seeds", source)
        if entry["train_fraction"] is not None:
            fractions = _fractions(entry["train_fraction"], f"{where}.train_fraction", source)
        else:
            fractions = _fractions(cfg["train_fraction"], "train_fraction", source)
        for name in names:
            try:
                spec = task.models.get(name)
            except UnknownNameError as err:
                raise ConfigError(f"{source}: {where}.models: {err}") from None
            params = _merge_params(spec.params, model_params.get(name), f"{where}.model_params.{name}", source, f"model {name!r}")
            for fraction in fractions:
                for seed in seeds:
                    resolved = {
                        "task": task.name,
                        "dataset": ds.name,
                        "dataset_params": dataset_params,
                        "model": name,
                        "model_params": params,
                        "module_params": module_params,
                        "trainer": trainer,
                        "seed": seed,
                    }
                    if fraction < 1:  # absent at 1.0, so that existing cell ids stay valid
                        resolved["train_fraction"] = fraction
                    cid = cell_id(resolved)
                    if cid in seen:
                        continue  # the same cell listed twice: run it once
                    seen.add(cid)
                    cells.append(Cell(cid, task.name, ds.name, name, spec.family, spec.pattern, seed, resolved))
    return cells
