"""A small typed schema for YAML configs: every key is declared with its type, default
and allowed values; anything else is a :class:`ConfigError` that names the offending
key and lists the valid ones. Shared by the micro-benchmarks and (later) the runner.

Example::

    SCHEMA = {
        "repeats": Field("int", 5, minimum=1, doc="timed calls per point"),
        "device": Field("str", "auto", choices=("auto", "cpu", "cuda")),
        "sequence": Section({"lengths": Field("list[int]", [256, 512])}),
    }
    cfg = validate(yaml.safe_load(text), SCHEMA, source="my.yaml")
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping

import yaml

__all__ = ["ConfigError", "Field", "Section", "validate", "load_yaml", "apply_overrides", "REQUIRED"]

DEVICES = ("cpu", "cuda")


class ConfigError(ValueError):
    """A config that does not match its schema (unknown key, wrong type, bad value)."""


class _Required:
    def __repr__(self) -> str:
        return "REQUIRED"


REQUIRED = _Required()

#: Scalar kinds a :class:`Field` can have; ``list[...]`` of any of them, and ``per_device[...]``
#: (either one value for every device, or a mapping ``{cpu: ..., cuda: ...}``).
_SCALARS = ("int", "float", "bool", "str", "any")


@dataclass(frozen=True)
class Field:
    kind: str
    default: Any = REQUIRED
    choices: tuple | None = None
    minimum: float | None = None
    nullable: bool = False
    doc: str = ""


@dataclass(frozen=True)
class Section:
    fields: Mapping[str, Any]
    doc: str = ""
    #: a list of sections (each item validated against ``fields``) instead of one section
    many: bool = False
    #: keep only the keys given (no defaults filled in): for overrides, where an absent key
    #: inherits and an explicit ``null`` means "off"
    partial: bool = False
    default: Any = field(default=None)


def _where(path: str, key: str | int) -> str:
    if isinstance(key, int):
        return f"{path}[{key}]"
    return f"{path}.{key}" if path else str(key)


def _check_scalar(kind: str, value: Any, f: Field, where: str, source: str) -> Any:
    def bad(expected: str) -> ConfigError:
        return ConfigError(f"{source}: {where}={value!r} is invalid: expected {expected}")

    if value is None:
        if f.nullable:
            return None
        raise bad(f"a {kind} (null is not allowed)")
    if kind == "int":
        if isinstance(value, bool) or not isinstance(value, int):
            raise bad("an integer")
    elif kind == "float":
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise bad("a number")
        value = float(value)
    elif kind == "bool":
        if not isinstance(value, bool):
            raise bad("true or false")
    elif kind == "str":
        if not isinstance(value, str):
            raise bad("a string")
    if f.choices is not None and value not in f.choices:
        raise bad("one of " + ", ".join(repr(c) for c in f.choices))
    if f.minimum is not None and value < f.minimum:
        raise bad(f"a value >= {f.minimum}")
    return value


def _check_value(kind: str, value: Any, f: Field, where: str, source: str) -> Any:
    if kind.startswith("per_device[") and kind.endswith("]"):
        inner = kind[len("per_device[") : -1]
        if isinstance(value, Mapping):
            unknown = [k for k in value if k not in DEVICES]
            if unknown:
                raise ConfigError(
                    f"{source}: unknown key '{_where(where, unknown[0])}'; valid keys: {', '.join(DEVICES)}"
                )
            missing = [d for d in DEVICES if d not in value]
            if missing:
                raise ConfigError(
                    f"{source}: {where} gives values per device but misses {', '.join(missing)}; "
                    f"give every one of {', '.join(DEVICES)} or a single value"
                )
            return {d: _check_value(inner, value[d], f, _where(where, d), source) for d in DEVICES}
        one = _check_value(inner, value, f, where, source)
        return {d: copy.deepcopy(one) for d in DEVICES}
    if kind.startswith("list[") and kind.endswith("]"):
        inner = kind[len("list[") : -1]
        if value is None and f.nullable:
            return None
        if not isinstance(value, list):
            raise ConfigError(f"{source}: {where}={value!r} is invalid: expected a list of {inner}")
        item = Field(inner, choices=f.choices, minimum=f.minimum)
        return [_check_scalar(inner, v, item, _where(where, i), source) for i, v in enumerate(value)]
    if kind not in _SCALARS:  # pragma: no cover - schema author error
        raise TypeError(f"unknown field kind {kind!r}")
    return _check_scalar(kind, value, f, where, source)


def validate(data: Any, schema: Mapping[str, Any], *, source: str = "config", path: str = "",
             partial: bool = False) -> dict:
    """Check ``data`` against ``schema`` and return a new dict with defaults filled in
    (``partial``: only the keys ``data`` gives)."""
    if data is None:
        data = {}
    if not isinstance(data, Mapping):
        raise ConfigError(f"{source}: {path or 'the config'} must be a mapping, got {type(data).__name__}")
    unknown = [k for k in data if k not in schema]
    if unknown:
        raise ConfigError(
            f"{source}: unknown key '{_where(path, unknown[0])}'; valid keys"
            f"{' of ' + path if path else ''}: {', '.join(schema)}"
        )
    out: dict = {}
    for key, spec in schema.items():
        where = _where(path, key)
        if isinstance(spec, Section):
            if spec.many:
                items = data.get(key, spec.default if spec.default is not None else [])
                if not isinstance(items, list):
                    raise ConfigError(f"{source}: {where} must be a list of mappings")
                out[key] = [
                    validate(it, spec.fields, source=source, path=_where(where, i)) for i, it in enumerate(items)
                ]
            else:
                out[key] = validate(data.get(key, {}), spec.fields, source=source, path=where, partial=spec.partial)
            continue
        if key not in data:
            if partial:
                continue
            if spec.default is REQUIRED:
                raise ConfigError(f"{source}: missing required key '{where}'")
            default = copy.deepcopy(spec.default)
            # defaults go through the same normalisation (e.g. per_device values become mappings)
            out[key] = None if default is None else _check_value(spec.kind, default, spec, where, "schema default")
            continue
        out[key] = _check_value(spec.kind, data[key], spec, where, source)
    return out


def load_yaml(path: str | Path) -> Any:
    path = Path(path)
    if not path.is_file():
        raise ConfigError(f"config file not found: {path}")
    try:
        return yaml.safe_load(path.read_text())
    except yaml.YAMLError as exc:
        raise ConfigError(f"{path}: not valid YAML: {exc}") from None


def apply_overrides(data: Any, overrides: list[str] | tuple[str, ...]) -> dict:
    """Apply ``key.sub=value`` overrides (value parsed as YAML) to a raw config mapping."""
    data = copy.deepcopy(data) if data else {}
    for item in overrides:
        if "=" not in item:
            raise ConfigError(f"--set {item!r}: expected KEY=VALUE, e.g. --set sequence.lengths=[256,512]")
        key, raw = item.split("=", 1)
        parts = [p for p in key.strip().split(".") if p]
        if not parts:
            raise ConfigError(f"--set {item!r}: empty key")
        try:
            value = yaml.safe_load(raw)
        except yaml.YAMLError as exc:
            raise ConfigError(f"--set {item!r}: value is not valid YAML: {exc}") from None
        node = data
        for p in parts[:-1]:
            nxt = node.get(p)
            if nxt is None:
                nxt = node[p] = {}
            if not isinstance(nxt, dict):
                raise ConfigError(f"--set {item!r}: '{p}' is not a section")
            node = nxt
        node[parts[-1]] = value
    return data
