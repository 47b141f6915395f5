"""The recurrence registry: every recurrent layer is one class registered by name with what it
supports, like the attention patterns (:mod:`attn_core.patterns`).

A plug-in adds one without editing attnbench::

    @register_recurrence("mine", complex_state=False, step=True, cost="L", gpu_kernel=None,
                         time_invariant=False, description="...")
    class Mine(RecurrentLayer):
        ...

Every registered class maps ``(B, L, d_model) -> (B, L, d_model)`` causally, takes
``lengths=``/``key_padding_mask=`` for right-padded batches and, with ``step``, decodes one
position at a time (:class:`attn_core.recurrent.RecurrentLayer`). Bidirectional use is the
:class:`~attn_core.recurrent.Bidirectional` wrapper around any of them.
"""

from __future__ import annotations

import inspect
from dataclasses import dataclass
from typing import Any, Callable

from torch import nn

from attn_core import _validate as V

__all__ = ["RecurrenceSpec", "register_recurrence", "unregister_recurrence", "get_recurrence",
           "list_recurrences", "build_recurrence"]


@dataclass(frozen=True)
class RecurrenceSpec:
    """One registered recurrence: its layer class and what it supports.

    ``causal``: one pass runs left to right (every recurrence here; a bidirectional model is two
    of them, :class:`~attn_core.recurrent.Bidirectional`). ``bidirectional``: it may be wrapped so.
    ``complex_state``: its state is complex (S4D, LRU). ``step``: it has
    ``step(x_t, state) -> (y_t, state)`` for decoding. ``cost``: training time in the length
    (``"L"``, ``"L log L"``, ``"L*Q"`` for chunk size ``Q``). ``gpu_kernel``: the name of a fused GPU
    kernel it uses, ``None`` when it is pure PyTorch everywhere. ``time_invariant``: its
    transition does not depend on the input (so a convolution kernel exists)."""

    name: str
    cls: type[nn.Module]
    complex_state: bool
    step: bool
    cost: str
    gpu_kernel: str | None = None
    time_invariant: bool = False
    causal: bool = True
    bidirectional: bool = True
    description: str = ""


_REGISTRY: dict[str, RecurrenceSpec] = {}


def register_recurrence(
    name: str,
    *,
    complex_state: bool,
    step: bool,
    cost: str,
    gpu_kernel: str | None = None,
    time_invariant: bool = False,
    bidirectional: bool = True,
    description: str = "",
    override: bool = False,
) -> Callable[[type[nn.Module]], type[nn.Module]]:
    """Class decorator registering a recurrent layer as ``name`` (see :class:`RecurrenceSpec`).
    Registering an existing name raises unless ``override=True``; returns the class unchanged."""
    if not isinstance(name, str) or not name.isidentifier():
        V.fail("name", name, "expected a recurrence name that is a Python identifier")
    if name in _REGISTRY and not override:
        raise ValueError(f"recurrence {name!r} is already registered: pass override=True to replace it")
    for flag, val in (("complex_state", complex_state), ("step", step), ("time_invariant", time_invariant),
                      ("bidirectional", bidirectional)):
        if not isinstance(val, bool):
            V.fail(flag, val, "expected a bool")
    if not isinstance(cost, str) or not cost:
        V.fail("cost", cost, 'expected the training cost in the length as a string ("L", "L log L", ...)')
    if gpu_kernel is not None and not isinstance(gpu_kernel, str):
        V.fail("gpu_kernel", gpu_kernel, "expected None (pure PyTorch) or the kernel's name")

    def decorator(cls: type[nn.Module]) -> type[nn.Module]:
        if not (isinstance(cls, type) and issubclass(cls, nn.Module)):
            V.fail("cls", cls, "expected an nn.Module subclass")
        _REGISTRY[name] = RecurrenceSpec(
            name=name, cls=cls, complex_state=complex_state, step=step, cost=cost, gpu_kernel=gpu_kernel,
            time_invariant=time_invariant, bidirectional=bidirectional, description=description)
        return cls

    return decorator


def unregister_recurrence(name: str) -> RecurrenceSpec:
    """Remove recurrence ``name`` and return its registration (for tests and plug-in reloads)."""
    spec = get_recurrence(name)
    del _REGISTRY[name]
    return spec


def get_recurrence(name: str) -> RecurrenceSpec:
    """The registration of ``name``; an unknown name raises listing the valid ones."""
    if name not in _REGISTRY:
        V.check_choice("recurrence", name, _REGISTRY)
    return _REGISTRY[name]


def list_recurrences(*, step: bool = False, bidirectional: bool = False) -> tuple[str, ...]:
    """Registered names in registration order, keeping those with ``step()`` (``step=True``)
    and/or that may be bidirectional (``bidirectional=True``)."""
    return tuple(n for n, s in _REGISTRY.items() if (s.step or not step) and (s.bidirectional or not bidirectional))


def build_recurrence(name: str, d_model: int, *, bidirectional: bool = False, **params: Any) -> nn.Module:
    """A layer of recurrence ``name`` of width ``d_model`` with its own ``params``; with
    ``bidirectional=True`` two of them (own parameters), one reading each sequence reversed."""
    spec = get_recurrence(name)
    if not isinstance(bidirectional, bool):
        V.fail("bidirectional", bidirectional, "expected a bool")
    accepted = inspect.signature(spec.cls.__init__).parameters
    unknown = sorted(set(params) - set(accepted))
    if unknown and not any(p.kind is p.VAR_KEYWORD for p in accepted.values()):
        valid = ", ".join(repr(k) for k in accepted if k not in ("self", "d_model"))
        V.fail("params", params, f"unknown key(s) {', '.join(map(repr, unknown))} for recurrence={name!r}; "
               f"valid keys: {valid}")
    if not bidirectional:
        return spec.cls(d_model, **params)
    if not spec.bidirectional:
        valid = ", ".join(map(repr, list_recurrences(bidirectional=True)))
        V.fail("bidirectional", bidirectional, f"recurrence {name!r} cannot be bidirectional; those that can: {valid}")
    from attn_core.recurrent.base import Bidirectional
    return Bidirectional(lambda: spec.cls(d_model, **params))
