"""The report: ``attnbench report [RESULTS_DIR]``.

Reads only result files (the per-cell records and ``suite.json`` manifests under
``RESULTS_DIR``, see :mod:`benchmarks.records`; and, when present, the micro-benchmarks'
``bench_attention.json``/``.png`` and ``bench_complexity.json``/``.png``) and writes into
``out_dir`` (default ``RESULTS_DIR``):

* ``REPORT.md`` and a self-contained ``report.html`` (same content; images embedded as
  base64 data URIs, inline CSS, no external links or scripts);
* ``summary.csv``: one row per suite/task/dataset/model;
* ``plots/*.png``: per task/dataset quality vs train time, quality vs parameters and learning
  curves; a copy of the attention scaling plot.

Sections: environment (with a note where records disagree), overview, per task/dataset a
leaderboard, the best attention model against the best RNN and CNN baselines (difference
with a 95% CI and a verdict, see :mod:`benchmarks.stats`) and plots; the attention scaling
benchmark; "Why self-attention: Table 1 measured" (the complexity benchmark); warnings (failed and missing cells, unequal seed counts, several git commits, ...).

Aggregation over the ``ok`` seeds of a model (failed seeds never enter a statistic):

* test metric: mean, sample std, Student-t 95% CI of the mean (undefined with one seed);
* params and FLOPs/sample: the records' value (a warning if seeds disagree, then the mean);
* train time and throughputs: mean over seeds; peak memory: the maximum over seeds.

Records of different suites are never pooled: a leaderboard is per (suite, task, dataset);
the suite is named in headings only when the folder holds more than one. Within a suite, two
``ok`` records of the same task/dataset/model/seed (a stale record from an older config)
keep the later-finished one, with a warning.

Task-specific artefacts in ``rec["extras"]`` are rendered by :data:`EXTRA_RENDERERS`.
"""

from __future__ import annotations

import base64
import contextlib
import csv
import datetime as _dt
import html as _html
import io
import json
import math
import os
import re
import shutil
import tempfile
import warnings
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable, Sequence

from benchmarks import report_budget, report_test_sets, stats
from benchmarks.records import MANIFEST, RUNS_DIR, load_manifests, load_records

__all__ = [
    "EXTRA_RENDERERS",
    "BENCH_RENDERERS",
    "BenchContext",
    "ExtraContext",
    "ExtraSection",
    "ReportError",
    "Analysis",
    "Group",
    "ModelResult",
    "Comparison",
    "BenchAttention",
    "FAMILIES",
    "SUMMARY_COLUMNS",
    "analyse",
    "write_report",
    "bench_candidate_dirs",
    "find_bench_attention",
    "find_bench_complexity",
    "embed_png",
    "add_report_arguments",
    "run_report_command",
]

FAMILIES = ("attention", "rnn", "cnn", "other")
BASELINE_FAMILIES = ("rnn", "cnn")
FAMILY_COLORS = {"attention": "tab:red", "rnn": "tab:blue", "cnn": "tab:green", "other": "tab:gray"}
MEM_KINDS = {"cuda_allocated": "CUDA allocator peak", "cpu_rss_growth": "CPU RSS growth"}
BENCH_NAME = "bench_attention"
COMPLEXITY_NAME = "bench_complexity"
CONFIDENCE = 0.95

SUMMARY_COLUMNS = (
    "suite", "task", "dataset", "model", "family", "pattern", "metric", "mode",
    "n_ok", "n_failed", "n_missing", "mean", "std", "ci_low", "ci_high",
    "params", "flops_per_sample", "train_time_s_mean", "train_samples_per_s", "infer_samples_per_s",
    "train_tokens_per_s", "infer_tokens_per_s", "peak_mem_bytes", "peak_mem_kind",
)
COST_COLUMNS = SUMMARY_COLUMNS[SUMMARY_COLUMNS.index("params"):]


class ReportError(ValueError):
    """Nothing to report on (no folder, no records and no manifests)."""


# ============================================================================ extras hook
@dataclass
class ExtraContext:
    """What an extras renderer gets: the key, the group, and ``(record, rec["extras"][key])``
    for every ``ok`` record of the group that has the key. ``plots_dir`` is where it may write
    images (reference them as ``plots/<name>`` in markdown and with :func:`embed_png` in html)."""

    key: str
    suite: str
    task: str
    dataset: str
    items: list[tuple[dict[str, Any], Any]]
    plots_dir: Path
    out_dir: Path


@dataclass
class ExtraSection:
    markdown: str
    html: str


ExtraRenderer = Callable[[ExtraContext], "ExtraSection | None"]

#: ``rec["extras"]`` key -> renderer. Tasks register here (e.g. confusion tables, attention
#: maps); keys without a renderer are listed in the report as not rendered.
EXTRA_RENDERERS: dict[str, ExtraRenderer] = {}


@dataclass
class BenchContext:
    """What a micro-benchmark section renderer gets: the benchmark's name, the folder holding
    its ``bench_<name>.json``, the parsed JSON (None if unreadable), and where to write plots."""

    name: str
    bench_dir: Path
    doc: Any
    plots_dir: Path
    out_dir: Path


#: micro-benchmark name -> renderer of its report section (for benchmarks beyond ``attention``
#: and ``complexity``, whose sections are built in); found like those, via bench_candidate_dirs.
BENCH_RENDERERS: dict[str, Callable[[BenchContext], "ExtraSection | None"]] = {}


# ============================================================================ formatting
def _num(x: Any) -> float | None:
    if x is None or isinstance(x, bool):
        return None
    try:
        v = float(x)
    except (TypeError, ValueError):
        return None
    return v


def fmt_metric(x: Any) -> str:
    v = _num(x)
    return "–" if v is None else f"{v:.4g}"


