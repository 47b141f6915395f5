"""Published figures on the results page, each with its protocol: how many runs, whether the
number is a single run, a mean, a median or the best, their set-up and ours side by side, and our
number for the same models. A figure's entry in ``results/page.yaml``::

    - model: GCN                  # their model
      value: "81.5%"              # as published
      source: "Kipf & Welling 2017, Table 2"
      runs: 100                   # how many runs the figure summarises
      statistic: mean             # single run | mean | mean ± std | median | best
      runs_note: random weight initialisations   # optional: what varied between runs
      same: the public split      # optional: what the protocols share
      theirs: "2 layers x 16 hidden units, ..."  # their set-up (literal; runs claims checked)
      ours_model: gcn             # our models to set beside it (one or a list)
      ours: "{config:gcn/model_params.hidden} hidden units, ..."  # our set-up (placeholders, checked)
"""

from __future__ import annotations

from typing import Any

from benchmarks.report.document import Block, BulletList, Paragraph
from benchmarks.report.page_claims import STATISTICS
from benchmarks.report.page_facts import PageError


__all__ = ["published_blocks", "statistic_text"]

_REQUIRED = ("model", "value", "source", "runs", "statistic", "theirs", "ours_model", "ours")


def statistic_text(statistic: str, runs: int) -> str:
    """``a single run``, ``mean of 100 runs``, ``best of 5 runs``..."""
    return "a single run" if statistic == "single run" else f"{statistic} of {runs} runs"


def _validate(p: Any, where: str) -> None:
    if not isinstance(p, dict):
        raise PageError(f"{where}: a mapping with {', '.join(_REQUIRED)} expected")
    missing = [k for k in _REQUIRED if k not in p]
    if missing:
        raise PageError(f"{where}: missing {', '.join(missing)} (a published figure needs {', '.join(_REQUIRED)})")
    runs, stat = p["runs"], p["statistic"]
    if not isinstance(runs, int) or isinstance(runs, bool) or runs < 1:
        raise PageError(f"{where}: runs: {runs!r}; the number of runs the figure summarises, an integer >= 1")
    if stat not in STATISTICS:
        raise PageError(f"{where}: statistic: {stat!r}; valid: {', '.join(STATISTICS)}")
    if (stat == "single run") != (runs == 1):
        raise PageError(f"{where}: statistic {stat!r} with runs: {runs} (a single run is runs: 1, and runs: 1 is a "
                        f"single run)")


def _ours(run: Any, names: Any, where: str) -> str:
    from benchmarks.report.page_facts import ci_text, shown_number as _num

    g = run.group
    names = [names] if isinstance(names, str) else list(names or [])
    out = []
    for name in names:
        m = next((m for m in g.models if m.model == name and m.summary is not None), None)
        if m is None:
            raise PageError(f"{where}: ours_model {name}: no results of it in {run.scope.label} "
                            f"(it has: {', '.join(m.model for m in g.models)})")
        s = m.summary
        out.append(f"{m.model} {_num(s.mean, g.metric)} {ci_text(s, g.metric)}, mean of {s.n} seeds")
    return "; ".join(out)


def published_blocks(builder: Any, run: Any, where: str) -> list[Block]:
    """The published figures of one headline run, or the line that none is cited."""
    pub = run.spec.get("published") or []
    if not pub:
        return [Paragraph("Published figure for this protocol: none cited (no paper reports these models under this "
                          "budget and split).")]
    items = []
    for p in pub:
        at = f"{where} published {p.get('model', '?') if isinstance(p, dict) else '?'!s}"
        _validate(p, f"{builder.label}: {at}")
        builder.built.published.append((f"{builder.label}: {at} theirs", p["theirs"], p["runs"]))
        builder.built.published.append((f"{builder.label}: {at} runs_note", str(p.get("runs_note") or ""), p["runs"]))
        note = f" ({p['runs_note']})" if p.get("runs_note") else ""
        same = f" Same: {p['same']}." if p.get("same") else ""
        items.append(f"{p['model']} {p['value']} ({p['source']}): {statistic_text(p['statistic'], p['runs'])}{note}. "
                     f"Our result: {_ours(run, p['ours_model'], f'{builder.label}: {at}')}.{same} "
                     f"Their set-up: {' '.join(str(p['theirs']).split())}. "
                     f"Our set-up: {builder.text(p['ours'], run.scope, at + ' ours')}.")
    return [Paragraph("Published figures, each with its own protocol (runs, statistic, set-up) beside ours:"),
            BulletList(items)]
