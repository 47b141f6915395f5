"""The attention pattern of a task's model: one place that checks a configured pattern against
what the model needs of it and resolves its parameters.

Every domain's attention model takes any registered sequence pattern (:mod:`attn_core.patterns`)
and its own parameters from the config, e.g.
``model_params: {transformer: {pattern: performer, pattern_params: {features: 64}}}``. A model
calls :func:`model_pattern` in its constructor, and registers a :class:`PatternCheck` (or its own
check built on :func:`model_pattern`) as :attr:`tasks.common.registry.ModelSpec.check`, so the
suite config refuses a pattern that cannot do what the model needs before any cell runs, in one
line that lists the patterns that can.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Mapping

from tasks.common.registry import ModelSpec, model_spec, register_preset

__all__ = ["model_pattern", "takes_window", "PatternCheck", "PATTERN_PARAMS", "PRESET_PATTERNS", "variant_presets",
           "register_variants"]

#: The model parameter holding a pattern's own parameters (default ``None``: the pattern's defaults).
PATTERN_PARAMS = "pattern_params"


def takes_window(pattern: str) -> bool:
    """Whether registered pattern ``pattern`` has a ``window`` parameter."""
    import attn_core

    return "window" in attn_core.get_pattern(pattern).params


def model_pattern(
    pattern: str, pattern_params: Mapping[str, Any] | None = None, *, window: int | None = None,
    causal: bool = False, padding: bool = False, cross: bool = False, kind: str | None = "sequence",
) -> dict[str, Any]:
    """The parameters of ``pattern`` for a model that needs ``causal``/``padding``/``cross``:
    ``pattern_params`` with the model's ``window`` shorthand folded in, checked against the
    pattern's registered defaults and filled in. Raises a one-line ``ValueError`` naming what is
    wrong (an unsupported pattern lists the registered ones that support what is needed)."""
    import attn_core

    attn_core.check_pattern(pattern, causal=causal, cross=cross, padding=padding, kind=kind)
    if pattern_params is not None and not isinstance(pattern_params, Mapping):
        raise ValueError(f"pattern_params={pattern_params!r} is invalid: expected a mapping of pattern={pattern!r}'s "
                         f"parameters ({', '.join(attn_core.get_pattern(pattern).params) or 'none'}) or null")
    params = dict(pattern_params or {})
    if window is not None:
        if params.get("window", window) != window:
            raise ValueError(f"window={window!r} and pattern_params.window={params['window']!r} disagree: give it once")
        params["window"] = window
    return attn_core.resolve_params(pattern, params)


@dataclass(frozen=True)
class PatternCheck:
    """:attr:`~tasks.common.registry.ModelSpec.check` of a sequence attention model: its
    ``pattern`` (params key ``key``) must support ``causal``/``padding``, and ``pattern_params``
    (with ``window``, when the model has one) must fit it. ``window_if_taken``: the model ignores
    its ``window`` for a pattern without one (speech's presets)."""

    causal: bool = False
    padding: bool = False
    key: str = "pattern"
    window_if_taken: bool = False

    def __call__(self, params: Mapping[str, Any]) -> None:
        pattern, window = params[self.key], params.get("window")
        if self.window_if_taken and window is not None and not takes_window(pattern):
            window = None
        model_pattern(pattern, params.get(PATTERN_PARAMS), window=window, causal=self.causal, padding=self.padding)


#: The efficient patterns every domain registers as presets of its attention model
#: (``<model>_<pattern>``, left out of ``models: all``), so a suite can name each variant and its
#: records keep them apart; a plug-in's pattern is used through ``model_params`` instead.
PRESET_PATTERNS = ("linear", "performer", "linformer", "nystrom", "local_global")


def variant_presets(
    base: str, params: Mapping[str, Any], *, allowed: Callable[[str], bool], key: str = "pattern",
    own: Mapping[str, Mapping[str, Any]] | None = None,
) -> dict[str, tuple[str, dict[str, Any]]]:
    """``{f"{base}_{pattern}": (pattern, overrides)}`` for each of :data:`PRESET_PATTERNS` that is
    registered and ``allowed`` (what the model can use). ``overrides``: what the preset changes of
    model ``base``'s registered ``params``: ``key`` set to the pattern, ``pattern_params`` to
    ``own[pattern]`` (e.g. a domain's window), ``window`` (when the model has one) to ``None``."""
    import attn_core

    out = {}
    for pattern in PRESET_PATTERNS:
        if pattern in attn_core.PATTERNS and allowed(pattern):
            extra = {"window": None} if "window" in params else {}
            own_params = dict((own or {}).get(pattern, {}))
            out[f"{base}_{pattern}"] = (pattern, {**extra, key: pattern, PATTERN_PARAMS: own_params})
    return out


def register_variants(
    base: Callable[..., Any] | ModelSpec, *, allowed: Callable[[str], bool], description: str,
    own: Mapping[str, Mapping[str, Any]] | None = None,
) -> list[ModelSpec]:
    """Register the :func:`variant_presets` of model ``base`` (its builder function or
    :class:`~tasks.common.registry.ModelSpec`) with :func:`~tasks.common.registry.register_preset`:
    left out of ``models: all``, ``pattern_params`` left out of cell ids at its default,
    ``description`` formatted with ``{pattern}``. Returns their specs."""
    spec = base if isinstance(base, ModelSpec) else model_spec(base)
    presets = variant_presets(spec.name, spec.params, allowed=allowed, key=spec.pattern_param, own=own)
    return [register_preset(name, spec, overrides, description=description.format(pattern=pattern), in_all=False,
                            omit_when_default=(PATTERN_PARAMS,))
            for name, (pattern, overrides) in presets.items()]
