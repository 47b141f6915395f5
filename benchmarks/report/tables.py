"""The report's tables as public builders: a group's leaderboard and its comparisons of the
best attention model against the best baselines, the overview, the warnings section and the
rows of ``summary.csv``. A domain section may call them to show a group the report's way."""

from __future__ import annotations

import csv
import io
from pathlib import Path
from typing import Any, Sequence

from benchmarks.report.budget import model_marker
from benchmarks.report.document import Block, BulletList, Heading, Paragraph, Table, write_text_atomic
from benchmarks.report.format import as_number, csv_value, fmt_bytes, fmt_ci, fmt_metric, fmt_seconds, fmt_si
from benchmarks.report import stats
from benchmarks.report.results import (
    BASELINE_FAMILIES,
    CONFIDENCE,
    Analysis,
    Comparison,
    Group,
    ModelResult,
    effective_pattern,
    group_title,
    longest_input,
    record_window,
)

__all__ = ["FLOPS_MARK", "flops_may_miss", "flops_may_miss_recurrent", "flops_note", "compile_note", "pattern_label", "MEM_KINDS", "SUMMARY_COLUMNS", "COST_COLUMNS", "WARNING_TITLES", "leaderboard_table",
           "comparison_table", "verdict_label", "overview_table", "warning_summary", "warning_blocks", "summary_rows", "write_summary_csv"]

MEM_KINDS = {"cuda_allocated": "CUDA allocator peak", "cpu_rss_growth": "CPU RSS growth"}

SUMMARY_COLUMNS = (
    "suite", "task", "dataset", "model", "family", "pattern", "metric", "mode",
    "n_ok", "n_failed", "n_missing", "mean", "std", "ci_low", "ci_high",
    "params", "flops_per_sample", "train_time_s_mean", "train_samples_per_s", "infer_samples_per_s",
    "train_tokens_per_s", "infer_tokens_per_s", "peak_mem_bytes", "peak_mem_kind",
)
COST_COLUMNS = SUMMARY_COLUMNS[SUMMARY_COLUMNS.index("params"):]


def _throughput(samples: Any, tokens: Any) -> str:
    s = "–" if as_number(samples) is None else f"{fmt_si(samples)} samples/s"
    if as_number(tokens) is not None:
        s += f"; {fmt_si(tokens)} tok/s"
    return s


def leaderboard_table(g: Group, confidence: float = CONFIDENCE, *, missing_column: bool = False) -> Table:
    """A group's leaderboard: rank, model, metric mean ± std and CI, cost columns and seed
    counts (``missing_column``: also the manifest cells without a record)."""
    pct = int(round(confidence * 100))
    headers = ["#", "model", "family", "pattern", f"{g.metric} mean ± std", f"{pct}% CI", "params",
               "FLOPs/sample", "train time", "train throughput", "inference throughput", "peak memory",
               "seeds ok/failed" + ("/missing" if missing_column else "")]
    rows = []
    rank = 0
    for m in g.models:
        s = m.summary
        if s is not None and s.mean is not None:
            rank += 1
            r = str(rank)
            ms = fmt_metric(s.mean) + (" (n=1)" if s.std is None else f" (n={s.n}, identical)" if s.identical
                                       else f" ± {fmt_metric(s.std)}")
            ci = fmt_ci(s.ci_low, s.ci_high, s.n, clipped=s.clipped, identical=s.identical)
        else:
            r, ms, ci = "–", "–", "–"
        c = m.cost
        mem = fmt_bytes(c.get("peak_mem_bytes"))
        if c.get("peak_mem_bytes") is not None and c.get("peak_mem_kind"):
            mem += f" ({MEM_KINDS.get(c['peak_mem_kind'], c['peak_mem_kind'])})"
        seeds = f"{len(m.values)}/{len(m.failed)}" + (f"/{len(m.missing)}" if missing_column else "")
        if len(m.ok) != len(m.values):
            seeds += f" ({len(m.ok) - len(m.values)} ok without metric)"
        rows.append([
            r, m.model + model_marker(m.ok), m.family, pattern_label(m), ms, ci, fmt_si(c.get("params")),
            fmt_si(c.get("flops_per_sample")) + (FLOPS_MARK if flops_may_miss(m) else ""),
            fmt_seconds(c.get("train_time_s_mean")),
            _throughput(c.get("train_samples_per_s"), c.get("train_tokens_per_s")),
            _throughput(c.get("infer_samples_per_s"), c.get("infer_tokens_per_s")), mem, seeds,
        ])
    return Table(headers, rows)


#: the leaderboard's marker on FLOPs counted before recurrent layers were (see :func:`flops_note`)
FLOPS_MARK = " ‡"


