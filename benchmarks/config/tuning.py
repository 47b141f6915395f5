"""Tuning files: the lockfile ``attnbench tune`` writes and a suite config references.

``attnbench tune CONFIG`` searches each model's learning rate (and at most one more
``module_params`` key) over one grid, the same for every model and family, with the same seeds:
every grid value is a ``module_params`` override, so each trial is an ordinary cell whose id
holds the value (:func:`trial_config`). The choice, on validation only, is written to a tuning
file (:mod:`benchmarks.report.tuning` builds it from the records)::

    schema: 1
    suite: quick
    config: {path: benchmarks/configs/quick.yaml, sets: [], cells_sha256: 3f2a...}   # the trial cells
    search: {method: grid, keys: [lr], grid: [{lr: 0.001}, {lr: 0.003}], seeds: [0, 1, 2], ...}
    records: results/tuning/quick          # the trials' records (attnbench tune --check reads them)
    date: '2026-12-01T10:00:00+00:00'      # the last trial's finish
    entries:
    - {task: pos_tagging, dataset: synthetic_far, model: transformer, family: attention,
       setting: {id: 1a2b3c4d5e6f, dataset: ..., model: ..., module: ..., trainer: ..., rest: ...},
       chosen: {lr: 0.003}, window: [{lr: 0.001}, {lr: 0.003}], trials: [{lr: 0.001, n: 3, mean: ..., ci: [...], cells: [...]}, ...]}

A suite config names one with the top-level key ``tuning: tuning/quick.yaml`` (relative to the
config's folder, else to ``benchmarks/configs/``, else to the current folder). Each of its cells
whose task, dataset and model the file tuned, in the same *setting* (the cell config without its
seed, the searched keys, where it runs and its extra test sets: :func:`setting_of`), gets the
chosen values as ``module_params``; **the tuned value wins over the cell entry's own**
``module_params.lr`` (a notice names the entries), since it is per model and the entry's is
shared by its models. ``--set tuning=null`` runs without it. The cell's config then holds
``tuning: {file, sha256, values}`` (so its record names the file and its hash), which is left out
of the cell id: a cell is what it trains, and a tuned lr of 0.003 is the cell an explicit 0.003
is. A cell the file does not cover keeps its own values (a notice counts them); a covered cell
whose setting differs (another epoch budget, model size, ...) is an error naming the sections
that differ, as is a file that covers no cell of the config.
"""

from __future__ import annotations

import copy
import hashlib
import json
import os
from dataclasses import replace
from pathlib import Path
from typing import Any, Iterable

from benchmarks.config import CONFIG_DIR
from benchmarks.config.schema import ConfigError, Problems, load_yaml, parse_yaml

__all__ = ["TUNING_SCHEMA", "DEFAULT_GRID", "TUNING_DIR", "parse_values", "grid_points", "setting_of",
           "trial_config", "resolve_tuning_path", "read_tuning_file", "display_path", "apply_tuning",
           "entry_label", "REPO_ROOT", "HEADER", "tuning_files"]

TUNING_SCHEMA = 1
#: the learning rates ``attnbench tune`` tries when ``--grid`` is not given
DEFAULT_GRID = (0.0003, 0.001, 0.003, 0.01)
#: where a shipped config's tuning files live (``tuning: tuning/quick.yaml``)
TUNING_DIR = CONFIG_DIR / "tuning"
REPO_ROOT = CONFIG_DIR.parents[1]
#: the first lines of every tuning file
HEADER = ("# A tuning file written by `attnbench tune` (a lockfile: do not edit). A config names it with\n"
          "# `tuning: <path>`; `attnbench tune CONFIG --check --file <this file>` rebuilds it from its records.\n")
#: cell config keys that say where or how much a cell is evaluated, not what it learns
_PLACE_KEYS = ("seed", "tuning", "test_sets", "device")
_TRAINER_PLACE_KEYS = ("accelerator", "devices")
#: what a setting is made of: section -> cell config keys (``rest``: every other key)
_SECTIONS = {"dataset": ("task", "dataset", "dataset_params"), "model": ("model", "model_params"),
             "module": ("module_params",), "trainer": ("trainer",)}


