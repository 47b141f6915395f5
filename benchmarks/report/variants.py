"""The "Attention variants across domains" section: read from the records only (through the
analysed groups), it appears when some domain ran an efficient attention pattern (any pattern
other than ``full``, ``truncated`` and ``graph``), e.g. ``benchmarks/configs/variants.yaml``.

* one table, a row per pattern and a column per domain (task / dataset group): the quality of
  the pattern's best model there (mean ± CI half-width of the group's metric over seeds), its
  rank among the patterns of that domain, mean train time and peak memory;
  and a last column with each pattern's mean rank over the domains it ran in (rows sorted by it);
  a last row names the machine each domain's records ran on;
* the Spearman rank correlation of the patterns' ranks between every two domains (over the
  patterns both ran, at least 3; tied means share their average rank): whether a variant that
  does well in one domain does well in another.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

from benchmarks.report.budget import machine_label
from benchmarks.report.document import Block, Heading, Image, Paragraph, Table
from benchmarks.report.format import fmt_bytes, fmt_metric, fmt_seconds, slug
from benchmarks.report.plots import plot_rank_grid
from benchmarks.report.results import Analysis, Group, ModelResult, group_title

__all__ = ["variants_blocks", "pattern_ranks", "spearman", "EXACT_PATTERNS"]

#: Patterns every attention benchmark already has: the section needs one beyond these.
EXACT_PATTERNS = frozenset({"full", "truncated", "graph"})


def pattern_ranks(g: Group) -> dict[str, tuple[float, ModelResult]]:
    """``{pattern: (rank, its best model)}`` over the group's attention models with a mean: the
    best model stands for its pattern, rank 1 is best by the group's metric and mode, and tied
    means share the average of their ranks (three patterns equal at places 3-5 are all 4.0, as
    Spearman's rho needs; ``scipy.stats.rankdata``)."""
    from scipy.stats import rankdata

    best: dict[str, ModelResult] = {}
    for m in g.ranked:  # best first
        if m.family == "attention" and m.pattern and m.pattern not in best:
            best[m.pattern] = m
    sign = -1.0 if g.mode == "max" else 1.0
    ranks = rankdata([sign * float(m.mean) for m in best.values()], method="average") if best else []
    return {p: (float(r), m) for (p, m), r in zip(best.items(), ranks)}


def spearman(a: dict[str, float], b: dict[str, float]) -> tuple[float | None, int]:
    """Spearman's rho of two rankings over their common keys (re-ranked among those, ties
    averaged: ``scipy.stats.spearmanr``), and how many there are; ``None`` below 3 or when one
    side is all ties (no order to correlate)."""
    from scipy.stats import spearmanr

    common = [k for k in a if k in b]
    n = len(common)
    if n < 3 or len({a[k] for k in common}) < 2 or len({b[k] for k in common}) < 2:
        return None, n
    return float(spearmanr([a[k] for k in common], [b[k] for k in common]).statistic), n


def _rank_label(rank: float, ranks: list[float]) -> str:
    """``#2``, or ``#3=`` for the first of tied places (a shared rank, shown the usual way)."""
    tied = [r for r in ranks if r == rank]
    return f"#{int(rank - (len(tied) - 1) / 2)}" + ("=" if len(tied) > 1 else "")


def _cell(rank: float, m: ModelResult, ranks: list[float]) -> str:
    s = m.summary
    half = None if s is None or s.ci_low is None or s.ci_high is None else (s.ci_high - s.ci_low) / 2
    quality = fmt_metric(m.mean) + ("" if half is None else f" ± {fmt_metric(half)}")
    return (f"{quality} ({_rank_label(rank, ranks)}; {m.model}) · {fmt_seconds(m.cost.get('train_time_s_mean'))} · "
            f"{fmt_bytes(m.cost.get('peak_mem_bytes'))}")


def _machines(g: Group) -> str:
    """The machine(s) a domain's records ran on, with counts when there are several."""
    labels = Counter(machine_label(r.get("env") or {}) for m in g.models for r in m.ok)
    if len(labels) <= 1:
        return next(iter(labels), "–")
    return "; ".join(f"{k} ({n})" for k, n in sorted(labels.items()))


def variants_blocks(an: Analysis, plots_dir: Path | None = None, written: dict[str, Path] | None = None) -> list[Block]:
    """The section's blocks, or none when no domain ran an efficient pattern; with ``plots_dir``,
    also the table's ranks as a heat map (``plots/variants_ranks.png``, entered in ``written``)."""
    domains = [(g, pattern_ranks(g)) for g in an.groups if g.train_fraction >= 1]
    domains = [(g, r) for g, r in domains if len(r) >= 2 and set(r) - EXACT_PATTERNS]
    if not domains:
        return []
    patterns: list[str] = []
    for _, ranks in domains:
        patterns += [p for p in ranks if p not in patterns]
    titles = [group_title(g, an.multi_suite) for g, _ in domains]
    pct = int(round(an.confidence * 100))
    every = [[rank for rank, _ in r.values()] for _, r in domains]
    places = {p: [r[p][0] for _, r in domains if p in r] for p in patterns}
    mean_rank = {p: (sum(v) / len(v), len(v)) for p, v in places.items()}
    patterns.sort(key=lambda p: mean_rank[p][0])  # best mean rank first; stable, so ties keep first-seen order
    rows: list[list[Any]] = [
        [p, *(_cell(*r[p], ranks) if p in r else "–" for (_, r), ranks in zip(domains, every)),
         f"{mean_rank[p][0]:.1f} ({mean_rank[p][1]})"]
        for p in patterns]
    rows.append(["machine", *(_machines(g) for g, _ in domains), "–"])
    blocks: list[Block] = [
        Heading(2, "Attention variants across domains", slug("attention-variants")),
        Paragraph(f"Per domain, each attention pattern's best model: test metric mean ± half the {pct}% CI over "
                  "seeds (#rank among the patterns there, = for a tie; model) · mean train time · peak memory. "
                  "Mean rank: over the domains the pattern ran in (how many); ties count their average place. "
                  "Machine: where each domain's records ran (times compare within a column; ranks are taken "
                  "within a column, so columns from different machines can still be correlated).",
                  "note"),
        Table(["pattern", *titles, "mean rank (domains)"], rows),
    ]
    if plots_dir is not None:
        grid = [[(r[p][0], len(r), f"{_rank_label(r[p][0], ranks)}\n{fmt_metric(r[p][1].mean)}") if p in r else None
                 for (_, r), ranks in zip(domains, every)] for p in patterns]
        png = plot_rank_grid(patterns, titles, grid, plots_dir / "variants_ranks.png",
                             "rank of each attention pattern per domain (#1 = best; blank: not run there)")
        if png is not None:
            if written is not None:
                written["plots/variants_ranks.png"] = png
            blocks.append(Image(png, "plots/variants_ranks.png", "attention patterns' ranks per domain"))
    pairs: list[list[Any]] = []
    for i, (gi, ri) in enumerate(domains):
        for j in range(i + 1, len(domains)):
            gj, rj = domains[j]
            rho, n = spearman({p: r for p, (r, _) in ri.items()}, {p: r for p, (r, _) in rj.items()})
            pairs.append([titles[i], titles[j], str(n), "–" if rho is None else f"{rho:+.2f}"])
    if pairs:
        blocks += [Paragraph("Spearman rank correlation of the patterns' ranks between domains (over the patterns "
                             "both ran; undefined below 3): near +1, the same variants win everywhere.", "note"),
                   Table(["domain", "domain", "patterns", "Spearman rho"], pairs)]
    return blocks