def fmt_si(x: Any, unit: str = "") -> str:
    v = _num(x)
    if v is None:
        return "–"
    if not math.isfinite(v):
        return f"{v}{unit}"
    a = abs(v)
    for factor, suffix in ((1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k")):
        if a >= factor:
            return f"{v / factor:.3g}{suffix}{unit}"
    return f"{v:.3g}{unit}"


def fmt_bytes(x: Any) -> str:
    v = _num(x)
    if v is None:
        return "–"
    for factor, suffix in ((1 << 40, "TiB"), (1 << 30, "GiB"), (1 << 20, "MiB"), (1 << 10, "KiB")):
        if abs(v) >= factor:
            return f"{v / factor:.3g} {suffix}"
    return f"{v:.0f} B"


def fmt_seconds(x: Any) -> str:
    v = _num(x)
    if v is None:
        return "–"
    if abs(v) < 60:
        return f"{v:.3g} s"
    if abs(v) < 3600:
        return f"{v / 60:.3g} min"
    return f"{v / 3600:.3g} h"


def fmt_ci(lo: Any, hi: Any, n: int | None = None) -> str:
    if lo is None or hi is None:
        return f"undefined (n={n})" if n is not None else "undefined"
    return f"[{fmt_metric(lo)}, {fmt_metric(hi)}]"


def _csv_value(x: Any) -> str:
    if x is None:
        return ""
    if isinstance(x, bool):
        return str(x).lower()
    if isinstance(x, int):
        return str(x)
    if isinstance(x, float):
        return repr(x)
    if hasattr(x, "item"):
        return _csv_value(x.item())
    return str(x)


def _slug(*parts: str) -> str:
    return "__".join(re.sub(r"[^A-Za-z0-9._-]+", "_", str(p)) for p in parts if p)


# ============================================================================ document model
@dataclass
class _H:
    level: int
    text: str
    anchor: str | None = None


@dataclass
class _P:
    text: str
    cls: str | None = None


@dataclass
class _Table:
    headers: list[str]
    rows: list[list[str]]


@dataclass
class _Img:
    path: Path  # absolute
    rel: str  # relative to out_dir, for markdown
    alt: str


@dataclass
class _List:
    items: list[str]
    cls: str | None = None


@dataclass
class _Pre:
    text: str


@dataclass
class _Raw:
    markdown: str
    html: str


def _md_cell(s: str) -> str:
    return str(s).replace("|", "\\|").replace("\n", " ")


def _render_md(blocks: list[Any]) -> str:
    out: list[str] = []
    for b in blocks:
        if isinstance(b, _H):
            out.append("#" * b.level + " " + b.text)
        elif isinstance(b, _P):
            out.append(b.text)
        elif isinstance(b, _Table):
            out.append("| " + " | ".join(_md_cell(h) for h in b.headers) + " |")
            out.append("|" + "|".join("---" for _ in b.headers) + "|")
            out.extend("| " + " | ".join(_md_cell(c) for c in row) + " |" for row in b.rows)
        elif isinstance(b, _Img):
            out.append(f"![{b.alt}]({b.rel})")
        elif isinstance(b, _List):
            out.extend(f"- {item}" for item in b.items)
        elif isinstance(b, _Pre):
            out.append("```\n" + b.text + "\n```")
        elif isinstance(b, _Raw):
            out.append(b.markdown)
        out.append("")
    return "\n".join(out).rstrip() + "\n"


def embed_png(path: str | os.PathLike) -> str:
    """A ``data:image/png;base64,...`` URI of the file (for self-contained html)."""
    return "data:image/png;base64," + base64.b64encode(Path(path).read_bytes()).decode("ascii")


_CSS = """
body{font-family:-apple-system,Segoe UI,Helvetica,Arial,sans-serif;max-width:1200px;margin:2em auto;padding:0 1em;color:#222;line-height:1.4}
h1{border-bottom:2px solid #444}h2{border-bottom:1px solid #bbb;margin-top:2em}
table{border-collapse:collapse;margin:0.8em 0;font-size:0.9em}
th,td{border:1px solid #ccc;padding:3px 8px;text-align:left;vertical-align:top}
th{background:#f0f0f0}tr:nth-child(even) td{background:#fafafa}
img{max-width:100%;border:1px solid #ddd;margin:0.5em 0}
pre{background:#f6f6f6;padding:0.6em;overflow-x:auto}
.note{color:#555;font-size:0.9em}
.warn{background:#fff4e5;border-left:4px solid #e69500;padding:0.4em 1em}
.ok{color:#1a7f37}.bad{color:#b42318}
"""


def _render_html(blocks: list[Any], title: str) -> str:
    e = _html.escape
    out = [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        f"<title>{e(title)}</title>",
        f"<style>{_CSS}</style>",
        "</head><body>",
    ]
    for b in blocks:
        if isinstance(b, _H):
            anchor = f' id="{e(b.anchor)}"' if b.anchor else ""
            out.append(f"<h{b.level}{anchor}>{e(b.text)}</h{b.level}>")
        elif isinstance(b, _P):
            cls = f' class="{b.cls}"' if b.cls else ""
            out.append(f"<p{cls}>{e(b.text)}</p>")
        elif isinstance(b, _Table):
            out.append("<table><thead><tr>" + "".join(f"<th>{e(h)}</th>" for h in b.headers) + "</tr></thead><tbody>")
            out.extend("<tr>" + "".join(f"<td>{e(str(c))}</td>" for c in row) + "</tr>" for row in b.rows)
            out.append("</tbody></table>")
        elif isinstance(b, _Img):
            out.append(f'<div><img src="{embed_png(b.path)}" alt="{e(b.alt)}"></div>')
        elif isinstance(b, _List):
            cls = f' class="{b.cls}"' if b.cls else ""
            out.append(f"<ul{cls}>" + "".join(f"<li>{e(i)}</li>" for i in b.items) + "</ul>")
        elif isinstance(b, _Pre):
            out.append(f"<pre>{e(b.text)}</pre>")
        elif isinstance(b, _Raw):
            out.append(b.html)
    out.append("</body></html>")
    return "\n".join(out) + "\n"


def _write_text_atomic(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8", newline="") as f:
            f.write(text)
        os.chmod(tmp, 0o644)  # mkstemp makes 0600; a report is for reading
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return path


# ============================================================================ analysis
@dataclass
class ModelResult:
    suite: str
    task: str
    dataset: str
    model: str
    family: str
    pattern: str | None
    ok: list[dict[str, Any]] = field(default_factory=list)
    failed: list[dict[str, Any]] = field(default_factory=list)
    missing: list[dict[str, Any]] = field(default_factory=list)  # manifest cells without a record
    values: list[float] = field(default_factory=list)  # test metric of the ok records, in seed order
    seeds: list[Any] = field(default_factory=list)
    summary: stats.Summary | None = None
    cost: dict[str, Any] = field(default_factory=dict)

    @property
    def mean(self) -> float | None:
        return None if self.summary is None else self.summary.mean


@dataclass
class Comparison:
    baseline_family: str
    attention: ModelResult | None
    baseline: ModelResult | None
    difference: stats.Difference | None
    verdict: str | None
    message: str  # the plain sentence


@dataclass
class Group:
    suite: str
    task: str
    dataset: str
    metric: str
    mode: str
    models: list[ModelResult]
    comparisons: list[Comparison] = field(default_factory=list)
    base_dataset: str = ""  # the dataset name without the training-set fraction
    train_fraction: float = 1.0

    @property
    def key(self) -> tuple[str, str, str]:
        return (self.suite, self.task, self.dataset)


@dataclass
class Analysis:
    results_dir: Path
    records: list[dict[str, Any]]
    manifests: list[dict[str, Any]]
    groups: list[Group]
    warnings: dict[str, list[str]]
    multi_suite: bool
    confidence: float


def _sort_key_seed(s: Any) -> tuple:
    return (0, s, "") if isinstance(s, (int, float)) and not isinstance(s, bool) else (1, 0, str(s))


def _cell_label(task: Any, dataset: Any, model: Any, seed: Any, suite: str | None = None) -> str:
    prefix = f"[{suite}] " if suite else ""
    return f"{prefix}{task}/{dataset}/{model} seed={seed}"


def _fraction_of(rec: dict[str, Any]) -> float:
    """The training-set fraction a record (or manifest cell) trained on; 1.0 when absent."""
    for src in (rec.get("data"), rec.get("config"), rec):
        if isinstance(src, dict) and _num(src.get("train_fraction")) is not None:
            return float(src["train_fraction"])
    return 1.0


def dataset_label(dataset: Any, fraction: float) -> str:
    """A group's dataset label: the name, plus the training-set fraction when below 1 (each
    fraction of a data-size sweep is its own group: its leaderboard and comparisons)."""
    return str(dataset) if fraction >= 1 else f"{dataset} [train {fraction * 100:.4g}%]"


def _finished_key(rec: dict[str, Any]) -> str:
    return str(rec.get("finished") or rec.get("started") or "")


def _aggregate_cost(m: ModelResult, warn: Callable[[str, str], None], where: str) -> dict[str, Any]:
    costs = [r.get("cost") or {} for r in m.ok]

    def vals(key: str) -> list[Any]:
        return [c.get(key) for c in costs if _num(c.get(key)) is not None]

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


def _manifest_cells(manifests: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Expected cells from the manifests (``{"suite": ..., "cells": [{"cell_id", "task",
    "dataset", "model", "seed", ...}]}``); each gets the manifest's suite name."""
    out = []
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
            if cid is None:
                continue
            out.append({**c, "cell_id": cid, "suite": c.get("suite", suite)})
    return out


#: Range of bounded metrics (as records store them): confidence intervals are clipped to it.
METRIC_BOUNDS: dict[str, tuple[float, float]] = {"acc": (0.0, 1.0), "bleu": (0.0, 100.0), "chrf": (0.0, 100.0)}


def _roots(results_dir: str | os.PathLike | Sequence[str | os.PathLike]) -> list[Path]:
    if isinstance(results_dir, (list, tuple)):
        if not results_dir:
            raise ReportError("no results folder given")
        return [Path(p) for p in results_dir]
    return [Path(results_dir)]


def suite_folders(root: str | os.PathLike, *, skip_reference: bool = True) -> list[Path]:
    """The suite folders at or under ``root``: folders with a ``suite.json`` or a ``runs/``
    folder (not searched further). ``skip_reference`` leaves out ``reference/`` sub-folders
    (committed reference results), so that fresh results are never pooled with them."""
    root = Path(root)
    if (root / MANIFEST).is_file() or (root / RUNS_DIR).is_dir():
        return [root]
    found: list[Path] = []
    if not root.is_dir():
        return found
    for child in sorted(p for p in root.iterdir() if p.is_dir() and not p.name.startswith(".")):
        if skip_reference and child.name == "reference":
            continue
        found.extend(suite_folders(child, skip_reference=skip_reference))
    return found


def analyse(results_dir: str | os.PathLike | Sequence[str | os.PathLike], confidence: float = CONFIDENCE) -> Analysis:
    """Load the records and manifests under ``results_dir`` (one folder, or a list of them for
    a combined report) and compute every statistic the report shows (no files written)."""
    roots = _roots(results_dir)
    for r in roots:
        if not r.is_dir():
            raise ReportError(f"results folder {r} does not exist")
    root = roots[0]
    warns: dict[str, list[str]] = defaultdict(list)

    def warn(kind: str, msg: str) -> None:
        warns[kind].append(msg)

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        records = [rec for r in roots for rec in load_records(r)]
        manifests = [m for r in roots for m in load_manifests(r)]
    for w in caught:
        warn("unreadable", str(w.message))
    if not records and not manifests:
        raise ReportError(f"no attnbench result records or suite manifests under {', '.join(map(str, roots))}")

    def rel(rec: dict[str, Any]) -> str:
        p = rec.get("_path")
        if not p:
            return "?"
        for r in roots:
            with contextlib.suppress(ValueError):
                return str(Path(p).relative_to(r.resolve()))
        return str(p)

    suites = sorted({str(r.get("suite")) for r in records} | {str(c["suite"]) for c in _manifest_cells(manifests)})
    multi = len(suites) > 1

    # ---- models per group, from records
    models: dict[tuple, ModelResult] = {}
    base_of: dict[tuple, tuple[str, float]] = {}
    group_recs: dict[tuple, list[dict]] = defaultdict(list)
    for rec in records:
        suite, task, ds, model = (str(rec.get(k)) for k in ("suite", "task", "dataset", "model"))
        frac = _fraction_of(rec)
        ds = dataset_label(ds, frac)
        base_of[(suite, task, ds)] = (str(rec.get("dataset")), frac)
        gkey = (suite, task, ds)
        group_recs[gkey].append(rec)
        m = models.get((*gkey, model))
        if m is None:
            m = models[(*gkey, model)] = ModelResult(suite, task, ds, model, str(rec.get("family") or "other"), rec.get("pattern"))
        if rec.get("family") and rec["family"] != m.family:
            warn("inconsistent", f"{rel(rec)}: family {rec['family']!r} differs from {m.family!r} in other records")
        status = rec.get("status")
        if status == "ok":
            m.ok.append(rec)
        else:
            if status != "failed":
                rec = {**rec, "reason": f"unknown status {status!r}" + (f": {rec.get('reason')}" if rec.get("reason") else "")}
            m.failed.append(rec)

    # ---- expected cells without a record
    have_ids = {r.get("cell_id") for r in records}  # a cell id hashes the resolved config
    for c in _manifest_cells(manifests):
        if c["cell_id"] in have_ids:
            continue
        suite, task, ds, model = str(c["suite"]), str(c.get("task")), str(c.get("dataset")), str(c.get("model"))
        frac = _fraction_of(c)
        ds = dataset_label(ds, frac)
        base_of.setdefault((suite, task, ds), (str(c.get("dataset")), frac))
        m = models.get((suite, task, ds, model))
        if m is None:
            m = models[(suite, task, ds, model)] = ModelResult(suite, task, ds, model, str(c.get("family") or "other"), c.get("pattern"))
        m.missing.append(c)
        warn("missing", f"{_cell_label(task, ds, model, c.get('seed'), suite if multi else None)} "
                        f"(cell {c['cell_id']}): in the suite manifest, no result record")

    # ---- records that the suite's manifest does not list (an earlier config of the suite)
    expected: dict[str, set] = defaultdict(set)
    for c in _manifest_cells(manifests):
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
    group_keys = sorted({k[:3] for k in models})
    groups: list[Group] = []
    for gkey in group_keys:
        suite, task, ds = gkey
        where_g = f"{'[' + suite + '] ' if multi else ''}{task}/{ds}"
        recs = group_recs.get(gkey, [])
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
        gmodels = [m for k, m in models.items() if k[:3] == gkey]
        for m in gmodels:
            where = f"{where_g}/{m.model}"
            # duplicates (same seed twice among ok records): keep the later-finished one
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
                v = _num((r.get("test") or {}).get(metric))
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
        gmodels.sort(key=_rank_key(mode))
        counts = {m.model: len(m.values) for m in gmodels}
        if len(set(counts.values())) > 1:
            warn("unequal_seeds", f"{where_g}: unequal numbers of successful seeds: "
                                  + ", ".join(f"{k} {v}" for k, v in counts.items()))
        # data checksums within the group
        sums = defaultdict(set)
        for r in recs:
            d = r.get("data") if isinstance(r.get("data"), dict) else {}
            if d.get("checksum"):
                sums[str(d.get("name", ds))].add(d["checksum"])
        for name, cs in sums.items():
            if len(cs) > 1:
                warn("inconsistent", f"{where_g}: dataset {name} has {len(cs)} different checksums across records: {sorted(cs)}")
        base, frac = base_of.get(gkey, (ds, 1.0))
        g = Group(suite, task, ds, metric, mode, gmodels, base_dataset=base, train_fraction=frac)
        g.comparisons = [_compare(g, fam, confidence) for fam in BASELINE_FAMILIES]
        groups.append(g)

    # ---- records measured on a shared device: their time budgets and throughput are not comparable
    shared = [rec for rec in records if int(((rec.get("resources") or {}).get("cells_sharing_device")) or 1) > 1]
    if shared:
        shown = ", ".join(rel(r) for r in shared[:5]) + (f", ... ({len(shared) - 5} more)" if len(shared) > 5 else "")
        warn("shared", f"{len(shared)} record(s) were measured with the device shared between cells "
                       f"(--cells-per-gpu): compare their time, throughput and time-capped quality with care: {shown}")

    for msg in report_budget.budget_warnings(groups, lambda g: _group_title(g, multi)):
        warn("budgets", msg)  # one table's models stopped by different kinds of budget

    # ---- environment disagreements that are warnings
    commits = Counter((r.get("env") or {}).get("git_commit") for r in records)
    if len(commits) > 1:
        warn("commits", "records come from different git commits: "
                        + "; ".join(f"{_short_commit(c)} ({n} record{'s' if n != 1 else ''})" for c, n in sorted(commits.items(), key=lambda x: str(x[0]))))
    dirty = sum(1 for r in records if (r.get("env") or {}).get("git_dirty"))
    if dirty:
        warn("commits", f"{dirty} of {len(records)} records were run from a working tree with uncommitted changes (git_dirty)")

    return Analysis(root, records, manifests, groups, dict(warns), multi, confidence)


def _short_commit(c: Any) -> str:
    return "unknown" if not c else str(c)[:12]


def _compare(g: Group, fam: str, confidence: float) -> Comparison:
    def best(family: str) -> ModelResult | None:
        cands = [m for m in g.models if m.family == family and m.values]
        return cands[0] if cands else None  # g.models is ranked

    def absent(family: str) -> str:
        present = [m for m in g.models if m.family == family]
        if not present:
            return f"no {family} baseline run" if family != "attention" else "no attention model run"
        return f"no successful {family} run ({', '.join(m.model for m in present)}: every seed failed, is missing or has no test metric)"

    att, base = best("attention"), best(fam)
    if att is None:
        return Comparison(fam, None, base, None, None, absent("attention"))
    if base is None:
        return Comparison(fam, att, None, None, None, absent(fam))
    diff = stats.compare(att.values, base.values, att.seeds, base.seeds, confidence=confidence)
    v = stats.verdict(diff, g.mode)
    return Comparison(fam, att, base, diff, v, _comparison_sentence(att, base, diff, v, g))


def _comparison_sentence(att: ModelResult, base: ModelResult, d: stats.Difference, v: str, g: Group) -> str:
    pct = int(round(d.confidence * 100))
    if d.ci_defined:
        ci = f"{pct}% CI [{fmt_metric(d.ci_low)}, {fmt_metric(d.ci_high)}]"
    else:
        ci = f"{pct}% CI undefined (n={min(d.n_a, d.n_b)})"
    how = f"paired over {d.n_a} seeds" if d.method == "paired" else f"Welch, n={d.n_a} vs {d.n_b}"
    vs = {
        stats.BETTER: f"{att.model} is better than {base.model}",
        stats.WORSE: f"{att.model} is worse than {base.model}",
        stats.NO_DIFFERENCE: f"no significant difference between {att.model} and {base.model}",
    }[v]
    return f"{vs}: {g.metric} difference {d.diff:+.4g}, {ci} ({how})"


# ============================================================================ environment
def _parse_date(s: Any) -> _dt.datetime | None:
    if not isinstance(s, str):
        return None
    try:
        d = _dt.datetime.fromisoformat(s.replace("Z", "+00:00"))
    except ValueError:
        return None
    return d if d.tzinfo else d.replace(tzinfo=_dt.timezone.utc)


def _distinct(values: Iterable[Any]) -> str:
    c = Counter("–" if v is None else str(v) for v in values)
    if len(c) <= 1:
        return next(iter(c), "–")
    return "DIFFER: " + "; ".join(f"{k} ({n})" for k, n in sorted(c.items()))


def _environment_blocks(an: Analysis) -> list[Any]:
    recs = an.records
    envs = [r.get("env") or {} for r in recs]
    dates = [d for r in recs for d in (_parse_date((r.get("env") or {}).get("date")), _parse_date(r.get("started")),
                                        _parse_date(r.get("finished"))) if d]
    rows = [["records", f"{len(recs)} ({sum(r.get('status') == 'ok' for r in recs)} ok, "
                        f"{sum(r.get('status') != 'ok' for r in recs)} failed)"]]
    suites = sorted({str(r.get("suite")) for r in recs} | {str(c["suite"]) for c in _manifest_cells(an.manifests)})
    rows.append(["suites", ", ".join(suites) or "–"])
    if dates:
        lo, hi = min(dates), max(dates)
        rows.append(["date range", f"{lo.isoformat(timespec='seconds')} .. {hi.isoformat(timespec='seconds')}"])
    commits = [(e.get("git_commit"), e.get("git_dirty")) for e in envs]
    commit_txt = _distinct(f"{_short_commit(c)}{' (dirty)' if d else ''}" for c, d in commits)
    for label, key in (("python", "python"), ("torch", "torch"), ("lightning", "lightning"),
                       ("torch_geometric", "torch_geometric"), ("CUDA", "cuda"), ("device", "device"),
                       ("device name", "device_name"), ("platform", "platform"), ("CPU count", "cpu_count"),
                       ("torch threads", "torch_threads")):
        rows.append([label, _distinct(e.get(key) for e in envs)])
    rows += report_budget.environment_rows(envs, _distinct)
    rows.append(["precision", _distinct(((r.get("config") or {}).get("trainer") or {}).get("precision", "32-true")
                                        for r in recs)])
    if any(e.get("float32_matmul_precision") for e in envs):
        rows.append(["float32 matmul", _distinct(e.get("float32_matmul_precision") for e in envs)])
    rows.append(["git commit", commit_txt])
    blocks: list[Any] = [_H(2, "Environment", "environment"), _Table(["", "value"], rows)]
    differ = [r[0] for r in rows if str(r[1]).startswith("DIFFER")]
    if differ:
        blocks.append(_P("Records disagree on: " + ", ".join(differ) + " (values with record counts above). "
                         "Compare numbers across those records with care.", "warn"))
    # data checksums
    data_rows = []
    seen: dict[tuple, Counter] = defaultdict(Counter)
    for r in recs:
        d = r.get("data") if isinstance(r.get("data"), dict) else None
        if d:
            seen[(str(r.get("task")), str(r.get("dataset")), str(d.get("name")), str(d.get("synthetic")))][str(d.get("checksum"))] += 1
    for (task, ds, name, syn), cs in sorted(seen.items()):
        data_rows.append([task, ds, name, syn, "; ".join(f"{c} ({n})" if len(cs) > 1 else c for c, n in sorted(cs.items()))])
    if data_rows:
        blocks += [_H(3, "Data"), _Table(["task", "dataset", "data", "synthetic", "checksum"], data_rows)]
    return blocks


# ============================================================================ plots
def _figure(figsize=(7.0, 4.5)):
    from matplotlib.figure import Figure

    return Figure(figsize=figsize, dpi=100)


def _save(fig, path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp.png")
    fig.savefig(tmp, format="png", bbox_inches="tight")
    os.replace(tmp, path)
    return path


def _legend_families(ax, families: Iterable[str]) -> None:
    from matplotlib.lines import Line2D

    fams = [f for f in FAMILIES if f in set(families)] + sorted(set(families) - set(FAMILIES))
    handles = [Line2D([], [], marker="o", ls="", color=FAMILY_COLORS.get(f, "black"), label=f) for f in fams]
    if handles:
        ax.legend(handles=handles, fontsize=8, title="family", title_fontsize=8)


def _log_axis_labels(ax, xs: list[float], unit_fmt: Callable[[float], str]) -> None:
    """Plain tick labels on a log x axis (``12 s``, ``120k``); within a decade, evenly spaced
    ticks (a log axis has none there); some room around the points."""
    from matplotlib.ticker import FuncFormatter, MaxNLocator, NullFormatter, NullLocator

    lo, hi = min(xs), max(xs)
    pad = 1.5 if hi == lo else max(1.05, (hi / lo) ** 0.1)
    ax.set_xlim(lo / pad, hi * pad)
    if hi * pad / (lo / pad) < 10:
        ax.xaxis.set_major_locator(MaxNLocator(5))
        ax.xaxis.set_minor_locator(NullLocator())
    ax.xaxis.set_major_formatter(FuncFormatter(lambda x, _pos: unit_fmt(x)))
    ax.xaxis.set_minor_formatter(NullFormatter())


def _plot_quality_vs(g: Group, xkey: str, xlabel: str, path: Path, title: str,
                     unit_fmt: Callable[[float], str] = fmt_si) -> Path | None:
    pts = [(m, _num(m.cost.get(xkey))) for m in g.models if m.mean is not None]
    pts = [(m, x) for m, x in pts if x is not None and x > 0]
    if not pts:
        return None
    fig = _figure()
    ax = fig.add_subplot(1, 1, 1)
    for m, x in pts:
        c = FAMILY_COLORS.get(m.family, "black")
        ax.errorbar([x], [m.mean], yerr=[[m.summary.std or 0.0]] if m.summary.std is not None else None,
                    fmt="o", color=c, capsize=3, ms=6)
        ax.annotate(m.model, (x, m.mean), xytext=(4, 4), textcoords="offset points", fontsize=7)
    ax.set_xscale("log")
    _log_axis_labels(ax, [x for _, x in pts], unit_fmt)
    ax.set_xlabel(xlabel)
    ax.set_ylabel(f"test {g.metric} ({'higher' if g.mode == 'max' else 'lower'} is better)")
    ax.set_title(title, fontsize=10)
    ax.grid(True, alpha=0.3, which="both")
    _legend_families(ax, [m.family for m, _ in pts])
    return _save(fig, path)


def _plot_curves(g: Group, path: Path, title: str) -> Path | None:
    series = []
    for m in g.models:
        by_epoch: dict[Any, list[float]] = defaultdict(list)
        for r in m.ok:
            for pt in r.get("curve") or []:
                if not isinstance(pt, dict):
                    continue
                e, v = _num(pt.get("epoch")), _num(pt.get("val_metric"))
                if e is not None and v is not None and math.isfinite(v):
                    by_epoch[e].append(v)
        if by_epoch:
            es = sorted(by_epoch)
            series.append((m, es, [stats.mean(by_epoch[e]) for e in es]))
    if not series:
        return None
    fig = _figure()
    ax = fig.add_subplot(1, 1, 1)
    styles = ["-", "--", ":", "-."]
    fam_count: Counter = Counter()
    for m, es, ys in series:
        ls = styles[fam_count[m.family] % len(styles)]
        fam_count[m.family] += 1
        ax.plot(es, ys, ls, color=FAMILY_COLORS.get(m.family, "black"), label=f"{m.model} ({m.family})", lw=1.5,
                marker="o" if len(es) <= 30 else None, ms=3)
    from matplotlib.ticker import MaxNLocator

    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax.set_xlabel("epoch")
    ax.set_ylabel(f"validation {g.metric} (mean over seeds)")
    ax.set_title(title, fontsize=10)
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=7)
    return _save(fig, path)


# ============================================================================ attention scaling bench
@dataclass
class BenchAttention:
    """A micro-benchmark's output files (attention scaling or complexity) and its parsed JSON."""

    json_path: Path | None
    png_path: Path | None
    doc: dict[str, Any] | None


def bench_candidate_dirs(results_dir: str | os.PathLike, name: str = "attention") -> list[Path]:
    """Where ``attnbench bench NAME`` output may lie relative to a results folder: the folder
    itself, ``bench/`` and ``bench/NAME/`` in it, and ``../bench`` and ``../bench/NAME`` (the CLI
    default is ``results/bench/NAME``)."""
    r = Path(results_dir)
    return [r, r / "bench", r / "bench" / name, r.parent / "bench", r.parent / "bench" / name]


def _find_bench(candidate_dirs: Sequence[str | os.PathLike], stem: str) -> BenchAttention | None:
    for d in candidate_dirs:
        d = Path(d)
        j, p = d / f"{stem}.json", d / f"{stem}.png"
        if not (j.is_file() or p.is_file()):
            continue
        doc = None
        if j.is_file():
            try:
                doc = json.loads(j.read_text(encoding="utf-8"))
            except (OSError, json.JSONDecodeError):
                doc = None
        return BenchAttention(j if j.is_file() else None, p if p.is_file() else None, doc if isinstance(doc, dict) else None)
    return None


def find_bench_attention(candidate_dirs: Sequence[str | os.PathLike]) -> BenchAttention | None:
    """The first candidate folder holding ``bench_attention.json`` or ``.png``; ``None`` if none."""
    return _find_bench(candidate_dirs, BENCH_NAME)


def find_bench_complexity(candidate_dirs: Sequence[str | os.PathLike]) -> BenchAttention | None:
    """The first candidate folder holding ``bench_complexity.json`` or ``.png``; ``None`` if none."""
    return _find_bench(candidate_dirs, COMPLEXITY_NAME)


def _bench_blocks(bench: BenchAttention, plots_dir: Path, out_dir: Path, written: dict[str, Path],
                  warn: Callable[[str, str], None]) -> list[Any]:
    blocks: list[Any] = [_H(2, "Attention scaling benchmark", "bench-attention")]
    src = bench.json_path or bench.png_path
    blocks.append(_P(f"From {src} (attnbench bench attention).", "note"))
    doc = bench.doc
    if bench.json_path is not None and doc is None:
        warn("unreadable", f"{bench.json_path}: not readable as JSON")
    if doc:
        setup = doc.get("setup") or {}
        env = doc.get("environment") or {}
        blocks.append(_P(
            f"Status: {doc.get('status')}; device: {env.get('device_name') or setup.get('device')}; "
            f"dtype: {setup.get('dtype')}; {len(doc.get('points') or [])} points; date {env.get('date', '–')}."
        ))
    if bench.png_path is not None:
        dest = plots_dir / f"{BENCH_NAME}.png"
        if bench.png_path.resolve() != dest.resolve():
            dest.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(bench.png_path, dest)
        written[f"plots/{dest.name}"] = dest
        blocks.append(_Img(dest, f"plots/{dest.name}", "attention scaling: time and memory vs size"))
    blocks += _checks_blocks(doc)
    return blocks


def _checks_blocks(doc: dict[str, Any] | None) -> list[Any]:
    """A micro-benchmark's ``checks`` as a table (result, check, value, target, note)."""
    checks = (doc or {}).get("checks")
    if isinstance(checks, list) and checks:
        rows = []
        for c in checks:
            if not isinstance(c, dict):
                continue
            v = c.get("value")
            rows.append([
                {True: "PASS", False: "FAIL", None: "info"}.get(c.get("pass"), str(c.get("pass"))),
                str(c.get("name", "")),
                f"{v:.4g}" if isinstance(v, float) else ("–" if v is None else str(v)),
                str(c.get("target", "")),
                str(c.get("note") or ""),
            ])
        return [_H(3, "Checks"), _Table(["result", "check", "value", "target", "note"], rows)]
    if doc is not None:
        return [_P("The benchmark JSON has no checks.", "note")]
    return []


# ============================================================================ complexity bench (Table 1)
def _fmt_exponent(fit: Any, paper: Any = None) -> str:
    """``1.93 ± 0.04 (top 2.01)`` and, with ``paper``, ``[paper 2]``."""
    if not isinstance(fit, dict) or _num(fit.get("exponent")) is None:
        s = "–"
    else:
        s = f"{fit['exponent']:.2f}"
        if _num(fit.get("stderr")) is not None:
            s += f" ± {fit['stderr']:.2f}"
        if _num(fit.get("tail_exponent")) is not None:
            s += f" (top {fit['tail_exponent']:.2f})"
    if _num(paper) is not None:
        s += f" [paper {paper:g}]"
    return s


def _by_n(values: Any, limit: int = 6) -> str:
    """``{"64": 1, "256": 1}`` -> ``n=64: 1, n=256: 1`` (largest ``limit`` n)."""
    if not isinstance(values, dict) or not values:
        return "–"
    items = sorted(((int(k), v) for k, v in values.items() if str(k).lstrip("-").isdigit()), key=lambda kv: kv[0])
    return ", ".join(f"n={n}: {v}" for n, v in items[-limit:])


def _path_cell(paths: Any) -> str:
    if not isinstance(paths, list) or not paths:
        return "–"
    parts = []
    for p in paths:
        if not isinstance(p, dict):
            continue
        hops = [h for h in p.get("hops") or [] if isinstance(h, dict) and h.get("hops") is not None]
        largest = max((h["n"] for h in hops), default=None)
        at = [h for h in hops if h["n"] == largest]
        shown = ", ".join(
            f"{h['hops']}" + ("" if h.get("param") is None else f" ({'r' if 'attention' in str(p.get('probe')) else 'k'}={h['param']})")
            for h in at)
        mark = "" if p.get("all_match", True) else " (probe ≠ closed form!)"
        parts.append(f"{p.get('probe')}: {p.get('best')}{mark}" + (f"; n={largest}: {shown} hops" if at else ""))
    return "; ".join(parts) or "–"


def _complexity_blocks(bench: BenchAttention, plots_dir: Path, out_dir: Path, written: dict[str, Path],
                       warn: Callable[[str, str], None]) -> list[Any]:
    """"Why self-attention: Table 1 measured": the paper's columns and the measured ones side by
    side, memory exponents, path-length and sequential-operation details, the plot, checks."""
    blocks: list[Any] = [_H(2, "Why self-attention: Table 1 measured", "bench-complexity")]
    src = bench.json_path or bench.png_path
    blocks.append(_P(f"From {src} (attnbench bench complexity). Paper: Vaswani et al. (2017), "
                     f"Attention Is All You Need, Table 1.", "note"))
    doc = bench.doc
    if bench.json_path is not None and doc is None:
        warn("unreadable", f"{bench.json_path}: not readable as JSON")
    doc = doc or {}
    setup = doc.get("setup") or {}
    env = doc.get("environment") or {}
    if doc:
        sn, sd = setup.get("sweep_n") or {}, setup.get("sweep_d") or {}
        blocks.append(_P(
            f"Status: {doc.get('status')}; device: {env.get('device_name') or setup.get('device')}; dtype: "
            f"{setup.get('dtype')}; batch {setup.get('batch')}, heads {setup.get('heads')}, window r={setup.get('window')}, "
            f"kernel k={setup.get('kernel')}; n sweep {sn.get('lengths')} at d={sn.get('d')}; d sweep "
            f"{sd.get('widths')} at n={sd.get('n')}; {len(doc.get('points') or [])} timing points in "
            f"{fmt_seconds(doc.get('wall_time_s'))}; date {env.get('date', '–')}."))
    rows = [r for r in doc.get("table") or [] if isinstance(r, dict)]
    if rows:
        paper_rows = (doc.get("paper") or {}).get("rows") or {}
        if paper_rows:
            blocks.append(_H(3, "The paper's table"))
            blocks.append(_Table(
                ["layer type", "complexity per layer", "sequential operations", "maximum path length"],
                [[str(r.get("row")), str(r.get("complexity")), str(r.get("sequential")), str(r.get("path"))]
                 for r in paper_rows.values() if isinstance(r, dict)]))
        blocks.append(_H(3, "Paper and measured, side by side"))
        blocks.append(_Table(
            ["layer (measured)", "paper row", "complexity per layer (paper)", "time ∝ n^e: e measured",
             "time ∝ d^e: e measured", "sequential operations (paper)", "sequential steps, measured",
             "maximum path length (paper)", "maximum path length, measured (best fit)"],
            [[str(r.get("layer")), str(r.get("paper_row")), str(r.get("paper_complexity")),
              _fmt_exponent(r.get("time_exp_n"), r.get("paper_exp_n")),
              _fmt_exponent(r.get("time_exp_d"), r.get("paper_exp_d")),
              str(r.get("paper_sequential")),
              f"{r.get('sequential_class') or '–'} ({_by_n(r.get('sequential_steps'), 2)})",
              str(r.get("paper_path")), _path_cell(r.get("path"))] for r in rows]))
        blocks.append(_P(
            "Exponent e: slope of the least-squares line through (log size, log time) over the sweep ± its standard "
            "error; 'top': the slope over the largest three sizes, where fixed per-call costs matter least. Time is "
            "forward + backward of one layer (median of the timed repeats). The *_op rows time the attention alone, "
            "the part of a layer Table 1 counts; the layers add O(n·d²) projections. Sequential steps: the longest "
            "chain of dependent step applications (a recurrence is counted on an explicit cell loop with the fused "
            "module's weights). Maximum path length: the fewest hops (layers, or time steps inside a recurrence) "
            "through which input 0 reaches output n−1, measured by autograd (nonzero gradient), fitted against 1, "
            "log n, n/r (n/k) and n; the best R² is named.", "note"))
        blocks.append(_H(3, "Memory"))
        blocks.append(_Table(
            ["layer", "peak memory ∝ n^e", "peak memory ∝ d^e", "implementation"],
            [[str(r.get("layer")), _fmt_exponent(r.get("mem_exp_n")), _fmt_exponent(r.get("mem_exp_d")),
              str((setup.get("layers") or {}).get(r.get("layer"), ""))] for r in rows]))
        blocks.append(_P("Peak memory: growth over the inputs during one forward + backward call (activations kept "
                         "for backward and gradients); the paper's table has no memory column.", "note"))
    kinds = ((doc.get("path_length") or {}).get("kinds")) or {}
    if kinds:
        prow = []
        for kind, k in kinds.items():
            if not isinstance(k, dict):
                continue
            fit = k.get("fit") or {}
            r2 = ", ".join(f"{m}: {'–' if v.get('r2') is None else format(v['r2'], '.3f')}"
                           for m, v in (fit.get("models") or {}).items() if isinstance(v, dict))
            pts = [p for p in k.get("points") or [] if isinstance(p, dict)]
            by_param: dict[Any, list[str]] = defaultdict(list)
            for p in pts:
                by_param[p.get("param")].append(f"{p.get('n')}:{p.get('hops')}")
            hops = "; ".join(("" if prm is None else f"{'r' if 'attention' in kind else 'k'}={prm}: ") + " ".join(v)
                             for prm, v in by_param.items())
            prow.append([kind, str(k.get("paper")), str(fit.get("best")),
                         "yes" if k.get("all_match") else "NO", r2, hops])
        blocks.append(_H(3, "Maximum path length, measured"))
        blocks.append(_Table(["probe", "paper", "best fit", "= closed form", "R² per model", "n:hops"], prow))
        method = (doc.get("path_length") or {}).get("method")
        if method:
            blocks.append(_P(f"Method: {method}.", "note"))
    seq = ((doc.get("sequential_ops") or {}).get("layers")) or {}
    if seq:
        srow = []
        for layer, s in seq.items():
            if not isinstance(s, dict):
                continue
            pts = [p for p in s.get("points") or [] if isinstance(p, dict)]
            srow.append([layer, str(s.get("paper")), str(s.get("steps_class")),
                         " ".join(f"{p.get('n')}:{p.get('steps')}" for p in pts),
                         str(s.get("critical_path_class")),
                         " ".join(f"{p.get('n')}:{p.get('critical_path_ops')}" for p in pts)])
        blocks.append(_H(3, "Sequential operations, counted"))
        blocks.append(_Table(["layer", "paper", "steps: growth", "n:steps", "critical path: growth",
                              "n:autograd ops"], srow))
        method = (doc.get("sequential_ops") or {}).get("method")
        if method:
            blocks.append(_P(f"Method: {method}.", "note"))
    failed = [p for p in doc.get("points") or [] if isinstance(p, dict) and p.get("status") not in (None, "ok")]
    if failed:
        blocks.append(_P("Points not measured: " + "; ".join(
            f"{p.get('layer')} n={p.get('n')} d={p.get('d')}: {p.get('status')}"
            + (f" ({p['reason']})" if p.get("reason") else "") for p in failed), "warn"))
    if bench.png_path is not None:
        dest = plots_dir / f"{COMPLEXITY_NAME}.png"
        if bench.png_path.resolve() != dest.resolve():
            dest.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(bench.png_path, dest)
        written[f"plots/{dest.name}"] = dest
        blocks.append(_Img(dest, f"plots/{dest.name}", "Table 1 measured: log-log time, memory, path length, "
                                                        "sequential operations"))
    blocks += _checks_blocks(doc if bench.doc is not None else None)
    return blocks


# ============================================================================ sections
def _group_title(g: Group, multi: bool) -> str:
    return f"{'[' + g.suite + '] ' if multi else ''}{g.task} / {g.dataset}"


def _train_size(m: ModelResult) -> float | None:
    sizes = [_num((r.get("data") or {}).get("train_size")) for r in m.ok if isinstance(r.get("data"), dict)]
    sizes = [x for x in sizes if x is not None]
    return stats.mean(sizes) if sizes else None


def _plot_datasize(gs: list[Group], path: Path, title: str) -> Path | None:
    """Test metric (mean ± std over seeds) against the training-set size, one line per model."""
    series: dict[str, list[tuple[float, float, float]]] = defaultdict(list)
    family: dict[str, str] = {}
    for g in gs:
        for m in g.models:
            if m.mean is None:
                continue
            x = _train_size(m) or g.train_fraction
            series[m.model].append((x, m.mean, m.summary.std or 0.0))
            family[m.model] = m.family
    series = {k: sorted(v) for k, v in series.items() if v}
    if not series:
        return None
    fig = _figure()
    ax = fig.add_subplot(1, 1, 1)
    styles = ["-", "--", ":", "-."]
    fam_count: Counter = Counter()
    for model, pts in sorted(series.items()):
        ls = styles[fam_count[family[model]] % len(styles)]
        fam_count[family[model]] += 1
        ax.errorbar([p[0] for p in pts], [p[1] for p in pts], yerr=[p[2] for p in pts], fmt=ls, marker="o",
                    color=FAMILY_COLORS.get(family[model], "black"), capsize=3, ms=4, lw=1.5,
                    label=f"{model} ({family[model]})")
    ax.set_xscale("log")
    _log_axis_labels(ax, [p[0] for pts in series.values() for p in pts], fmt_si)
    g0 = gs[0]
    ax.set_xlabel("training examples (log)")
    ax.set_ylabel(f"test {g0.metric} ({'higher' if g0.mode == 'max' else 'lower'} is better)")
    ax.set_title(title, fontsize=10)
    ax.grid(True, alpha=0.3, which="both")
    ax.legend(fontsize=8)
    return _save(fig, path)


def _datasize_blocks(an: Analysis, plots_dir: Path, written: dict[str, Path],
                     warn: Callable[[str, str], None]) -> list[Any]:
    """For each task/dataset run at two or more training-set fractions (``train_fraction``):
    a table of the metric per model and fraction, and the metric-vs-data-size plot."""
    sweeps: dict[tuple, list[Group]] = defaultdict(list)
    for g in an.groups:
        sweeps[(g.suite, g.task, g.base_dataset or g.dataset)].append(g)
    blocks: list[Any] = []
    for (suite, task, base), gs in sweeps.items():
        if len({g.train_fraction for g in gs}) < 2:
            continue
        gs = sorted(gs, key=lambda g: g.train_fraction)
        title = f"{'[' + suite + '] ' if an.multi_suite else ''}{task} / {base}: quality vs training-set size"
        blocks += [_H(2, title, _slug(suite, task, base, "datasize"))]
        models = sorted({m.model for g in gs for m in g.models})
        headers = ["model", "family"] + [f"{g.train_fraction * 100:.4g}% (n={fmt_si(_train_size(g.models[0]) if g.models else None)})"
                                         for g in gs]
        rows = []
        for model in models:
            fam, cells = "", []
            for g in gs:
                m = next((m for m in g.models if m.model == model), None)
                if m is None or m.mean is None:
                    cells.append("–")
                    continue
                fam = m.family
                cells.append(fmt_metric(m.mean) + (f" ± {fmt_metric(m.summary.std)}" if m.summary.std is not None else ""))
            rows.append([model, fam, *cells])
        blocks.append(_Table(headers, rows))
        blocks.append(_P(f"Test {gs[0].metric} (mean ± std over seeds) per training-set fraction; each fraction is "
                         f"a seeded random subset of the training split (the run seed draws it, so models with "
                         f"the same seed saw the same examples). Validation and test sets are unchanged.", "note"))
        name = f"{_slug(suite if an.multi_suite else '', task, base)}__datasize.png"
        try:
            p = _plot_datasize(gs, plots_dir / name, title)
        except Exception as exc:  # noqa: BLE001 - a plot failure must not lose the report
            warn("plots", f"{title}: {type(exc).__name__}: {exc}")
            p = None
        if p is not None:
            written[f"plots/{name}"] = p
            blocks.append(_Img(p, f"plots/{name}", "quality vs training-set size"))
    return blocks


def _throughput(samples: Any, tokens: Any) -> str:
    s = "–" if _num(samples) is None else f"{fmt_si(samples)} samples/s"
    if _num(tokens) is not None:
        s += f"; {fmt_si(tokens)} tok/s"
    return s


def _leaderboard(g: Group, an: Analysis) -> _Table:
    pct = int(round(an.confidence * 100))
    headers = ["#", "model", "family", "pattern", f"{g.metric} mean ± std", f"{pct}% CI", "params",
               "FLOPs/sample", "train time", "train throughput", "inference throughput", "peak memory",
               "seeds ok/failed" + ("/missing" if an.manifests else "")]
    rows = []
    rank = 0
    for m in g.models:
        s = m.summary
        if s is not None and s.mean is not None:
            rank += 1
            r = str(rank)
            ms = fmt_metric(s.mean) + (f" ± {fmt_metric(s.std)}" if s.std is not None else " (n=1)")
            ci = fmt_ci(s.ci_low, s.ci_high, s.n)
        else:
            r, ms, ci = "–", "–", "–"
        c = m.cost
        mem = fmt_bytes(c.get("peak_mem_bytes"))
        if c.get("peak_mem_bytes") is not None and c.get("peak_mem_kind"):
            mem += f" ({MEM_KINDS.get(c['peak_mem_kind'], c['peak_mem_kind'])})"
        seeds = f"{len(m.values)}/{len(m.failed)}" + (f"/{len(m.missing)}" if an.manifests else "")
        if len(m.ok) != len(m.values):
            seeds += f" ({len(m.ok) - len(m.values)} ok without metric)"
        rows.append([
            r, m.model + report_budget.model_marker(m.ok), m.family, str(m.pattern or "–"), ms, ci, fmt_si(c.get("params")),
            fmt_si(c.get("flops_per_sample")), fmt_seconds(c.get("train_time_s_mean")),
            _throughput(c.get("train_samples_per_s"), c.get("train_tokens_per_s")),
            _throughput(c.get("infer_samples_per_s"), c.get("infer_tokens_per_s")), mem, seeds,
        ])
    return _Table(headers, rows)


def _comparison_table(g: Group, confidence: float) -> _Table:
    pct = int(round(confidence * 100))
    rows = []
    for c in g.comparisons:
        if c.difference is None:
            rows.append([f"attention vs {c.baseline_family}", c.attention.model if c.attention else "–",
                         c.baseline.model if c.baseline else "–", "–", "–", "–", c.message])
            continue
        d = c.difference
        rows.append([
            f"attention vs {c.baseline_family}", c.attention.model, c.baseline.model, f"{d.diff:+.4g}",
            fmt_ci(d.ci_low, d.ci_high, min(d.n_a, d.n_b)),
            f"paired t, {d.n_a} seeds" if d.method == "paired" else f"Welch t, n={d.n_a} vs {d.n_b}",
            c.verdict,
        ])
    return _Table(["comparison", "best attention", "best baseline", "difference (attention − baseline)",
                   f"{pct}% CI", "interval", "verdict"], rows)


def _extras_blocks(g: Group, plots_dir: Path, out_dir: Path, warn: Callable[[str, str], None]) -> list[Any]:
    items: dict[str, list[tuple[dict, Any]]] = defaultdict(list)
    for m in g.models:
        for r in m.ok:
            ex = r.get("extras")
            if isinstance(ex, dict):
                for k, v in ex.items():
                    items[k].append((r, v))
    if not items:
        return []
    blocks: list[Any] = []
    unrendered = []
    for key in sorted(items):
        fn = EXTRA_RENDERERS.get(key)
        if fn is None:
            unrendered.append(key)
            continue
        try:
            sec = fn(ExtraContext(key, g.suite, g.task, g.dataset, items[key], plots_dir, out_dir))
        except Exception as exc:  # noqa: BLE001 - one bad renderer must not lose the report
            warn("render", f"{g.task}/{g.dataset}: extras renderer for {key!r} failed: {type(exc).__name__}: {exc}")
            continue
        if sec is not None:
            blocks.append(_Raw(sec.markdown, sec.html))
    if unrendered:
        blocks.append(_P("Task artefacts in the records without a renderer (see EXTRA_RENDERERS): "
                         + ", ".join(unrendered), "note"))
    return blocks


def _summary_rows(an: Analysis) -> list[dict[str, Any]]:
    rows = []
    for g in an.groups:
        for m in g.models:
            s = m.summary
            rows.append({
                "suite": g.suite, "task": g.task, "dataset": g.dataset, "model": m.model, "family": m.family,
                "pattern": m.pattern, "metric": g.metric, "mode": g.mode,
                "n_ok": len(m.values), "n_failed": len(m.failed), "n_missing": len(m.missing),
                "mean": s.mean if s else None, "std": s.std if s else None,
                "ci_low": s.ci_low if s else None, "ci_high": s.ci_high if s else None,
                **{k: m.cost.get(k) for k in COST_COLUMNS},
            })
    return rows


def _write_csv(path: Path, rows: list[dict[str, Any]]) -> Path:
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(SUMMARY_COLUMNS)
    for row in rows:
        w.writerow([_csv_value(row.get(c)) for c in SUMMARY_COLUMNS])
    return _write_text_atomic(path, buf.getvalue())


_WARNING_TITLES = (
    ("failed", "Failed cells"),
    ("missing", "Missing cells (in a suite manifest, no record)"),
    ("unequal_seeds", "Unequal seed counts"),
    ("shared", "Measured on a shared device"),
    ("budgets", "Models stopped by different budgets"),
    ("commits", "Git commits"),
    ("duplicates", "Duplicate records"),
    ("stale", "Records not in the suite manifest"),
    ("no_metric", "Records without the metric"),
    ("inconsistent", "Inconsistent records"),
    ("unreadable", "Unreadable files"),
    ("plots", "Plots"),
    ("render", "Extras renderers"),
)


def _warning_blocks(warns: dict[str, list[str]]) -> list[Any]:
    blocks: list[Any] = [_H(2, "Warnings", "warnings")]
    if not any(warns.values()):
        blocks.append(_P("None."))
        return blocks
    titles = dict(_WARNING_TITLES)
    for kind in [k for k, _ in _WARNING_TITLES] + sorted(set(warns) - set(titles)):
        msgs = warns.get(kind)
        if msgs:
            blocks += [_H(3, f"{titles.get(kind, kind)} ({len(msgs)})"), _List(list(msgs), "warn")]
    return blocks


# ============================================================================ entry points
def write_report(
    results_dir: str | os.PathLike,
    out_dir: str | os.PathLike | None = None,
    *,
    bench_dirs: Sequence[str | os.PathLike] | None = None,
    confidence: float = CONFIDENCE,
) -> dict[str, Path]:
    """Write ``REPORT.md``, ``report.html``, ``summary.csv`` and ``plots/*.png`` for the records
    under ``results_dir`` into ``out_dir`` (default ``results_dir``). ``bench_dirs``: where to
    look for the micro-benchmarks' output (default :func:`bench_candidate_dirs` of each).

    Returns ``{path relative to out_dir: absolute path}`` of every file written. Raises
    :class:`ReportError` when there is nothing to report on."""
    roots = _roots(results_dir)
    if out_dir is None and len(roots) > 1:
        raise ReportError("a report of several results folders needs --out DIR (where to write it)")
    an = analyse(roots, confidence)
    from benchmarks.extras import load_all

    load_all()  # the domains' renderers register in EXTRA_RENDERERS
    out = Path(out_dir) if out_dir is not None else roots[0]
    source = ", ".join(map(str, roots))
    results_dir = roots[0]  # where micro-benchmark output is looked for
    out.mkdir(parents=True, exist_ok=True)
    plots_dir = out / "plots"
    written: dict[str, Path] = {}
    warns = an.warnings

    def warn(kind: str, msg: str) -> None:
        warns.setdefault(kind, []).append(msg)

    pct = int(round(confidence * 100))
    blocks: list[Any] = [
        _H(1, "attnbench report"),
        _P(f"Generated {_dt.datetime.now(_dt.timezone.utc).isoformat(timespec='seconds')} from {source} "
           f"({len(an.records)} records). Statistics are over the successful seeds of each model: mean ± sample "
           f"std, and the Student-t {pct}% confidence interval of the mean (undefined with one seed).", "note"),
    ]
    blocks += _environment_blocks(an)

    # overview
    ov_rows = []
    for g in an.groups:
        ranked = [m for m in g.models if m.mean is not None]
        best = f"{ranked[0].model} ({fmt_metric(ranked[0].mean)})" if ranked else "–"
        ov_rows.append([_group_title(g, an.multi_suite), f"{g.metric} ({g.mode})", str(len(g.models)), best,
                        *[c.verdict or c.message for c in g.comparisons]])
    blocks += [_H(2, "Overview", "overview"),
               _Table(["task / dataset", "metric", "models", "best (mean)",
                       *[f"attention vs {f}" for f in BASELINE_FAMILIES]], ov_rows)]
    if any(warns.values()):
        n = sum(len(v) for v in warns.values())
        blocks.append(_P(f"{n} warning(s): see Warnings at the end.", "warn"))

    for g in an.groups:
        title = _group_title(g, an.multi_suite)
        blocks += [_H(2, title, _slug(g.suite, g.task, g.dataset))]
        blocks.append(_P(f"Test {g.metric} at the best-validation checkpoint "
                         f"({'higher' if g.mode == 'max' else 'lower'} is better); ranked by mean.", "note"))
        blocks.append(_leaderboard(g, an))
        capped = report_budget.leaderboard_note(g.models)
        if capped:
            blocks.append(_P(capped, "warn"))
        sets = report_test_sets.test_set_table(g.models, g.metric, an.confidence, METRIC_BOUNDS.get(g.metric),
                                               fmt_metric, lambda msg, t=title: warn("test_sets", f"{t}: {msg}"))
        if sets is not None:
            blocks += [_H(3, "Test sets"), _Table(*sets),
                       _P("Each model's best-validation weights scored on its own test split and on every other "
                          "test set (a cell's test_sets, or attnbench eval on kept weights); mean ± std over "
                          "seeds with the t-interval.", "note")]
        blocks.append(_H(3, "Attention against the best baselines"))
        blocks.append(_comparison_table(g, an.confidence))
        blocks.append(_List([c.message for c in g.comparisons]))
        blocks.append(_P(
            f"Difference = attention − baseline in {g.metric}; best model of a family by mean "
            f"(the interval does not account for that selection). Paired t-interval when both models ran the "
            f"same seeds, Welch otherwise. Verdict: the {pct}% CI excludes 0 (better/worse w.r.t. the metric's "
            f"direction) or not (no significant difference).", "note"))
        stem = _slug(g.suite if an.multi_suite else "", g.task, g.dataset)
        plots = [
            (f"{stem}__quality_vs_time.png", lambda p, g=g, t=title: _plot_quality_vs(
                g, "train_time_s_mean", "train time (mean over seeds, log)", p, f"{t}: quality vs train time",
                fmt_seconds)),
            (f"{stem}__quality_vs_params.png", lambda p, g=g, t=title: _plot_quality_vs(
                g, "params", "parameters (log)", p, f"{t}: quality vs parameters")),
            (f"{stem}__learning_curves.png", lambda p, g=g, t=title: _plot_curves(g, p, f"{t}: learning curves")),
        ]
        imgs = []
        for name, fn in plots:
            try:
                p = fn(plots_dir / name)
            except Exception as exc:  # noqa: BLE001 - a plot failure must not lose the report
                warn("plots", f"{title}: {name}: {type(exc).__name__}: {exc}")
                continue
            if p is not None:
                written[f"plots/{name}"] = p
                imgs.append(_Img(p, f"plots/{name}", name[len(stem) + 2:-4].replace("_", " ")))
        if imgs:
            blocks += [_H(3, "Plots"), *imgs]
            blocks.append(_P("Error bars: sample std over seeds; colour: model family; learning curves: "
                             "validation metric per epoch, mean over the seeds that reached the epoch.", "note"))
        blocks += _extras_blocks(g, plots_dir, out, warn)

    bench = find_bench_attention(bench_dirs if bench_dirs is not None else bench_candidate_dirs(results_dir))
    if bench is not None:
        try:
            blocks += _bench_blocks(bench, plots_dir, out, written, warn)
        except Exception as exc:  # noqa: BLE001
            warn("plots", f"attention scaling benchmark: {type(exc).__name__}: {exc}")
    cx = find_bench_complexity(bench_dirs if bench_dirs is not None else bench_candidate_dirs(results_dir, "complexity"))
    if cx is not None:
        try:
            blocks += _complexity_blocks(cx, plots_dir, out, written, warn)
        except Exception as exc:  # noqa: BLE001
            warn("render", f"complexity benchmark (Table 1): {type(exc).__name__}: {exc}")

    blocks += _datasize_blocks(an, plots_dir, written, warn)

    for bname, render in sorted(BENCH_RENDERERS.items()):
        cands = bench_dirs if bench_dirs is not None else bench_candidate_dirs(results_dir, bname)
        found = _find_bench(cands, f"bench_{bname}")
        if found is None or found.json_path is None:
            continue
        try:
            sec = render(BenchContext(bname, found.json_path.parent, found.doc, plots_dir, out))
        except Exception as exc:  # noqa: BLE001 - one bad renderer must not lose the report
            warn("render", f"{bname} benchmark: {type(exc).__name__}: {exc}")
            continue
        if sec is not None:
            blocks.append(_Raw(sec.markdown, sec.html))

    blocks += _warning_blocks(warns)

    written["summary.csv"] = _write_csv(out / "summary.csv", _summary_rows(an))
    written["REPORT.md"] = _write_text_atomic(out / "REPORT.md", _render_md(blocks))
    written["report.html"] = _write_text_atomic(out / "report.html", _render_html(blocks, "attnbench report"))
    return written


# ============================================================================ CLI helpers
def add_report_arguments(parser) -> None:
    """Arguments of ``attnbench report``: ``[RESULTS_DIR ...] [--out DIR] [--bench-dir DIR ...]``."""
    parser.add_argument("results_dirs", nargs="*", metavar="RESULTS_DIR",
                        help="a suite folder (results/<suite>); a folder of suites reports each suite on "
                             "its own; several folders make one combined report (needs --out). Default: "
                             "every suite folder under results/ except results/reference, each on its own")
    parser.add_argument("--out", metavar="DIR", default=None, help="where to write the report (default: the suite folder)")
    parser.add_argument("--bench-dir", dest="bench_dirs", action="append", default=None, metavar="DIR",
                        help="folder with bench_attention.json/.png or bench_complexity.json/.png (repeatable; "
                             "default: RESULTS_DIR, RESULTS_DIR/bench[/NAME], RESULTS_DIR/../bench[/NAME])")


def report_targets(results_dirs: Sequence[str], out: str | None) -> list[tuple[list[Path], Path | None]]:
    """What ``attnbench report`` writes: ``[(folders, out_dir)]``, one report per entry. A report
    covers one suite folder unless the user names several (then one combined report in
    ``out``); committed reference results are never pooled with fresh ones."""
    if not results_dirs:
        folders = suite_folders("results")
        if not folders:
            raise ReportError("no suite folders under results/ (results/reference is left out unless named); "
                              "name one: attnbench report results/<suite>")
        return [([f], None) for f in folders] if out is None or len(folders) == 1 else [(folders, Path(out))]
    for d in results_dirs:
        if not Path(d).is_dir():
            raise ReportError(f"results folder not found: {d}")
    if len(results_dirs) > 1:
        if out is None:
            raise ReportError(f"{len(results_dirs)} results folders make one combined report: name where with --out DIR")
        return [([Path(d) for d in results_dirs], Path(out))]
    root = Path(results_dirs[0])
    folders = suite_folders(root, skip_reference=root.name != "reference" and "reference" not in root.parts)
    if len(folders) <= 1:
        return [([root], Path(out) if out else None)]
    if out is not None:
        raise ReportError(f"{root} holds {len(folders)} suites ({', '.join(f.name for f in folders)}): each is "
                          "reported in its own folder, so --out does not apply; name the folders to combine them")
    return [([f], None) for f in folders]


def run_report_command(args) -> int:
    """Handler for ``attnbench report``: writes each report and prints what it wrote. A
    :class:`ReportError` becomes the CLI's usage error (exit code 2)."""
    try:
        targets = report_targets(args.results_dirs, args.out)
        for folders, out in targets:
            written = write_report(folders if len(folders) > 1 else folders[0], out, bench_dirs=args.bench_dirs)
            for key in ("REPORT.md", "report.html", "summary.csv"):
                print(f"wrote {written[key]}")
            n_plots = sum(1 for k in written if k.startswith("plots/"))
            if n_plots:
                print(f"wrote {n_plots} plot(s) in {written['REPORT.md'].parent / 'plots'}")
    except ReportError as exc:
        from benchmarks.cli import CliError

        raise CliError(str(exc)) from None
    return 0