def _hash(obj: Any, n: int) -> str:
    blob = json.dumps(obj, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(blob.encode()).hexdigest()[:n]


def parse_values(text: str, key: str, option: str) -> list[Any]:
    """``"0.001,0.003"`` -> ``[0.001, 0.003]`` (each value read as YAML); ``lr`` values must be
    numbers > 0 and no value may repeat. A bad list is one :class:`ConfigError` line naming ``option``."""
    example = "e.g. 0.001,0.003,0.01" if key == "lr" else "e.g. 0,0.01"
    parts = [p.strip() for p in str(text).split(",")]
    if not parts or any(not p for p in parts):
        raise ConfigError(f"{option} {text!r}: expected values separated by commas, {example}")
    values = [parse_yaml(p) for p in parts]
    for raw, v in zip(parts, values):
        number = isinstance(v, (int, float)) and not isinstance(v, bool)
        if key == "lr" and not (number and v > 0 and v == v and v != float("inf")):
            raise ConfigError(f"{option} {text!r}: {raw} is not a learning rate: expected numbers > 0, {example}")
        if v is None or isinstance(v, (list, dict)):
            raise ConfigError(f"{option} {text!r}: {raw} is not a value of {key}: expected scalars, {example}")
    if len(set(map(repr, values))) != len(values):
        raise ConfigError(f"{option} {text!r}: a value is given twice; expected distinct values, {example}")
    return [float(v) if key == "lr" else v for v in values]


def grid_points(lrs: Iterable[float], also: tuple[str, list[Any]] | None = None) -> list[dict[str, Any]]:
    """The grid: one point per learning rate (ascending), times the values of one more key."""
    lrs = sorted(lrs)
    if also is None:
        return [{"lr": v} for v in lrs]
    key, values = also
    return [{"lr": v, key: w} for v in lrs for w in values]


def setting_of(config: dict[str, Any], keys: Iterable[str]) -> dict[str, str]:
    """The setting a cell was tuned in: a short hash per section of its config (dataset, model,
    module without the searched ``keys``, trainer without where it runs, the rest) and ``id``,
    the hash of them all. Seed, test sets, device and an applied tuning are left out."""
    keys = set(keys)
    c = {k: v for k, v in config.items() if k not in _PLACE_KEYS}
    c["module_params"] = {k: v for k, v in (c.get("module_params") or {}).items() if k not in keys}
    c["trainer"] = {k: v for k, v in (c.get("trainer") or {}).items() if k not in _TRAINER_PLACE_KEYS}
    parts = {name: {k: c.pop(k, None) for k in ks} for name, ks in _SECTIONS.items()}
    parts["rest"] = c
    out = {name: _hash(part, 8) for name, part in parts.items()}
    return {"id": _hash(out, 12), **out}


def entry_label(e: dict[str, Any]) -> str:
    """``task/dataset/model`` of a tuning entry or a cell."""
    get = e.get if isinstance(e, dict) else lambda k: getattr(e, k, None)
    return f"{get('task')}/{get('dataset')}/{get('model')}"


def trial_config(cfg: dict[str, Any], points: list[dict[str, Any]], *, tasks: Iterable[str] | None = None,
                 diagnostic: str | None = None) -> dict[str, Any]:
    """The raw suite config of the trials: each selected cell entry (of ``tasks``, of
    ``diagnostic``; all by default) once per grid point, the point's values as its
    ``module_params``; the diagnostics those entries name; no micro-benchmarks, no tuning file
    (the trials are what one is made from). Suite ``<suite>.tuning``."""
    from tasks.common.registry import get_task

    tasks = list(tasks) if tasks is not None else None
    entries = []
    for entry in cfg["cells"]:
        if (tasks is not None and entry["task"] not in tasks) or (diagnostic and entry.get("diagnostic") != diagnostic):
            continue
        params = get_task(entry["task"]).module_params
        for key in sorted({k for p in points for k in p} - set(params)):  # once, not once per trial entry
            raise ConfigError(f"--also {key}: not a module parameter of task {entry['task']!r}; valid: "
                              f"{', '.join(k for k in params if k != 'lr') or 'none besides lr'}")
        for point in points:
            e = copy.deepcopy(entry)
            e["module_params"] = {**(entry.get("module_params") or {}), **point}
            entries.append(e)
    if not entries:
        if diagnostic:
            have = sorted({str(e["diagnostic"]) for e in cfg["cells"] if e.get("diagnostic")})
            among = f" among tasks {','.join(tasks)}" if tasks is not None else ""
            raise ConfigError(f"--diagnostic {diagnostic}: no cell entry of suite {cfg['suite']!r} is tagged with "
                              f"it{among}; its diagnostics: {', '.join(have) or 'none'}")
        have = list(dict.fromkeys(str(e["task"]) for e in cfg["cells"]))
        raise ConfigError(f"--tasks {','.join(tasks or [])}: not in suite {cfg['suite']!r}; its tasks: {', '.join(have)}")
    used = {e.get("diagnostic") for e in entries}
    raw = {k: copy.deepcopy(v) for k, v in cfg.items() if k not in ("cells", "diagnostics", "micro_benchmarks", "tuning")}
    raw.update(suite=f"{cfg['suite']}.tuning", cells=entries, micro_benchmarks=[],
               description=f"learning-rate trials of suite {cfg['suite']} (attnbench tune)",
               diagnostics={k: v for k, v in (cfg.get("diagnostics") or {}).items() if k in used})
    return raw


def display_path(path: str | os.PathLike) -> str:
    """``path`` relative to the repository when it lies inside it (as records name files), else absolute."""
    p = Path(path).resolve()
    try:
        return p.relative_to(REPO_ROOT).as_posix()
    except ValueError:
        return str(p)


def _is_tuning_file(p: Path) -> bool:
    try:
        with p.open("r", encoding="utf-8") as f:
            return f.read(len(HEADER)) == HEADER
    except (OSError, UnicodeDecodeError):
        return False


def tuning_files(folders: Iterable[Path]) -> list[str]:
    """The tuning files (those ``attnbench tune`` wrote: they start with :data:`HEADER`) in ``folders``."""
    found = []
    for d in folders:
        found += [display_path(p) for p in sorted(d.glob("*.yaml")) if _is_tuning_file(p)] if d.is_dir() else []
    return list(dict.fromkeys(found))


def resolve_tuning_path(value: str, source: str) -> Path:
    """The file a ``tuning:`` key names: absolute, or relative to the config's folder, to
    ``benchmarks/configs/`` or to the current folder (the first that exists). A missing one is one
    :class:`ConfigError` line listing the tuning files there are."""
    p = Path(value).expanduser()
    config_dir = Path(source).resolve().parent if Path(source).is_file() else None
    bases = [] if p.is_absolute() else [b for b in (config_dir, CONFIG_DIR, Path.cwd()) if b is not None]
    cands = [p] if p.is_absolute() else [b / p for b in bases]
    for cand in cands:
        if cand.is_file():
            return cand.resolve()
    have = tuning_files([c.parent for c in cands] + [TUNING_DIR])
    hint = f"tuning files: {', '.join(have)}" if have else "no tuning file exists yet: attnbench tune CONFIG writes one"
    raise ConfigError(f"{source}: tuning={value!r}: no such file (looked in "
                      f"{', '.join(dict.fromkeys(display_path(c.parent) for c in cands))}); {hint}; or tuning: null")


def read_tuning_file(path: str | os.PathLike) -> tuple[dict[str, Any], str]:
    """``(document, sha256 of its bytes)`` of a tuning file, its shape checked: one
    :class:`ConfigError` line naming the file and what is wrong."""
    path = Path(path)
    try:
        data = path.read_bytes()
    except OSError as err:
        raise ConfigError(f"tuning file {display_path(path)}: cannot read it: {err.strerror or err}") from None
    doc = load_yaml(path)
    bad = _shape_problem(doc)
    if bad:
        raise ConfigError(f"tuning file {display_path(path)}: {bad} (attnbench tune writes these files; "
                          "rerun it rather than editing one)")
    return doc, "sha256:" + hashlib.sha256(data).hexdigest()


def _shape_problem(doc: Any) -> str | None:
    """What is wrong with a tuning document's shape, or None."""
    if not isinstance(doc, dict):
        return "not a mapping: expected the keys schema, suite, search, entries"
    if doc.get("schema") != TUNING_SCHEMA:
        return f"schema={doc.get('schema')!r}: expected {TUNING_SCHEMA}"
    keys = (doc.get("search") or {}).get("keys") if isinstance(doc.get("search"), dict) else None
    if not (isinstance(keys, list) and keys and keys[0] == "lr" and all(isinstance(k, str) for k in keys)
            and len(keys) <= 2):
        return f"search.keys={keys!r}: expected [lr] or [lr, KEY]"
    entries = doc.get("entries")
    if not isinstance(entries, list):
        return "entries: expected a list of tuned (task, dataset, model)"
    for i, e in enumerate(entries):
        ok = isinstance(e, dict) and all(isinstance(e.get(k), str) for k in ("task", "dataset", "model")) \
            and isinstance(e.get("setting"), dict) and isinstance(e["setting"].get("id"), str)
        if not ok:
            return f"entries[{i}]: expected task, dataset, model and setting.id"
        chosen = e.get("chosen")
        if chosen is not None and not (isinstance(chosen, dict) and set(chosen) == set(keys)):
            return f"entries[{i}].chosen={chosen!r}: expected null or a value for each of {', '.join(keys)}"
        lr = chosen.get("lr") if chosen else None
        if chosen is not None and not (isinstance(lr, (int, float)) and not isinstance(lr, bool) and lr > 0):
            return f"entries[{i}].chosen.lr={lr!r}: expected a number > 0"
    return None


def _differs(entries: list[dict[str, Any]], setting: dict[str, str]) -> str:
    """The setting sections in which a cell differs from the closest tuned entry."""
    best = min(entries, key=lambda e: sum(e["setting"].get(k) != v for k, v in setting.items() if k != "id"))
    names = {"dataset": "dataset_params", "model": "model_params", "module": "module_params",
             "trainer": "trainer", "rest": "other keys (train_fraction, diagnostic)"}
    return ", ".join(names[k] for k, v in setting.items() if k != "id" and best["setting"].get(k) != v) or "setting"


def apply_tuning(cfg: dict[str, Any], cells: list[Any], source: str, problems: Problems,
                 notices: list[str] | None = None) -> list[Any]:
    """``cells`` with the chosen values of ``cfg['tuning']`` applied (see the module docstring);
    ``cfg['tuning']`` becomes the file's absolute path, so that a later expansion finds it from
    anywhere. Problems go to ``problems``; notices for the user to ``notices``."""
    from benchmarks.config.params import cell_id

    before = len(problems)
    with problems.collect():
        path = resolve_tuning_path(str(cfg["tuning"]), source)
        doc, sha = read_tuning_file(path)
        cfg["tuning"] = str(path)
    if len(problems) > before:
        return cells
    shown, keys = display_path(path), list(doc["search"]["keys"])
    tuned: dict[tuple[str, str, str], list[dict[str, Any]]] = {}
    for e in doc["entries"]:
        tuned.setdefault((e["task"], e["dataset"], e["model"]), []).append(e)
    out, seen, uncovered, unchosen, applied = [], set(), 0, set(), set()
    for cell in cells:
        entries = tuned.get((cell.task, cell.dataset, cell.model))
        if not entries:
            uncovered += 1
            out.append(cell)
            continue
        setting = setting_of(cell.config, keys)
        entry = next((e for e in entries if e["setting"]["id"] == setting["id"]), None)
        if entry is None:  # the same problem under other trainer keys (a --set budget, compile): tuned there
            entry = next((e for e in entries if all(e["setting"].get(k) == v for k, v in setting.items()
                                                    if k not in ("id", "trainer"))), None)
            if entry is not None and notices is not None:
                notices.append(f"tuning: {shown} tuned {entry_label(cell)} under other trainer settings; its "
                               "chosen value is applied")
        if entry is None:
            problems.add(f"{source}: tuning: {shown} tuned {entry_label(cell)} in another setting (this config "
                         f"differs in {_differs(entries, setting)}); rerun attnbench tune for this config, or set "
                         "tuning: null")
            continue
        if entry.get("chosen") is None:  # no grid value trained every seed: the cell keeps its own
            unchosen.add(entry_label(cell))
            out.append(cell)
            continue
        config = copy.deepcopy(cell.config)
        config["module_params"] = {**config.get("module_params", {}), **entry["chosen"]}
        config["tuning"] = {"file": shown, "sha256": sha, "values": dict(entry["chosen"])}
        new = replace(cell, cell_id=cell_id(config), config=config)
        applied.add((cell.task, cell.dataset, cell.model))
        if new.cell_id not in seen:
            seen.add(new.cell_id)
            out.append(new)
    if not applied and not unchosen and not len(problems):  # another problem (a bad cell) would explain it
        problems.add(f"{source}: tuning: {shown} covers none of this config's cells (it tuned "
                     f"{', '.join(sorted({entry_label(e) for e in doc['entries']})) or 'nothing'}); "
                     "name the tuning file of this config, or set tuning: null")
    if notices is not None and applied:
        notices += _notices(cfg, shown, keys, applied, uncovered, unchosen)
    return out


def _notices(cfg: dict[str, Any], shown: str, keys: list[str], applied: set[tuple[str, str, str]],
             uncovered: int, unchosen: set[str]) -> list[str]:
    """What applying a tuning file changed, for the user: the entries whose own values of the
    searched keys it replaced, the cells it does not cover and the entries without a choice."""
    lines = [f"tuning: {shown} sets {', '.join(keys)} of {len(applied)} model(s) per task and dataset "
             f"(not part of the cell ids: the values are)"]
    for i, entry in enumerate(cfg.get("cells") or []):
        own = {k: v for k, v in (entry.get("module_params") or {}).items() if k in keys}
        models = entry.get("models")
        if own and any(t == entry.get("task") and d == entry.get("dataset") and (models == "all" or m in (models or []))
                       for t, d, m in applied):
            lines.append(f"tuning: cells[{i}] ({entry.get('task')}/{entry.get('dataset')}) sets "
                         f"{', '.join(f'module_params.{k}={v!r}' for k, v in own.items())} itself; "
                         f"the tuned per-model value replaces it (tuning: null keeps it)")
    if uncovered:
        lines.append(f"tuning: {uncovered} cell(s) that {shown} does not cover keep their own {', '.join(keys)}")
    if unchosen:
        lines.append(f"tuning: {shown} chose no value for {', '.join(sorted(unchosen))} (no grid value trained "
                     f"every seed): they keep their own")
    return lines
