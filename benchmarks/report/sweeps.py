"""When, not only who (issue 52 item 2): a diagnostic that names a ``sweep`` axis (a dataset
parameter its cells sweep, :mod:`benchmarks.config.sweep`) has each expectation tested at every
point of the axis, and the report says where along the axis the verdict flips.

At each point the expectation is tested as everywhere else (:func:`benchmarks.report.diagnostics.
test_expectation`: the paired t-interval over seeds, the exact permutation test with zero spread,
TOST for ``~``). Along the axis, for ``LEFT − RIGHT`` in the metric's direction:

* **a crossover**: the mean difference changes sign between two neighbouring points and at least
  one point on each side is significant; the crossover is where the linearly interpolated mean
  difference crosses 0 (in log x when the values span a decade or more), and its interval is where
  the interpolated ends of the 95% intervals cross 0 (open-ended where an end never crosses inside
  the range). It is read off the seeds' t-intervals at each point: the variance between seeds of one
  fixed split per point, not the test set's own sampling error;
* otherwise the values where the difference is significant either way, or "no crossover between A
  and B" with what holds there.

The points where a model could not run are listed with their reason (a failed record), not dropped.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from benchmarks.report import stats
from benchmarks.report.diagnostics import (CONTRADICTED, MATCHED, DiagnosticRow, definitions, expectations,
                                           test_expectation)
from benchmarks.report.document import Block, Heading, Image, Paragraph, Table
from benchmarks.report.format import fmt_ci, fmt_metric
from benchmarks.report.results import Analysis, Group

__all__ = ["Crossover", "SweepResult", "crossover", "place_crossover", "sweep_results", "sweep_blocks", "as_json", "summary_lines",
           "read_summary"]


@dataclass
class Crossover:
    """Where ``LEFT − RIGHT`` (metric direction) flips along the axis, or why it does not."""

    statement: str
    at: float | None = None  # the interpolated crossover
    low: float | None = None  # its interval (None: open at that end)
    high: float | None = None
    better_at: list[Any] = field(default_factory=list)  # axis values where LEFT is significantly better
    worse_at: list[Any] = field(default_factory=list)


@dataclass
class SweepResult:
    suite: str
    name: str
    axis: str
    definition: dict[str, Any]
    values: list[Any]
    groups: list[Group]
    rows: dict[str, list[DiagnosticRow]] = field(default_factory=dict)  # expectation -> one row per point
    crossovers: dict[str, Crossover] = field(default_factory=dict)
    failed: list[str] = field(default_factory=list)  # points where a model could not run, with the reason

    @property
    def title(self) -> str:
        return str(self.definition.get("title") or self.name)


def _num(v: Any) -> float | None:
    return float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) else None


def _zero(x0: float, y0: float, x1: float, y1: float, log: bool) -> float:
    """Where the line through (x0, y0), (x1, y1) crosses y = 0 (x interpolated in log when ``log``)."""
    a, b = (math.log(x0), math.log(x1)) if log else (x0, x1)
    t = y0 / (y0 - y1)
    x = a + t * (b - a)
    return math.exp(x) if log else x


def _first_zero(xs: list[float], ys: list[float], log: bool) -> float | None:
    for i in range(len(xs) - 1):
        if ys[i] == 0:
            return xs[i]
        if ys[i] * ys[i + 1] < 0:
            return _zero(xs[i], ys[i], xs[i + 1], ys[i + 1], log)
    return xs[-1] if ys and ys[-1] == 0 else None


def crossover(values: list[Any], rows: list[DiagnosticRow], mode: str, left: str, right: str) -> Crossover:
    """The crossover of ``left − right`` over the sorted axis ``values`` (one row per value)."""
    sign = 1.0 if mode == "max" else -1.0
    pts = [(v, r) for v, r in zip(values, rows) if r.diff is not None and _num(v) is not None]
    better = [v for v, r in pts if r.verdict == stats.BETTER]
    worse = [v for v, r in pts if r.verdict == stats.WORSE]
    if len(pts) < 2:
        return Crossover(f"too few points with results ({len(pts)}) to place a crossover", None, None, None, better, worse)
    boot = all(r.items is not None for _, r in pts)  # the bootstrap over seeds and test items, where kept
    d = [sign * r.diff.diff for _, r in pts]
    lo = [sign * (r.items.low if boot else r.diff.ci_low if r.diff.ci_low is not None else r.diff.diff) for _, r in pts]
    hi = [sign * (r.items.high if boot else r.diff.ci_high if r.diff.ci_high is not None else r.diff.diff) for _, r in pts]
    how = "the bootstrap over seeds and test items" if boot else "the t-intervals over seeds"
    return place_crossover([float(v) for v, _ in pts], d, lo, hi, better, worse, left, right, how)


def place_crossover(xs: list[float], d: list[float], lo: list[float], hi: list[float], better: list[Any],
                    worse: list[Any], left: str, right: str, how: str,
                    label: Callable[[Any], str] = fmt_metric) -> Crossover:
    """Where ``left − right`` flips along the ascending axis ``xs``: ``d`` its difference at each
    point (positive = ``left`` better), ``lo``/``hi`` its interval, ``better``/``worse`` the points
    (as ``label`` names them) where it is significant; ``how`` says how the intervals were made."""
    log = min(xs) > 0 and max(xs) / min(xs) >= 10
    lo, hi = [min(a, b) for a, b in zip(lo, hi)], [max(a, b) for a, b in zip(lo, hi)]
    span = f"between {label(xs[0])} and {label(xs[-1])}"
    if not better and not worse:
        return Crossover(f"no significant difference at any value {span}: no crossover", None, None, None)
    if not worse or not better:
        which, where = ("better", better) if better else ("worse", worse)
        return Crossover(f"no crossover {span}: {left} is significantly {which} than {right} at "
                         f"{', '.join(label(v) for v in where)} and never significantly "
                         f"{'worse' if better else 'better'}", None, None, None, better, worse)
    at = _first_zero(xs, d, log)
    # where each end of the interval crosses 0: the range of axis values the crossover may lie in
    ends = [x for x in (_first_zero(xs, lo, log), _first_zero(xs, hi, log)) if x is not None]
    low, high = (min(ends), max(ends)) if len(ends) == 2 else (ends[0], None) if ends else (None, None)
    rising = d[-1] > d[0]
    first, then = ("worse", "better") if rising else ("better", "worse")
    where = (f"≈ {fmt_metric(at)}" if at is not None else "between the points") + (
        f" (interval {fmt_metric(low) if low is not None else '≤ ' + fmt_metric(xs[0])} to "
        f"{fmt_metric(high) if high is not None else '≥ ' + fmt_metric(xs[-1])})")
    return Crossover(f"{left} goes from significantly {first} than {right} (at "
                     f"{', '.join(label(v) for v in (worse if rising else better))}) to significantly {then} "
                     f"(at {', '.join(label(v) for v in (better if rising else worse))}); the crossover is at "
                     f"{where}{', log-interpolated' if log else ''}; interval from {how}",
                     at, low, high, better, worse)


def _at(g: Group, axis: str) -> Any:
    """A group's value on the axis: its dataset parameter, or its training-set fraction."""
    return g.train_fraction if axis == "train_fraction" else g.point[axis]


