"""The parameters of a cell (dataset, model, module): checked against the registered defaults
(:func:`merge_params`), deprecated model parameter names put under the current ones.

A model may rename a parameter (``renamed={old: new}`` on its registration,
:mod:`tasks.common.params`). A config that still uses the old name is rewritten under the new
one, with one notice per old name (naming the new name and the cells); giving both names for
one model is an error. Cell ids do not change: they hash the names a parameter was first
recorded under (:func:`benchmarks.config.suite.cell_id`, :func:`renamed_params`).
"""

from __future__ import annotations

import copy
import hashlib
import json
from typing import TYPE_CHECKING, Any, Mapping

from benchmarks.config.schema import ConfigError, Field, Problems, check_value

if TYPE_CHECKING:
    from tasks.common.registry import Bounds

__all__ = ["cell_id", "merge_params", "param_field", "rename_model_params", "renamed_params"]


def param_field(name: str, default: Any, declared: Mapping[str, Bounds] | None) -> Field:
    """The :class:`Field` a registered parameter follows: the type of its default, the bounds
    of :func:`tasks.common.registry.param_bounds`."""
    from tasks.common.registry import param_bounds

    b = param_bounds(name, default, declared)
    kind = b.kind or kind_of(default)
    nullable = b.nullable if b.nullable is not None else default is None
    return Field(kind, default, choices=b.choices, minimum=b.minimum, maximum=b.maximum,
                 min_open=b.min_open, max_open=b.max_open, nullable=nullable)


def kind_of(default: Any) -> str:
    for t, kind in ((bool, "bool"), (int, "int"), (float, "float"), (str, "str")):
        if isinstance(default, t):
            return kind
    if isinstance(default, list):
        kinds = {kind_of(v) for v in default}
        if kinds == {"int", "float"}:
            kinds = {"float"}
        return f"list[{kinds.pop()}]" if len(kinds) == 1 and not kinds & {"any"} else "list[any]"
    return "any"


def merge_params(defaults: dict, overrides: Any, where: str, source: str, what: str,
                  bounds: Mapping[str, Bounds] | None = None) -> dict:
    """The defaults with ``overrides`` applied, every override checked (unknown key, type,
    range, choices: all problems in one error). The values are kept as given, so that cell
    ids do not change with a check."""
    if overrides is None:
        overrides = {}
    if not isinstance(overrides, dict):
        raise ConfigError(f"{source}: {where}={overrides!r} is invalid: expected a mapping of {what} parameters")
    problems = Problems(source)
    valid = ", ".join(sorted(defaults)) or "(none)"
    for key, value in overrides.items():
        if key not in defaults:
            problems.add(f"{source}: unknown key '{where}.{key}'; valid {what} parameters: {valid}")
            continue
        with problems.collect():
            check_value(value, param_field(key, defaults[key], bounds), f"{where}.{key}", source)
    problems.raise_if_any()
    out = _copied(defaults)
    out.update(_copied(overrides))
    return out


def _copied(value: Any) -> Any:
    """A copy of plain config data (mappings, lists, scalars) at any depth: what ``copy.deepcopy``
    gives, 5x faster (a generated sweep of 60k cells copies its defaults 180k times)."""
    if isinstance(value, dict):
        return {k: _copied(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_copied(v) for v in value]
    if isinstance(value, tuple):
        return tuple(_copied(v) for v in value)
    if isinstance(value, (str, int, float, bool, type(None))):
        return value
    return copy.deepcopy(value)


def rename_model_params(cfg: dict[str, Any], source: str, problems: Problems) -> list[str]:
    """Put every cell's ``model_params`` of validated ``cfg`` under the current names (a new
    mapping per cell, so that a YAML anchor shared by cells is never changed in place). Returns
    one notice per deprecated name used; both names for one model is a problem in ``problems``.
    Cells whose task or models are unknown are left to the cell checks, which report them."""
    from tasks.common.registry import get_task

    uses: dict[tuple[str, str], list[str]] = {}
    for i, entry in enumerate(cfg.get("cells") or []):
        given = entry.get("model_params") if isinstance(entry, dict) else None
        if not isinstance(given, dict):
            continue
        try:
            models = get_task(entry.get("task")).models
        except (KeyError, TypeError, ValueError):  # an unknown task: reported by the cell checks
            continue
        out = dict(given)
        for model, params in given.items():
            if not isinstance(model, str) or model not in models or not isinstance(params, dict):
                continue
            spec, where = models.get(model), f"cells[{i}].model_params.{model}"
            try:
                out[model], old = spec.current_names(params)
            except ValueError as err:
                problems.add(f"{source}: {where}: {err}")
                out[model] = {k: v for k, v in params.items() if k not in spec.renamed}  # reported once
                continue
            for key in old:
                uses.setdefault((key, spec.renamed[key]), []).append(where)
        entry["model_params"] = out
    return [f"{source}: model parameter {old!r} is deprecated, use {new!r} (same cell ids): {', '.join(at)}"
            for (old, new), at in uses.items()]


def renamed_params(config: Mapping[str, Any]) -> Mapping[str, str]:
    """The renamed parameters (old -> new) of the model a resolved cell ``config`` names, or an
    empty mapping when the task or model is not registered here."""
    from tasks.common.registry import get_task

    try:
        return get_task(config["task"]).models.get(config["model"]).renamed
    except (KeyError, TypeError, ValueError):
        return {}


def cell_id(config: dict[str, Any], renamed: Mapping[str, str] | None = None) -> str:
    """A stable 12-hex-digit hash of the resolved config (key order does not matter).

    Ids keep the names a parameter was first recorded under: a model parameter renamed since
    (``renamed``, old -> new; None: the registered model's ``ModelSpec.renamed``) is hashed under
    its old name, so a record written before the rename and a cell expanded now share one id."""
    from tasks.common.params import recorded_names

    config = {k: v for k, v in config.items() if k != "tuning"}  # the file that chose a value: the value counts
    renamed = renamed_params(config) if renamed is None else renamed
    if renamed and isinstance(config.get("model_params"), Mapping):
        config = {**config, "model_params": recorded_names(config["model_params"], renamed)}
    blob = json.dumps(config, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(blob.encode()).hexdigest()[:12]
