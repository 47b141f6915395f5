"""The report's inputs, checked before anything reads them: result records and ``suite.json``
manifests under each results folder. A file the report cannot use (unreadable JSON, a field of
the wrong type, a manifest of the wrong shape, a record of another suite in a suite's folder)
becomes one warning naming the file and the problem, and the report is written from the rest:
never a Python exception from a bad file.
"""

from __future__ import annotations

import json
import warnings
from pathlib import Path
from typing import Any, Sequence

from benchmarks.run.records import MANIFEST, load_records
from benchmarks.report.results import Warn

__all__ = ["RECORD_FIELDS", "NESTED_FIELDS", "record_problem", "manifest_problem", "load_inputs", "merge_suites",
           "ORIGIN"]

_SCALAR = (str, int, float)
_NAME = (str, int)  # task, dataset and model names (a number is shown as its text)

#: field -> the types a record's field may have (None: absent or null is fine everywhere)
RECORD_FIELDS: dict[str, tuple[type, ...]] = {
    "suite": _NAME, "task": _NAME, "dataset": _NAME, "model": _NAME, "cell_id": _NAME, "status": (str,),
    "family": (str,), "kind": (str,), "pattern": (str,), "seed": _SCALAR, "reason": _SCALAR, "metric": (dict,), "test": (dict,),
    "best_val": (dict,), "cost": (dict,), "curve": (list,), "data": (dict,), "extras": (dict,), "config": (dict,),
    "env": (dict,), "stop": (dict,), "resources": (dict,), "started": (str,), "finished": (str,),
    "epochs_run": (int, float), "test_sets": (dict,),
}
_NUM = (int, float)
#: field -> sub-field -> types, for the sub-fields the report reads
NESTED_FIELDS: dict[str, dict[str, tuple[type, ...]]] = {
    "data": {"name": _NAME, "checksum": (str,), "info": (dict,), "train_size": _NUM, "max_len": _NUM,
             "train_fraction": _NUM, "synthetic": (bool,)},
    "env": {"git_commit": (str,), "git_dirty": (bool,), "date": (str,), "fingerprint": (dict,), "device": (str,),
            "device_name": (str,), "cpu_count": _NUM, "torch_threads": _NUM},
    "stop": {"reason": (str,), "epochs": _NUM, "max_epochs": _NUM, "time_cap_s": _NUM},
    "resources": {"cells_sharing_device": _NUM},
    "config": {"model_params": (dict,), "trainer": (dict,), "dataset_params": (dict,), "module_params": (dict,),
               "train_fraction": _NUM},
    "best_val": {"value": _NUM, "epoch": _NUM},
    # the costs the report shows (other keys, such as a newer record's details, are not read)
    "cost": {**{k: _NUM for k in ("params", "flops_per_sample", "train_time_s", "train_samples_per_s",
                                  "infer_samples_per_s", "train_tokens_per_s", "infer_tokens_per_s",
                                  "peak_mem_bytes")}, "peak_mem_kind": (str,), "flops_rule": (str,)},
}


def _type_names(types: tuple[type, ...]) -> str:
    return " or ".join({dict: "an object", list: "a list", str: "a string", int: "an integer",
                        float: "a number", bool: "a boolean"}.get(t, t.__name__) for t in types)


def _kind(x: Any) -> str:
    return {dict: "an object", list: "a list", str: "a string", bool: "a boolean", int: "an integer",
            float: "a number"}.get(type(x), type(x).__name__)


def record_problem(rec: dict[str, Any]) -> str | None:
    """What makes a loaded record unusable for the report (the first problem found), or None."""
    for key, types in RECORD_FIELDS.items():
        v = rec.get(key)
        if v is None:
            continue
        if isinstance(v, bool) or not isinstance(v, types):
            return f"field {key!r} is {_kind(v)} ({_short(v)}), expected {_type_names(types)}"
    m = rec.get("metric")
    if m is not None:
        for k in ("name", "mode"):
            if m.get(k) is not None and not isinstance(m.get(k), str):
                return f"field 'metric.{k}' is {_kind(m[k])} ({_short(m[k])}), expected a string"
    for key, subs in NESTED_FIELDS.items():
        block = rec.get(key) or {}
        for k, types in subs.items():
            v = block.get(k)
            if v is not None and (not isinstance(v, types) or (isinstance(v, bool) and bool not in types)):
                return f"field '{key}.{k}' is {_kind(v)} ({_short(v)}), expected {_type_names(types)}"
    for i, point in enumerate(rec.get("curve") or []):
        if not isinstance(point, dict):
            return f"field 'curve[{i}]' is {_kind(point)}, expected an object"
    return None


