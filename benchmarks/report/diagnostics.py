"""The suite diagnostics in the report: what each expected, what the run found, and whether the
two agree (:mod:`benchmarks.config.diagnostics` defines them).

Each expectation ``LEFT REL RIGHT`` is tested like the report's other comparisons
(:func:`benchmarks.report.analysis.compare_models`: paired t-interval over common seeds, else
Welch; the verdict needs :data:`~benchmarks.report.stats.MIN_SEEDS` seeds) and read against
the relation:

* ``>`` / ``<``: **matched** when the verdict is better / worse, **not significant** when the
  interval holds 0, **contradicted** when it is significant the other way;
* ``~``: two one-sided tests (TOST) within the diagnostic's ``margin``: **matched** when level,
  **contradicted** when significantly different instead, **not significant** otherwise
  (undecided: more seeds);
* **too few seeds** or **not run** where no verdict can be drawn.

A zero-width interval (identical seeds) never decides: the exact permutation test does
(:mod:`benchmarks.report.tests_of`). Every expectation of the report is one family of tests:
each row also carries its Holm-adjusted p and outcome. A family side is the family's best model
by validation mean (:func:`benchmarks.report.analysis.best_of`). Reads only the analysis: no files.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from benchmarks.config.diagnostics import FAMILY_NAMES, Expectation, parse_expectation
from benchmarks.config.schema import ConfigError
from benchmarks.report import stats
from benchmarks.report.analysis import best_of, compare_models
from benchmarks.report.document import Block, BulletList, Heading, Paragraph, Table
from benchmarks.report.format import fmt_ci, fmt_metric
from benchmarks.report.results import Analysis, Group, ModelResult, group_title
from benchmarks.report.item_ci import ItemInterval, item_seed_interval, model_items
from benchmarks.report.tests_of import equivalence_p, holm

__all__ = ["MATCHED", "NOT_SIGNIFICANT", "CONTRADICTED", "TOO_FEW", "NOT_RUN", "OUTCOMES", "DiagnosticRow",
           "DiagnosticResult", "evaluate", "outcome_of", "diagnostic_blocks", "summary_lines", "read_summary", "as_json"]

MATCHED, NOT_SIGNIFICANT, CONTRADICTED = "matched", "not significant", "contradicted"
TOO_FEW, NOT_RUN = "too few seeds", "not run"
OUTCOMES = (MATCHED, NOT_SIGNIFICANT, CONTRADICTED, TOO_FEW, NOT_RUN)


@dataclass
class DiagnosticRow:
    """One expectation and what the run found."""

    expectation: Expectation
    outcome: str
    left: ModelResult | None = None
    right: ModelResult | None = None
    diff: stats.Difference | None = None
    verdict: str | None = None
    note: str = ""
    margin: float | None = None  # '~': level within +-margin
    p: float | None = None  # the expectation's test: TOST for '~', the difference's two-sided test otherwise
    test: str = ""
    p_holm: float | None = None  # ``p`` Holm-adjusted over every expectation of the report
    outcome_holm: str | None = None
    items: ItemInterval | None = None  # the seeds x test items bootstrap, where the records keep test items

    @property
    def cost_ratios(self) -> tuple[float | None, float | None]:
        """(train time, peak memory) of the left model over the right one."""
        def ratio(key: str) -> float | None:
            a = (self.left.cost or {}).get(key) if self.left else None
            b = (self.right.cost or {}).get(key) if self.right else None
            return a / b if isinstance(a, (int, float)) and isinstance(b, (int, float)) and b else None

        return ratio("train_time_s_mean"), ratio("peak_mem_bytes")


@dataclass
class DiagnosticResult:
    suite: str
    name: str
    definition: dict[str, Any]
    group: Group | None
    rows: list[DiagnosticRow] = field(default_factory=list)

    @property
    def title(self) -> str:
        return str(self.definition.get("title") or self.name)


def outcome_of(exp: Expectation, verdict: str, level: bool | None = None) -> str:
    """The outcome of an expectation given the verdict of ``left - right`` and, for ``~``, whether
    the equivalence test finds the two level within the margin: level is **matched**, a
    significant difference otherwise **contradicted**, neither **not significant** (undecided:
    more seeds)."""
    if verdict == stats.TOO_FEW:
        return TOO_FEW
    if exp.rel == "~":
        if level:
            return MATCHED
        return CONTRADICTED if verdict in (stats.BETTER, stats.WORSE) else NOT_SIGNIFICANT
    if verdict == exp.expected_verdict:
        return MATCHED
    return NOT_SIGNIFICANT if verdict == stats.NO_DIFFERENCE else CONTRADICTED


def _side(g: Group, name: str) -> ModelResult | None:
    if name in FAMILY_NAMES:
        return best_of(g, name)
    for m in g.models:
        if (m.model == name or m.model.startswith(name + " ")) and m.values:
            return m
    return None


def definitions(an: Analysis) -> list[tuple[str, str, dict[str, Any]]]:
    """(suite, name, definition) of every diagnostic the manifests define, in config order."""
    out, seen = [], set()
    for man in an.manifests:
        cfg = man.get("config") if isinstance(man, dict) else None
        diags = cfg.get("diagnostics") if isinstance(cfg, dict) else None
        if not isinstance(diags, dict):
            continue
        suite = str(man.get("suite"))
        for name, body in diags.items():
            if (suite, name) not in seen and isinstance(body, dict):
                seen.add((suite, name))
                out.append((suite, str(name), body))
    return out


def test_expectation(g: Group | None, exp: Expectation, body: dict[str, Any], confidence: float) -> DiagnosticRow:
    """One expectation tested on one group (its outcome before any multiplicity correction)."""
    left, right = (_side(g, exp.left), _side(g, exp.right)) if g else (None, None)
    if left is None or right is None:
        missing = [s for s, m in ((exp.left, left), (exp.right, right)) if m is None]
        return DiagnosticRow(exp, NOT_RUN, left, right, note=f"no results for {', '.join(missing)}")
    diff, verdict = compare_models(g, left, right, confidence)
    row = DiagnosticRow(exp, TOO_FEW, left, right, diff, verdict, p=diff.p, test=diff.test)
    row.items = item_seed_interval(model_items(left.ok), model_items(right.ok), confidence)
    if exp.rel == "~" and body.get("margin"):
        row.margin = float(body["margin"])
        row.p, row.test = equivalence_p(left.values, right.values, row.margin, left.seeds, right.seeds)
    elif exp.rel == "~":  # a run from before margins: level cannot be tested
        row.p, row.test = None, "no margin stated: level not tested"
    alpha = 1.0 - confidence
    row.outcome = outcome_of(exp, verdict, None if row.p is None or exp.rel != "~" else row.p < alpha)
    return row


def expectations(name: str, body: dict[str, Any], an: Analysis) -> list[Expectation]:
    """A diagnostic's parsed expectations (a hand-edited manifest's bad one: a warning)."""
    out = []
    for j, text in enumerate(body.get("expect") or []):
        try:
            out.append(parse_expectation(text, f"diagnostics.{name}.expect[{j}]", "suite.json"))
        except ConfigError as err:  # a hand-edited manifest: say so, never crash the report
            an.warnings.setdefault("diagnostics", []).append(str(err))
    return out


def evaluate(an: Analysis) -> list[DiagnosticResult]:
    """Every diagnostic of the analysed suites with its expectations tested (a swept diagnostic's
    are tested at each point of its axis instead: :mod:`benchmarks.report.sweeps`)."""
    results = []
    for suite, name, body in definitions(an):
        if body.get("sweep"):
            continue
        g = next((g for g in an.groups if g.suite == suite and g.diagnostic == name), None)
        res = DiagnosticResult(suite, name, body, g)
        res.rows = [test_expectation(g, exp, body, an.confidence) for exp in expectations(name, body, an)]
        results.append(res)
    _adjust(results, 1.0 - an.confidence)
    _warn_saturated(an, results)
    return results


def _adjust(results: list[DiagnosticResult], alpha: float) -> None:
    """Holm's correction over the family of every expectation tested in the report: each row's
    adjusted p and the outcome it gives (a '~' row's difference test at Bonferroni's alpha/m)."""
    rows = [row for r in results for row in r.rows if row.outcome not in (TOO_FEW, NOT_RUN) and row.p is not None]
    for row, p in zip(rows, holm([row.p for row in rows])):
        row.p_holm = p
        exp, d = row.expectation, row.diff
        if exp.rel == "~":
            different = d is not None and d.p is not None and d.p * len(rows) < alpha and d.diff != 0.0
            row.outcome_holm = MATCHED if p < alpha else CONTRADICTED if different else NOT_SIGNIFICANT
        else:
            verdict = row.verdict if p < alpha else stats.NO_DIFFERENCE
            row.outcome_holm = outcome_of(exp, verdict)


def _warn_saturated(an: Analysis, results: list[DiagnosticResult]) -> None:
    """A diagnostic whose best model reaches the metric's ceiling cannot rank the families."""
    from benchmarks.report.results import METRIC_BOUNDS

    for r in results:
        g = r.group
        bounds = METRIC_BOUNDS.get(g.metric) if g else None
        if g and g.ranked and bounds and bounds[1] is not None and g.mode == "max" and g.ranked[0].mean >= bounds[1]:
            an.warnings.setdefault("diagnostics", []).append(
                f"diagnostic {r.name}: {g.ranked[0].model} reaches {g.metric} = {fmt_metric(bounds[1])} on every "
                f"seed: the data saturates and cannot separate the models")


