"""The "Attention variants across domains" section: read from the records only (through the
analysed groups), it appears when some domain ran an efficient attention pattern (any pattern
other than ``full``, ``truncated`` and ``graph``), e.g. ``benchmarks/configs/variants.yaml``.

* one table, a row per pattern and a column per domain (task / dataset group): the quality of
  the pattern's best model there (mean ± CI half-width of the group's metric over seeds), its
  rank among the patterns of that domain, mean train time and peak memory;
* the Spearman rank correlation of the patterns' ranks between every two domains (over the
  patterns both ran, at least 3): whether a variant that does well in one domain does well in
  another.
"""

from __future__ import annotations

from typing import Any

from benchmarks.report.document import Block, Heading, Paragraph, Table
from benchmarks.report.format import fmt_bytes, fmt_metric, fmt_seconds, slug
from benchmarks.report.results import Analysis, Group, ModelResult, group_title

__all__ = ["variants_blocks", "pattern_ranks", "spearman", "EXACT_PATTERNS"]

#: Patterns every attention benchmark already has: the section needs one beyond these.
EXACT_PATTERNS = frozenset({"full", "truncated", "graph"})


def pattern_ranks(g: Group) -> dict[str, tuple[int, ModelResult]]:
    """``{pattern: (rank, its best model)}`` over the group's attention models with a mean
    (ranks 1.. by the group's metric and mode; the best model stands for its pattern)."""
    best: dict[str, ModelResult] = {}
    for m in g.ranked:  # best first
        if m.family == "attention" and m.pattern and m.pattern not in best:
            best[m.pattern] = m
    return {p: (i, m) for i, (p, m) in enumerate(best.items(), 1)}


def spearman(a: dict[str, int], b: dict[str, int]) -> tuple[float | None, int]:
    """Spearman's rho of two rankings over their common keys (re-ranked among those), and how
    many there are; ``None`` below 3."""
    common = [k for k in a if k in b]
    n = len(common)
    if n < 3:
        return None, n
    ra = {k: i for i, k in enumerate(sorted(common, key=a.__getitem__), 1)}
    rb = {k: i for i, k in enumerate(sorted(common, key=b.__getitem__), 1)}
    d2 = sum((ra[k] - rb[k]) ** 2 for k in common)
    return 1 - 6 * d2 / (n * (n * n - 1)), n


def _cell(rank: int, m: ModelResult) -> str:
    s = m.summary
    half = None if s is None or s.ci_low is None or s.ci_high is None else (s.ci_high - s.ci_low) / 2
    quality = fmt_metric(m.mean) + ("" if half is None else f" ± {fmt_metric(half)}")
    return (f"{quality} (#{rank}; {m.model}) · {fmt_seconds(m.cost.get('train_time_s_mean'))} · "
            f"{fmt_bytes(m.cost.get('peak_mem_bytes'))}")


def variants_blocks(an: Analysis) -> list[Block]:
    """The section's blocks, or none when no domain ran an efficient pattern."""
    domains = [(g, pattern_ranks(g)) for g in an.groups if g.train_fraction >= 1]
    domains = [(g, r) for g, r in domains if len(r) >= 2 and set(r) - EXACT_PATTERNS]
    if not domains:
        return []
    patterns: list[str] = []
    for _, ranks in domains:
        patterns += [p for p in ranks if p not in patterns]
    titles = [group_title(g, an.multi_suite) for g, _ in domains]
    pct = int(round(an.confidence * 100))
    rows: list[list[Any]] = [[p, *(_cell(*r[p]) if p in r else "–" for _, r in domains)] for p in patterns]
    blocks: list[Block] = [
        Heading(2, "Attention variants across domains", slug("attention-variants")),
        Paragraph(f"Per domain, each attention pattern's best model: test metric mean ± half the {pct}% CI over "
                  "seeds (#rank among the patterns there; model) · mean train time · peak memory.", "note"),
        Table(["pattern", *titles], rows),
    ]
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
