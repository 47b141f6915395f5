"""Test quality by a length of each test item, from the per-item outcomes the records keep beside
them (:mod:`benchmarks.run.items`), so the trained models answer it without retraining (issue 52):

* **sentence length** (translation; Bahdanau et al. 2015, Figure 2): each model's corpus BLEU on
  the test sentences of each bin of reference length, the length the statistics hold (for the
  synthetic word-mapping task it equals the source length; on real data it follows it closely).
  Bin edges are the quintiles of the test set's lengths (fewer bins where lengths repeat), so
  that each bin holds about a fifth of the sentences;
* **dependency length** (POS tagging on UD, the items' ``head_distance``): token accuracy on the
  test words whose syntactic head lies 1, 2, 3-4, 5-8, ... words away (doubling bins; the root
  has no head and is left out; a bin of fewer than :data:`MIN_UNITS` words joins the one before).
  A proxy for "the distance from the deciding word": UD does not mark which word decides a tag,
  but a word's head is the word it depends on;
* **input length** (speech frame tagging, each frame's input: a concatenation of 1,000-5,000 frames
  on FSDD): frame accuracy by the length of the input the frame belongs to, bins at the quintiles
  of the test inputs' lengths (one per input).

Per model, the mean over seeds of each bin's score, with the seeds' range; per comparison, each
bin's difference with a paired bootstrap over seeds and test examples.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

import numpy as np

from benchmarks.report.document import Block, BulletList, Heading, Image, Paragraph, Table
from benchmarks.report.item_ci import model_items
from benchmarks.report.results import Analysis, Group

__all__ = ["LengthAxis", "AXES", "length_bins", "doubling_bins", "bleu_by_length", "score_by_bin", "gap_by_length",
           "length_crossover", "length_crossovers", "length_pairs", "length_statement", "length_rows", "plot_name", "bin_label", "by_length_blocks"]

BINS = 5
#: bootstrap resamples per bin (each a corpus BLEU per seed and model)
RESAMPLES = 2000
#: a dependency-length bin holds at least this many test words (else it joins the bin before)
MIN_UNITS = 100


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


def doubling_bins(lengths: np.ndarray, min_units: int = MIN_UNITS) -> list[tuple[int, int]]:
    """``(1, 1), (2, 2), (3, 4), (5, 8), ...`` up to the longest of ``lengths`` (0s left out); a bin
    holding fewer than ``min_units`` of them is merged into the one before it."""
    lengths = np.asarray(lengths)
    top = int(lengths.max()) if lengths.size else 0
    out: list[tuple[int, int]] = []
    lo = 1
    while lo <= top:
        hi = min(max(lo, 2 * lo - 2) if lo > 2 else lo, top)
        n = int(((lengths >= lo) & (lengths <= hi)).sum())
        if out and n < min_units:
            out[-1] = (out[-1][0], hi)
        else:
            out.append((lo, hi))
        lo = hi + 1
    return out


@dataclass(frozen=True)
class LengthAxis:
    """What a group's items are binned by, and how they are scored."""

    name: str  #: "sentence length", "dependency length"
    label: str  #: the x-axis label
    unit: str  #: what the length counts ("words")
    metric: str  #: "BLEU", "accuracy (%)"
    scale: float  #: score and difference -> shown units
    diff_unit: str  #: "BLEU", "points"
    of: Callable[[Any], np.ndarray | None]  #: items -> (N,) each unit's length, or None
    bins: Callable[[Any], list[tuple[int, int]]]  #: items -> the bins of their lengths
    note: str  #: how the bins and scores were made, in words


def _ref_length(it: Any) -> np.ndarray | None:
    return it.values[:, 1] if it.values.ndim == 2 and it.metric == "bleu" else None


def _head_distance(it: Any) -> np.ndarray | None:
    return it.axis_values if getattr(it, "axis", None) == "head_distance" and it.values.ndim == 1 else None


def _input_length(it: Any) -> np.ndarray | None:
    """Each frame's input length (the size of its group), for frame tagging."""
    if it.unit != "frame" or it.group_of is None or it.values.ndim != 1:
        return None
    _, index, counts = np.unique(it.group_of, return_inverse=True, return_counts=True)
    return counts[index]


def _input_bins(it: Any) -> list[tuple[int, int]]:
    _, counts = np.unique(it.group_of, return_counts=True)  # one length per input
    return length_bins(counts)


