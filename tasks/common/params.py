"""Renamed model parameters: one name per concept across domains, old names kept as aliases.

A registration declares the parameters it renamed (``renamed={"heads": "num_heads"}``, old ->
new, on :class:`tasks.common.registry.ModelSpec`). The builder's signature has only the new
names; these helpers translate in both directions:

* :func:`current_names`: a config or a record written with the old names -> the new names
  (what a model is built with, what a suite stores); giving both names is an error;
* :func:`recorded_names`: the new names -> the names a parameter was first recorded under,
  which is what a cell id hashes (:func:`benchmarks.config.suite.cell_id`), so that renaming a
  parameter never changes an id.
"""

from __future__ import annotations

from typing import Any, Mapping

__all__ = ["current_names", "recorded_names", "check_renamed"]


def current_names(params: Mapping[str, Any], renamed: Mapping[str, str], *,
                  what: str = "model") -> tuple[dict[str, Any], list[str]]:
    """``params`` with every old name of ``renamed`` replaced by its new name (order kept), and
    the old names that were used. A ``ValueError`` (one line) when an old and its new name are
    both given."""
    if not renamed or not any(k in renamed for k in params):
        return dict(params), []
    both = [f"{old!r} and {renamed[old]!r}" for old in params if old in renamed and renamed[old] in params]
    if both:
        raise ValueError(f"{what}: {'; '.join(both)} name the same parameter (the first is the deprecated "
                         "name of the second): give it once, under the new name")
    used = [k for k in params if k in renamed]
    return {renamed.get(k, k): v for k, v in params.items()}, used


def recorded_names(params: Mapping[str, Any], renamed: Mapping[str, str]) -> dict[str, Any]:
    """``params`` with every new name of ``renamed`` back under its old name: the names the
    parameters were first recorded under (what a cell id hashes). Old names pass unchanged."""
    if not renamed:
        return dict(params)
    back = {new: old for old, new in renamed.items()}
    return {back.get(k, k): v for k, v in params.items()}


def check_renamed(name: str, params: Mapping[str, Any], renamed: Mapping[str, str]) -> None:
    """A ``ValueError`` unless every new name of ``renamed`` is a parameter and no old name is."""
    bad = [f"{old!r} -> {new!r}" for old, new in renamed.items() if new not in params or old in params]
    if bad:
        raise ValueError(f"model {name!r}: renamed={dict(renamed)!r}: {', '.join(bad)} must map an old name "
                         "that is no longer a parameter to one of its params")
