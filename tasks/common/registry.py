"""Registries of tasks, datasets and models.

The runner knows tasks only through :data:`TASKS`. A task package registers itself on
import (``tasks/<domain>/__init__.py``); :func:`get_task` imports the known task packages
lazily so that ``import tasks`` stays cheap. Every lookup that fails lists the valid names.

What a parameter may be set to (checked by the suite config before any cell runs) comes from
:func:`param_bounds`: an explicit :class:`Bounds` a registration declares (``bounds=`` on
:class:`ModelSpec` / :class:`DatasetSpec`, ``module_bounds=`` on :class:`Task`), else a rule
from the parameter's name and registered default (see :func:`param_bounds`, defined in
:mod:`tasks.common.bounds` and re-exported here).

Models are registered by decorator (timm's ``@register_model``): the builder's name, keyword-only
defaults and first docstring paragraph are the model's name, parameters and description. A preset
is the same builder under another name with other defaults (:func:`register_preset`).

A domain collects what its model modules registered with :func:`registered_models` (:func:`define_task`
does it); a plug-in adds a model to an existing task with ``task=``. A parameter renamed after
records were written is declared with ``renamed={old: new}`` (:mod:`tasks.common.params`): the
old name still builds the model, and cell ids keep hashing the old name.
"""

from __future__ import annotations

import copy
import dataclasses
import functools
import importlib
import inspect
import warnings
from dataclasses import dataclass, field
from types import ModuleType
from typing import Any, Callable, Generic, Iterable, Iterator, Mapping, TypeVar

# Bounds, param_bounds and SEED_MAX live in tasks.common.bounds; re-exported here for existing importers
from tasks.common.bounds import SEED_MAX, Bounds, param_bounds  # noqa: F401
from tasks.common.params import check_renamed, current_names
from tasks.common.suggest import did_you_mean

FAMILIES = ("attention", "rnn", "cnn", "other")
#: family -> its kinds (the first is the default); a family not listed has none. Recurrence is
#: ``classic`` (LSTM/GRU cells stepped over L) or ``modern`` (parallel scans: minGRU, S4D, Mamba-2, LRU)
KINDS = {"rnn": ("classic", "modern")}

