"""The report: ``attnbench report [RESULTS_DIR]``.

Reads only result files (the per-cell records and ``suite.json`` manifests under
``RESULTS_DIR``, see :mod:`benchmarks.run.records`; and, when present, the micro-benchmarks'
``bench_attention.json``/``.png`` and ``bench_complexity.json``/``.png``) and writes into
``out_dir`` (default ``RESULTS_DIR``):

* ``REPORT.md`` and a self-contained ``report.html`` (same content; images embedded as
  base64 data URIs, inline CSS, no external links or scripts);
* ``summary.csv``: one row per suite/task/dataset/model;
* ``plots/*.png``: per task/dataset quality vs train time, quality vs parameters and learning
  curves; a copy of the attention scaling plot.

Sections: environment (with a note where records disagree), overview, per task/dataset a
leaderboard, the best attention model against the best RNN and CNN baselines (difference
with a 95% CI and a verdict, see :mod:`benchmarks.report.stats`) and plots; the attention scaling
benchmark; "Why self-attention: Table 1 measured" (the complexity benchmark); warnings (failed
and missing cells, failed micro-benchmark checks and the warnings benchmarks stored, time caps,
unequal seed counts, several git commits, ...), listed at the end and summarised at the top of the
Overview. :func:`failed_checks` gives ``attnbench run`` the failed checks of a results folder.

Aggregation over the ``ok`` seeds of a model (failed seeds never enter a statistic):

* test metric: mean, sample std, Student-t 95% CI of the mean (undefined with one seed);
* params and FLOPs/sample: the records' value (a warning if seeds disagree, then the mean);
* train time and throughputs: mean over seeds; peak memory: the maximum over seeds.

Records of different suites are never pooled: a leaderboard is per (suite, task, dataset);
the suite is named in headings only when the folder holds more than one. Within a suite, two
``ok`` records of the same task/dataset/model/seed (a stale record from an older config)
keep the later-finished one, with a warning.

Task-specific artefacts in ``rec["extras"]`` are rendered by :data:`EXTRA_RENDERERS`.

Modules: :mod:`~benchmarks.report.format` (numbers), :mod:`~benchmarks.report.document`
(blocks, Markdown and HTML), :mod:`~benchmarks.report.results` (the data: groups, model
results, comparisons), :mod:`~benchmarks.report.analysis` (records -> results, warnings),
:mod:`~benchmarks.report.tables` (leaderboard, comparison and summary tables),
:mod:`~benchmarks.report.environment`, :mod:`~benchmarks.report.plots`,
:mod:`~benchmarks.report.micro` (micro-benchmark sections), :mod:`~benchmarks.report.sections`
(the hooks of domains and micro-benchmarks), :mod:`~benchmarks.report.budget`,
:mod:`~benchmarks.report.test_sets`, :mod:`~benchmarks.report.build` (:func:`write_report`)
and :mod:`~benchmarks.report.command` (the CLI's handler). This package never imports
:mod:`benchmarks.cli`.
"""

from __future__ import annotations

from benchmarks.report.analysis import analyse, group_of, manifest_cells
from benchmarks.report.build import write_report
from benchmarks.report.command import add_report_arguments, report_targets, run_report_command, suite_folders
from benchmarks.report.document import (
    Block,
    Bold,
    BulletList,
    Code,
    Heading,
    Image,
    Paragraph,
    Raw,
    Table,
    embed_png,
    render_html,
    render_html_fragment,
    render_markdown,
)
from benchmarks.report.format import fmt_bytes, fmt_ci, fmt_metric, fmt_seconds, fmt_si
from benchmarks.report.checks import bench_outputs, failed_checks
from benchmarks.report.micro import (
    BenchAttention,
    bench_candidate_dirs,
    check_result,
    find_bench_attention,
    find_bench_complexity,
)
from benchmarks.report.results import (
    BASELINE_FAMILIES,
    CONFIDENCE,
    FAMILIES,
    METRIC_BOUNDS,
    Analysis,
    Comparison,
    Group,
    ModelResult,
    ReportError,
    dataset_label,
    group_title,
)
from benchmarks.report.sections import (
    BENCH_RENDERERS,
    EXTRA_RENDERERS,
    BenchContext,
    ExtraContext,
    ExtraSection,
)
from benchmarks.report.tables import SUMMARY_COLUMNS, comparison_table, leaderboard_table

__all__ = [
    # hooks of domains and micro-benchmarks
    "EXTRA_RENDERERS", "BENCH_RENDERERS", "BenchContext", "ExtraContext", "ExtraSection",
    # the analysis
    "ReportError", "Analysis", "Group", "ModelResult", "Comparison", "FAMILIES", "BASELINE_FAMILIES", "CONFIDENCE",
    "METRIC_BOUNDS", "SUMMARY_COLUMNS", "analyse", "group_of", "group_title", "dataset_label", "manifest_cells",
    # the document model and the table builders
    "Block", "Heading", "Paragraph", "Table", "Image", "BulletList", "Raw", "Bold", "Code", "render_markdown",
    "render_html", "render_html_fragment", "embed_png", "leaderboard_table", "comparison_table",
    "fmt_metric", "fmt_si", "fmt_bytes", "fmt_seconds", "fmt_ci",
    # micro-benchmark output
    "BenchAttention", "bench_candidate_dirs", "find_bench_attention", "find_bench_complexity", "check_result",
    # what the micro-benchmarks say about themselves (attnbench run fails on a failed check)
    "bench_outputs", "failed_checks",
    # entry points
    "write_report", "add_report_arguments", "report_targets", "run_report_command", "suite_folders",
]
