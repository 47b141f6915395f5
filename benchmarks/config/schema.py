"""A small typed schema for YAML configs: every key is declared with its type, default
and allowed values; anything else is a :class:`ConfigError` that names the offending
key and lists the valid ones. Every problem in a config is collected (:class:`Problems`)
and reported in one error, one line each. Shared by the micro-benchmarks and the suites.

Example::

    SCHEMA = {
        "repeats": Field("int", 5, minimum=1, doc="timed calls per point"),
        "device": Field("str", "auto", choices=("auto", "cpu", "cuda")),
        "sequence": Section({"lengths": Field("list[int]", [256, 512])}),
    }
    cfg = validate(yaml.safe_load(text), SCHEMA, source="my.yaml")
"""

from __future__ import annotations

import contextlib
import copy
import math
import re
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Callable, Iterator, Mapping

import yaml

from benchmarks.config.strict_yaml import (MAX_YAML_ALIAS_NODES, MAX_YAML_DEPTH, Refused as _Refused,  # noqa: F401
                                          StrictLoader, parse_yaml)

__all__ = ["ConfigError", "CliError", "Field", "Section", "Problems", "validate", "load_yaml", "parse_yaml",
           "StrictLoader", "apply_overrides",
           "parse_override", "set_path", "describe", "check_value", "REQUIRED"]

DEVICES = ("cpu", "cuda")


class ConfigError(ValueError):
    """A config that does not match its schema (unknown key, wrong type, bad value).
    ``problems`` holds one line per problem; the message is them all."""

    def __init__(self, message: str, problems: list[str] | None = None) -> None:
        super().__init__(message)
        self.problems = list(problems) if problems else [message]


class CliError(Exception):
    """A usage error on the command line: printed as ``attnbench: error: ...`` with exit code 2.
    Defined here, below every command, so that launchers and commands raise it without
    importing :mod:`benchmarks.cli`."""


class Problems:
    """Collects every problem of one config, so that one :class:`ConfigError` lists them all::

        problems = Problems("x.yaml")
        with problems.collect():
            check_something()          # a ConfigError raised here is recorded, not raised
        problems.raise_if_any()
    """

    def __init__(self, source: str) -> None:
        self.source = source
        self.lines: list[str] = []

    def __len__(self) -> int:
        return len(self.lines)

    def add(self, line: str) -> None:
        if line not in self.lines:
            self.lines.append(line)

    @contextlib.contextmanager
    def collect(self) -> Iterator[None]:
        try:
            yield
        except ConfigError as err:
            for line in err.problems:
                self.add(line)

    def raise_if_any(self) -> None:
        if not self.lines:
            return
        if len(self.lines) == 1:
            raise ConfigError(self.lines[0])
        body = "\n".join(f"  {line}" for line in self.lines)
        raise ConfigError(f"{self.source}: {len(self.lines)} problems:\n{body}", self.lines)


class _Required:
    def __repr__(self) -> str:
        return "REQUIRED"


REQUIRED = _Required()

#: Scalar kinds a :class:`Field` can have; ``list[...]`` of any of them, and ``per_device[...]``
#: (either one value for every device, or a mapping ``{cpu: ..., cuda: ...}``).
_SCALARS = ("int", "float", "bool", "str", "any")
_NOUNS = {"int": "an integer", "float": "a number", "bool": "true or false", "str": "a string", "any": "a value"}


@dataclass(frozen=True)
class Field:
    """One key: its ``kind``, default, and what values are allowed: ``choices``, a range
    (``minimum``/``maximum``, ``min_open``/``max_open`` exclude the end), a regex ``pattern``
    the whole string must match, or a predicate ``test`` (then ``expect`` says in words what
    it allows)."""

    kind: str
    default: Any = REQUIRED
    choices: tuple | None = None
    minimum: float | None = None
    nullable: bool = False
    doc: str = ""
    maximum: float | None = None
    min_open: bool = False
    max_open: bool = False
    pattern: str | None = None
    test: Callable[[Any], bool] | None = None
    expect: str = ""


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


def _range(f: Field) -> str:
    lo, hi = f.minimum, f.maximum
    if lo is not None and hi is not None:
        return f"in {'(' if f.min_open else '['}{lo}, {hi}{')' if f.max_open else ']'}"
    if lo is not None:
        return f"{'>' if f.min_open else '>='} {lo}"
    if hi is not None:
        return f"{'<' if f.max_open else '<='} {hi}"
    return ""