#: Task packages, in report order. A package listed here registers a :class:`Task` on import.
TASK_PACKAGES = {
    "graphs": "tasks.graphs",
    "pos_tagging": "tasks.pos_tagging",
    "translation": "tasks.translation",
    "speech": "tasks.speech",
    "vision": "tasks.vision",
}
#: heavy modules a domain's cells import lazily (not at package import, to keep ``import tasks.X``
#: cheap): a warm parent (the local pool's forkserver) imports them once for the runs that have the domain
TASK_WARM_MODULES = {"graphs": ("tasks.graphs.warm",)}

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
            hint = did_you_mean(name, self._items)  # "did you mean ...?" when a valid name is near
            raise UnknownNameError(f"unknown {self.kind} {name!r}; {hint + ' ' if hint else ''}valid: {valid}")
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
    ``params`` are the defaults a config may override (unknown keys are errors). Built-in models
    make theirs with :func:`register_model` and :func:`register_preset`."""

    name: str
    family: str
    build: Callable[..., Any]
    params: dict[str, Any] = field(default_factory=dict)
    pattern: str | None = None  # attention pattern ("full", "truncated", "graph") for attention models
    description: str = ""
    #: explicit limits of some ``params`` (others follow :func:`param_bounds`' rule)
    bounds: Mapping[str, Bounds] = field(default_factory=dict)
    #: checks the resolved ``params`` together (one-line ``ValueError``), before any cell runs
    check: Callable[[dict[str, Any]], None] | None = None
    #: parameters added after records were written: out of a cell's resolved config (and id) while
    #: at their default (an empty mapping counts as ``None``), so existing cell ids stay valid
    omit_when_default: tuple[str, ...] = ()
    #: the ``params`` key naming the attention pattern (vision's ViT: ``"attention"``)
    pattern_param: str = "pattern"
    #: whether ``models: all`` includes it (attention-variant presets, modern_rnn: named explicitly)
    in_all: bool = True
    #: renamed parameters, old -> new: the old name is a deprecated alias that cell ids still hash
    renamed: Mapping[str, str] = field(default_factory=dict)
    #: the model's kind within its family (:data:`KINDS`; None for a family without kinds)
    kind: str | None = None

    def __post_init__(self) -> None:
        if self.family not in FAMILIES:
            raise ValueError(f"model {self.name!r}: family={self.family!r}; valid: {', '.join(FAMILIES)}")
        kinds = KINDS.get(self.family, ())
        if self.kind is None and kinds:
            object.__setattr__(self, "kind", kinds[0])
        elif self.kind is not None and self.kind not in kinds:
            valid = ", ".join(kinds) if kinds else f"none for family {self.family!r}"
            raise ValueError(f"model {self.name!r}: kind={self.kind!r}; valid: {valid}")
        unknown = [k for k in self.omit_when_default if k not in self.params]
        if unknown:
            raise ValueError(f"model {self.name!r}: omit_when_default names {unknown}, not among its params")
        check_renamed(self.name, self.params, self.renamed)

    def current_names(self, params: Mapping[str, Any]) -> tuple[dict[str, Any], list[str]]:
        """``params`` under the current names and the deprecated names used (:mod:`tasks.common.params`)."""
        return current_names(params, self.renamed, what=f"model {self.name!r}")

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
        """What is wrong with ``params`` together (heads vs width, then :attr:`check`), one line, or None."""
        heads, width = params.get("num_heads"), params.get("d_model")
        if type(heads) is int and type(width) is int and heads > 0 and width % heads:
            return (f"num_heads={heads} does not divide d_model={width} (each head gets d_model / num_heads "
                    f"dimensions): pick num_heads among {[h for h in range(1, width + 1) if width % h == 0][:8]}")
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
    #: parameters added after records were written: out of a cell's resolved config (and id) while
    #: at their default, so existing cell ids stay valid (as :attr:`ModelSpec.omit_when_default`)
    omit_when_default: tuple[str, ...] = ()

    def without_defaults(self, params: Mapping[str, Any]) -> dict[str, Any]:
        """``params`` less the :attr:`omit_when_default` keys that keep their default."""
        return {k: v for k, v in params.items() if not (k in self.omit_when_default and v == self.params.get(k))}


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


def _import_task(name: str) -> None:
    """Import the built-in task package ``name`` (it registers itself) unless it is registered."""
    pkg = TASK_PACKAGES.get(name)
    if pkg is None or name in TASKS:
        return
    try:
        importlib.import_module(pkg)
    except ModuleNotFoundError as err:
        if err.name is None or not pkg.startswith(err.name):
            raise  # the package exists but one of its imports is missing: say so


def available_tasks() -> list[str]:
    """Every task: the built-in packages that exist in this checkout (imported, so they
    registered), in report order, then the tasks plug-ins registered."""
    for name in TASK_PACKAGES:
        _import_task(name)
    names = TASKS.names()
    return [n for n in TASK_PACKAGES if n in names] + [n for n in names if n not in TASK_PACKAGES]


def get_task(name: str) -> Task:
    """The task ``name``, importing its own package only (a config of one domain never imports
    the other four); an unknown name imports them all, so that its error lists every choice."""
    _import_task(name)
    if name not in TASKS:
        available_tasks()
    return TASKS.get(name)


# --------------------------------------------------------------------------- models by decorator
#: module name -> {model name: spec}, in registration order (timm's ``_module_to_models``)
_MODULE_MODELS: dict[str, dict[str, ModelSpec]] = {}

B = TypeVar("B", bound=Callable[..., Any])


def builder_params(fn: Callable[..., Any]) -> dict[str, Any]:
    """The parameters of model builder ``fn``: its keyword-only arguments with their defaults
    (copies), in order. ``fn`` takes ``data_info`` as its one positional argument; every
    keyword-only argument needs a default (it is what a config may leave out)."""
    params: dict[str, Any] = {}
    positional = 0
    for p in inspect.signature(fn).parameters.values():
        if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD):
            positional += 1
        elif p.kind is p.KEYWORD_ONLY:
            if p.default is p.empty:
                raise TypeError(f"model builder {fn.__name__!r}: keyword-only {p.name!r} needs a default")
            params[p.name] = copy.deepcopy(p.default)
        else:
            raise TypeError(f"model builder {fn.__name__!r}: *{p.name} is not allowed; name every parameter")
    if positional != 1:
        raise TypeError(f"model builder {fn.__name__!r}: expected one positional argument (data_info), "
                        f"then keyword-only parameters; got {positional} positional")
    return params


class _Build(functools.partial):
    """:attr:`ModelSpec.build` of a registered builder: ``partial(_build_model, fn, name, renamed,
    **preset)`` that also takes the deprecated names of ``renamed`` (old -> new), translated
    before the preset's defaults are merged (so a caller's old name wins over a preset default)."""

    def __call__(self, /, *args: Any, **params: Any) -> Any:
        return super().__call__(*args, **current_names(params, self.args[2], what=f"model {self.args[1]!r}")[0])


def _build_model(fn: Callable[..., Any], name: str, renamed: Mapping[str, str], data_info: Any, /,
                 **params: Any) -> Any:
    """``fn(data_info, **params)``, an unknown parameter a ``ValueError`` that lists the valid ones."""
    valid = builder_params(fn)
    unknown = sorted(set(params) - set(valid))
    if unknown:
        raise ValueError(f"model {name!r}: unknown parameter(s) {', '.join(unknown)}; "
                         f"valid: {', '.join(sorted(valid))}")
    return fn(data_info, **params)


def builder_of(spec: ModelSpec) -> Callable[..., Any]:
    """The builder function behind ``spec`` (the same for a model and its presets), or ``spec.build``
    itself for a spec made by hand."""
    build = spec.build
    if isinstance(build, functools.partial) and build.func is _build_model:
        return build.args[0]
    return build


def _describe(fn: Callable[..., Any]) -> str:
    """The first paragraph of ``fn``'s docstring on one line."""
    doc = inspect.getdoc(fn) or ""
    return " ".join(doc.split("\n\n")[0].split())


