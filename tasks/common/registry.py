"""Registries of tasks, datasets and models.

The runner knows tasks only through :data:`TASKS`. A task package registers itself on
import (``tasks/<domain>/__init__.py``); :func:`get_task` imports the known task packages
lazily so that ``import tasks`` stays cheap. Every lookup that fails lists the valid names.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass, field
from typing import Any, Callable, Generic, Iterator, TypeVar

FAMILIES = ("attention", "rnn", "cnn", "other")

#: Task packages, in report order. A package listed here registers a :class:`Task` on import.
TASK_PACKAGES = {
    "graphs": "tasks.graphs",
    "pos_tagging": "tasks.pos_tagging",
    "translation": "tasks.translation",
    "speech": "tasks.speech",
    "vision": "tasks.vision",
}

T = TypeVar("T")


class UnknownNameError(KeyError, ValueError):
    """A name that is not in a registry; the message lists the valid names."""

    def __str__(self) -> str:  # KeyError quotes its message; print it plainly
        return str(self.args[0])


class Registry(Generic[T]):
    """Name -> entry, failing loudly with the valid names."""

    def __init__(self, kind: str) -> None:
        self.kind = kind
        self._items: dict[str, T] = {}

    def register(self, name: str, item: T) -> T:
        if name in self._items:
            raise ValueError(f"{self.kind} {name!r} is registered twice")
        self._items[name] = item
        return item

    def get(self, name: str) -> T:
        if name not in self._items:
            valid = ", ".join(sorted(self._items)) or "(none)"
            raise UnknownNameError(f"unknown {self.kind} {name!r}; valid: {valid}")
        return self._items[name]

    def __contains__(self, name: object) -> bool:
        return name in self._items

    def __iter__(self) -> Iterator[str]:
        return iter(self._items)

    def items(self):
        return self._items.items()

    def names(self) -> list[str]:
        return list(self._items)


@dataclass(frozen=True)
class ModelSpec:
    """A network registered by name. ``build(data_info, **params)`` returns an ``nn.Module``;
    ``params`` are the defaults a config may override (unknown keys are errors)."""

    name: str
    family: str
    build: Callable[..., Any]
    params: dict[str, Any] = field(default_factory=dict)
    pattern: str | None = None  # attention pattern ("full", "truncated", "graph") for attention models
    description: str = ""

    def __post_init__(self) -> None:
        if self.family not in FAMILIES:
            raise ValueError(f"model {self.name!r}: family={self.family!r}; valid: {', '.join(FAMILIES)}")


@dataclass(frozen=True)
class DatasetSpec:
    """A dataset registered by name. ``build(data_dir, cache_dir, seed, **params)`` returns a
    LightningDataModule exposing ``info`` (a dict the model builders read, e.g. sizes, classes)
    and ``checksum()`` (a short string identifying the exact data used)."""

    name: str
    build: Callable[..., Any]
    params: dict[str, Any] = field(default_factory=dict)
    synthetic: bool = False
    description: str = ""


@dataclass
class Task:
    """One domain. ``make_module(net, data_info, **train_params)`` returns the task's
    LightningModule around a network; ``metric`` is the headline test metric (logged as
    ``val/<metric>`` and ``test/<metric>``) and ``mode`` says whether higher is better."""

    name: str
    metric: str
    mode: str  # "max" or "min"
    make_module: Callable[..., Any]
    module_params: dict[str, Any] = field(default_factory=dict)
    datasets: Registry[DatasetSpec] = field(default_factory=lambda: Registry("dataset"))
    models: Registry[ModelSpec] = field(default_factory=lambda: Registry("model"))
    description: str = ""

    def __post_init__(self) -> None:
        if self.mode not in ("max", "min"):
            raise ValueError(f"task {self.name!r}: mode={self.mode!r}; valid: 'max', 'min'")
        self.datasets.kind = f"dataset of task {self.name!r}"
        self.models.kind = f"model of task {self.name!r}"


TASKS: Registry[Task] = Registry("task")


def register_task(task: Task) -> Task:
    return TASKS.register(task.name, task)


def available_tasks() -> list[str]:
    """Task packages that exist in this checkout (imported, so they registered)."""
    for name, pkg in TASK_PACKAGES.items():
        if name not in TASKS:
            try:
                importlib.import_module(pkg)
            except ModuleNotFoundError as err:
                if err.name is None or not pkg.startswith(err.name):
                    raise  # the package exists but one of its imports is missing: say so
    return TASKS.names()


def get_task(name: str) -> Task:
    available_tasks()
    return TASKS.get(name)
