"""BLEU by sentence length (issue 52, the translation axis; Bahdanau et al. 2015, Figure 2): each
model's corpus BLEU on the test sentences of each length bin, from the per-sentence statistics
the records keep beside them (:mod:`benchmarks.run.items`), so the trained models answer it
without retraining.

The bins are by reference (target) length, the length the statistics hold: for the synthetic
word-mapping task it equals the source length; on real data it follows it closely. Bin edges are
the quintiles of the test set's lengths (fewer bins where lengths repeat), so that each bin holds
about a fifth of the sentences. Per model, the mean over seeds of each bin's corpus BLEU, with the
seeds' range.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from benchmarks.report.document import Block, Heading, Image, Paragraph, Table
from benchmarks.report.item_ci import model_items
from benchmarks.report.results import Analysis, Group

__all__ = ["length_bins", "bleu_by_length", "by_length_blocks"]

BINS = 5


def length_bins(lengths: np.ndarray, bins: int = BINS) -> list[tuple[int, int]]:
    """Inclusive ``(low, high)`` length ranges at the quantiles of ``lengths`` (distinct, ascending)."""
    qs = np.quantile(lengths, np.linspace(0, 1, bins + 1))
    edges = sorted({int(np.ceil(q)) for q in qs[1:-1]})
    lo, out = int(lengths.min()), []
    for e in edges + [int(lengths.max())]:
        if e >= lo:
            out.append((lo, e))
            lo = e + 1
    return out


def bleu_by_length(items: dict[Any, Any], bins: list[tuple[int, int]]) -> list[tuple[float, float, float] | None]:
    """Per bin, (mean, min, max) over seeds of the corpus BLEU of its sentences; None where empty."""
    from benchmarks.run.items import bleu_from_stats

    out = []
    for lo, hi in bins:
        scores = []
        for it in items.values():
            ref = it.values[:, 1]  # (N,) reference lengths
            rows = it.values[(ref >= lo) & (ref <= hi)]
            if len(rows):
                scores.append(bleu_from_stats(rows))
        out.append((float(np.mean(scores)), min(scores), max(scores)) if scores else None)
    return out


def _bleu_items(g: Group) -> dict[str, dict[Any, Any]]:
    out = {}
    for m in g.models:
        items = model_items(m.ok)
        if items and all(it.values.ndim == 2 and it.metric == "bleu" for it in items.values()):
            out[m.model] = items
    return out


def by_length_blocks(an: Analysis, plots_dir: Path, written: dict[str, Path], warn: Any) -> list[Block]:
    """Per translation group whose records keep sentence statistics: BLEU per length bin per model."""
    blocks: list[Block] = []
    for g in an.groups:
        per_model = _bleu_items(g)
        if len(per_model) < 2:
            continue
        lengths = next(iter(next(iter(per_model.values())).values())).values[:, 1]
        bins = length_bins(lengths)
        table = {model: bleu_by_length(items, bins) for model, items in per_model.items()}
        counts = [int(((lengths >= lo) & (lengths <= hi)).sum()) for lo, hi in bins]
        headers = ["model"] + [f"{lo}{'' if lo == hi else f'-{hi}'} words ({n} sentences)" for (lo, hi), n in zip(bins, counts)]
        rows = [[model] + [("–" if c is None else f"{c[0]:.1f} ({c[1]:.1f}-{c[2]:.1f})") for c in cells]
                for model, cells in table.items()]
        blocks += [Heading(3, f"{g.task} / {g.dataset}: BLEU by sentence length", f"length-{g.task}-{g.dataset}"),
                   Table(headers, rows),
                   Paragraph("Corpus BLEU of the test sentences in each bin of reference length (quintiles of the test "
                             "set), mean over seeds with the seeds' range, from the per-sentence statistics beside "
                             "each record: the trained models, not retrained (Bahdanau et al. 2015, Figure 2).", "note")]
        name = f"length__{g.task}__{''.join(ch if ch.isalnum() else '_' for ch in g.dataset)}.png"
        try:
            from benchmarks.report.plots import FAMILY_COLORS, line_styles, new_figure, save_figure

            fig = new_figure()
            ax = fig.add_subplot(1, 1, 1)
            style = line_styles()
            family = {m.model: m.family for m in g.models}
            mids = [(lo + hi) / 2 for lo, hi in bins]
            for model, cells in table.items():
                pts = [(x, c[0]) for x, c in zip(mids, cells) if c is not None]
                ax.plot([p[0] for p in pts], [p[1] for p in pts], style(family[model]), marker="o", ms=4,
                        color=FAMILY_COLORS.get(family[model], "black"), label=f"{model} ({family[model]})")
            ax.set_xlabel("reference length (words; bin middle)")
            ax.set_ylabel("test BLEU")
            ax.set_title(f"{g.task} / {g.dataset}: BLEU by sentence length", fontsize=10)
            ax.grid(True, alpha=0.3)
            ax.legend(fontsize=8)
            written[f"plots/{name}"] = save_figure(fig, plots_dir / name)
            blocks.append(Image(written[f"plots/{name}"], f"plots/{name}", "BLEU by sentence length"))
        except Exception as exc:  # noqa: BLE001 - a plot failure must not lose the report
            warn("plots", f"BLEU by length {g.task}/{g.dataset}: {type(exc).__name__}: {exc}")
    if blocks:
        blocks.insert(0, Heading(2, "By sentence length", "by-length"))
    return blocks