AXES = (
    LengthAxis("sentence length", "reference length (words; bin middle)", "words", "BLEU", 1.0, "BLEU", _ref_length,
               lambda it: length_bins(_ref_length(it)), "Corpus BLEU of the test sentences in each bin of reference length (quintiles of the "
               "test set), mean over seeds with the seeds' range, from the per-sentence statistics beside each "
               "record: the trained models, not retrained (Bahdanau et al. 2015, Figure 2)."),
    LengthAxis("dependency length", "distance to the syntactic head (words; bin middle, log scale)", "words",
               "accuracy (%)", 100.0, "points", _head_distance, lambda it: doubling_bins(_head_distance(it)),
               "Token accuracy of the test words whose syntactic head lies that many words away (the treebank's "
               "gold dependencies; the root word, which has no head, left out; doubling bins, a bin of fewer "
               f"than {MIN_UNITS} words merged into the one before), mean over seeds with the seeds' range, from "
               "the per-token outcomes beside each record: the trained models, not retrained. A proxy for the "
               "distance from the deciding word: UD does not mark which word decides a tag."),
    LengthAxis("input length", "input length (frames; bin middle)", "frames", "accuracy (%)", 100.0, "points",
               _input_length, _input_bins,
               "Frame accuracy of the test inputs in each bin of input length (quintiles of the test inputs' "
               "lengths), mean over seeds with the seeds' range, from the per-frame outcomes beside each record: "
               "the trained models, not retrained. Every model trained on inputs of every length in the range."),
)


def _score(it: Any, keep: np.ndarray) -> float | None:
    """The record's metric on the units ``keep`` (BLEU from statistics, else mean correctness)."""
    if not keep.any():
        return None
    if it.values.ndim == 2:
        from benchmarks.run.items import bleu_from_stats

        return bleu_from_stats(it.values[keep])
    return float(it.values[keep].mean())


def score_by_bin(items: dict[Any, Any], bins: list[tuple[int, int]], axis: LengthAxis) -> list[tuple[float, float, float] | None]:
    """Per bin, (mean, min, max) over seeds of the score of its units in ``axis.scale`` units; None where empty."""
    out = []
    for lo, hi in bins:
        scores = []
        for it in items.values():
            length = axis.of(it)
            got = _score(it, (length >= lo) & (length <= hi))
            if got is not None:
                scores.append(got * axis.scale)
        out.append((float(np.mean(scores)), min(scores), max(scores)) if scores else None)
    return out


def bleu_by_length(items: dict[Any, Any], bins: list[tuple[int, int]]) -> list[tuple[float, float, float] | None]:
    """Per bin, (mean, min, max) over seeds of the corpus BLEU of its sentences; None where empty."""
    return score_by_bin(items, bins, AXES[0])


def _bin(items: dict[Any, Any], lo: int, hi: int, axis: LengthAxis) -> dict[Any, Any]:
    out = {}
    for seed, it in items.items():
        length = axis.of(it)
        keep = (length >= lo) & (length <= hi)  # (N,) the unit's length in the bin
        out[seed] = it._replace(ids=it.ids[keep], values=it.values[keep],
                                group_of=None if it.group_of is None else it.group_of[keep],
                                axis_values=None if it.axis_values is None else it.axis_values[keep])
    return out


def gap_by_length(a: dict[Any, Any], b: dict[Any, Any], bins: list[tuple[int, int]],
                  resamples: int = RESAMPLES, axis: LengthAxis = AXES[0]) -> list[Any]:
    """Per bin, score(a) - score(b) (in ``axis.scale`` units) with its paired bootstrap interval over
    the seeds both ran and the bin's test examples (:func:`~benchmarks.report.item_ci.item_seed_interval`);
    None where it cannot be made (fewer than 2 common seeds or examples)."""
    from dataclasses import replace

    from benchmarks.report.item_ci import item_seed_interval

    # a page builds the same comparison for its When rows and its predicts table, and its tests build
    # the page many times: the items are the same objects (item_ci.model_items keeps them), so the
    # intervals are computed once per process
    key = (tuple((s, id(it)) for s, it in a.items()), tuple((s, id(it)) for s, it in b.items()), tuple(bins),
           resamples, axis.name)
    if key in _GAPS:
        return _GAPS[key][-1]
    out = []
    for lo, hi in bins:
        g = item_seed_interval(_bin(a, lo, hi, axis), _bin(b, lo, hi, axis), resamples=resamples)
        out.append(None if g is None else replace(g, diff=g.diff * axis.scale, low=g.low * axis.scale,
                                                    high=g.high * axis.scale))
    _GAPS[key] = (list(a.values()), list(b.values()), out)  # the items kept alive: their ids stay theirs
    return out


#: :func:`gap_by_length`'s results in this process, by the identity of the items compared; each entry
#: holds those items, so no other object can take one of their ids while it is here
_GAPS: dict[Any, tuple[list[Any], list[Any], list[Any]]] = {}


