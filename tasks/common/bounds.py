"""Parameter bounds: what a registered parameter may be set to.

:class:`Bounds` is what one parameter may be; :func:`param_bounds` gives the bounds of a
parameter from an explicit declaration, else from a rule on its name and registered default.
The suite config checks every parameter against them before any cell runs. The registrations
in :mod:`tasks.common.registry` declare explicit bounds (and re-export these names).
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Any, Mapping


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

#: the largest seed every RNG accepts (numpy's legacy seeding, Lightning's ``seed_everything``)
SEED_MAX = 2**32 - 1


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
        "num_classes": Bounds(kind="int", minimum=2),  # one class: nothing to classify
    }


def _is_probability(name: str) -> bool:
    return (name == "dropout" or name.endswith("_dropout") or name.startswith("p_") or name.endswith("_p")
            or "fraction" in name)


def param_bounds(name: str, default: Any, declared: Mapping[str, Bounds] | None = None) -> Bounds:
    """What parameter ``name`` (registered default ``default``) may be set to.

    The rule, first match wins:

    1. a :class:`Bounds` the registration declares for ``name``;
    2. a parameter whose name means the same in every domain (``optimizer``, ``scheduler``,
       ``pattern``, ``score``, ``lr`` > 0, ``weight_decay`` >= 0, ``window`` >= 0 or null,
       ``num_classes`` >= 2 ...); an int ``seed`` or ``*_seed`` lies in [0, :data:`SEED_MAX`];
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
    if isinstance(default, int) and not isinstance(default, bool) and (name == "seed" or name.endswith("_seed")):
        return Bounds(minimum=0, maximum=SEED_MAX)
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
