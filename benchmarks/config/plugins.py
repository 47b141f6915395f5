"""Plug-ins: code outside attnbench that registers attention patterns, models, datasets or tasks.

A plug-in is found three ways, and every process (the driver and each worker) loads the same:

* an installed package's entry point in the group :data:`ENTRY_POINT_GROUP` (``attnbench.plugins``),
  discovered at start-up; the entry point is a module (importing it registers, and its
  ``register()`` is called if it has one) or a callable ``register()``::

      [project.entry-points."attnbench.plugins"]
      cosine = "attnbench_plugin_example"

* ``--plugin MODULE`` on the command line, or ``plugins: [MODULE, ...]`` in a suite config;
* ``$ATTNBENCH_PLUGINS`` (comma-separated modules): how the driver hands the last two to its
  workers (local pool, ``attnbench cell``, Slurm, Ray).

A plug-in that fails to load is one line naming it (:class:`PluginError`). :func:`origin` says
where a registered name comes from, for ``attnbench list``.
"""

from __future__ import annotations

import functools
import importlib
import importlib.metadata
import os
import types
from dataclasses import dataclass
from typing import Any, Callable

__all__ = ["ENTRY_POINT_GROUP", "PLUGINS_ENV", "PluginError", "Plugin", "load_plugins", "loaded_plugins", "plugins_problem", "origin",
           "BUILTIN"]

ENTRY_POINT_GROUP = "attnbench.plugins"
PLUGINS_ENV = "ATTNBENCH_PLUGINS"  # comma-separated modules imported before a cell runs
BUILTIN = "built-in"
_BUILTIN_PACKAGES = ("attn_core", "tasks", "benchmarks")


class PluginError(RuntimeError):
    """A plug-in that could not be loaded; the message is one line naming it."""


@dataclass(frozen=True)
class Plugin:
    """One loaded plug-in: ``label`` (the module, or ``entry point NAME``), the module its code
    lives in, and how it was found (``entry point``, ``--plugin/config``, ``$ATTNBENCH_PLUGINS``)."""

    label: str
    module: str
    source: str


_LOADED: dict[str, Plugin] = {}  # key (module or entry point value) -> plug-in, in load order


def _one_line(err: BaseException) -> str:
    return " ".join(f"{type(err).__name__}: {err}".split())


def _run(obj: Any, label: str) -> None:
    """A loaded plug-in object: a module (its ``register()`` if any) or a callable ``register()``."""
    fn: Callable[[], Any] | None = getattr(obj, "register", None) if isinstance(obj, types.ModuleType) else obj
    if fn is None:
        return
    if not callable(fn):
        raise PluginError(f"plug-in {label} is neither a module nor a callable register(): {obj!r}")
    try:
        fn()
    except Exception as err:  # noqa: BLE001 - a broken plug-in is one clear line
        raise PluginError(f"plug-in {label}: register() failed: {_one_line(err)}") from None


def _load_module(name: str, source: str) -> None:
    if name in _LOADED:
        return
    try:
        mod = importlib.import_module(name)
    except Exception as err:  # noqa: BLE001
        raise PluginError(f"plug-in {name!r} could not be imported: {_one_line(err)}") from None
    _run(mod, repr(name))
    _LOADED[name] = Plugin(name, name, source)


def _entry_points() -> list[importlib.metadata.EntryPoint]:
    if os.environ.get("ATTNBENCH_NO_ENTRY_POINTS"):
        return []
    return sorted(importlib.metadata.entry_points(group=ENTRY_POINT_GROUP), key=lambda ep: (ep.name, ep.value))


def _load_entry_point(ep: importlib.metadata.EntryPoint) -> None:
    if ep.value in _LOADED:
        return
    dist = getattr(getattr(ep, "dist", None), "name", None)
    label = f"entry point {ep.name!r} ({ep.value}" + (f" of {dist})" if dist else ")")
    try:
        obj = ep.load()
    except Exception as err:  # noqa: BLE001
        raise PluginError(f"plug-in {label} could not be loaded: {_one_line(err)}") from None
    _run(obj, label)
    _LOADED[ep.value] = Plugin(f"entry point {ep.name!r}", ep.module, "entry point" + (f" of {dist}" if dist else ""))


def load_plugins(extra: list[str] | tuple[str, ...] = ()) -> list[str]:
    """Load every plug-in: the installed entry points of :data:`ENTRY_POINT_GROUP`, the modules
    named in ``$ATTNBENCH_PLUGINS`` and ``extra`` (``--plugin``, a config's ``plugins:``). Each
    is loaded once per process. The modules are added to ``$ATTNBENCH_PLUGINS`` so that worker
    processes load them too. Returns the module names; raises :class:`PluginError`."""
    for ep in _entry_points():
        _load_entry_point(ep)
    env = [n.strip() for n in os.environ.get(PLUGINS_ENV, "").split(",") if n.strip()]
    names = list(dict.fromkeys(env + [str(n).strip() for n in extra if str(n).strip()]))
    for name in names:
        _load_module(name, PLUGINS_ENV if name in env else "--plugin/config")
    if names:  # worker processes (local pool, attnbench cell, Slurm, Ray) import the same ones
        os.environ[PLUGINS_ENV] = ",".join(names)
    return names


def plugins_problem(names: list[str] | tuple[str, ...]) -> str | None:
    """:func:`load_plugins` with ``names`` (a config's ``plugins:``): the one-line problem, or ``None``."""
    try:
        load_plugins(names)
    except PluginError as err:
        return str(err)
    return None


def loaded_plugins() -> list[Plugin]:
    """The plug-ins this process loaded, in load order."""
    return list(_LOADED.values())


def _module_of(obj: Any) -> str | None:
    """The module that defines ``obj`` (a partial: the first of its function and callable
    arguments that is not attnbench's own, so a plug-in's class under a shared builder counts)."""
    if isinstance(obj, functools.partial):
        mods = [_module_of(obj.func)] + [_module_of(a) for a in obj.args if callable(a)]
        mods = [m for m in mods if m]
        return next((m for m in mods if not _builtin(m)), mods[0] if mods else None)
    return getattr(obj, "__module__", None)


def _builtin(module: str) -> bool:
    return module.split(".")[0] in _BUILTIN_PACKAGES


def origin(obj: Any) -> str:
    """Where the registered ``obj`` (a pattern function, a model's or dataset's ``build``, a
    task's ``make_module``) comes from: ``built-in``, ``plug-in <label>`` (a loaded plug-in
    whose module holds it) or ``module <name>`` (registered by other code)."""
    module = _module_of(obj)
    if not module or _builtin(module):
        return BUILTIN
    for p in _LOADED.values():
        top = p.module.split(".")[0]
        if module == p.module or module.startswith(p.module + ".") or module.split(".")[0] == top:
            return f"plug-in {p.label}"
    return f"module {module}"
