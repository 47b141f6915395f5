"""The attention pattern registry: every pattern :class:`~attn_core.MultiHeadAttention` and the
Transformer layers can use is one registered function, found by name.

A sequence pattern is a function with the core signature plus its own keyword parameters::

    fn(q, k, v, *, causal=False, key_padding_mask=None, dropout_p=0.0, scale=None, state=None,
       **own_params) -> out  # q (B, H, Lq, D), k (B, H, Lk, D), v (B, H, Lk, Dv) -> (B, H, Lq, Dv)

registered with what it supports (causal, key padding, cross-attention), its cost and its
parameters' defaults. Patterns that carry learned or random per-layer state (Linformer's
projections, Performer's random features) register a ``make_state`` factory; each
:class:`~attn_core.MultiHeadAttention` builds that module once, owns it as a submodule (so its
parameters train and its buffers follow ``.to()``) and passes it as ``state=``.

A plug-in adds a pattern without editing attnbench::

    @attn_core.register_pattern("mine", causal=False, padding=True, cross=True, complexity="L^2",
                                params={"temperature": 1.0}, description="softmax with a temperature")
    def mine(q, k, v, *, causal=False, key_padding_mask=None, dropout_p=0.0, scale=None, state=None,
             temperature=1.0):
        ...

What :class:`~attn_core.MultiHeadAttention` must know it asks the registration, never the name:
a band pattern declares ``band="width"`` (its parameter holding the band's width) and
``incremental=True``, and decoding then slices its band and keeps a rolling buffer of it; a
pattern with another mask rule declares ``allows`` (and ``buffer`` for a rolling cache).

``kind="graph"`` patterns (``"graph"``) take node inputs and an ``edge_index`` instead:
sequence-only callers refuse them through :func:`check_pattern`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Callable, Iterator, Mapping, Sequence

from torch import Tensor, nn

from attn_core import _validate as V
from attn_core.masks import window_allows

__all__ = [
    "Pattern",
    "Recurrence",
    "PatternNames",
    "PATTERNS",
    "register_pattern",
    "unregister_pattern",
    "get_pattern",
    "list_patterns",
    "check_pattern",
    "resolve_params",
    "make_pattern_state",
]

KINDS = ("sequence", "graph")


@dataclass(frozen=True)
class Recurrence:
    """How a causal pattern decodes from a fixed-size state instead of a growing key/value
    cache (linear attention as an RNN, Katharopoulos et al. 2020): O(1) time and memory per
    decoded position instead of O(t).

    ``init(batch, num_heads, head_dim, *, device, dtype, state, **params) -> carry``: the state
    before the first position, a dict of batch-first tensors (a search reorders it with
    ``index_select``). ``step(q, k, v, carry, *, state, **params) -> (out, carry)``: one new
    position, ``q``/``k (B, H, 1, D)``, ``v (B, H, 1, Dv)`` -> ``out (B, H, 1, Dv)``, equal to
    the last row of the pattern's causal function over every position so far."""

    init: Callable[..., dict[str, Tensor]]
    step: Callable[..., tuple[Tensor, dict[str, Tensor]]]