def flops_may_miss(m: ModelResult) -> str | None:
    """What a model's FLOPs/sample may leave out, by its records' ``cost.flops_rule``: recurrent
    layers (family ``rnn``; torch's counter gives a fused LSTM/GRU/RNN op 0 FLOPs) or, for an
    attention model, CPU SDPA's products (no formula in torch). None when counted or unknown."""
    rules = [str((r.get("cost") or {}).get("flops_rule") or "") for r in m.ok
             if as_number((r.get("cost") or {}).get("flops_per_sample")) is not None]
    if m.family == "rnn" and any("recurrent" not in rule for rule in rules):
        return "recurrent layers"
    if m.family == "attention" and any("sdpa" not in rule for rule in rules):
        return "attention products of SDPA on CPU"
    return None


def flops_may_miss_recurrent(m: ModelResult) -> bool:
    """A recurrent model whose FLOPs may leave out its recurrent layers (:func:`flops_may_miss`)."""
    return flops_may_miss(m) == "recurrent layers"


def flops_note(g: Group) -> str | None:
    """The footnote under a leaderboard with :data:`FLOPS_MARK` models."""
    marked = [(m.model, flops_may_miss(m)) for m in g.models if flops_may_miss(m)]
    if not marked:
        return None
    return (f"‡ FLOPs/sample possibly not counting: " + "; ".join(f"{name}: {what}" for name, what in marked)
            + ". These records were measured before attnbench counted them: torch's FLOP counter gives a fused "
              "LSTM/GRU/RNN op (cuDNN on GPU, an unpacked LSTM on CPU) and CPU SDPA 0 FLOPs, so the figure may "
              "cover only the other layers.")


def compile_note(g: Group) -> str | None:
    """The footnote of a leaderboard whose cells were compiled (``trainer.compile``) or padded to
    length buckets: per model its compile mode, batch shapes and graphs of training, compile time,
    and what the buckets cost in padding (from each model's first ok record)."""
    parts = []
    for m in g.models:
        cost = (m.ok[0].get("cost") or {}) if m.ok else {}
        info, pad = cost.get("compile") or {}, cost.get("padding") or {}
        bits = []
        if info:
            train = (info.get("graphs") or {}).get("train") if isinstance(info.get("graphs"), dict) else None
            bits.append(f"compile {info.get('mode', 'default')}: {(info.get('shapes') or {}).get('train', '?')} "
                        f"training shape(s), {train if train is not None else '?'} graph(s), "
                        f"{fmt_seconds(info.get('compile_s'))} compiling")
        if pad.get("buckets"):
            longest = (pad.get("batch_longest") or {}).get("overhead")
            bits.append(f"buckets {','.join(map(str, pad['buckets']))}: padding {pad['overhead']:+.0%} of the data's "
                        f"positions" + (f" (longest-item batches {longest:+.0%})" if longest is not None else ""))
        if bits:
            parts.append(f"{m.model}: " + "; ".join(bits))
    return ("Compiled / bucketed cells: " + " · ".join(parts) + ". Train times exclude compiling.") if parts else None


def pattern_label(m: ModelResult) -> str:
    """The configured pattern, and beside it the effective one when a window covers every input
    (``truncated (w=64) = full: inputs <= 58``)."""
    label = str(m.pattern or "–")
    full = [(record_window(r), longest_input(r)) for r in m.ok
            if effective_pattern(m.pattern, record_window(r), longest_input(r)) == "full"]
    if full and len(full) == len(m.ok):
        w = max(x[0] for x in full)
        longest = max(x[1] for x in full)
        return f"{label} (w={w}) = full: inputs <= {longest}"
    return label


def comparison_table(g: Group, confidence: float = CONFIDENCE) -> Table:
    """The best attention model against the best model of each baseline family: difference,
    its confidence interval, the test used and the verdict."""
    pct = int(round(confidence * 100))
    rows = []
    for c in g.comparisons:
        if c.difference is None:
            rows.append([f"attention vs {c.baseline_family}", c.attention.model if c.attention else "–",
                         c.baseline.model if c.baseline else "–", "–", "–", "–", c.message])
            continue
        d = c.difference
        too_few = c.verdict == stats.TOO_FEW
        rows.append([
            f"attention vs {c.baseline_family}", c.attention.model, c.baseline.model, f"{d.diff:+.4g}",
            f"– (n={d.n})" if too_few else fmt_ci(d.ci_low, d.ci_high, d.n, clipped=d.clipped, identical=d.identical),
            f"paired t, {d.n_a} seeds" if d.method == "paired" else f"Welch t, n={d.n_a} vs {d.n_b}",
            verdict_label(c),
        ])
    return Table(["comparison", "best attention", "best baseline", "difference (attention − baseline)",
                  f"{pct}% CI", "interval", "verdict"], rows)


