"""Records -> what the report shows: groups (one leaderboard per suite, task and dataset), each
model's statistics over its successful seeds and its cost, the best attention model against the
best baselines, and the warnings (failed, missing, stale or inconsistent records). No files
are written here; :func:`analyse` is the whole computation, :func:`group_of` the same for one
group of records held in memory.
"""

from __future__ import annotations

import contextlib
import math
import os
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any, Callable, Iterable, Sequence

from benchmarks.report import stats
from benchmarks.report.budget import budget_warnings, machine_warnings
from benchmarks.report.format import as_number, fmt_ci, fmt_metric
from benchmarks.report.inputs import ORIGIN, load_inputs, merge_suites
from benchmarks.report.labels import dataset_variants, model_labels  # noqa: F401 - model_labels re-exported
from benchmarks.report.results import (
    BASELINE_FAMILIES,
    CONFIDENCE,
    METRIC_BOUNDS,
    MODERN_RNN,
    Analysis,
    Comparison,
    Group,
    ModelResult,
    ReportError,
    Warn,
    baseline_family,
    dataset_label,
    diagnostic_of,
    group_title,
    short_commit,
)

__all__ = ["analyse", "group_of", "manifest_cells", "result_roots", "best_of", "compare_models", "comparisons",
           "model_labels"]


def _sort_key_seed(s: Any) -> tuple:
    return (0, s, "") if isinstance(s, (int, float)) and not isinstance(s, bool) else (1, 0, str(s))


def _cell_label(task: Any, dataset: Any, model: Any, seed: Any, suite: str | None = None) -> str:
    prefix = f"[{suite}] " if suite else ""
    return f"{prefix}{task}/{dataset}/{model} seed={seed}"


def _fraction_of(rec: dict[str, Any]) -> float:
    """The training-set fraction a record (or manifest cell) trained on; 1.0 when absent."""
    for src in (rec.get("data"), rec.get("config"), rec):
        if isinstance(src, dict) and as_number(src.get("train_fraction")) is not None:
            return float(src["train_fraction"])
    return 1.0


def _finished_key(rec: dict[str, Any]) -> str:
    return str(rec.get("finished") or rec.get("started") or "")


def _aggregate_cost(m: ModelResult, warn: Warn, where: str) -> dict[str, Any]:
    costs = [r.get("cost") or {} for r in m.ok]

    def vals(key: str) -> list[Any]:
        return [c.get(key) for c in costs if as_number(c.get(key)) is not None]

    out: dict[str, Any] = {}
    for key in ("params", "flops_per_sample"):
        vs = vals(key)
        if not vs:
            out[key] = None
        elif all(v == vs[0] for v in vs):
            out[key] = vs[0]
        else:
            out[key] = stats.mean(vs)
            warn("inconsistent", f"{where}: {key} differs between seeds ({sorted(set(vs))}); the mean is shown")
    for key, out_key in (
        ("train_time_s", "train_time_s_mean"),
        ("train_samples_per_s", "train_samples_per_s"),
        ("infer_samples_per_s", "infer_samples_per_s"),
        ("train_tokens_per_s", "train_tokens_per_s"),
        ("infer_tokens_per_s", "infer_tokens_per_s"),
    ):
        vs = vals(key)
        out[out_key] = stats.mean(vs) if vs else None
    mems = vals("peak_mem_bytes")
    out["peak_mem_bytes"] = max(mems) if mems else None
    kinds = sorted({c.get("peak_mem_kind") for c in costs if c.get("peak_mem_kind")})
    out["peak_mem_kind"] = kinds[0] if len(kinds) == 1 else ("mixed: " + ", ".join(kinds) if kinds else None)
    return out


def _rank_key(mode: str) -> Callable[[ModelResult], tuple]:
    def key(m: ModelResult) -> tuple:
        if m.mean is None or not math.isfinite(m.mean):
            return (1, 0.0, m.model)
        return (0, -m.mean if mode == "max" else m.mean, m.model)

    return key