def _found(row: DiagnosticRow, metric: str) -> str:
    if row.diff is None:
        return row.note or "–"
    d = row.diff
    ci = "identical seeds" if d.identical else fmt_ci(d.ci_low, d.ci_high, d.n, clipped=d.clipped)
    boot = (f"; seeds × test {row.items.unit}s bootstrap [{row.items.low:.4g}, {row.items.high:.4g}]"
            if row.items else "")
    return (f"{row.left.model} {fmt_metric(d.mean_a)} vs {row.right.model} {fmt_metric(d.mean_b)}: "
            f"{d.diff:+.4g} {metric}, {int(round(d.confidence * 100))}% CI {ci}, n={d.n}{boot}")


def _expected(row: DiagnosticRow) -> str:
    """The expectation as written, with the margin of a '~'."""
    return row.expectation.text + (f" (±{row.margin:g})" if row.margin is not None else "")


def _fmt_p(p: float | None) -> str:
    return "–" if p is None else "<0.001" if p < 0.001 else f"{p:.3f}"


def _tested(row: DiagnosticRow) -> str:
    """The test's p-value, its name, and the Holm-adjusted p."""
    if row.p is None:
        return row.test or "–"
    return f"p={_fmt_p(row.p)} ({row.test}); Holm p={_fmt_p(row.p_holm)}"