def verdict_label(c: Comparison) -> str:
    """A comparison's verdict with its number of seeds (``better (n=5)``, ``too few seeds
    (n=2)``); the reason when there is no comparison."""
    if c.verdict is None or c.difference is None:
        return c.message
    return f"{c.verdict} (n={c.difference.n})"


def overview_table(groups: Sequence[Group], multi: bool) -> Table:
    """One row per group: metric, number of models, the best one and the verdicts (a column
    for the modern recurrences only when some group ran one)."""
    extra = [f for g in groups for f in (c.baseline_family for c in g.comparisons) if f not in BASELINE_FAMILIES]
    fams = list(BASELINE_FAMILIES) + list(dict.fromkeys(extra))
    rows = []
    for g in groups:
        ranked = g.ranked
        best = f"{ranked[0].model} ({fmt_metric(ranked[0].mean)})" if ranked else "–"
        by = {c.baseline_family: c for c in g.comparisons}
        rows.append([group_title(g, multi), f"{g.metric} ({g.mode})", str(len(g.models)), best,
                     *[verdict_label(by[f]) if f in by else "–" for f in fams]])
    return Table(["task / dataset", "metric", "models", "best (mean)", *[f"attention vs {f}" for f in fams]], rows)


def summary_rows(an: Analysis) -> list[dict[str, Any]]:
    """``summary.csv``'s rows: one per suite/task/dataset/model, keyed by :data:`SUMMARY_COLUMNS`."""
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


def write_summary_csv(path: Path, rows: list[dict[str, Any]]) -> Path:
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(SUMMARY_COLUMNS)
    for row in rows:
        w.writerow([csv_value(row.get(c)) for c in SUMMARY_COLUMNS])
    return write_text_atomic(path, buf.getvalue())


#: Warning kinds in the order the Warnings section lists them, with their titles: the missed
#: micro-benchmark targets first, as in attnbench run's closing summary (issue 44).
WARNING_TITLES = (
    ("failed_checks", "Failed micro-benchmark checks"),
    ("failed", "Failed cells"),
    ("missing", "Missing cells (in a suite manifest, no record)"),
    ("bench", "Micro-benchmark warnings"),
    ("time_caps", "Training ended by the time cap"),
    ("unequal_seeds", "Unequal seed counts"),
    ("shared", "Measured on a shared device"),
    ("budgets", "Models stopped by different budgets"),
    ("machines", "Models measured on different machines"),
    ("commits", "Git commits"),
    ("duplicates", "Duplicate records"),
    ("stale", "Records not in the suite manifest"),
    ("no_metric", "Records without the metric"),
    ("inconsistent", "Inconsistent records"),
    ("unreadable", "Unreadable files"),
    ("plots", "Plots"),
    ("render", "Extras renderers"),
)


def _kinds(warns: dict[str, list[str]]) -> list[str]:
    titles = dict(WARNING_TITLES)
    return [k for k, _ in WARNING_TITLES if warns.get(k)] + sorted(k for k in set(warns) - set(titles) if warns[k])


def warning_summary(warns: dict[str, list[str]], shown: int = 3) -> list[Block]:
    """The top of the Overview: how many warnings, and per kind its count and first ``shown``
    messages (a failed check reads here as plainly as a failed cell); nothing when there are none."""
    if not any(warns.values()):
        return []
    titles = dict(WARNING_TITLES)
    n = sum(len(v) for v in warns.values())
    items = []
    for kind in _kinds(warns):
        msgs = warns[kind]
        more = f" (+{len(msgs) - shown} more)" if len(msgs) > shown else ""
        items.append(f"{titles.get(kind, kind)} ({len(msgs)}): " + " | ".join(msgs[:shown]) + more)
    return [Paragraph(f"{n} warning(s), listed in full under Warnings at the end:", "warn"), BulletList(items, "warn")]


def warning_blocks(warns: dict[str, list[str]]) -> list[Block]:
    """The Warnings section: a list per kind, known kinds first; "None." when there are none."""
    blocks: list[Block] = [Heading(2, "Warnings", "warnings")]
    if not any(warns.values()):
        blocks.append(Paragraph("None."))
        return blocks
    titles = dict(WARNING_TITLES)
    for kind in _kinds(warns):
        msgs = warns[kind]
        blocks += [Heading(3, f"{titles.get(kind, kind)} ({len(msgs)})"), BulletList(list(msgs), "warn")]
    return blocks
