"""Row and group labels that keep configurations apart: where one model ran with different
``model_params`` or ``module_params`` in one group (a swept ``lr``, vision's ``mamba2`` over rows
and over patches) each configuration is its own row, and where one dataset ran with different
``dataset_params`` (a swept ``min_gap``, ``num_train``, ``p_in``) each point is its own group, so
that nothing pools records of different settings as if they were seeds (issue 52 item 1)."""

from __future__ import annotations

from collections import defaultdict
from typing import Any, Hashable, Iterable

from benchmarks.report.inputs import ORIGIN

__all__ = ["model_labels", "dataset_variants", "params_of"]


def params_of(item: dict[str, Any], key: str) -> dict[str, Any]:
    """A record's or manifest cell's ``config[key]`` (a mapping; ``{}`` when absent)."""
    cfg = item.get("config")
    params = cfg.get(key) if isinstance(cfg, dict) else None
    return params if isinstance(params, dict) else {}


def _setting(item: dict[str, Any]) -> dict[str, Any]:
    """What tells two configurations of one model apart: its model and module parameters."""
    return {**params_of(item, "module_params"), **params_of(item, "model_params")}


def _differing(variants: list[dict[str, Any]]) -> list[str]:
    keys = sorted({k for v in variants for k in v})
    return [k for k in keys if len({repr(v.get(k)) for v in variants}) > 1]


def model_labels(items: Iterable[tuple[tuple, dict[str, Any]]]) -> dict[int, str]:
    """``{id(item): label}`` for ``(group key, record or manifest cell)`` pairs: the model's name,
    or, where one model ran with different ``model_params`` or ``module_params`` in one group, the
    name with the params that differ (``mamba2 (mode=patches)``, ``transformer (lr=0.003)``), so
    that each configuration is its own row instead of one model pooling them all. In a merged
    report (:func:`~benchmarks.report.inputs.merge_suites`), a label that more than one suite
    ran gets its suite too (``transformer [pos_tagging]``): two configs' budgets never pool."""
    items = list(items)
    seen: dict[tuple, dict[str, dict[str, Any]]] = defaultdict(dict)
    for gkey, it in items:
        params = _setting(it)
        seen[(gkey, str(it.get("model")))][repr(sorted(params.items(), key=lambda kv: kv[0]))] = params
    out: dict[int, str] = {}
    for gkey, it in items:
        model = str(it.get("model"))
        variants = list(seen[(gkey, model)].values())
        if len(variants) < 2:
            out[id(it)] = model
            continue
        mine = _setting(it)
        out[id(it)] = f"{model} ({', '.join(f'{k}={mine.get(k)}' for k in _differing(variants))})"
    origins: dict[tuple, set] = defaultdict(set)
    for gkey, it in items:
        origins[(gkey, out[id(it)])].add(it.get(ORIGIN))
    for gkey, it in items:
        if len(origins[(gkey, out[id(it)])]) > 1:
            out[id(it)] += f" [{it.get(ORIGIN)}]"
    return out


def dataset_variants(items: Iterable[tuple[Hashable, dict[str, Any]]]) -> dict[int, dict[str, Any]]:
    """``{id(item): point}`` for ``(base key, record or manifest cell)`` pairs: the dataset
    parameters in which the item's setting differs from others of the same base key (a sweep's
    point, e.g. ``{"min_gap": 8}``), ``{}`` where all agree."""
    items = list(items)
    seen: dict[Hashable, dict[str, dict[str, Any]]] = defaultdict(dict)
    for key, it in items:
        params = params_of(it, "dataset_params")
        seen[key][repr(sorted(params.items(), key=lambda kv: kv[0]))] = params
    out: dict[int, dict[str, Any]] = {}
    for key, it in items:
        variants = list(seen[key].values())
        mine = params_of(it, "dataset_params")
        out[id(it)] = {k: mine.get(k) for k in _differing(variants)} if len(variants) > 1 else {}
    return out