@dataclass(frozen=True)
class Pattern:
    """One registered pattern: its function and what it supports.

    ``causal``/``padding``/``cross``: whether it can be causal, takes a ``key_padding_mask``,
    and attends over another sequence (``Lq != Lk``). ``complexity``: time and memory in the
    sequence length (``"L^2"``, ``"L*w"``, ``"L*m"`` ...). ``needs_max_len``: its state is
    sized by the longest sequence (``max_len=``). ``params``: its own keyword parameters with
    their defaults. ``weights``: ``fn`` accepts ``need_weights=`` and can return the dense
    probabilities. ``dropout``: ``fn`` applies ``dropout_p`` (otherwise it has no probabilities
    to drop and ignores it). ``check(params)`` validates the parameters' values.
    ``incremental``: a decoder may keep a key/value cache: the causal output of the last of
    ``t + 1`` positions is ``fn`` called non-causally with that one query over keys ``0..t``
    (its output depends on the query and the keys it sees, not on the query's index: true of
    ``full`` and of kernel patterns like ``linear``; ``truncated`` needs its band and says so
    too: :meth:`attn_core.MultiHeadAttention.step` slices it). ``allows(i, j, *, causal,
    **params)``: the mask rule of a softmax pattern restricted to some keys, a predicate of query
    and key positions (:mod:`attn_core.masks`); an ``incremental`` one with a rule decodes by
    full attention over the cached keys the rule allows the last position. ``recurrence``: a
    causal decoder keeps this fixed-size state (:class:`Recurrence`) instead of keys/values.
    ``band``: the name of the parameter ``w`` of a band rule ``|i - j| <= w`` (``j <= i`` when
    causal; :func:`attn_core.masks.window_allows`): ``allows`` and ``buffer`` default to it, and
    :meth:`attn_core.MultiHeadAttention.step` keeps only the last ``w + 1`` cached keys.
    ``buffer(params) -> (g, w)``: a causal decoder keeps only the first ``g`` and the last ``w``
    keys/values (no later position attends the others), a rolling buffer of ``g + w``.

    A registration pickles and copies as its name (it is looked up again on load), so modules
    holding it stay picklable whatever its functions are."""

    name: str
    fn: Callable[..., Any]
    causal: bool
    padding: bool
    cross: bool
    complexity: str
    needs_max_len: bool = False
    params: Mapping[str, Any] = field(default_factory=dict)
    description: str = ""
    make_state: Callable[..., nn.Module | None] | None = None
    kind: str = "sequence"
    weights: bool = False
    dropout: bool = True
    check: Callable[[dict[str, Any]], None] | None = None
    incremental: bool = False
    allows: Callable[..., Tensor] | None = None
    recurrence: Recurrence | None = None
    band: str | None = None
    buffer: Callable[[Mapping[str, Any]], tuple[int, int]] | None = None

    def __reduce__(self) -> tuple[Callable[[str], Pattern], tuple[str]]:
        return get_pattern, (self.name,)

    @property
    def graph(self) -> bool:
        """A graph pattern: node inputs ``(N, H, D)`` and an ``edge_index``, no sequence positions."""
        return self.kind == "graph"

    @property
    def positional(self) -> bool:
        """It has a mask rule on positions (``allows``): a cached step attends by softmax over
        the keys the rule lets the last position see, not by calling ``fn``."""
        return self.allows is not None

    @property
    def decodes(self) -> bool:
        """A causal decoder can run it one position at a time: a key/value cache or a recurrence."""
        return self.incremental or self.recurrence is not None

    def resolve(self, params: Mapping[str, Any] | None = None) -> dict[str, Any]:
        """:func:`resolve_params` of this registration."""
        params = dict(params or {})
        unknown = sorted(set(params) - set(self.params))
        if unknown:
            valid = ", ".join(map(repr, self.params)) or "none"
            V.fail("pattern_params", params, f"unknown key(s) {', '.join(map(repr, unknown))} for "
                   f"pattern={self.name!r}; valid keys: {valid}")
        out = {**self.params, **params}
        for key, val in params.items():
            _check_type(self.name, key, val, self.params[key])
        if self.check is not None:
            self.check(out)
        return out

    def build_state(self, num_heads: int, head_dim: int, *, max_len: int | None, params: Mapping[str, Any]
                    ) -> nn.Module | None:
        """The per-layer state from already :meth:`resolve` d ``params`` (see :func:`make_pattern_state`)."""
        if self.needs_max_len and not V.is_int(max_len, 1):
            V.fail("max_len", max_len, f"pattern={self.name!r} needs max_len, the longest sequence (a positive int)")
        return None if self.make_state is None else self.make_state(num_heads, head_dim, max_len=max_len, **params)

    def supports(self, *, causal: bool = False, cross: bool = False, padding: bool = False) -> bool:
        """Whether this pattern can do everything asked for."""
        return (self.causal or not causal) and (self.cross or not cross) and (self.padding or not padding)


_REGISTRY: dict[str, Pattern] = {}