def manifest_problem(man: Any) -> str | None:
    """What makes a ``suite.json`` unusable (the first problem found), or None."""
    if not isinstance(man, dict):
        return f"is {_kind(man)}, expected an object with 'suite' and 'cells'"
    suite = man.get("suite")
    if isinstance(suite, dict):
        suite = suite.get("name")
    if suite is not None and not isinstance(suite, str):
        return f"field 'suite' is {_kind(suite)} ({_short(suite)}), expected a string"
    cells = man.get("cells")
    if cells is not None and not isinstance(cells, list):
        return f"field 'cells' is {_kind(cells)}, expected a list"
    for i, c in enumerate(cells or []):
        if not isinstance(c, dict):
            return f"field 'cells[{i}]' is {_kind(c)}, expected an object"
        for k in ("cell_id", "task", "dataset", "model", "seed", "suite"):
            v = c.get(k)
            if v is not None and (isinstance(v, bool) or not isinstance(v, _SCALAR)):
                return f"field 'cells[{i}].{k}' is {_kind(v)} ({_short(v)}), expected a string or number"
    return None


def _short(x: Any, limit: int = 60) -> str:
    s = repr(x)
    return s if len(s) <= limit else s[:limit - 3] + "..."


def _suite_of(man: dict[str, Any]) -> str | None:
    s = man.get("suite")
    return s.get("name") if isinstance(s, dict) else s


def _load_manifests(root: Path, warn: Warn) -> list[dict[str, Any]]:
    out = []
    for p in sorted(root.rglob(MANIFEST)):
        try:
            man = json.loads(p.read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, json.JSONDecodeError) as err:
            warn("unreadable", f"{p}: not readable as JSON ({err}); its cells are not counted as expected")
            continue
        problem = manifest_problem(man)
        if problem:
            warn("unreadable", f"{p}: {problem}; its cells are not counted as expected")
            continue
        out.append(man)
    return out


def load_inputs(roots: Sequence[Path], warn: Warn) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """The usable records and manifests under ``roots``; a warning (kind ``unreadable``) for
    every file left out, naming it and the problem. A record whose suite no manifest of its
    folder names (a record of another suite copied into ``runs/``) is left out too."""
    records, manifests = [], []
    for root in roots:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            recs = load_records(root)
        for w in caught:
            warn("unreadable", str(w.message))
        mans = _load_manifests(root, warn)
        suites = {str(_suite_of(m)) for m in mans if _suite_of(m) is not None}
        for rec in recs:
            where = rec.get("_path", "?")
            problem = record_problem(rec)
            if problem is None and suites and str(rec.get("suite")) not in suites:
                problem = (f"a record of suite {rec.get('suite')!r} in the folder of suite(s) "
                           f"{', '.join(sorted(suites))} (copied from another run?)")
            if problem:
                warn("unreadable", f"{where}: {problem}; left out of the report")
                continue
            records.append(rec)
        manifests += mans
    return records, manifests


#: where a merged report (:func:`merge_suites`) keeps each record's and manifest cell's own suite
ORIGIN = "merged_from"


def merge_suites(records: list[dict[str, Any]], manifests: list[dict[str, Any]],
                 name: str) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Copies of ``records`` and ``manifests`` as one suite ``name`` (``attnbench report
    --merge-suites``), each keeping its own suite under :data:`ORIGIN`: the report then groups
    by task and dataset across suites, so that peers run from another config (the classic
    models of speech.yaml beside modern_recurrence.yaml's recurrences) share one leaderboard and
    its comparisons. A model that ran in several of the suites keeps a row per suite (see
    :func:`~benchmarks.report.analysis.model_labels`)."""
    recs = [{**r, "suite": name, ORIGIN: str(r.get("suite"))} for r in records]
    mans = []
    for m in manifests:
        own = str(_suite_of(m))
        cells = [{**c, "suite": name, ORIGIN: str(c.get("suite") or own)} for c in m.get("cells") or []]
        mans.append({**m, "suite": name, ORIGIN: own, "cells": cells})
    return recs, mans
