"""The report's assembly: :func:`write_report` puts the sections in order (environment,
overview, per group its leaderboard, test sets, comparisons, plots and domain sections, attention
variants, modern recurrence, the micro-benchmarks, data-size sweeps, warnings) and writes ``REPORT.md``, ``report.html``,
``summary.csv`` and ``plots/*.png``."""

from __future__ import annotations

import datetime as _dt
import json
import os
from collections import defaultdict
from pathlib import Path
from typing import Sequence

from benchmarks.report import stats
from benchmarks.report.analysis import analyse, manifest_cells, result_roots
from benchmarks.report.budget import held_equal, leaderboard_note
from benchmarks.report.checks import bench_outputs, bench_warnings
from benchmarks.report.document import (
    Block,
    BulletList,
    Heading,
    Image,
    Paragraph,
    Table,
    render_html,
    render_markdown,
    write_text_atomic,
)
from benchmarks.report.diagnostics import as_json as diagnostics_json, diagnostic_blocks, evaluate as evaluate_diagnostics
from benchmarks.report.environment import environment_blocks
from benchmarks.report.format import fmt_metric, fmt_seconds, fmt_si, slug
from benchmarks.report.inputs import ORIGIN
from benchmarks.report.micro import (
    bench_attention_blocks,
    bench_candidate_dirs,
    complexity_blocks,
    find_bench_attention,
    find_bench_complexity,
)
from benchmarks.report.plots import plot_curves, plot_datasize, plot_quality_vs, train_size
from benchmarks.report.recurrence import recurrence_blocks
from benchmarks.report.results import CONFIDENCE, METRIC_BOUNDS, Analysis, Group, ReportError, Warn, group_title
from benchmarks.report.sections import bench_blocks, extras_blocks, load_sections
from benchmarks.report.by_length import by_length_blocks
from benchmarks.report.compute import compute_blocks
from benchmarks.report.sweeps import as_json as sweeps_json, sweep_blocks, sweep_results
from benchmarks.report.tables import (
    comparison_table,
    flops_note,
    compile_note,
    leaderboard_table,
    overview_table,
    summary_rows,
    warning_blocks,
    warning_summary,
    write_summary_csv,
)
from benchmarks.report.test_sets import test_set_table
from benchmarks.report.tuning import tuning_blocks
from benchmarks.report.variants import variants_blocks

__all__ = ["write_report"]