def length_pairs(g: Group, have: set[str]) -> list[tuple[str, str]]:
    """The comparisons by length: the best attention model (chosen on validation) against the best
    RNN and the best CNN and, when it is not the full-attention ``transformer``, against that one;
    the RNN decoder with Bahdanau attention against the one without."""
    from benchmarks.report.analysis import best_of

    att = best_of(g, "attention")
    pairs = [(att.model, m.model) for fam in ("rnn", "cnn") if att and (m := best_of(g, fam)) and m.model in have]
    if att and att.model != "transformer" and "transformer" in have:  # truncated (or another pattern) vs full
        pairs.append((att.model, "transformer"))
    if {"rnn_bahdanau", "rnn_noattn"} <= have:
        pairs.append(("rnn_bahdanau", "rnn_noattn"))
    return [p for i, p in enumerate(pairs) if p[0] in have and p not in pairs[:i]]


def bin_label(lo: int, hi: int) -> str:
    """``12-13`` for a bin of lengths, ``11`` for a bin of one length."""
    return f"{lo}" if lo == hi else f"{lo}-{hi}"


def length_statement(a: str, b: str, bins: list[tuple[int, int]], gaps: list[Any], named: bool = True,
                     axis: LengthAxis = AXES[0]) -> str:
    """Where along the axis ``a`` beats ``b`` significantly, where it loses, and whether the gap
    grows from the shortest bin to the longest, in words."""
    ok = [(bn, g) for bn, g in zip(bins, gaps) if g is not None]
    if not ok:
        return f"{a} - {b}: no interval (fewer than 2 common seeds)"
    better = [bin_label(*bn) for bn, g in ok if g.low > 0]
    worse = [bin_label(*bn) for bn, g in ok if g.high < 0]
    (b0, g0), (b1, g1) = ok[0], ok[-1]
    parts = [f"{f'{a} - {b}: ' if named else ''}{g0.diff:+.1f} {axis.diff_unit} [{g0.low:+.1f}, {g0.high:+.1f}] at "
             f"{bin_label(*b0)} {axis.unit}, {g1.diff:+.1f} [{g1.low:+.1f}, {g1.high:+.1f}] at {bin_label(*b1)}"]
    parts.append(f"ahead in {len(better)} of {len(ok)} bins"
                 + (f" with an interval (of {len(bins)}; the others hold one test example)" if len(ok) < len(bins) else "")
                 + (f" ({', '.join(better)})" if better else "")
                 + (f", behind in {len(worse)} ({', '.join(worse)})" if worse else ", behind in none"))
    what = axis.name.split()[0]  # sentence | dependency
    if better and worse:
        parts.append(f"the verdict flips with {what} length")
    if g0.high < g1.low:
        parts.append(f"the gap widens with {what} length (the longest bin's interval lies above the shortest's)")
    elif g1.high < g0.low:
        parts.append(f"the gap narrows with {what} length (the longest bin's interval lies below the shortest's)")
    else:
        parts.append("no significant change of the gap from the shortest bin to the longest")
    return "; ".join(parts)


def length_crossover(bins: list[tuple[int, int]], gaps: list[Any], a: str, b: str, axis: LengthAxis) -> Any:
    """The :class:`~benchmarks.report.sweeps.Crossover` of ``a - b`` along the bins (at their
    middles), as a swept diagnostic's, so that the two can be set side by side."""
    from benchmarks.report.sweeps import Crossover, place_crossover

    pts = [((lo + hi) / 2, bin_label(lo, hi), g) for (lo, hi), g in zip(bins, gaps) if g is not None]
    if len(pts) < 2:
        return Crossover(f"too few bins with an interval ({len(pts)}) to place a crossover")
    names = {x: f"{name} {axis.unit}" for x, name, _ in pts}
    return place_crossover([x for x, _, _ in pts], [g.diff for *_, g in pts], [g.low for *_, g in pts],
                           [g.high for *_, g in pts], [x for x, _, g in pts if g.low > 0],
                           [x for x, _, g in pts if g.high < 0], a, b,
                           "the bootstrap over seeds and test items, per bin", lambda x: names.get(x, f"{x:g}"))


def length_crossovers(g: Group) -> dict[str, Any]:
    """``{"a - b": Crossover}`` per :func:`length_pairs` comparison of a group with a length axis."""
    found = _axis_items(g)
    if found is None:
        return {}
    axis, per_model = found
    bins = axis.bins(_first(per_model))
    return {f"{a} - {b}": length_crossover(bins, gap_by_length(per_model[a], per_model[b], bins, axis=axis), a, b, axis)
            for a, b in length_pairs(g, set(per_model))}


