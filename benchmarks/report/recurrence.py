"""The "Modern recurrence" section: read from the analysed groups, it appears when some domain
ran a recurrence of family ``rnn`` and kind ``modern`` (minGRU/minLSTM, S4D, Mamba-2, LRU; e.g.
``benchmarks/configs/modern_recurrence.yaml``).

Per domain (task / dataset group), the best modern recurrence against the best classic RNN
(LSTM/GRU), the best attention model and the best CNN: each side's mean with its t-interval, the
difference (modern − other) with its interval and the verdict, computed exactly as the
attention comparisons (:func:`~benchmarks.report.analysis.compare_models`). The classic ``rnn``
comparisons elsewhere in the report never pick a modern model, so their verdicts are unchanged.
"""

from __future__ import annotations

from benchmarks.report import stats
from benchmarks.report.analysis import best_of, compare_models
from benchmarks.report.document import Block, Heading, Paragraph, Table
from benchmarks.report.format import fmt_ci, fmt_metric
from benchmarks.report.results import MODERN_RNN, Analysis, Group, ModelResult, group_title

__all__ = ["recurrence_blocks", "OPPONENTS"]

#: what the best modern recurrence is compared with, in this order: (baseline family, label)
OPPONENTS = (("rnn", "classic RNN"), ("attention", "attention"), ("cnn", "CNN"))


def _side(m: ModelResult) -> str:
    s = m.summary
    if s is None:
        return f"{m.model}: –"
    return f"{m.model}: {fmt_metric(s.mean)} {fmt_ci(s.ci_low, s.ci_high, s.n, clipped=s.clipped, identical=s.identical)}"


def _rows(g: Group, an: Analysis) -> list[list[str]]:
    title = group_title(g, an.multi_suite)
    modern = best_of(g, MODERN_RNN)
    if modern is None:
        present = ", ".join(m.model for m in g.models if m.kind == "modern" and m.family == "rnn")
        return [[title, f"no successful run ({present})", "–", "–", "–", "–", "–"]]
    rows = []
    for fam, label in OPPONENTS:
        other = best_of(g, fam)
        if other is None:
            rows.append([title, _side(modern), label, f"no {label} run with results", "–", "–", "–"])
            continue
        d, v = compare_models(g, modern, other, an.confidence)
        too_few = v == stats.TOO_FEW
        rows.append([title, _side(modern), label, _side(other), f"{d.diff:+.4g}",
                     f"– (n={d.n})" if too_few else fmt_ci(d.ci_low, d.ci_high, d.n, clipped=d.clipped,
                                                             identical=d.identical),
                     f"{v} (n={d.n})"])
    return rows


def recurrence_blocks(an: Analysis) -> list[Block]:
    """The section's blocks; none when no group ran a modern recurrence."""
    groups = [g for g in an.groups if any(m.family == "rnn" and m.kind == "modern" for m in g.models)]
    if not groups:
        return []
    pct = int(round(an.confidence * 100))
    rows = [r for g in groups for r in _rows(g, an)]
    return [
        Heading(2, "Modern recurrence", "modern-recurrence"),
        Paragraph("Per domain, the best modern recurrence (family rnn, kind modern: minGRU/minLSTM, S4D, Mamba-2, "
                  "LRU) against the best classic RNN, attention model and CNN, by the group's test metric.", "note"),
        Table(["task / dataset", f"best modern recurrence (mean, {pct}% CI)", "against",
               f"best of them (mean, {pct}% CI)", "difference (modern − other)", f"{pct}% CI", "verdict"], rows),
        Paragraph(f"Best model of a kind by mean (the intervals do not account for that selection); paired t-interval "
                  f"when both ran the same seeds, Welch otherwise; verdicts for the modern recurrence (better / "
                  f"worse / no significant difference); fewer than {stats.MIN_SEEDS} seeds: too few seeds.", "note"),
    ]
