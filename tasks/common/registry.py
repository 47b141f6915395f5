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


def _named_bounds() -> dict[str, Bounds]:
    """Parameters whose name means the same thing in every domain. Imported lazily: the
    choices live beside the code that accepts them (attn_core, the shared task module).
    ``pattern``'s choices are read from the registry at every call, so a pattern a plug-in
    registers later is accepted."""
    import attn_core

    return {**_static_named_bounds(), "pattern": Bounds(choices=tuple(attn_core.PATTERNS))}


@functools.lru_cache(maxsize=1)
def _static_named_bounds() -> dict[str, Bounds]:
    """The part of :func:`_named_bounds` that never changes after import (cached)."""
    from attn_core.graph import GRAPH_SCORES
    from tasks.common.module import OPTIMIZERS, SCHEDULERS

    return {
        "optimizer": Bounds(choices=tuple(OPTIMIZERS)),
        "scheduler": Bounds(choices=tuple(SCHEDULERS)),
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
    #: checks the resolved ``params`` together (e.g. that the pattern supports what the model
    #: needs), raising a one-line ``ValueError``; the suite config runs it before any cell
    check: Callable[[dict[str, Any]], None] | None = None
    #: parameters added after records were first written: left out of a cell's resolved config
    #: (and so of its id) while they keep their registered default (an empty mapping counts as
    #: a ``None`` default), so existing cell ids stay valid
    omit_when_default: tuple[str, ...] = ()
    #: the ``params`` key naming the attention pattern (vision's ViT: ``"attention"``)
    pattern_param: str = "pattern"
    #: whether ``models: all`` includes it (the attention-variant presets are named explicitly)
    in_all: bool = True

    def __post_init__(self) -> None:
        if self.family not in FAMILIES:
            raise ValueError(f"model {self.name!r}: family={self.family!r}; valid: {', '.join(FAMILIES)}")
        unknown = [k for k in self.omit_when_default if k not in self.params]
        if unknown:
            raise ValueError(f"model {self.name!r}: omit_when_default names {unknown}, not among its params")

    def pattern_for(self, params: Mapping[str, Any]) -> str | None:
        """The attention pattern of this model with resolved ``params``: the value of
        :attr:`pattern_param` when it names a registered pattern, else the registered
        :attr:`pattern` (``None`` for a model without attention)."""
        if self.pattern is None:
            return None
        value = params.get(self.pattern_param)
        if isinstance(value, str):
            import attn_core

            if value in attn_core.PATTERNS:
                return value
        return self.pattern

    def problem(self, params: dict[str, Any]) -> str | None:
        """What :attr:`check` finds wrong with the resolved ``params``, on one line, or ``None``."""
        if self.check is None:
            return None
        try:
            self.check(params)
        except (ValueError, TypeError) as err:
            return " ".join(str(err).split())
        return None

    def without_defaults(self, params: Mapping[str, Any]) -> dict[str, Any]:
        """``params`` less the :attr:`omit_when_default` keys that keep their default."""
        def default(key: str) -> bool:
            value, dflt = params[key], self.params[key]
            return value == dflt or (dflt is None and isinstance(value, Mapping) and not value)

        return {k: v for k, v in params.items() if not (k in self.omit_when_default and default(k))}


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