def register_pattern(
    name: str,
    *,
    causal: bool,
    padding: bool,
    cross: bool,
    complexity: str,
    needs_max_len: bool = False,
    params: Mapping[str, Any] | None = None,
    description: str = "",
    make_state: Callable[..., nn.Module | None] | None = None,
    kind: str = "sequence",
    weights: bool = False,
    dropout: bool = True,
    check: Callable[[dict[str, Any]], None] | None = None,
    incremental: bool = False,
    allows: Callable[..., Tensor] | None = None,
    recurrence: Recurrence | None = None,
    band: str | None = None,
    buffer: Callable[[Mapping[str, Any]], tuple[int, int]] | None = None,
    override: bool = False,
) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Decorator registering ``fn`` as pattern ``name`` (see :class:`Pattern` for the fields).

    ``make_state(num_heads, head_dim, *, max_len, **params) -> nn.Module | None`` builds the
    per-layer state. Registering an existing name raises unless ``override=True``.
    Returns ``fn`` unchanged, so the function stays importable and callable directly."""
    if not isinstance(name, str) or not name.isidentifier():
        V.fail("name", name, "expected a pattern name that is a Python identifier")
    V.check_choice("kind", kind, KINDS)
    if name in _REGISTRY and not override:
        raise ValueError(f"pattern {name!r} is already registered: pass override=True to replace it")
    if not isinstance(complexity, str) or not complexity:
        V.fail("complexity", complexity, 'expected the cost in the length as a string ("L^2", "L*w", ...)')
    flags = {"causal": causal, "padding": padding, "cross": cross, "needs_max_len": needs_max_len,
             "incremental": incremental}
    for flag, val in flags.items():
        if not isinstance(val, bool):
            V.fail(flag, val, "expected a bool")
    if allows is not None and not callable(allows):
        V.fail("allows", allows, "expected None or the mask rule allows(i, j, *, causal, **params) -> bool tensor")
    if recurrence is not None and not (isinstance(recurrence, Recurrence) and causal):
        V.fail("recurrence", recurrence, "expected None or an attn_core.Recurrence(init, step) of a causal pattern")
    if band is not None and band not in (params or {}):
        V.fail("band", band, "expected None or the name of the band's width among params: "
               + (", ".join(map(repr, params or {})) or "none"))
    if buffer is not None and not (callable(buffer) and incremental and (allows is not None or band is not None)):
        V.fail("buffer", buffer, "expected None or buffer(params) -> (global, window), for an incremental "
               "pattern with a mask rule (allows or band)")
    if band is not None:
        allows = allows or _band_rule(band)
        buffer = buffer or (lambda p: (0, int(p[band])))

    def decorator(fn: Callable[..., Any]) -> Callable[..., Any]:
        if not callable(fn):
            V.fail("fn", fn, "expected a callable attention function")
        _REGISTRY[name] = Pattern(
            name=name, fn=fn, causal=causal, padding=padding, cross=cross, complexity=complexity,
            needs_max_len=needs_max_len, params=MappingProxyType(dict(params or {})),
            description=description, make_state=make_state, kind=kind, weights=weights,
            dropout=dropout, check=check, incremental=incremental, allows=allows,
            recurrence=recurrence, band=band, buffer=buffer,
        )
        return fn

    return decorator


def _band_rule(band: str) -> Callable[..., Tensor]:
    """The mask rule of a band pattern whose width is its parameter ``band``."""

    def allows(i: Tensor, j: Tensor, *, causal: bool, **params: Any) -> Tensor:
        return window_allows(i - j, params[band], causal)

    return allows


def unregister_pattern(name: str) -> Pattern:
    """Remove pattern ``name`` and return its registration (for tests and plug-in reloads)."""
    spec = get_pattern(name)
    del _REGISTRY[name]
    return spec


def get_pattern(name: str) -> Pattern:
    """The registration of ``name``; an unknown name raises listing the valid ones."""
    if name not in _REGISTRY:
        V.check_choice("pattern", name, _REGISTRY)
    return _REGISTRY[name]


def list_patterns(
    *, kind: str | None = None, causal: bool = False, cross: bool = False, padding: bool = False
) -> tuple[str, ...]:
    """Registered names in registration order, keeping those of ``kind`` (``None``: any) that
    support every capability asked for (``causal=True``: only causal-capable ones, ...)."""
    return tuple(
        n for n, p in _REGISTRY.items()
        if (kind is None or p.kind == kind) and p.supports(causal=causal, cross=cross, padding=padding)
    )


def check_pattern(
    name: str, *, causal: bool = False, cross: bool = False, padding: bool = False, kind: str | None = "sequence"
) -> Pattern:
    """The registration of ``name`` if it is of ``kind`` (``None``: any) and supports what is
    needed, else a one-line ``ValueError`` listing the patterns that do."""
    spec = get_pattern(name)
    if (kind is None or spec.kind == kind) and spec.supports(causal=causal, cross=cross, padding=padding):
        return spec
    needs = [w for w, on in (("causal", causal), ("cross-attention", cross), ("key padding", padding)) if on]
    missing = [w for w, has in zip(("causal", "cross-attention", "key padding"), (spec.causal, spec.cross, spec.padding))
               if w in needs and not has]
    reasons = ([f"it is a {spec.kind} pattern, not a {kind} one"] if kind is not None and spec.kind != kind else [])
    reasons += [f"it does not support {' + '.join(missing)}"] if missing else []
    label = f"{kind} patterns" if kind else "patterns"
    label += f" supporting {' + '.join(needs)}" if needs else ""
    supporters = ", ".join(map(repr, list_patterns(kind=kind, causal=causal, cross=cross, padding=padding)))
    raise ValueError(f"pattern={name!r} is invalid: {', and '.join(reasons)}; {label}: {supporters}")


class PatternNames(Sequence[str]):
    """A live, read-only view of the registered names passing :func:`list_patterns`' filters:
    a plug-in registered later shows up. ``"full" in PATTERNS``, iteration, ``len``,
    ``tuple(PATTERNS)`` and indexing all work."""

    def __init__(self, **filters: Any) -> None:
        self._filters = filters

    def _names(self) -> tuple[str, ...]:
        return list_patterns(**self._filters)

    def __iter__(self) -> Iterator[str]:
        return iter(self._names())

    def __len__(self) -> int:
        return len(self._names())

    def __getitem__(self, i):  # type: ignore[override]
        return self._names()[i]

    def __contains__(self, name: object) -> bool:
        return name in self._names()

    def __eq__(self, other: object) -> bool:
        return tuple(self) == tuple(other) if isinstance(other, (tuple, list, PatternNames)) else NotImplemented

    def __hash__(self) -> int:
        return hash(tuple(self))

    def __repr__(self) -> str:
        return repr(self._names())


#: Every registered pattern name, sequence and graph (a live view of the registry).
PATTERNS = PatternNames()


def resolve_params(name: str, params: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """``params`` checked against pattern ``name``'s registered defaults and merged over them.

    An unknown key raises with one line listing the valid keys; a value whose type differs
    from its non-``None`` default's raises; then the pattern's own ``check`` runs."""
    return get_pattern(name).resolve(params)


def _check_type(pattern: str, key: str, val: Any, default: Any) -> None:
    if default is None:
        return
    if isinstance(default, bool):
        ok = isinstance(val, bool)
    elif isinstance(default, int):
        ok = isinstance(val, int) and not isinstance(val, bool)
    elif isinstance(default, float):
        ok = isinstance(val, (int, float)) and not isinstance(val, bool)
    else:
        ok = isinstance(val, type(default))
    if not ok:
        V.fail(key, val, f"pattern={pattern!r} expects a {type(default).__name__} (default {default!r})")


def make_pattern_state(
    name: str, num_heads: int, head_dim: int, *, max_len: int | None = None, params: Mapping[str, Any] | None = None
) -> nn.Module | None:
    """The per-layer state of pattern ``name`` (``None`` when it has none), from its resolved
    ``params``. A pattern with ``needs_max_len`` refuses ``max_len=None``."""
    spec = get_pattern(name)
    return spec.build_state(num_heads, head_dim, max_len=max_len, params=spec.resolve(params))