def _cost(row: DiagnosticRow) -> str:
    t, m = row.cost_ratios
    parts = ([f"time {t:.2g}x"] if t is not None else []) + ([f"memory {m:.2g}x"] if m is not None else [])
    return ", ".join(parts) or "–"


def diagnostic_blocks(an: Analysis, results: list[DiagnosticResult]) -> list[Block]:
    """The overview's diagnostics: one table of every expectation (found vs expected) and, per
    diagnostic, what it tests and why the order follows."""
    if not results:
        return []
    rows, about = [], []
    for r in results:
        metric = r.group.metric if r.group else ""
        where = f" ({group_title(r.group, an.multi_suite)})" if r.group else " (no results)"
        about.append(f"{r.title}{where}: {r.definition.get('tests', '')} Expected: "
                     f"{'; '.join(r.definition.get('expect') or []) or 'nothing stated'}. Why: {r.definition.get('why', '')}")
        for row in r.rows:
            rows.append([r.name, _expected(row), _found(row, metric), _tested(row), _cost(row),
                         f"**{row.outcome}**" if row.outcome == CONTRADICTED else row.outcome,
                         row.outcome_holm or "–"])
    counts = {o: sum(row.outcome == o for r in results for row in r.rows) for o in OUTCOMES}
    tally = ", ".join(f"{n} {o}" for o, n in counts.items() if n)
    family = [row for r in results for row in r.rows if row.outcome_holm]
    held = {o: sum(row.outcome_holm == o for row in family) for o in OUTCOMES}
    tally_holm = ", ".join(f"{n} {o}" for o, n in held.items() if n)
    return [
        Heading(3, "Diagnostics: found vs expected", "diagnostics"),
        Paragraph(f"Each diagnostic's data is built so that the model families separate for a stated reason; its "
                  f"config names the comparisons it expects. {tally}"
                  + (f"; Holm-adjusted over the {len(family)} expectations tested: {tally_holm}" if family else "")
                  + ".", "note"),
        Table(["diagnostic", "expected", "found (left vs right)", "test", "cost left/right", "outcome",
               "outcome, Holm-adjusted"], rows),
        BulletList(about),
        Paragraph(f"A family stands for its best model by mean validation score (chosen on validation, tested on "
                  f"test). Each expectation is one test at alpha = {1 - an.confidence:.2g}: '>' / '<' by the "
                  f"two-sided test of left − right (paired t-test over common seeds, else Welch; with zero spread "
                  f"the exact permutation test, so identical seeds never decide), matched by a significant "
                  f"difference the expected way, contradicted by one the other way, else not significant; '~' by "
                  f"two one-sided tests (TOST) that the difference lies within ±margin (the diagnostic's config "
                  f"states it, in the metric's units): matched when level, contradicted when significantly "
                  f"different instead, else not significant (undecided: more seeds). The intervals and tests cover "
                  f"the variance between seeds on one fixed split, not the test set's own sampling error; where the "
                  f"records keep their test items, 'found' adds the paired bootstrap over seeds and test "
                  f"examples together (benchmarks/report/item_ci.py), which covers both. The "
                  f"family of tests is every expectation of this report; the last column applies Holm's "
                  f"correction to it (a '~' row's difference test at Bonferroni's alpha/m). Fewer than "
                  f"{stats.MIN_SEEDS} seeds: too few seeds. Cost: mean train time and peak memory, left over right.",
                  "note"),
    ]