def _add(module: str | None, spec: ModelSpec, task: str | None) -> ModelSpec:
    """Record ``spec`` among ``module``'s models (None: nowhere) and, with ``task``, in that task."""
    models = _MODULE_MODELS.setdefault(module, {}) if module is not None else {}
    if spec.name in models:
        raise ValueError(f"model {spec.name!r} is registered twice in {module}")
    if task is not None:
        get_task(task).models.register(spec.name, spec)
    models[spec.name] = spec
    return spec


def register_model(
    *, family: str, pattern: str | None = None, description: str | None = None,
    check: Callable[[dict[str, Any]], None] | None = None, bounds: Mapping[str, Bounds] | None = None,
    omit_when_default: tuple[str, ...] = (), pattern_param: str = "pattern", in_all: bool = True,
    renamed: Mapping[str, str] | None = None, task: str | None = None, kind: str | None = None,
) -> Callable[[B], B]:
    """Decorator: register builder ``fn(data_info, *, param=default, ...) -> nn.Module`` as model
    ``fn.__name__`` with the :class:`ModelSpec` options given; its parameters are
    :func:`builder_params` (the signature is their one source), its description the first
    paragraph of its docstring unless ``description`` is given. ``task``: also register it in
    that task now (a plug-in's model); otherwise the domain collects it with
    :func:`registered_models`. Returns ``fn`` unchanged; a name registered twice is an error."""
    def decorate(fn: B) -> B:
        spec = ModelSpec(
            name=fn.__name__, family=family, build=_Build(_build_model, fn, fn.__name__, dict(renamed or {})),
            params=builder_params(fn), pattern=pattern,
            description=_describe(fn) if description is None else description, bounds=dict(bounds or {}),
            check=check, omit_when_default=tuple(omit_when_default), pattern_param=pattern_param, in_all=in_all,
            renamed=dict(renamed or {}), kind=kind,
        )
        _add(fn.__module__, spec, task)
        return fn

    return decorate