def describe(kind: str, f: Field) -> str:
    """What ``f`` allows, in words (``an integer >= 1``, ``one of 'a', 'b' or null`` ...)."""
    if f.expect:
        text = f.expect
    elif kind.startswith("list[") and kind.endswith("]"):
        text = f"a list, each item {describe(kind[5:-1], replace(f, nullable=False))}"
    elif f.choices is not None:
        text = "one of " + ", ".join(repr(c) for c in f.choices)
    else:
        text = " ".join(t for t in (_NOUNS.get(kind, kind), _range(f)) if t)
        if f.pattern:
            text += f" matching {f.pattern}"
    return text + (" or null" if f.nullable and not f.expect else "")


def _check_scalar(kind: str, value: Any, f: Field, where: str, source: str) -> Any:
    def bad(expected: str | None = None) -> ConfigError:
        return ConfigError(f"{source}: {where}={value!r} is invalid: expected {expected or describe(kind, f)}")

    if value is None:
        if f.nullable:
            return None
        raise bad(f"{describe(kind, f)} (null is not allowed)")
    if isinstance(value, float) and not math.isfinite(value):  # YAML's .nan/.inf: one rule for every float
        raise bad(f"a finite value: {describe(kind, f)}")
    if kind == "int":
        if isinstance(value, bool) or not isinstance(value, int):
            raise bad()
    elif kind == "float":
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise bad()
        value = float(value)
    elif kind == "bool":
        if not isinstance(value, bool):
            raise bad()
    elif kind == "str":
        if not isinstance(value, str):
            raise bad()
    if f.choices is not None and value not in f.choices:
        raise bad()
    if f.minimum is not None and (value < f.minimum or (f.min_open and value == f.minimum)):
        raise bad()
    if f.maximum is not None and (value > f.maximum or (f.max_open and value == f.maximum)):
        raise bad()
    if f.pattern is not None and not re.fullmatch(f.pattern, value):
        raise bad()
    if f.test is not None and not f.test(value):
        raise bad()
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
            raise ConfigError(f"{source}: {where}={value!r} is invalid: expected {describe(kind, f)}")
        item = replace(f, kind=inner, nullable=False)
        problems = Problems(source)
        out = []
        for i, v in enumerate(value):
            with problems.collect():
                out.append(_check_scalar(inner, v, item, _where(where, i), source))
        problems.raise_if_any()
        return out
    if kind not in _SCALARS:  # pragma: no cover - schema author error
        raise TypeError(f"unknown field kind {kind!r}")
    return _check_scalar(kind, value, f, where, source)


def check_value(value: Any, f: Field, where: str, source: str) -> Any:
    """Check one value against ``f``; returns it normalised (e.g. an int given for a float)."""
    return _check_value(f.kind, value, f, where, source)


def validate(data: Any, schema: Mapping[str, Any], *, source: str = "config", path: str = "",
             partial: bool = False, problems: Problems | None = None) -> dict:
    """Check ``data`` against ``schema`` and return a new dict with defaults filled in
    (``partial``: only the keys ``data`` gives). Every problem is reported in one
    :class:`ConfigError`; given ``problems``, they are added there instead (and the keys
    with a bad value are left out of the result)."""
    own = problems is None
    problems = Problems(source) if problems is None else problems
    out = _validate(data, schema, source, path, partial, problems)
    if own:
        problems.raise_if_any()
    return out


def _validate(data: Any, schema: Mapping[str, Any], source: str, path: str, partial: bool,
              problems: Problems) -> dict:
    if data is None:
        data = {}
    if not isinstance(data, Mapping):
        if path:
            problems.add(f"{source}: {path}={data!r} is invalid: expected a mapping of keys ({', '.join(schema)})")
        else:
            problems.add(f"{source}: the config must be a mapping of keys ({', '.join(schema)}), got {type(data).__name__}")
        return {}
    for k in data:
        if k not in schema:
            problems.add(f"{source}: unknown key '{_where(path, k)}'; valid keys"
                         f"{' of ' + path if path else ''}: {', '.join(schema)}")
    out: dict = {}
    for key, spec in schema.items():
        where = _where(path, key)
        if isinstance(spec, Section):
            if spec.many:
                items = data.get(key, spec.default if spec.default is not None else [])
                if not isinstance(items, list):
                    problems.add(f"{source}: {where}={items!r} is invalid: expected a list of mappings")
                    continue
                out[key] = [_validate(it, spec.fields, source, _where(where, i), False, problems)
                            for i, it in enumerate(items)]
            else:
                out[key] = _validate(data.get(key, {}), spec.fields, source, where, spec.partial, problems)
            continue
        if key not in data:
            if partial:
                continue
            if spec.default is REQUIRED:
                problems.add(f"{source}: missing required key '{where}'")
                continue
            default = copy.deepcopy(spec.default)
            # defaults go through the same normalisation (e.g. per_device values become mappings)
            out[key] = None if default is None else _check_value(spec.kind, default, spec, where, "schema default")
            continue
        with problems.collect():
            out[key] = _check_value(spec.kind, data[key], spec, where, source)
    return out