def plot_name(g: Group) -> str:
    """The file name (under the report's plots/) of a group's quality-by-length plot."""
    return f"length__{g.task}__{''.join(ch if ch.isalnum() else '_' for ch in g.dataset)}.png"


def _axis_items(g: Group) -> tuple[LengthAxis, dict[str, dict[Any, Any]]] | None:
    """The axis a group's items are binned by, and each model's ``{seed: Items}`` that have it
    (None when fewer than two models have it, or their lengths fall in one bin)."""
    for axis in AXES:
        out = {}
        for m in g.models:
            items = model_items(m.ok)
            if items and all(axis.of(it) is not None for it in items.values()):
                out[m.model] = items
        if len(out) >= 2 and len(axis.bins(_first(out))) >= 2:  # a test set of one length has no axis
            return axis, out
    return None


def _first(per_model: dict[str, dict[Any, Any]]) -> Any:
    """The first record's items (every record of a group has the same test set)."""
    return next(iter(next(iter(per_model.values())).values()))


def length_rows(g: Group) -> list[tuple[LengthAxis, list[tuple[int, int]], str, str]]:
    """(axis, bins, "a - b", statement) per :func:`length_pairs` comparison of a group whose records
    keep sentence statistics or dependency lengths; [] for any other group."""
    found = _axis_items(g)
    if found is None:
        return []
    axis, per_model = found
    bins = axis.bins(_first(per_model))
    return [(axis, bins, f"{a} - {b}", length_statement(a, b, bins, gap_by_length(per_model[a], per_model[b], bins,
                                                                                   axis=axis), False, axis))
            for a, b in length_pairs(g, set(per_model))]


def by_length_blocks(an: Analysis, plots_dir: Path, written: dict[str, Path], warn: Any) -> list[Block]:
    """Per group whose records keep sentence statistics (translation) or dependency lengths (POS on
    UD): the score per length bin per model, the comparisons' gaps per bin, and the plot."""
    blocks: list[Block] = []
    for g in an.groups:
        found = _axis_items(g)
        if found is None:
            continue
        axis, per_model = found
        lengths = axis.of(_first(per_model))
        bins = axis.bins(_first(per_model))
        table = {model: score_by_bin(items, bins, axis) for model, items in per_model.items()}
        counts = [int(((lengths >= lo) & (lengths <= hi)).sum()) for lo, hi in bins]
        of = _first(per_model).group_of  # (N,) each unit's example, where units are finer
        groups = [None if of is None else len(np.unique(of[(lengths >= lo) & (lengths <= hi)])) for lo, hi in bins]
        unit, group = _first(per_model).unit, _first(per_model).group
        headers = ["model"] + [f"{bin_label(lo, hi)} {axis.unit} ({n} {unit}s" + (f" in {k} {group}s)" if k else ")")
                               for (lo, hi), n, k in zip(bins, counts, groups)]
        rows = [[model] + [("–" if c is None else f"{c[0]:.1f} ({c[1]:.1f}-{c[2]:.1f})") for c in cells]
                for model, cells in table.items()]
        title = f"{g.task} / {g.dataset}: {axis.metric.split(' ')[0]} by {axis.name}"
        blocks += [Heading(3, title, f"length-{g.task}-{g.dataset}"), Table(headers, rows), Paragraph(axis.note, "note")]
        pairs = length_pairs(g, set(per_model))
        if pairs:
            lines = [length_statement(a, b, bins, gap_by_length(per_model[a], per_model[b], bins, axis=axis), True, axis)
                     for a, b in pairs]
            blocks += [BulletList(lines),
                       Paragraph(f"Each difference with its 95% paired bootstrap interval ({RESAMPLES} resamples of "
                                 f"the seeds both models ran and, independently, of the bin's test {unit}s"
                                 + (f", drawn by whole {group}" if group else "") + "): it covers the variance "
                                 "between seeds and the test set's sampling error.", "note")]
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
            if axis.name == "dependency length":
                ax.set_xscale("log", base=2)
            ax.set_xlabel(axis.label)
            ax.set_ylabel(f"test {axis.metric}")
            ax.set_title(title, fontsize=10)
            ax.grid(True, alpha=0.3)
            ax.legend(fontsize=8)
            written[f"plots/{name}"] = save_figure(fig, plots_dir / name)
            blocks.append(Image(written[f"plots/{name}"], f"plots/{name}", title))
        except Exception as exc:  # noqa: BLE001 - a plot failure must not lose the report
            warn("plots", f"{title}: {type(exc).__name__}: {exc}")
    if blocks:
        blocks.insert(0, Heading(2, "By length", "by-length"))
    return blocks