def sweep_results(an: Analysis) -> list[SweepResult]:
    """Every swept diagnostic of the analysed suites, tested point by point along its axis."""
    out = []
    for suite, name, body in definitions(an):
        axis = body.get("sweep")
        if not axis:
            continue
        gs = [g for g in an.groups if g.suite == suite and g.diagnostic == name
              and (axis in g.point or axis == "train_fraction")]
        gs.sort(key=lambda g: (_num(_at(g, axis)) is None, _num(_at(g, axis)) or 0.0, str(_at(g, axis))))
        res = SweepResult(suite, name, str(axis), body, [_at(g, axis) for g in gs], gs)
        for g in gs:
            for m in g.models:
                for r in m.failed:
                    res.failed.append(f"{axis}={_at(g, axis)}: {m.model} seed {r.get('seed')}: "
                                      f"{r.get('reason') or 'failed'}")
        for exp in expectations(name, body, an):
            rows = [test_expectation(g, exp, body, an.confidence) for g in gs]
            res.rows[exp.text] = rows
            mode = gs[0].mode if gs else "max"
            res.crossovers[exp.text] = crossover(res.values, rows, mode, exp.left, exp.right)
        out.append(res)
    return out


def _cell(row: DiagnosticRow) -> str:
    if row.diff is None:
        return row.note or "–"
    d = row.diff
    ci = "identical seeds" if d.identical else fmt_ci(d.ci_low, d.ci_high, d.n, clipped=d.clipped)
    mark = "**" if row.outcome in (MATCHED, CONTRADICTED) else ""
    return f"{mark}{d.diff:+.3g}{mark} {ci} ({row.left.model} vs {row.right.model}; {row.outcome})"