def load_yaml(path: str | Path, empty: str | None = None) -> Any:
    """The YAML document at ``path`` (strict: see :class:`StrictLoader`). ``empty``: the
    message when the file holds no document (None: an empty file loads as None)."""
    path = Path(path)
    if not path.is_file():
        raise ConfigError(f"config file not found: {path}")
    try:
        data = parse_yaml(path.read_text())
    except _Refused as exc:
        raise ConfigError(f"{path}: {exc}") from None
    except yaml.YAMLError as exc:
        raise ConfigError(f"{path}: not valid YAML: {exc}") from None
    if data is None and empty is not None:
        raise ConfigError(f"{path}: {empty}")
    return data


def parse_override(item: str) -> tuple[list[str], Any]:
    """``"a.b.c=VALUE"`` -> ``(["a", "b", "c"], value parsed as YAML)``."""
    if "=" not in item:
        raise ConfigError(f"--set {item!r}: expected KEY=VALUE, e.g. --set trainer.max_epochs=3")
    key, raw = item.split("=", 1)
    key = key.strip()
    if not key:
        raise ConfigError(f"--set {item!r}: empty key; expected KEY=VALUE, e.g. --set trainer.max_epochs=3")
    parts = key.split(".")
    if any(not p.strip() for p in parts):
        raise ConfigError(f"--set {item!r}: key {key!r} has an empty part; keys are dotted paths, "
                          "e.g. trainer.max_epochs or cells.0.trainer.max_epochs")
    try:
        value = parse_yaml(raw)
    except yaml.YAMLError as exc:
        raise ConfigError(f"--set {item!r}: value is not valid YAML: {exc}") from None
    return [p.strip() for p in parts], value


def set_path(data: dict, parts: list[str], value: Any, item: str) -> list[str]:
    """Set ``value`` at the dotted path ``parts`` in ``data`` (creating missing sections).
    In a list a part is an index (``cells.2``) or ``*`` (every item). Returns the dotted
    paths set."""
    done: list[str] = []

    def walk(node: Any, i: int, trail: list[str]) -> None:
        here = ".".join(trail) or "the config"
        p, last = parts[i], i == len(parts) - 1
        if isinstance(node, list):
            if p == "*":
                if not node:
                    raise ConfigError(f"--set {item!r}: '{here}' is empty: '*' matches nothing")
                keys: list = list(range(len(node)))
            elif p.isdigit() and int(p) < len(node):
                keys = [int(p)]
            else:
                valid = f"0..{len(node) - 1}" if node else "none: the list is empty"
                raise ConfigError(f"--set {item!r}: '{'.'.join(trail + [p])}': {p!r} is not an index of "
                                  f"{here}; valid: {valid}, or '*' for every item")
        elif isinstance(node, dict):
            if p == "*":
                raise ConfigError(f"--set {item!r}: '{'.'.join(trail + [p])}': '*' stands for every item "
                                  f"of a list, and '{here}' is a section")
            keys = [p]
        else:
            raise ConfigError(f"--set {item!r}: '{here}' is not a section")
        for k in keys:
            path = trail + [str(k)]
            if last:
                node[k] = copy.deepcopy(value)
                done.append(".".join(path))
                continue
            child = node[k] if isinstance(node, list) else node.get(k)
            if child is None:
                child = node[k] = {}
            if not isinstance(child, (dict, list)):
                raise ConfigError(f"--set {item!r}: '{'.'.join(path)}' is not a section (it is {child!r})")
            walk(child, i + 1, path)

    walk(data, 0, [])
    return done


def apply_overrides(data: Any, overrides: list[str] | tuple[str, ...]) -> dict:
    """Apply ``key.sub=value`` overrides (value parsed as YAML), left to right, to a raw
    config mapping; every bad override is reported in one :class:`ConfigError`."""
    data = copy.deepcopy(data) if data else {}
    problems = Problems("--set")
    for item in overrides:
        with problems.collect():
            parts, value = parse_override(item)
            set_path(data, parts, value, item)
    problems.raise_if_any()
    return data