def manifest_cells(manifests: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Expected cells from the manifests (``{"suite": ..., "cells": [{"cell_id", "task",
    "dataset", "model", "seed", ...}]}``); each gets the manifest's suite name. A cell listed by
    several manifests (a combined report of folders that ran slices of one suite) counts once."""
    out = []
    seen: set[tuple[Any, Any]] = set()
    for man in manifests:
        if not isinstance(man, dict):
            continue
        suite = man.get("suite")
        if isinstance(suite, dict):  # tolerate {"suite": {"name": ...}}
            suite = suite.get("name")
        for c in man.get("cells") or []:
            if not isinstance(c, dict):
                continue
            cid = c.get("cell_id", c.get("id"))
            cell = {**c, "cell_id": cid, "suite": c.get("suite", suite)}
            if cid is None or (cell["suite"], cid) in seen:
                continue
            seen.add((cell["suite"], cid))
            out.append(cell)
    return out


def result_roots(results_dir: str | os.PathLike | Sequence[str | os.PathLike]) -> list[Path]:
    """One results folder or a list of them (a combined report) as a list of paths."""
    if isinstance(results_dir, (list, tuple)):
        if not results_dir:
            raise ReportError("no results folder given")
        return [Path(p) for p in results_dir]
    return [Path(results_dir)]


def _add_record(models: dict[tuple, ModelResult], gkey: tuple, rec: dict[str, Any], warn: Warn,
                rel: Callable[[dict[str, Any]], str], label: str | None = None) -> None:
    """File one record under its model (``label``: see :func:`model_labels`) of group ``gkey``:
    ok, or failed (with the reason)."""
    model = label or str(rec.get("model"))
    m = models.get((*gkey, model))
    if m is None:
        m = models[(*gkey, model)] = ModelResult(*gkey, model, str(rec.get("family") or "other"), rec.get("pattern"),
                                                 kind=rec.get("kind"))
    if rec.get("family") and rec["family"] != m.family:
        warn("inconsistent", f"{rel(rec)}: family {rec['family']!r} differs from {m.family!r} in other records")
    status = rec.get("status")
    if status == "ok":
        m.ok.append(rec)
    else:
        if status != "failed":
            rec = {**rec, "reason": f"unknown status {status!r}" + (f": {rec.get('reason')}" if rec.get("reason") else "")}
        m.failed.append(rec)


def _group_metric(recs: list[dict[str, Any]], where_g: str, warn: Warn) -> tuple[str, str]:
    """The metric and mode most of a group's records name (a warning when they differ)."""
    metrics = Counter(
        (r["metric"].get("name"), r["metric"].get("mode"))
        for r in recs if isinstance(r.get("metric"), dict) and r["metric"].get("name")
    )
    if metrics:
        (metric, mode), _ = metrics.most_common(1)[0]
        if len(metrics) > 1:
            warn("inconsistent", f"{where_g}: records name different metrics {sorted(map(str, metrics))}; "
                                 f"the report uses {metric} ({mode})")
    else:
        metric, mode = "?", "max"
    if mode not in stats.MODES:
        warn("inconsistent", f"{where_g}: unknown metric mode {mode!r}; treated as 'max'")
        mode = "max"
    return metric, mode


def _summarise_model(m: ModelResult, metric: str, confidence: float, warn: Warn, where: str, multi: bool,
                     rel: Callable[[dict[str, Any]], str]) -> None:
    """One model's seeds (duplicates resolved: the later-finished record), metric values,
    statistics and cost; warnings for what was left out and for failed seeds."""
    by_seed: dict[Any, list[dict]] = defaultdict(list)
    for r in m.ok:
        by_seed[r.get("seed")].append(r)
    kept = []
    for seed, rs in by_seed.items():
        rs = sorted(rs, key=_finished_key)
        if len(rs) > 1:
            warn("duplicates", f"{where} seed={seed}: {len(rs)} ok records "
                               f"({', '.join(rel(r) for r in rs)}); using the latest ({rel(rs[-1])})")
        kept.append(rs[-1])
    m.ok = sorted(kept, key=lambda r: _sort_key_seed(r.get("seed")))
    m.failed.sort(key=lambda r: _sort_key_seed(r.get("seed")))
    values, seeds = [], []
    for r in m.ok:
        rm = r.get("metric") if isinstance(r.get("metric"), dict) else {}
        if rm.get("name") not in (None, metric):
            warn("inconsistent", f"{rel(r)}: metric {rm.get('name')!r} is not the group's {metric!r}; left out")
            continue
        v = as_number((r.get("test") or {}).get(metric))
        if v is None or not math.isfinite(v):
            warn("no_metric", f"{rel(r)}: status ok but test[{metric!r}] is {(r.get('test') or {}).get(metric)!r}; left out of the statistics")
            continue
        values.append(v)
        seeds.append(r.get("seed"))
    m.values, m.seeds = values, seeds
    m.summary = stats.summarize(values, confidence, bounds=METRIC_BOUNDS.get(metric))
    m.cost = _aggregate_cost(m, warn, where)
    for r in m.failed:
        warn("failed", f"{_cell_label(r.get('task'), r.get('dataset'), r.get('model'), r.get('seed'), m.suite if multi else None)} "
                       f"(cell {r.get('cell_id')}): {r.get('reason') or 'no reason given'}")


def _rank(gmodels: list[ModelResult], metric: str, mode: str, confidence: float, warn: Warn, where_g: str,
          multi: bool, rel: Callable[[dict[str, Any]], str]) -> None:
    """Summarise each model of a group, then rank them (best mean first) in place."""
    for m in gmodels:
        _summarise_model(m, metric, confidence, warn, f"{where_g}/{m.model}", multi, rel)
    gmodels.sort(key=_rank_key(mode))
    counts = {m.model: len(m.values) for m in gmodels}
    if len(set(counts.values())) > 1:
        warn("unequal_seeds", f"{where_g}: unequal numbers of successful seeds: "
                              + ", ".join(f"{k} {v}" for k, v in counts.items()))


def group_of(records: Iterable[dict[str, Any]], metric: str, mode: str = "max", *,
             confidence: float = CONFIDENCE) -> Group:
    """One group from records held in memory (all of one task and dataset), its models
    summarised and ranked by ``metric`` exactly as :func:`analyse` does; its warnings dropped.
    For tools and tests that have records but no results folder."""
    recs = list(records)
    first = recs[0] if recs else {}
    gkey = tuple(str(first.get(k, "")) for k in ("suite", "task", "dataset"))
    models: dict[tuple, ModelResult] = {}
    labels = model_labels([(gkey, r) for r in recs])
    for rec in recs:
        _add_record(models, gkey, rec, lambda kind, msg: None, lambda r: "?", labels[id(rec)])
    gmodels = list(models.values())
    _rank(gmodels, metric, mode, confidence, lambda kind, msg: None, "/".join(gkey), False, lambda r: "?")
    g = Group(*gkey, metric, mode, gmodels, base_dataset=gkey[2])
    g.comparisons = comparisons(g, confidence)
    return g


def analyse(results_dir: str | os.PathLike | Sequence[str | os.PathLike], confidence: float = CONFIDENCE, *,
            merge: str | None = None) -> Analysis:
    """Load the records and manifests under ``results_dir`` (one folder, or a list of them for
    a combined report) and compute every statistic the report shows (no files written).
    ``merge``: report every suite found as one suite of that name (:func:`merge_suites`)."""
    roots = result_roots(results_dir)
    for r in roots:
        if not r.is_dir():
            raise ReportError(f"results folder {r} does not exist")
    root = roots[0]
    warns: dict[str, list[str]] = defaultdict(list)

    def warn(kind: str, msg: str) -> None:
        warns[kind].append(msg)

    records, manifests = load_inputs(roots, warn)  # a bad file is a warning, never an exception
    if not records and not manifests:
        bad = warns.get("unreadable", [])
        raise ReportError(f"no attnbench result records or suite manifests under {', '.join(map(str, roots))}"
                          + (f" ({len(bad)} file(s) left out; the first: {bad[0]})" if bad else ""))
    if merge is not None:
        records, manifests = merge_suites(records, manifests, merge)

    def rel(rec: dict[str, Any]) -> str:
        """A record's path inside its folder; in a combined report, the folder as named first
        (the same cell's records in two folders would otherwise read alike)."""
        p = rec.get("_path")
        if not p:
            return "?"
        for r in roots:
            with contextlib.suppress(ValueError):
                inside = Path(p).relative_to(r.resolve())
                return str(r / inside) if len(roots) > 1 else str(inside)
        return str(p)

    cells = manifest_cells(manifests)
    suites = sorted({str(r.get("suite")) for r in records} | {str(c["suite"]) for c in cells})
    multi = len(suites) > 1

    # ---- models per group, from records
    models: dict[tuple, ModelResult] = {}
    base_of: dict[tuple, tuple[str, float]] = {}
    diag_of: dict[tuple, str | None] = {}
    group_recs: dict[tuple, list[dict]] = defaultdict(list)
    have_ids = {r.get("cell_id") for r in records}  # a cell id hashes the resolved config
    absent = [c for c in cells if c["cell_id"] not in have_ids]
    # a dataset run with different dataset_params (a sweep's points): each point its own group
    points = dataset_variants([((x.get("suite"), x.get("task"), x.get("dataset"), _fraction_of(x), diagnostic_of(x)), x)
                               for x in [*records, *absent]])
    point_of: dict[tuple, dict[str, Any]] = {}

    def gkey_of(item: dict[str, Any]) -> tuple:
        point = points.get(id(item)) or {}
        label = dataset_label(str(item.get("dataset")), _fraction_of(item), diagnostic_of(item), point)
        key = (str(item.get("suite")), str(item.get("task")), label)
        point_of[key] = point
        return key

    labels = model_labels([(gkey_of(x), x) for x in [*records, *absent]])
    for rec in records:
        frac = _fraction_of(rec)
        gkey = gkey_of(rec)
        base_of[gkey] = (str(rec.get("dataset")), frac)
        diag_of[gkey] = diagnostic_of(rec)
        group_recs[gkey].append(rec)
        _add_record(models, gkey, rec, warn, rel, labels[id(rec)])

    # ---- expected cells without a record
    for c in absent:
        suite, task, ds, model = str(c["suite"]), str(c.get("task")), str(c.get("dataset")), labels[id(c)]
        frac = _fraction_of(c)
        ds = dataset_label(ds, frac, diagnostic_of(c))
        base_of.setdefault((suite, task, ds), (str(c.get("dataset")), frac))
        diag_of.setdefault((suite, task, ds), diagnostic_of(c))
        m = models.get((suite, task, ds, model))
        if m is None:
            m = models[(suite, task, ds, model)] = ModelResult(suite, task, ds, model, str(c.get("family") or "other"),
                                                               c.get("pattern"), kind=c.get("kind"))
        m.missing.append(c)
        warn("missing", f"{_cell_label(task, ds, model, c.get('seed'), suite if multi else None)} "
                        f"(cell {c['cell_id']}): in the suite manifest, no result record")

    # ---- records that the suite's manifest does not list (an earlier config of the suite)
    expected: dict[str, set] = defaultdict(set)
    for c in cells:
        expected[str(c["suite"])].add(c["cell_id"])
    stale: dict[str, list[str]] = defaultdict(list)
    for rec in records:
        suite = str(rec.get("suite"))
        if suite in expected and rec.get("cell_id") not in expected[suite]:
            stale[suite].append(rel(rec))
    for suite, paths in sorted(stale.items()):
        shown = ", ".join(paths[:10]) + (f", ... ({len(paths) - 10} more)" if len(paths) > 10 else "")
        warn("stale", f"suite {suite}: {len(paths)} record(s) not in the suite manifest (an earlier config?), "
                      f"still reported: {shown}")

    # ---- groups
    groups: list[Group] = []
    for gkey in sorted({k[:3] for k in models}):
        suite, task, ds = gkey
        where_g = f"{'[' + suite + '] ' if multi else ''}{task}/{ds}"
        recs = group_recs.get(gkey, [])
        metric, mode = _group_metric(recs, where_g, warn)
        gmodels = [m for k, m in models.items() if k[:3] == gkey]
        _rank(gmodels, metric, mode, confidence, warn, where_g, multi, rel)
        _warn_checksums(recs, ds, where_g, warn)
        base, frac = base_of.get(gkey, (ds, 1.0))
        g = Group(suite, task, ds, metric, mode, gmodels, base_dataset=base, train_fraction=frac,
                  diagnostic=diag_of.get(gkey), point=point_of.get(gkey) or {})
        g.comparisons = comparisons(g, confidence)
        groups.append(g)

    _warn_records(records, groups, multi, warn, rel)
    return Analysis(root, records, manifests, groups, dict(warns), multi, confidence)


def _warn_checksums(recs: list[dict[str, Any]], ds: str, where_g: str, warn: Warn) -> None:
    """A warning per dataset of a group whose records name different data checksums."""
    sums = defaultdict(set)
    for r in recs:
        d = r.get("data") if isinstance(r.get("data"), dict) else {}
        if d.get("checksum"):
            sums[str(d.get("name", ds))].add(d["checksum"])
    for name, cs in sums.items():
        if len(cs) > 1:
            warn("inconsistent", f"{where_g}: dataset {name} has {len(cs)} different checksums across records: {sorted(cs)}")


def _warn_records(records: list[dict[str, Any]], groups: list[Group], multi: bool, warn: Warn,
                  rel: Callable[[dict[str, Any]], str]) -> None:
    """Warnings over all records: a shared device, different budgets or machines in one table,
    several git commits or a dirty working tree."""
    # ---- records measured on a shared device: their time budgets and throughput are not comparable
    shared = [rec for rec in records if (as_number((rec.get("resources") or {}).get("cells_sharing_device")) or 1) > 1]
    if shared:
        shown = ", ".join(rel(r) for r in shared[:5]) + (f", ... ({len(shared) - 5} more)" if len(shared) > 5 else "")
        warn("shared", f"{len(shared)} record(s) were measured with the device shared between cells "
                       f"(--cells-per-gpu): compare their time, throughput and time-capped quality with care: {shown}")

    for msg in budget_warnings(groups, lambda g: group_title(g, multi)):
        warn("budgets", msg)  # one table's models stopped by different kinds of budget
    for msg in machine_warnings(groups, lambda g: group_title(g, multi)):
        warn("machines", msg)  # one table's models measured on different machines

    # ---- environment disagreements that are warnings
    commits = Counter((r.get("env") or {}).get("git_commit") for r in records)
    if len(commits) > 1:
        warn("commits", "records come from different git commits: "
                        + "; ".join(f"{short_commit(c)} ({n} record{'s' if n != 1 else ''})" for c, n in sorted(commits.items(), key=lambda x: str(x[0]))))
    dirty = sum(1 for r in records if (r.get("env") or {}).get("git_dirty"))
    if dirty:
        warn("commits", f"{dirty} of {len(records)} records were run from a working tree with uncommitted changes (git_dirty)")


def val_mean(m: ModelResult) -> float | None:
    """The mean best-validation score of a model's ok records (None when any lacks one)."""
    vals = [as_number((r.get("best_val") or {}).get("value")) for r in m.ok]
    if not vals or any(v is None or not math.isfinite(v) for v in vals):
        return None
    return sum(vals) / len(vals)


def best_of(g: Group, family: str) -> ModelResult | None:
    """The group's best model with results in ``family`` (a :func:`baseline_family` name), chosen
    on **validation** (the best mean of the records' best-validation scores), so that the test
    set that compares it is not the one that picked it; by test mean where a record has no
    validation score (older records)."""
    cands = [m for m in g.models if baseline_family(m) == family and m.values]
    if not cands:
        return None
    vals = [val_mean(m) for m in cands]
    if any(v is None for v in vals):
        return cands[0]  # g.models is ranked by test mean
    sign = 1.0 if g.mode == "max" else -1.0
    return max(zip(cands, vals), key=lambda mv: sign * mv[1])[0]  # ties: the better test mean


def compare_models(g: Group, a: ModelResult, b: ModelResult, confidence: float) -> tuple[stats.Difference, str]:
    """``a - b`` in the group's metric (paired over common seeds, else Welch), clipped to the
    metric's range, and the verdict for ``a``."""
    diff = stats.compare(a.values, b.values, a.seeds, b.seeds, confidence=confidence)
    diff = diff.clip(stats.difference_bounds(METRIC_BOUNDS.get(g.metric)))
    return diff, stats.verdict(diff, g.mode)


def comparisons(g: Group, confidence: float) -> list[Comparison]:
    """The best attention model against the best of each baseline family, plus the modern
    recurrences where the group ran one."""
    fams = BASELINE_FAMILIES + ((MODERN_RNN,) if any(baseline_family(m) == MODERN_RNN for m in g.models) else ())
    return [_compare(g, fam, confidence) for fam in fams]


def _compare(g: Group, fam: str, confidence: float) -> Comparison:
    def absent(family: str) -> str:
        present = [m for m in g.models if baseline_family(m) == family]
        if not present:
            return f"no {family} baseline run" if family != "attention" else "no attention model run"
        return f"no successful {family} run ({', '.join(m.model for m in present)}: every seed failed, is missing or has no test metric)"

    att, base = best_of(g, "attention"), best_of(g, fam)
    if att is None:
        return Comparison(fam, None, base, None, None, absent("attention"))
    if base is None:
        return Comparison(fam, att, None, None, None, absent(fam))
    diff, v = compare_models(g, att, base, confidence)
    return Comparison(fam, att, base, diff, v, _comparison_sentence(att, base, diff, v, g))


def _comparison_sentence(att: ModelResult, base: ModelResult, d: stats.Difference, v: str, g: Group) -> str:
    pct = int(round(d.confidence * 100))
    how = f"paired over {d.n_a} seeds" if d.method == "paired" else f"Welch, n={d.n_a} vs {d.n_b}"
    if v == stats.TOO_FEW:
        return (f"too few seeds (n={d.n}) to compare {att.model} with {base.model} (a verdict needs at least "
                f"{stats.MIN_SEEDS} per model): {g.metric} difference {d.diff:+.4g} ({how})")
    if d.identical:
        ci = f"every seed gives the same difference (n={d.n}, identical)"
    elif d.ci_defined:
        ci = f"{pct}% CI {fmt_ci(d.ci_low, d.ci_high, d.n, clipped=d.clipped)}"
    else:
        ci = f"{pct}% CI undefined (n={d.n})"
    vs = {
        stats.BETTER: f"{att.model} is better than {base.model}",
        stats.WORSE: f"{att.model} is worse than {base.model}",
        stats.NO_DIFFERENCE: f"no significant difference between {att.model} and {base.model}",
    }[v]
    return f"{vs}: {g.metric} difference {d.diff:+.4g}, {ci} ({how})"