def model_spec(fn: Callable[..., Any]) -> ModelSpec:
    """The spec :func:`register_model` made for builder ``fn``."""
    spec = _MODULE_MODELS.get(getattr(fn, "__module__", ""), {}).get(getattr(fn, "__name__", ""))
    if spec is None or builder_of(spec) is not fn:
        raise ValueError(f"{fn!r} is not a model builder registered with @register_model")
    return spec


def register_preset(
    name: str, base: Callable[..., Any] | ModelSpec, params: Mapping[str, Any], *, description: str,
    family: str | None = None, pattern: str | None = None, in_all: bool = True,
    omit_when_default: tuple[str, ...] | None = None, task: str | None = None,
) -> ModelSpec:
    """Register ``base``'s builder (a registered builder function or the spec of a model or preset)
    as model ``name`` with other defaults ``params``: a preset, not a copy. The other options come
    from ``base`` unless given; ``pattern`` defaults to the one ``params`` names
    (:meth:`ModelSpec.pattern_for`). Recorded beside the builder's own models, or with ``task``
    (a plug-in's preset of any registered model) in that task only. A deprecated parameter name
    (:attr:`ModelSpec.renamed`) in ``params`` is taken with a ``FutureWarning``. Returns the new spec."""
    spec = model_spec(base) if not isinstance(base, ModelSpec) else base
    params, old = spec.current_names(params)
    for key in old:
        warnings.warn(f"preset {name!r} of {spec.name!r}: parameter {key!r} is deprecated, use "
                      f"{spec.renamed[key]!r}", FutureWarning, stacklevel=2)
    unknown = sorted(set(params) - set(spec.params))
    if unknown:
        raise ValueError(f"preset {name!r} of {spec.name!r}: unknown parameter(s) {', '.join(unknown)}; "
                         f"valid: {', '.join(spec.params)}")
    if not isinstance(spec.build, functools.partial) or spec.build.func is not _build_model:
        raise ValueError(f"preset {name!r}: {spec.name!r} was not registered with @register_model")
    fn, base_kw = builder_of(spec), spec.build.keywords
    merged = {**copy.deepcopy(spec.params), **copy.deepcopy(dict(params))}
    preset = dataclasses.replace(
        spec, name=name, params=merged, description=description, in_all=in_all,
        build=_Build(_build_model, fn, name, dict(spec.renamed), **{**base_kw, **copy.deepcopy(dict(params))}),
        family=spec.family if family is None else family,
        kind=spec.kind if family in (None, spec.family) else None,  # another family: its default kind
        pattern=pattern if pattern is not None else spec.pattern_for(merged),
        omit_when_default=spec.omit_when_default if omit_when_default is None else tuple(omit_when_default),
    )
    return _add(fn.__module__ if task is None else None, preset, task)


def registered_models(module: str | ModuleType) -> list[ModelSpec]:
    """The models registered by builders of ``module`` (and their presets), in registration order."""
    name = module if isinstance(module, str) else module.__name__
    return list(_MODULE_MODELS.get(name, {}).values())


# --------------------------------------------------------------------------- a task in one call
def define_task(
    name: str, *, metric: str, mode: str, description: str, module: ModuleType,
    models: ModuleType | str | Iterable[ModuleType | str],
    datasets: Iterable[DatasetSpec], module_bounds: Mapping[str, Bounds] | None = None,
) -> Task:
    """Make task ``name`` from its domain's pieces and register it: ``module`` (its ``module.py``,
    with ``make_module`` and ``MODULE_DEFAULTS``), what its model module(s) ``models`` registered,
    and ``datasets`` (their ``params`` are copied). Returns the :class:`Task`."""
    task = Task(name=name, metric=metric, mode=mode, make_module=module.make_module,
                module_params=dict(module.MODULE_DEFAULTS), description=description,
                module_bounds=dict(module_bounds or {}))
    for ds in datasets:
        task.datasets.register(ds.name, dataclasses.replace(ds, params=dict(ds.params)))
    for mod in [models] if isinstance(models, (str, ModuleType)) else models:
        for spec in registered_models(mod):
            task.models.register(spec.name, spec)
    return register_task(task)
