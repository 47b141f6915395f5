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

from benchmarks.report.document import Block, BulletList, Heading, Image, Paragraph, Table
from benchmarks.report.item_ci import model_items
from benchmarks.report.results import Analysis, Group

__all__ = ["length_bins", "bleu_by_length", "gap_by_length", "length_pairs", "length_statement", "length_rows", "plot_name", "bin_label", "by_length_blocks"]

BINS = 5
#: bootstrap resamples per bin (each a corpus BLEU per seed and model)
RESAMPLES = 2000


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


def _bin(items: dict[Any, Any], lo: int, hi: int) -> dict[Any, Any]:
    out = {}
    for seed, it in items.items():
        keep = (it.values[:, 1] >= lo) & (it.values[:, 1] <= hi)  # (N,) reference length in the bin
        out[seed] = it._replace(ids=it.ids[keep], values=it.values[keep],
                                group_of=None if it.group_of is None else it.group_of[keep])
    return out


def gap_by_length(a: dict[Any, Any], b: dict[Any, Any], bins: list[tuple[int, int]],
                  resamples: int = RESAMPLES) -> list[Any]:
    """Per bin, BLEU(a) - BLEU(b) with its paired bootstrap interval over the seeds both ran and the
    bin's test sentences (:func:`~benchmarks.report.item_ci.item_seed_interval`); None where it
    cannot be made (fewer than 2 common seeds or sentences)."""
    from benchmarks.report.item_ci import item_seed_interval

    return [item_seed_interval(_bin(a, lo, hi), _bin(b, lo, hi), resamples=resamples) for lo, hi in bins]


def length_pairs(g: Group, have: set[str]) -> list[tuple[str, str]]:
    """The comparisons by length: the best attention model (chosen on validation) against the best
    RNN and the best CNN, and the RNN decoder with Bahdanau attention against the one without."""
    from benchmarks.report.analysis import best_of

    att = best_of(g, "attention")
    pairs = [(att.model, m.model) for fam in ("rnn", "cnn") if att and (m := best_of(g, fam)) and m.model in have]
    if {"rnn_bahdanau", "rnn_noattn"} <= have:
        pairs.append(("rnn_bahdanau", "rnn_noattn"))
    return [p for i, p in enumerate(pairs) if p[0] in have and p not in pairs[:i]]


def bin_label(lo: int, hi: int) -> str:
    """``12-13`` for a bin of lengths, ``11`` for a bin of one length."""
    return f"{lo}" if lo == hi else f"{lo}-{hi}"


def length_statement(a: str, b: str, bins: list[tuple[int, int]], gaps: list[Any], named: bool = True) -> str:
    """Where along sentence length ``a`` beats ``b`` significantly, where it loses, and whether
    the gap grows from the shortest bin to the longest, in words."""
    ok = [(bn, g) for bn, g in zip(bins, gaps) if g is not None]
    if not ok:
        return f"{a} - {b}: no interval (fewer than 2 common seeds)"
    better = [bin_label(*bn) for bn, g in ok if g.low > 0]
    worse = [bin_label(*bn) for bn, g in ok if g.high < 0]
    (b0, g0), (b1, g1) = ok[0], ok[-1]
    parts = [f"{f'{a} - {b}: ' if named else ''}{g0.diff:+.1f} BLEU [{g0.low:+.1f}, {g0.high:+.1f}] at {bin_label(*b0)} words, "
             f"{g1.diff:+.1f} [{g1.low:+.1f}, {g1.high:+.1f}] at {bin_label(*b1)}"]
    parts.append(f"ahead in {len(better)} of {len(ok)} bins" + (f" ({', '.join(better)})" if better else "")
                 + (f", behind in {len(worse)} ({', '.join(worse)})" if worse else ", behind in none"))
    if better and worse:
        parts.append("the verdict flips with length")
    if g0.high < g1.low:
        parts.append("the gap widens with length (the longest bin's interval lies above the shortest's)")
    elif g1.high < g0.low:
        parts.append("the gap narrows with length (the longest bin's interval lies below the shortest's)")
    else:
        parts.append("no significant change of the gap from the shortest bin to the longest")
    return "; ".join(parts)


def plot_name(g: Group) -> str:
    """The file name (under the report's plots/) of a group's BLEU-by-length plot."""
    return f"length__{g.task}__{''.join(ch if ch.isalnum() else '_' for ch in g.dataset)}.png"


def length_rows(g: Group) -> list[tuple[list[tuple[int, int]], str, str]]:
    """(bins, "a - b", statement) per :func:`length_pairs` comparison of a group whose records keep
    sentence statistics; [] for any other group."""
    per_model = _bleu_items(g)
    if len(per_model) < 2:
        return []
    bins = length_bins(next(iter(next(iter(per_model.values())).values())).values[:, 1])
    return [(bins, f"{a} - {b}", length_statement(a, b, bins, gap_by_length(per_model[a], per_model[b], bins), False))
            for a, b in length_pairs(g, set(per_model))]


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
        headers = ["model"] + [f"{bin_label(lo, hi)} words ({n} sentences)" for (lo, hi), n in zip(bins, counts)]
        rows = [[model] + [("–" if c is None else f"{c[0]:.1f} ({c[1]:.1f}-{c[2]:.1f})") for c in cells]
                for model, cells in table.items()]
        blocks += [Heading(3, f"{g.task} / {g.dataset}: BLEU by sentence length", f"length-{g.task}-{g.dataset}"),
                   Table(headers, rows),
                   Paragraph("Corpus BLEU of the test sentences in each bin of reference length (quintiles of the test "
                             "set), mean over seeds with the seeds' range, from the per-sentence statistics beside "
                             "each record: the trained models, not retrained (Bahdanau et al. 2015, Figure 2).", "note")]
        pairs = length_pairs(g, set(per_model))
        if pairs:
            lines = [length_statement(a, b, bins, gap_by_length(per_model[a], per_model[b], bins)) for a, b in pairs]
            blocks += [BulletList(lines),
                       Paragraph(f"Each difference with its 95% paired bootstrap interval ({RESAMPLES} resamples of "
                                 "the seeds both models ran and, independently, of the bin's test sentences): it "
                                 "covers the variance between seeds and the test sentences' sampling error.", "note")]
        name = plot_name(g)
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
