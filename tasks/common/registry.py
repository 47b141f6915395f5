"""Registries of tasks, datasets and models.

The runner knows tasks only through :data:`TASKS`. A task package registers itself on
import (``tasks/<domain>/__init__.py``); :func:`get_task` imports the known task packages
lazily so that ``import tasks`` stays cheap. Every lookup that fails lists the valid names.

What a parameter may be set to (checked by the suite config before any cell runs) comes from
:func:`param_bounds`: an explicit :class:`Bounds` a registration declares (``bounds=`` on
:class:`ModelSpec` / :class:`DatasetSpec`, ``module_bounds=`` on :class:`Task`), else a rule
from the parameter's name and registered default (see :func:`param_bounds`).
"""

from __future__ import annotations

import functools
import importlib
from dataclasses import dataclass, field
from typing import Any, Callable, Generic, Iterator, Mapping, TypeVar

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


@dataclass(frozen=True)
class Bounds:
    """What one parameter may be. ``kind``: ``"int"``, ``"float"``, ``"bool"``, ``"str"``,
    ``"list[int]"`` ... or ``"any"`` (None: the type of the registered default); ``choices``:
    the allowed values; ``minimum``/``maximum``: a range (``min_open``/``max_open``: the end
    itself excluded); ``nullable``: whether ``null`` is allowed (None: only if the default is)."""

    kind: str | None = None
    choices: tuple | None = None
    minimum: float | None = None
    maximum: float | None = None
    min_open: bool = False
    max_open: bool = False
    nullable: bool | None = None


_UNIT = Bounds(minimum=0, maximum=1)


@functools.lru_cache(maxsize=1)
def _named_bounds() -> dict[str, Bounds]:
    """Parameters whose name means the same thing in every domain. Imported lazily: the
    choices live beside the code that accepts them (attn_core, the shared task module)."""
    import attn_core
    from attn_core.graph import GRAPH_SCORES
    from tasks.common.module import OPTIMIZERS, SCHEDULERS

    patterns = getattr(attn_core, "PATTERNS", None)
    return {
        "optimizer": Bounds(choices=tuple(OPTIMIZERS)),
        "scheduler": Bounds(choices=tuple(SCHEDULERS)),
        "pattern": Bounds(choices=tuple(patterns) if patterns else None),
        "score": Bounds(choices=tuple(GRAPH_SCORES)),
        "lr": Bounds(minimum=0, min_open=True),
        "weight_decay": Bounds(minimum=0),
        "label_smoothing": Bounds(minimum=0, maximum=1, max_open=True),
        "warmup_steps": Bounds(minimum=0),
        "window": Bounds(kind="int", minimum=0, nullable=True),  # 0: each position sees itself only
        "radius": Bounds(minimum=0),  # 0: each patch sees itself only
        "align_sentences": Bounds(minimum=0),  # 0: no alignment pictures
        "max_tokens": Bounds(kind="int", minimum=1, nullable=True),  # null: batches by count only
        # vision: exactly one of patch_size (pixels) and patch_grid (patches per side), the other null
        "patch_size": Bounds(kind="int", minimum=1, nullable=True),
        "patch_grid": Bounds(kind="int", minimum=1, nullable=True),
    }


def _is_probability(name: str) -> bool:
    return (name == "dropout" or name.endswith("_dropout") or name.startswith("p_") or name.endswith("_p")
            or "fraction" in name)


def param_bounds(name: str, default: Any, declared: Mapping[str, Bounds] | None = None) -> Bounds:
    """What parameter ``name`` (registered default ``default``) may be set to.

    The rule, first match wins:

    1. a :class:`Bounds` the registration declares for ``name``;
    2. a parameter whose name means the same in every domain (``optimizer``, ``scheduler``,
       ``pattern``, ``score``, ``lr`` > 0, ``weight_decay`` >= 0, ``window`` >= 0 or null ...);
    3. probability-like floats (``dropout``, ``*_dropout``, ``p_*``, ``*_p``, ``*fraction*``)
       lie in [0, 1]; names ending in ``noise`` are >= 0;
    4. an int default >= 1 is a size or count: >= 1; an int default of 0 (a seed, an offset, a
       count that may be empty) is >= 0; a list of ints all >= 1 keeps its items >= 1;
    5. otherwise only the type of the default is checked (a ``None`` default: anything).
    """
    if declared and name in declared:
        return declared[name]
    named = _named_bounds()
    if name in named:
        return named[name]
    if isinstance(default, float) and _is_probability(name):
        return _UNIT
    if isinstance(default, (int, float)) and not isinstance(default, bool) and name.endswith("noise"):
        return Bounds(minimum=0)
    if isinstance(default, int) and not isinstance(default, bool) and default >= 0:
        return Bounds(minimum=min(default, 1))
    if (isinstance(default, list) and default and all(isinstance(v, int) and not isinstance(v, bool) for v in default)
            and min(default) >= 1):
        return Bounds(minimum=1)
    return Bounds()


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
    #: explicit limits of some ``params`` (others follow :func:`param_bounds`' rule)
    bounds: Mapping[str, Bounds] = field(default_factory=dict)

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
    #: explicit limits of some ``params`` (others follow :func:`param_bounds`' rule)
    bounds: Mapping[str, Bounds] = field(default_factory=dict)


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
    #: explicit limits of some ``module_params`` (others follow :func:`param_bounds`' rule)
    module_bounds: Mapping[str, Bounds] = field(default_factory=dict)

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
