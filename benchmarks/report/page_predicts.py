"""Does the small answer predict the big one? For each domain of ``results/page.yaml``'s
``predicts:``, the synthetic diagnostic's verdict (best attention against the best RNN and the best
CNN, the headline's rule) beside the real-data headline's, and optionally a synthetic sweep's
crossover beside a real-data sweep's, each marked agree / disagree / undecided. An entry::

    - domain: Graphs
      headline: "Graphs: Cora node classification"     # a headline entry's title
      small: {folder: reference/.../quick, diagnostic: neighbours, margin: 0.03}
      sweep:                                            # optional
        small: {folder: reference/.../when, diagnostic: homophily}
        real: {folder: reference/.../when_real, diagnostic: homophily}
        expect: ["attention > other", "cnn > other"]   # one or a list of the diagnostics' expectations

A side may instead be a comparison along a length of the test items (``{folder, length: "a - b"}``,
:func:`benchmarks.report.by_length.length_crossovers`: sentence, dependency or input length, from the
trained models without a sweep); ``expect`` then names the row (one expectation). ``sweep`` may be a
list of such mappings.
      reasons: {cnn: "...", "cnn > other": "..."}      # one per disagreement (rnn, cnn or an expectation)

A disagreement without its reason, or a reason where the two agree, is a :class:`PageError`, so
the reasons cannot go stale as records change.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Callable

from benchmarks.report.document import Block, Heading, Paragraph, Table
from benchmarks.report.page_facts import PageError, ci_text, shown_number
from benchmarks.report.page_verdicts import direction, family_verdict
from benchmarks.report.results import Group

__all__ = ["predicts_blocks", "agreement", "crossovers_agree"]

FAMILIES = (("rnn", "vs best RNN"), ("cnn", "vs best CNN"))


def agreement(small: str, big: str) -> str:
    """'agree', 'disagree' or 'undecided' for two verdict words (see :func:`direction`)."""
    a, b = direction(small), direction(big)
    if a is None or b is None:
        return "undecided"
    return "agree" if a == b else "disagree"


def crossovers_agree(a: Any, b: Any) -> str:
    """Two sweeps' crossovers of one expectation: 'agree' when both flip and their intervals meet,
    or neither flips and the verdict is the same everywhere; 'disagree' otherwise; 'undecided'
    when either has no significant point."""
    if a.at is not None and b.at is not None:
        lo = max(x for x in (a.low, b.low, float("-inf")) if x is not None)
        hi = min(x for x in (a.high, b.high, float("inf")) if x is not None)
        return "agree" if lo <= hi else "disagree"
    if a.at is None and b.at is None:
        sa = "+" if a.better_at and not a.worse_at else "-" if a.worse_at and not a.better_at else None
        sb = "+" if b.better_at and not b.worse_at else "-" if b.worse_at and not b.better_at else None
        if sa is None or sb is None:
            return "undecided"
        return "agree" if sa == sb else "disagree"
    return "disagree"


def _group(an: Any, diagnostic: str, where: str) -> Group:
    for g in an.groups:
        if g.diagnostic == diagnostic and not g.point:
            return g
    have = sorted({g.diagnostic for g in an.groups if g.diagnostic})
    raise PageError(f"page.yaml: {where}: no diagnostic {diagnostic!r} (without a sweep point) in its folder "
                    f"(it has: {', '.join(have) or 'none'})")


def _sweep(analyse: Callable[..., Any], spec: dict[str, Any], expect: str, where: str) -> tuple[Any, str]:
    from benchmarks.report.sweeps import sweep_results

    an, folders = analyse(spec, where)
    if spec.get("length"):
        from benchmarks.report.by_length import length_crossovers

        found = {pair: c for g in an.groups for pair, c in length_crossovers(g).items()}
        if spec["length"] not in found:
            raise PageError(f"page.yaml: {where}: no comparison {spec['length']!r} by length in {', '.join(folders)} "
                            f"(it has: {', '.join(found) or 'none'})")
        return found[spec["length"]], folders[0]
    res = next((r for r in sweep_results(an) if r.name == spec.get("diagnostic")), None)
    if res is None or expect not in res.crossovers:
        raise PageError(f"page.yaml: {where}: no swept diagnostic {spec.get('diagnostic')!r} with expectation "
                        f"{expect!r} in {', '.join(folders)}")
    return res.crossovers[expect], folders[0]


def _check_reason(reasons: dict[str, Any], key: str, verdict: str, what: str, where: str) -> str:
    reason = reasons.get(key)
    name = key if key in ("rnn", "cnn") else repr(key)
    if verdict == "disagree" and not reason:
        raise PageError(f"page.yaml: {where}: {what} disagree: give the reason as reasons.{name}")
    if verdict == "agree" and reason:
        raise PageError(f"page.yaml: {where}: {what} now agree: remove reasons.{name}")
    return " ".join(str(reason).split()) if reason else ""


def _word(g: Group, fam: str, margin: Any) -> tuple[str, str]:
    d, word, _ = family_verdict(g, fam, margin)
    if d is None:
        return word, "–"
    return word, f"{word}: {shown_number(d.diff, g.metric, True)} {ci_text(d, g.metric)}"


def predicts_blocks(specs: list[dict[str, Any]], runs: dict[str, Any], root: Path,
                    analyse: Callable[[dict[str, Any], str], tuple[Any, list[str]]]) -> list[Block]:
    """The section's blocks. ``runs``: headline title -> its loaded run (``.group``, ``.spec``);
    ``analyse(spec, where)``: the page's folder analysis (``(Analysis, folders)``)."""
    if not specs:
        return []
    rows, tally = [], {"agree": 0, "disagree": 0, "undecided": 0}
    for i, spec in enumerate(specs):
        where = f"predicts[{i}] {spec.get('domain', '?')!r}"
        if not isinstance(spec, dict) or not {"domain", "headline", "small"} <= set(spec):
            raise PageError(f"page.yaml: {where}: domain, headline and small expected")
        run = runs.get(spec["headline"])
        if run is None:
            raise PageError(f"page.yaml: {where}: no headline titled {spec['headline']!r} (have: {', '.join(runs)})")
        if not isinstance(spec["small"], dict) or not {"folder", "diagnostic"} <= set(spec["small"]):
            raise PageError(f"page.yaml: {where}: small: a mapping with folder and diagnostic expected")
        sweeps = spec.get("sweep") or []
        sweeps = sweeps if isinstance(sweeps, list) else [sweeps]
        if not all(isinstance(sw, dict) and all(isinstance(sw.get(k), dict) for k in ("small", "real")) for sw in sweeps):
            raise PageError(f"page.yaml: {where}: sweep: a mapping (or a list of them) with small and real (each "
                            "folder and diagnostic, or folder and length) and expect expected")
        reasons = spec.get("reasons") or {}
        if not isinstance(reasons, dict):
            raise PageError(f"page.yaml: {where}: reasons: a mapping of rnn, cnn or an expectation to its reason expected")
        pairs = [(sw, e) for sw in sweeps for e in ([sw["expect"]] if isinstance(sw.get("expect"), str)
                                                    else list(sw.get("expect") or []))]
        expects = [e for _, e in pairs]
        unknown = set(reasons) - {"rnn", "cnn", *expects}
        if unknown:
            raise PageError(f"page.yaml: {where}: reasons.{sorted(unknown)[0]} is not one of rnn, cnn"
                            + "".join(f", {e!r}" for e in expects))
        an, folders = analyse(spec["small"], where + " small")
        small = _group(an, spec["small"].get("diagnostic"), where)
        for fam, label in FAMILIES:
            s_word, s_text = _word(small, fam, spec["small"].get("margin"))
            b_word, b_text = _word(run.group, fam, run.spec.get("margin"))
            if s_text == "–" or b_text == "–":
                continue
            verdict = agreement(s_word, b_word)
            tally[verdict] += 1
            reason = _check_reason(reasons, fam, verdict, f"the verdicts {label} ({s_word} / {b_word})", where)
            rows.append([spec["domain"], f"attention {label}", f"{small.diagnostic}: {s_text}",
                         f"{run.group.base_dataset or run.group.dataset}: {b_text}",
                         verdict, reason or "–"])
        for sw, expect in pairs:
            a, _ = _sweep(analyse, sw.get("small") or {}, expect, where + " sweep.small")
            b, _ = _sweep(analyse, sw.get("real") or {}, expect, where + " sweep.real")
            verdict = crossovers_agree(a, b)
            tally[verdict] += 1
            reason = _check_reason(reasons, expect, verdict, f"the crossovers of {expect!r}", where)
            what = (f"crossover of {expect} along {sw['small']['diagnostic']}" if sw["small"].get("diagnostic")
                    else f"{expect} ({sw['small'].get('length')}, per length bin)")
            rows.append([spec["domain"], what,
                         f"synthetic: {a.statement}", f"real: {b.statement}", verdict, reason or "–"])
    return [Heading(2, "Does the small answer predict the big one?"),
            Paragraph("Each domain's synthetic diagnostic (quick.yaml, seconds per cell) against its real-data headline "
                      "(minutes per cell), by the headline's rule: the best attention model against the best RNN and "
                      "the best CNN, each chosen on validation; 'wins'/'loses' by the two-sided test at 95% (before "
                      "Holm's correction), 'level' by TOST within each run's margin. 'agree': the same direction; "
                      "'disagree': opposite, or level against a difference; 'undecided': either side is undecided. "
                      "Where a real-data sweep exists, its crossover beside the synthetic one (agree: the intervals "
                      f"meet). In all: agree {tally['agree']}, disagree {tally['disagree']}, undecided "
                      f"{tally['undecided']}."),
            Table(["domain", "comparison", "synthetic (small)", "real data (big)", "verdicts", "why they differ"], rows)]