def summary_lines(rows: list[dict[str, Any]]) -> list[str]:
    """The diagnostics as terminal lines, one per expectation (found vs expected), from the rows
    of :func:`as_json` (``diagnostics.json``), with a closing tally."""
    lines = []
    for r in rows:
        cost = [f"{k} {r[f'{k}_ratio']:.2g}x" for k in ("time", "memory") if r.get(f"{k}_ratio") is not None]
        expect = r["expect"] + (f" (±{r['margin']:g})" if r.get("margin") is not None else "")
        holm_note = (f"  (Holm-adjusted: {r['outcome_holm']})"
                     if r.get("outcome_holm") and r["outcome_holm"] != r["outcome"] else "")
        lines.append(f"  {r['outcome']:<15} {r['diagnostic']}: {expect:<30} {r['found']}"
                     + (f"  [{', '.join(cost)}]" if cost else "") + holm_note)
    tally = {o: sum(r["outcome"] == o for r in rows) for o in OUTCOMES}
    if rows:
        lines.append(f"  {len(rows)} expectations: " + ", ".join(f"{n} {o}" for o, n in tally.items() if n))
        held = [r["outcome_holm"] for r in rows if r.get("outcome_holm")]
        if held:
            lines.append(f"  Holm-adjusted over {len(held)} tests: "
                         + ", ".join(f"{held.count(o)} {o}" for o in OUTCOMES if held.count(o)))
    return lines


def read_summary(out_dir: str | Path) -> list[str]:
    """:func:`summary_lines` of the ``diagnostics.json`` a report wrote into ``out_dir`` (none: [])."""
    path = Path(out_dir) / "diagnostics.json"
    try:
        rows = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return []
    return summary_lines(rows) if isinstance(rows, list) else []


def as_json(results: list[DiagnosticResult]) -> list[dict[str, Any]]:
    """The rows as plain data (the report's ``diagnostics.json``: what ``attnbench run`` prints
    at the end, and what tests and the results page read)."""
    out = []
    for r in results:
        metric = r.group.metric if r.group else None
        for row in r.rows:
            d = row.diff
            t, m = row.cost_ratios
            out.append({
                "suite": r.suite, "diagnostic": r.name, "title": r.title, "expect": row.expectation.text,
                "outcome": row.outcome, "verdict": row.verdict, "metric": metric,
                "left": row.left.model if row.left else None, "right": row.right.model if row.right else None,
                "left_mean": d.mean_a if d else None, "right_mean": d.mean_b if d else None,
                "diff": d.diff if d else None, "ci_low": d.ci_low if d else None, "ci_high": d.ci_high if d else None,
                "n": d.n if d else None, "time_ratio": t, "memory_ratio": m, "found": _found(row, metric or ""),
                "margin": row.margin, "p": row.p, "test": row.test or None, "p_holm": row.p_holm,
                "outcome_holm": row.outcome_holm,
                "items_ci_low": row.items.low if row.items else None,
                "items_ci_high": row.items.high if row.items else None,
                "items_unit": row.items.unit if row.items else None,
            })
    return out