def sweep_blocks(an: Analysis, results: list[SweepResult], plots_dir: Path, written: dict[str, Path],
                 warn: Any) -> list[Block]:
    """Per swept diagnostic: the plot of the metric against the axis, the per-point verdicts of each
    expectation and where each flips."""
    from benchmarks.report.sweep_plot import plot_sweep, plot_sweep_cost

    blocks: list[Block] = []
    for res in results:
        if not res.groups:
            continue
        blocks.append(Heading(2, f"When: {res.title}, along {res.axis}", f"when-{res.name}"))
        blocks.append(Paragraph(f"{res.definition.get('tests', '')} Why: {res.definition.get('why', '')}"))
        headers = ["expectation"] + [f"{res.axis}={v}" for v in res.values] + ["where it flips"]
        rows = [[text, *(_cell(r) for r in rs), res.crossovers[text].statement] for text, rs in res.rows.items()]
        blocks.append(Table(headers, rows))
        blocks.append(Paragraph(f"Each cell: left − right in {res.groups[0].metric} with its 95% t-interval over seeds "
                                f"(paired), and the expectation's outcome at that point (bold: decided). The crossover "
                                f"is interpolated linearly (in log x when the values span a decade) between the points "
                                f"where the mean difference changes sign; its interval is where the interpolated ends "
                                f"of the 95% intervals cross 0: of the paired bootstrap over seeds and test items where "
                                f"every point's records keep their test items (covering the seeds' variance and the test "
                                f"set's sampling error), else of the t-intervals (the seeds' variance on one fixed split "
                                f"per point only). Each statement says which.", "note"))
        if res.failed:
            blocks.append(Paragraph("Points where a model could not run: " + "; ".join(res.failed) + ".", "note"))
        for plot, name, alt in ((plot_sweep, f"when__{res.name}.png", f"{res.groups[0].metric} against {res.axis}"),
                                (plot_sweep_cost, f"when__{res.name}__cost.png",
                                 f"training time per sample and peak memory against {res.axis}")):
            try:
                p = plot(res, plots_dir / name)
            except Exception as exc:  # noqa: BLE001 - a plot failure must not lose the report
                warn("plots", f"sweep {res.name} ({name}): {type(exc).__name__}: {exc}")
                p = None
            if p is not None:
                written[f"plots/{name}"] = p
                blocks.append(Image(p, f"plots/{name}", f"{res.title}: {alt}"))
    return blocks


def as_json(results: list[SweepResult]) -> list[dict[str, Any]]:
    """The crossovers as plain data (the report's ``sweeps.json``: what ``attnbench run`` prints)."""
    return [{"suite": r.suite, "diagnostic": r.name, "axis": r.axis, "values": r.values, "expect": text,
             "statement": c.statement, "at": c.at, "low": c.low, "high": c.high,
             "better_at": c.better_at, "worse_at": c.worse_at,
             "points": [{"value": v, "outcome": row.outcome, "diff": row.diff.diff if row.diff else None,
                         "ci_low": row.diff.ci_low if row.diff else None, "ci_high": row.diff.ci_high if row.diff else None,
                         "n": row.diff.n if row.diff else None} for v, row in zip(r.values, r.rows[text])]}
            for r in results for text, c in r.crossovers.items()]


def summary_lines(rows: list[dict[str, Any]]) -> list[str]:
    """One terminal line per swept expectation: where it flips."""
    return [f"  {r['diagnostic']} along {r['axis']} ({', '.join(map(str, r['values']))}): {r['expect']}: "
            f"{r['statement']}" for r in rows]


def read_summary(out_dir: str | Path) -> list[str]:
    """:func:`summary_lines` of the ``sweeps.json`` a report wrote into ``out_dir`` (none: [])."""
    try:
        rows = json.loads((Path(out_dir) / "sweeps.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return []
    return summary_lines(rows) if isinstance(rows, list) else []
