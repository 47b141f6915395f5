"""A sweep is a config list (issue 52 item 1): a list given for a parameter that takes one value
sweeps it, one cell per value, the value part of the cell's config and so of its id.

Which lists sweep is decided by the parameter's registered kind (:func:`benchmarks.config.params.param_field`):

* a scalar parameter (int, float, str, bool; e.g. ``min_gap``, ``lr``, ``num_train``): a list of
  values, ``num_train: [100, 300, 1000]``;
* a list parameter (e.g. speech's ``per_class: [12, 6, 12]``): a list of lists,
  ``per_class: [[12, 6, 12], [48, 6, 12]]``;
* a parameter of any other kind (``None`` default without declared bounds): no sweep, the list is its value.

Several swept keys in one mapping give every combination (a Cartesian product, in the order
written), and each model's ``model_params``, the ``module_params`` and the ``dataset_params`` sweep
independently of one another. A swept cell is exactly the cell written with that one value: the
same id, so a sweep reuses the records of the points already run. ``trainer`` keys are not swept
(a trainer list such as ``devices: [0, 1]`` is a value).
"""

from __future__ import annotations

import itertools
from typing import TYPE_CHECKING, Any, Mapping

if TYPE_CHECKING:
    from tasks.common.registry import Bounds

__all__ = ["SCALAR_KINDS", "swept_keys", "sweep_variants"]

SCALAR_KINDS = ("int", "float", "str", "bool")


def _is_sweep(value: Any, kind: str) -> bool:
    if not isinstance(value, list) or not value:
        return False
    if kind.startswith("list"):
        return all(isinstance(v, list) for v in value)
    return kind in SCALAR_KINDS and not any(isinstance(v, (list, dict)) for v in value)


def swept_keys(given: Any, defaults: Mapping[str, Any], bounds: Mapping[str, Bounds] | None = None) -> list[str]:
    """The keys of a params mapping whose value is a sweep (in the order written)."""
    from benchmarks.config.params import param_field

    if not isinstance(given, dict):
        return []
    return [k for k, v in given.items() if k in defaults and _is_sweep(v, param_field(k, defaults[k], bounds).kind)]


def sweep_variants(given: Any, defaults: Mapping[str, Any], bounds: Mapping[str, Bounds] | None = None) -> list[Any]:
    """The params mappings ``given`` stands for: itself when nothing is swept, else one per
    combination of its swept values (each with that one value in place of the list)."""
    keys = swept_keys(given, defaults, bounds)
    if not keys:
        return [given]
    out = []
    for combo in itertools.product(*(given[k] for k in keys)):
        variant = dict(given)
        variant.update(zip(keys, combo))
        out.append(variant)
    return out