def _group_blocks(g: Group, an: Analysis, plots_dir: Path, out: Path, written: dict[str, Path],
                  warn: Warn) -> list[Block]:
    """One group's section: leaderboard, test sets, comparisons, plots, domain sections."""
    pct = int(round(an.confidence * 100))
    title = group_title(g, an.multi_suite)
    blocks: list[Block] = [Heading(2, title, slug(g.suite, g.task, g.dataset))]
    blocks.append(Paragraph(f"Test {g.metric} at the best-validation checkpoint "
                            f"({'higher' if g.mode == 'max' else 'lower'} is better); ranked by mean.", "note"))
    blocks.append(leaderboard_table(g, an.confidence, missing_column=bool(an.manifests)))
    blocks.append(Paragraph(held_equal(g.models)[1], "note"))
    capped = leaderboard_note(g.models)
    if capped:
        blocks.append(Paragraph(capped, "warn"))
    for note in (flops_note(g), compile_note(g)):
        if note:
            blocks.append(Paragraph(note, "note"))
    sets = test_set_table(g.models, g.metric, an.confidence, METRIC_BOUNDS.get(g.metric),
                          fmt_metric, lambda msg, t=title: warn("test_sets", f"{t}: {msg}"))
    if sets is not None:
        blocks += [Heading(3, "Test sets"), Table(*sets),
                   Paragraph("Each model's best-validation weights scored on its own test split and on every other "
                             "test set (a cell's test_sets, or attnbench eval on kept weights); mean ± std over "
                             "seeds with the t-interval.", "note")]
    blocks.append(Heading(3, "Attention against the best baselines"))
    blocks.append(comparison_table(g, an.confidence))
    blocks.append(BulletList([c.message for c in g.comparisons]))
    blocks.append(Paragraph(
        f"Difference = attention − baseline in {g.metric}; the best model of a family is chosen on validation "
        f"(its mean best-validation score), so the test set that compares two models did not pick them. Paired "
        f"t-test and interval when both models ran the same seeds, Welch otherwise; when every seed gives the same "
        f"difference, the exact permutation test instead (a zero-width interval never decides). Verdict: the test "
        f"is significant at {100 - pct}% (better/worse w.r.t. the metric's direction) or not (no significant "
        f"difference; not a claim of equality: that needs a margin, see the diagnostics' '~'); the interval covers "
        f"the variance between seeds on one fixed split, not the test set's own sampling error. With fewer than "
        f"{stats.MIN_SEEDS} successful seeds "
        f"in either model: too few seeds (n = the smaller count), no verdict. Intervals of bounded metrics are "
        f"clipped to the metric's range (marked); tied seeds show \"identical\" instead of a zero-width interval.",
        "note"))
    stem = slug(g.suite if an.multi_suite else "", g.task, g.dataset)
    plots = [
        (f"{stem}__quality_vs_time.png", lambda p: plot_quality_vs(
            g, "train_time_s_mean", "train time (mean over seeds, log)", p, f"{title}: quality vs train time",
            fmt_seconds)),
        (f"{stem}__quality_vs_params.png", lambda p: plot_quality_vs(
            g, "params", "parameters (log)", p, f"{title}: quality vs parameters")),
        (f"{stem}__learning_curves.png", lambda p: plot_curves(g, p, f"{title}: learning curves")),
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
            imgs.append(Image(p, f"plots/{name}", name[len(stem) + 2:-4].replace("_", " ")))
    if imgs:
        blocks += [Heading(3, "Plots"), *imgs]
        blocks.append(Paragraph("Error bars: sample std over seeds; colour: model family; learning curves: "
                                "validation metric per epoch, mean over the seeds that reached the epoch.", "note"))
    blocks += extras_blocks(g, plots_dir, out, warn)
    return blocks


def _datasize_blocks(an: Analysis, plots_dir: Path, written: dict[str, Path], warn: Warn) -> list[Block]:
    """For each task/dataset run at two or more training-set fractions (``train_fraction``):
    a table of the metric per model and fraction, and the metric-vs-data-size plot."""
    sweeps: dict[tuple, list[Group]] = defaultdict(list)
    for g in an.groups:
        sweeps[(g.suite, g.task, g.base_dataset or g.dataset)].append(g)
    blocks: list[Block] = []
    for (suite, task, base), gs in sweeps.items():
        if len({g.train_fraction for g in gs}) < 2:
            continue
        gs = sorted(gs, key=lambda g: g.train_fraction)
        title = f"{'[' + suite + '] ' if an.multi_suite else ''}{task} / {base}: quality vs training-set size"
        blocks += [Heading(2, title, slug(suite, task, base, "datasize"))]
        models = sorted({m.model for g in gs for m in g.models})
        headers = ["model", "family"] + [f"{g.train_fraction * 100:.4g}% (n={fmt_si(train_size(g.models[0]) if g.models else None)})"
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
        blocks.append(Table(headers, rows))
        blocks.append(Paragraph(f"Test {gs[0].metric} (mean ± std over seeds) per training-set fraction; each "
                                f"fraction is a seeded random subset of the training split (the run seed draws it, "
                                f"so models with the same seed saw the same examples). Validation and test sets "
                                f"are unchanged.", "note"))
        name = f"{slug(suite if an.multi_suite else '', task, base)}__datasize.png"
        try:
            p = plot_datasize(gs, plots_dir / name, title)
        except Exception as exc:  # noqa: BLE001 - a plot failure must not lose the report
            warn("plots", f"{title}: {type(exc).__name__}: {exc}")
            p = None
        if p is not None:
            written[f"plots/{name}"] = p
            blocks.append(Image(p, f"plots/{name}", "quality vs training-set size"))
    return blocks


def _merged_note(an: Analysis, merge: str | None) -> str:
    """What a merged report pooled: ``; suites a, b merged as NAME``."""
    if merge is None:
        return ""
    own = sorted({str(r.get(ORIGIN)) for r in an.records} | {str(c.get(ORIGIN)) for c in manifest_cells(an.manifests)})
    return f"; suites {', '.join(own)} merged as {merge}: grouped by task and dataset across them"


def write_report(
    results_dir: str | os.PathLike | Sequence[str | os.PathLike],
    out_dir: str | os.PathLike | None = None,
    *,
    bench_dirs: Sequence[str | os.PathLike] | None = None,
    confidence: float = CONFIDENCE,
    merge: str | None = None,
) -> dict[str, Path]:
    """Write ``REPORT.md``, ``report.html``, ``summary.csv`` and ``plots/*.png`` for the records
    under ``results_dir`` (or a list of folders: one combined report) into ``out_dir`` (default
    ``results_dir``). ``bench_dirs``: where to look for the micro-benchmarks' output (default
    :func:`bench_candidate_dirs` of each). ``merge``: one suite of that name for every suite
    found (``attnbench report --merge-suites``: :func:`~benchmarks.report.inputs.merge_suites`).

    Returns ``{path relative to out_dir: absolute path}`` of every file written. Raises
    :class:`ReportError` when there is nothing to report on."""
    roots = result_roots(results_dir)
    if out_dir is None and len(roots) > 1:
        raise ReportError("a report of several results folders needs --out DIR (where to write it)")
    an = analyse(roots, confidence, merge=merge)
    out = Path(out_dir) if out_dir is not None else roots[0]
    source = ", ".join(map(str, roots))
    root = roots[0]  # where micro-benchmark output is looked for
    out.mkdir(parents=True, exist_ok=True)
    plots_dir = out / "plots"
    written: dict[str, Path] = {}
    warns = an.warnings

    def warn(kind: str, msg: str) -> None:
        warns.setdefault(kind, []).append(msg)

    load_sections({g.task for g in an.groups}, warn)  # the domains' renderers register in EXTRA_RENDERERS

    pct = int(round(confidence * 100))
    blocks: list[Block] = [
        Heading(1, "attnbench report"),
        Paragraph(f"Generated {_dt.datetime.now(_dt.timezone.utc).isoformat(timespec='seconds')} from {source} "
                  f"({len(an.records)} records{_merged_note(an, merge)}). Statistics are over the successful seeds of each model: mean ± "
                  f"sample std, and the Student-t {pct}% confidence interval of the mean (undefined with one seed).",
                  "note"),
    ]
    blocks += environment_blocks(an)
    blocks += [Heading(2, "Overview", "overview")]
    overview_at = len(blocks)  # the warnings' summary goes here once every section has added its own
    diagnostics = evaluate_diagnostics(an)
    blocks += diagnostic_blocks(an, diagnostics)
    blocks.append(overview_table(an.groups, an.multi_suite))
    sweeps = sweep_results(an)  # swept diagnostics: where each expectation flips along the axis
    blocks += sweep_blocks(an, sweeps, plots_dir, written, warn)
    bench_warnings(bench_outputs(root, bench_dirs), warn)  # failed checks, busy machine, ...
    for g in an.groups:
        capped = leaderboard_note(g.models)
        if capped:
            warn("time_caps", f"{group_title(g, an.multi_suite)}: {capped}")
    for g in an.groups:
        blocks += _group_blocks(g, an, plots_dir, out, written, warn)
    blocks += variants_blocks(an, plots_dir, written)  # only when a domain ran an efficient attention pattern
    blocks += recurrence_blocks(an)  # only when a domain ran a modern recurrence
    blocks += tuning_blocks(an.records, warn, plots=(plots_dir, out), written=written)  # only when the records name a tuning file (attnbench tune)

    bench = find_bench_attention(bench_dirs if bench_dirs is not None else bench_candidate_dirs(root))
    if bench is not None:
        try:
            blocks += bench_attention_blocks(bench, plots_dir, out, written, warn)
        except Exception as exc:  # noqa: BLE001
            warn("plots", f"attention scaling benchmark: {type(exc).__name__}: {exc}")
    cx = find_bench_complexity(bench_dirs if bench_dirs is not None else bench_candidate_dirs(root, "complexity"))
    if cx is not None:
        try:
            blocks += complexity_blocks(cx, plots_dir, out, written, warn)
        except Exception as exc:  # noqa: BLE001
            warn("render", f"complexity benchmark (Table 1): {type(exc).__name__}: {exc}")
    blocks += _datasize_blocks(an, plots_dir, written, warn)
    blocks += compute_blocks(an, plots_dir, written, warn)  # quality against training compute, per family
    blocks += by_length_blocks(an, plots_dir, written, warn)  # translation: BLEU per sentence-length bin
    blocks += bench_blocks(root, bench_dirs, plots_dir, out, warn)
    blocks[overview_at:overview_at] = warning_summary(warns)
    blocks += warning_blocks(warns)

    written["summary.csv"] = write_summary_csv(out / "summary.csv", summary_rows(an))
    if sweeps:
        written["sweeps.json"] = write_text_atomic(out / "sweeps.json", json.dumps(sweeps_json(sweeps), indent=1) + "\n")
    if diagnostics:
        written["diagnostics.json"] = write_text_atomic(
            out / "diagnostics.json", json.dumps(diagnostics_json(diagnostics), indent=1) + "\n")
    written["REPORT.md"] = write_text_atomic(out / "REPORT.md", render_markdown(blocks))
    written["report.html"] = write_text_atomic(out / "report.html", render_html(blocks, "attnbench report"))
    return written
