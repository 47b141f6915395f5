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
        model_params: {gcn: {d_model: 64}}           # per model, checked against its defaults
        module_params: {lr: 0.005}                  # optimiser etc., checked against the task
        trainer: {max_epochs: 200}                  # per-cell trainer overrides (an absent key
                                                    # inherits; null switches off, e.g.
                                                    # early_stopping_patience: null)
        train_fraction: [0.1, 1.0]                  # data-size sweep (any task); default 1.0

Every value is checked before any cell runs, and one :class:`ConfigError` lists every
problem found, one line each (``<source>: <key path>=<value> is invalid: expected <what is
allowed>``). Model, dataset and module parameters are checked against the registered
defaults: the type of the default (an int default takes ints only, a float default ints or
floats, a bool default booleans, a list default lists of the same item type, a null default
anything) and the bounds of :func:`tasks.common.registry.param_bounds` (what a registration
declares, else a documented rule from the parameter's name and default).

Overrides (``--set KEY=VALUE``, the value parsed as YAML) are applied left to right, and a
command-line value wins over everything in the file:

* ``--set trainer.max_epochs=1`` sets the suite's trainer *and* replaces every cell's own
  ``trainer.max_epochs``; likewise ``--set seeds=...`` and ``--set train_fraction=...`` replace
  the cells' own ``seeds`` / ``train_fraction``. The cells whose own values were replaced are
  named in a notice (:func:`load_suite_with_notices`).
* ``--set cells.2.trainer.max_epochs=3`` reaches one cell (its index in ``cells``, from 0);
  ``--set 'cells.*.trainer.max_epochs=1'`` every cell. A later ``--set`` wins over an earlier one.
"""

from __future__ import annotations

import copy
import itertools
import json
import warnings
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Mapping

from benchmarks.config.diagnostics import check_diagnostics
from benchmarks.config.sweep import swept_keys, sweep_variants
from benchmarks.config.params import cell_id, merge_params, rename_model_params, renamed_params  # noqa: F401 - cell_id re-exported
from benchmarks.config.schema import (ConfigError, Field, Problems, Section, load_yaml, parse_override, set_path,
                                      validate)
from benchmarks.config.trainer import OMIT_WHEN_DEFAULT, TRAINER_FIELDS, resolve_device  # noqa: F401 - re-exported

#: a suite name is a name, never a path: results go to results/<suite>/
SUITE_NAME = r"[A-Za-z0-9][A-Za-z0-9._-]*"


CELL_FIELDS = {
    "task": Field("str", doc="task name (attnbench list)"),
    "dataset": Field("str", doc="dataset of the task"),
    "dataset_params": Field("any", {}, doc="overrides of the dataset's defaults"),
    "models": Field("any", "all", doc="list of model names, or 'all'"),
    "model_params": Field("any", {}, doc="{model: {param: value}} overrides"),
    "module_params": Field("any", {}, doc="overrides of the task module's defaults (lr, ...)"),
    # only the keys a cell gives: absent ones inherit the suite's, an explicit null switches off
    "trainer": Section({k: replace(f, default=None) for k, f in TRAINER_FIELDS.items()}, partial=True),
    "seeds": Field("any", None, nullable=True, doc="overrides the suite's seeds for this cell"),
    "train_fraction": Field("any", None, nullable=True, doc="overrides the suite's train_fraction for this cell"),
    "diagnostic": Field("str", None, nullable=True, doc="the suite diagnostic (diagnostics: NAME) these cells "
                        "belong to; part of the cell ids"),
    "test_sets": Field("any", {}, doc="{name: {dataset param: value}}: more test sets, each the cell's dataset with "
                       "these parameters changed (they may change the test split only), all scored at the best "
                       "checkpoint and stored in the record under test_sets"),
}

SUITE_SCHEMA = {
    "suite": Field("str", pattern=SUITE_NAME, doc="suite name: output goes to results/<suite>/",
                   expect=f"a name matching {SUITE_NAME} (not a path: results go to results/<suite>/)"),
    "description": Field("str", ""),
    "seeds": Field("any", 3, doc="a count n (seeds 0..n-1) or a list of ints"),
    "train_fraction": Field("any", 1.0, doc="fraction of the training set each cell trains on, in (0, 1]; "
                            "a list sweeps it (one cell per value). The subset is drawn with the run seed, "
                            "so every model with the same seed sees the same examples"),
    "trainer": Section(TRAINER_FIELDS),
    "cells": Section(CELL_FIELDS, many=True),
    "diagnostics": Field("any", {}, doc="named experiments with expected verdicts: {NAME: {title, tests, why, "
                         "expect: ['attention > cnn', ...]}} (benchmarks.config.diagnostics)"),
    "micro_benchmarks": Field("list[str]", [], doc="micro-benchmarks (attnbench bench NAME) run after the cells, "
                              "with their default configs; output in <out>/bench/NAME"),
    "plugins": Field("list[str]", [], doc="plug-in modules to import first (like --plugin), in the driver and "
                     "every worker, so the cells may use what they register; not part of the cell ids"),
    "jobs": Field("int", None, nullable=True, minimum=1, doc="cells at once on the local launcher when --jobs is "
                  "not given (each with cores / jobs threads): small cells finish sooner side by side; not part "
                  "of the cell ids"),
    "keep_checkpoints": Field("bool", False, doc="keep each cell's best weights beside its record (<record>.pt, "
                              "weights only), for attnbench eval; not part of the cell ids"),
    "tuning": Field("str", None, nullable=True, doc="a tuning file (attnbench tune; e.g. tuning/quick.yaml, relative "
                    "to this config's folder): its chosen lr per model replaces the cells' own "
                    "(benchmarks.config.tuning); the values are part of the cell ids, the file is not"),
}

#: what an empty suite config file is told
EMPTY_CONFIG = "empty config: expected a mapping with at least `suite` and `cells`"

#: the most seeds a count may ask for: more is surely a typo, and would build that many cells
MAX_SEEDS = 10_000

#: suite-level keys a command-line --set makes win over the cells' own values
_CELL_OVERRIDABLE = ("seeds", "train_fraction")


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
    """``seeds``: a count n in 1..MAX_SEEDS (seeds 0..n-1) or a non-empty list of distinct ints in
    [0, SEED_MAX] (what every RNG accepts)."""
    from tasks.common.registry import SEED_MAX

    expected = f"expected a count in 1..{MAX_SEEDS} or a non-empty list of distinct ints >= 0"
    if isinstance(value, int) and not isinstance(value, bool) and 1 <= value <= MAX_SEEDS:
        return list(range(value))
    if (isinstance(value, list) and value and all(isinstance(s, int) and not isinstance(s, bool) for s in value)
            and min(value) >= 0):
        if max(value) > SEED_MAX:
            raise ConfigError(f"{source}: {where}={value!r} is invalid: seed {max(value)} is beyond {SEED_MAX} "
                              f"(2**32 - 1, the largest seed the RNGs accept); {expected[len('expected '):]} "
                              f"and <= {SEED_MAX}")
        if len(set(value)) != len(value):
            raise ConfigError(f"{source}: {where}={value!r} has repeated seeds; {expected}")
        return list(value)
    raise ConfigError(f"{source}: {where}={value!r} is invalid: {expected}")


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


def load_suite(path: str | Path, overrides: list[str] | tuple[str, ...] = ()) -> dict[str, Any]:
    """Read, override (``--set``) and validate a suite config; returns the validated dict. A
    deprecated parameter name is a ``FutureWarning`` (:func:`load_suite_with_notices`: a notice)."""
    return validate_suite(apply_suite_overrides(load_yaml(path, empty=EMPTY_CONFIG), overrides)[0], source=str(path))


def load_suite_with_notices(path: str | Path, overrides: list[str] | tuple[str, ...] = ()
                            ) -> tuple[dict[str, Any], list[str]]:
    """:func:`load_suite`, plus notices for the user: which cells' own values a
    command-line ``--set`` replaced (see the override rule in this module's docstring), and
    which deprecated parameter names the config uses (:mod:`benchmarks.config.params`)."""
    raw, notices = apply_suite_overrides(load_yaml(path, empty=EMPTY_CONFIG), overrides)
    return validate_suite(raw, source=str(path), notices=notices), notices


def apply_suite_overrides(raw: Any, overrides: list[str] | tuple[str, ...]) -> tuple[dict[str, Any], list[str]]:
    """Apply ``--set`` overrides to a raw suite config, left to right: a suite-level
    ``trainer.KEY``, ``seeds`` or ``train_fraction`` also replaces the cells' own values.
    Returns the new raw config and one notice per override that replaced cells' values."""
    data = copy.deepcopy(raw) if raw else {}
    problems = Problems("--set")
    notices: list[str] = []
    for item in overrides:
        with problems.collect():
            parts, value = parse_override(item)
            set_path(data, parts, value, item)
            replaced = _replace_cell_values(data, parts, value)
            if replaced:
                notices.append(f"--set {item} also replaces the value the cell sets itself in "
                               f"{len(replaced)} cell(s): {'; '.join(replaced)}")
    problems.raise_if_any()
    return data, notices


def _replace_cell_values(data: dict, parts: list[str], value: Any) -> list[str]:
    """Drop the cells' own values of the suite-level key ``parts`` (so they inherit it);
    returns ``cells[i] (task/dataset): key=old value`` for each one dropped."""
    if parts[0] == "trainer" and len(parts) == 2:
        keys = [("trainer", parts[1])]
    elif parts == ["trainer"] and isinstance(value, dict):
        keys = [("trainer", k) for k in value]
    elif len(parts) == 1 and parts[0] in _CELL_OVERRIDABLE:
        keys = [(parts[0],)]
    else:
        return []
    cells = data.get("cells")
    out = []
    for i, cell in enumerate(cells if isinstance(cells, list) else []):
        for key in keys:
            node = cell
            for p in key[:-1]:
                node = node.get(p) if isinstance(node, dict) else None
            if isinstance(node, dict) and key[-1] in node and not (len(key) == 1 and node[key[-1]] is None):
                old = node.pop(key[-1])
                name = f"{cell.get('task')}/{cell.get('dataset')}"
                out.append(f"cells[{i}] ({name}) had {'.'.join(key)}={old!r}")
    return out


def validate_suite(raw: Any, source: str = "config", notices: list[str] | None = None) -> dict[str, Any]:
    """Check a (raw, overridden) suite config: every key and value, every cell against the
    registries. Raises one :class:`ConfigError` listing every problem; returns the config, its
    model parameters under their current names (a deprecated name: a line added to ``notices``,
    or without them a ``FutureWarning``)."""
    problems = Problems(source)
    cfg = validate(raw, SUITE_SCHEMA, source=source, problems=problems)
    deprecated = rename_model_params(cfg, source, problems)
    _seconds_as_float(cfg)
    from benchmarks.config.plugins import plugins_problem

    if cfg.get("plugins") and (err := plugins_problem(cfg["plugins"])):  # before the cells: they may use them
        problems.add(f"{source}: plugins: {err}")
    if "cells" in cfg and not cfg["cells"]:
        problems.add(f"{source}: 'cells' is empty: a suite needs at least one cell")
    for key, check in (("seeds", _seeds), ("train_fraction", _fractions)):
        if key in cfg:
            with problems.collect():
                check(cfg[key], key, source)
    from benchmarks.config.micro import MICRO_BENCHMARKS

    for i, name in enumerate(cfg.get("micro_benchmarks") or []):
        if name not in MICRO_BENCHMARKS:
            problems.add(f"{source}: micro_benchmarks[{i}]={name!r} is invalid: expected one of {', '.join(MICRO_BENCHMARKS)}")
    tuned: list[str] = []
    cells = _expand(cfg, source, problems, tuned)  # resolves every cell against the registries: fails early
    check_diagnostics(cfg, cells, source, problems)
    problems.raise_if_any()
    _VALIDATED[:] = [(cfg, _fingerprint(cfg), cells)]  # the next expand(cfg) takes them
    if notices is not None:
        notices += tuned
    for line in deprecated:
        if notices is not None:
            notices.append(line)
        else:
            warnings.warn(line, FutureWarning, stacklevel=2)
    return cfg


def _seconds_as_float(cfg: dict[str, Any]) -> None:
    """A plain ``max_time_s`` is kept a float (``420`` -> ``420.0``), as it always was, so that
    the cell ids of existing configs do not change; the calibrated form is kept as given."""
    cells = cfg.get("cells") if isinstance(cfg.get("cells"), list) else []
    for trainer in [cfg.get("trainer"), *(c.get("trainer") for c in cells if isinstance(c, dict))]:
        value = trainer.get("max_time_s") if isinstance(trainer, dict) else None
        if isinstance(value, int) and not isinstance(value, bool):
            trainer["max_time_s"] = float(value)


#: the cells :func:`validate_suite` resolved last, for the one :func:`expand` of the same config
#: that follows it (a generated sweep of 60k cells resolves in ~10 s: once is enough)
_VALIDATED: list[tuple[dict[str, Any], str, list[Cell]]] = []


def _fingerprint(cfg: dict[str, Any]) -> str:
    return json.dumps(cfg, sort_keys=True, default=repr)


def expand(cfg: dict[str, Any], source: str = "config") -> list[Cell]:
    """The matrix of cells of a validated ``cfg``, in config order (cell entry, model, seed)."""
    if _VALIDATED:
        done, printed, cells = _VALIDATED.pop()  # taken once: the cells are never shared
        if done is cfg and printed == _fingerprint(cfg):  # unchanged since: no problem to name
            return cells
    problems = Problems(source)
    cells = _expand(cfg, source, problems)
    problems.raise_if_any()
    return cells


def _expand(cfg: dict[str, Any], source: str, problems: Problems, notices: list[str] | None = None) -> list[Cell]:
    """Resolve every cell entry; a problem is recorded in ``problems`` and its entry skipped.
    A ``tuning`` file's chosen values are applied last (:func:`benchmarks.config.tuning.apply_tuning`)."""
    cells: list[Cell] = []
    seen: set[str] = set()
    for i, entry in enumerate(cfg.get("cells") or []):
        with problems.collect():
            for cell in _resolve_entry(cfg, entry, f"cells[{i}]", source):
                if cell.cell_id not in seen:  # the same cell listed twice: run it once
                    seen.add(cell.cell_id)
                    cells.append(cell)
    if cfg.get("tuning"):
        from benchmarks.config.tuning import apply_tuning

        cells = apply_tuning(cfg, cells, source, problems, notices)
    return cells


def _resolve_entry(cfg: dict[str, Any], entry: dict[str, Any], where: str, source: str) -> list[Cell]:
    """The cells of one entry of ``cells``; raises one :class:`ConfigError` with all its problems."""
    from tasks.common.registry import UnknownNameError, get_task

    problems = Problems(source)
    if "task" not in entry or "dataset" not in entry:
        return []  # already reported (missing or not a mapping)
    try:
        task = get_task(entry["task"])
    except UnknownNameError as err:
        raise ConfigError(f"{source}: {where}.task: {err}") from None
    ds = None
    try:
        ds = task.datasets.get(entry["dataset"])
    except UnknownNameError as err:
        problems.add(f"{source}: {where}.dataset: {err}")
    names = entry.get("models", "all")
    names = [n for n, s in task.models.items() if s.in_all] if names == "all" else [names] if isinstance(names, str) else names
    if not isinstance(names, list) or not names or not all(isinstance(n, str) for n in names):
        problems.add(f"{source}: {where}.models={entry['models']!r} is invalid: expected 'all' or a non-empty list of names")
        names = []
    specs = {}
    for name in names:
        try:
            specs[name] = task.models.get(name)
        except UnknownNameError as err:
            problems.add(f"{source}: {where}.models: {err}")
    model_params = entry.get("model_params") or {}
    if not isinstance(model_params, dict):
        problems.add(f"{source}: {where}.model_params={model_params!r} is invalid: expected a mapping of model names to parameters")
        model_params = {}
    for name in model_params:
        if name not in names:
            problems.add(f"{source}: unknown key '{where}.model_params.{name}': not among this cell's models ({', '.join(names)})")
    resolved: dict[str, Any] = {}
    checks = [("module_params", task.module_params, entry.get("module_params"), f"task {task.name!r} module", task.module_bounds)]
    if ds is not None:
        checks.insert(0, ("dataset_params", ds.params, entry.get("dataset_params"), f"dataset {ds.name!r}", ds.bounds))
    checks += [(f"model_params.{n}", spec.params, model_params.get(n), f"model {n!r}", spec.bounds) for n, spec in specs.items()]
    for key, defaults, given, what, bounds in checks:  # a list for a one-value parameter sweeps it (sweep.py)
        with problems.collect():
            resolved[key] = [merge_params(defaults, variant, f"{where}.{key}", source, what, bounds)
                             for variant in sweep_variants(given, defaults, bounds)]
    for n, spec in specs.items():  # the model's own check of its parameters together (its pattern, ...)
        for params in resolved.get(f"model_params.{n}", []):
            if err := spec.problem(params):
                problems.add(f"{source}: {where}.model_params.{n}: {err}")
                break
    trainer = dict(cfg.get("trainer") or {})
    own_trainer = entry.get("trainer") or {}
    trainer.update(own_trainer)  # only the keys the cell gives; null = off (e.g. max_time_s)
    if isinstance(trainer.get("min_epochs"), int) and isinstance(trainer.get("max_epochs"), int) \
            and trainer["min_epochs"] > trainer["max_epochs"]:
        at = f"{where}.trainer" if {"min_epochs", "max_epochs"} & set(own_trainer) else "trainer"
        problems.add(f"{source}: {at}.min_epochs={trainer['min_epochs']!r} is invalid: expected at most "
                     f"max_epochs={trainer['max_epochs']!r}")
    # Several devices train one cell with DDP (benchmarks/run/distributed.py); on CPU a device is a
    # process, so only a count can say how many (Lightning's CPU accelerator takes no indices).
    devices, accelerator = trainer.get("devices", 1), str(trainer.get("accelerator", "auto"))
    if isinstance(devices, list) and resolve_device(accelerator) == "cpu":
        at = f"{where}.trainer" if {"devices", "accelerator"} & set(own_trainer) else "trainer"
        problems.add(f"{source}: {at}.devices={devices!r} is invalid with accelerator={accelerator!r} (CPU): "
                     "expected an integer >= 1 (processes, e.g. 2) or 'auto'; device indices are for GPUs")
    seeds: list[int] = []
    fractions: list[float] = []
    with problems.collect():
        seeds = _seeds(entry["seeds"], f"{where}.seeds", source) if entry.get("seeds") is not None \
            else _seeds(cfg.get("seeds"), "seeds", source)
    with problems.collect():
        fractions = _fractions(entry["train_fraction"], f"{where}.train_fraction", source) \
            if entry.get("train_fraction") is not None else _fractions(cfg.get("train_fraction", 1.0), "train_fraction", source)
    test_sets: dict[str, dict[str, Any]] = {}
    if ds is not None and entry.get("test_sets"):
        with problems.collect():
            test_sets = resolve_test_sets(entry["test_sets"], ds, (resolved.get("dataset_params") or [{}])[0],
                                          f"{where}.test_sets", source)
    problems.raise_if_any()
    trainer = {k: v for k, v in trainer.items() if not (k in OMIT_WHEN_DEFAULT and v == OMIT_WHEN_DEFAULT[k])}
    device = resolve_device(str(trainer.get("accelerator", "auto")))
    cells = []
    ds_swept = swept_keys(entry.get("dataset_params"), ds.params, ds.bounds)
    points = itertools.product(resolved["dataset_params"], resolved["module_params"], specs.items())
    for ds_params, module_params, (name, spec) in points:  # one of each unless a key is swept
        for model_params, fraction, seed in itertools.product(resolved[f"model_params.{name}"], fractions, seeds):
            config = {
                "task": task.name,
                "dataset": ds.name,
                # ids stay valid: defaults left out, except a swept key (the report reads its axis from it)
                "dataset_params": {**ds.without_defaults(ds_params), **{k: ds_params[k] for k in ds_swept}},
                "model": name,
                "model_params": spec.without_defaults(model_params),  # ids stay valid
                "module_params": module_params,
                "trainer": trainer,
                "seed": seed,
            }
            if fraction < 1:  # absent at 1.0, so that existing cell ids stay valid
                config["train_fraction"] = fraction
            if entry.get("diagnostic"):  # absent when untagged, so that existing cell ids stay valid
                config["diagnostic"] = entry["diagnostic"]
            if test_sets:  # absent when none, so that existing cell ids stay valid
                config["test_sets"] = test_sets
            if device != "cpu":  # a GPU cell is never the CPU record of the same config
                config["device"] = device
            cells.append(Cell(cell_id(config, spec.renamed), task.name, ds.name, name, spec.family,
                              spec.pattern_for(model_params), seed, config))
    return cells


#: a test set's name: it becomes a record key and a report column
TEST_SET_NAME = r"[A-Za-z0-9][A-Za-z0-9._-]*"


def resolve_test_sets(given: Any, ds: Any, dataset_params: dict[str, Any], where: str, source: str,
               named: bool = True) -> dict[str, dict[str, Any]]:
    """``{name: overrides}`` of a cell's extra test sets, each override checked against the
    dataset's parameters like ``dataset_params`` (all problems in one error). Only the
    overrides are kept (what differs from the cell's own dataset). ``named=False``: problems
    name ``where`` alone (one test set given on the command line)."""
    import re

    problems = Problems(source)
    if not isinstance(given, dict):
        raise ConfigError(f"{source}: {where}={given!r} is invalid: expected a mapping {{name: {{dataset param: value}}}}")
    out: dict[str, dict[str, Any]] = {}
    for name, override in given.items():
        at = f"{where}.{name}" if named else where
        if not isinstance(name, str) or not re.fullmatch(TEST_SET_NAME, name) or name == "test":
            problems.add(f"{source}: {where}: test set name {name!r} is invalid: expected a name matching "
                         f"{TEST_SET_NAME}, other than 'test' (the cell's own test split)")
            continue
        if not isinstance(override, dict) or not override:
            problems.add(f"{source}: {at}={override!r} is invalid: expected a non-empty mapping of "
                         f"dataset {ds.name!r} parameters ({', '.join(sorted(ds.params))})")
            continue
        with problems.collect():
            merge_params(ds.params, override, at, source, f"dataset {ds.name!r}", ds.bounds)
            same = [k for k, v in override.items() if dataset_params.get(k) == v]
            if len(same) == len(override):
                problems.add(f"{source}: {at}={override!r} is invalid: it changes nothing (the cell's dataset "
                             f"already has {', '.join(f'{k}={override[k]!r}' for k in same)})")
            out[name] = dict(override)
    problems.raise_if_any()
    return out
