"""Literal numbers in ``results/page.yaml``'s prose that claim to come from the records: ``N
seeds``, ``N cells``, ``N epochs`` (``ViT N epochs``: that model's), ``N CPU cores`` / ``N-core``,
durations (``225 s``, ``5.7 min``), and, in a published figure's protocol, ``single run`` / ``mean of N`` / ``N runs``.
Each is checked against the records (or the figure's ``runs``); a mismatch is one line naming
the file, where in it, the claim and what the records say. Placeholders are right by
construction and are not scanned; ``{not_recorded:...}`` is exempt.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from benchmarks.report.format import fmt_seconds
from benchmarks.report.page_facts import PageError, Scope, span, strip_placeholders

__all__ = ["Claim", "find_claims", "check_prose", "check_runs", "STATISTICS"]

WORDS = {w: i for i, w in enumerate("zero one two three four five six seven eight nine ten eleven twelve thirteen "
                                    "fourteen fifteen sixteen seventeen eighteen nineteen twenty".split())}
_NUM = r"(\d[\d,]*|" + "|".join(WORDS) + r")"
_RANGE = _NUM + r"(?:\s*(?:-|–|to)\s*" + _NUM + r")?"
_PATTERNS: dict[str, re.Pattern[str]] = {
    "seeds": re.compile(rf"\b{_RANGE}[\s-]+seeds?\b", re.I),
    "cells": re.compile(rf"\b{_NUM}\s+(?:training\s+)?cells?\b(?!\s+at\s+(?:once|a\s+time))", re.I),
    "epochs": re.compile(rf"\b{_RANGE}[\s-]+epochs?\b", re.I),
    "cores": re.compile(rf"\b{_NUM}[\s-]+(?:CPU\s+)?cores?\b", re.I),
    "time": re.compile(r"\b(\d+(?:\.\d+)?)\s?(s|sec|seconds?|min|minutes?|h|hours?)\b(?![-\w])", re.I),
    "runs": re.compile(rf"\b(?:(?:a\s+)?single\s+run|{_NUM}\s+runs?|(?:mean|average|median|best)\s+(?:of|over)\s+{_NUM})\b",
                       re.I),
}
#: how a published figure summarises its runs
STATISTICS = ("single run", "mean", "mean ± std", "median", "best")
_UNIT_S = {"s": 1.0, "sec": 1.0, "second": 1.0, "seconds": 1.0, "min": 60.0, "minute": 60.0, "minutes": 60.0,
           "h": 3600.0, "hour": 3600.0, "hours": 3600.0}


@dataclass
class Claim:
    """A literal number in prose, what it counts, and the range it states."""

    kind: str
    text: str
    lo: float
    hi: float
    before: str = ""  # the words before it (epochs: a model name, or "up to")
    start: int = 0  # where it is in the text


def _num(s: str | None) -> float | None:
    if s is None:
        return None
    s = s.lower()
    return float(WORDS[s]) if s in WORDS else float(s.replace(",", ""))


def find_claims(text: str, kinds: tuple[str, ...]) -> list[Claim]:
    """The literal claims of ``kinds`` in ``text`` (placeholders already stripped), in text order."""
    out: list[Claim] = []
    for kind in kinds:
        for m in _PATTERNS[kind].finditer(text):
            g = list(m.groups())
            if kind == "epochs":
                before = " ".join(text[max(0, m.start() - 40):m.start()].split()[-2:])
                lo, hi = _num(g[0]), _num(g[1])
            elif kind == "time":
                before, lo, hi = "", float(g[0]) * _UNIT_S[g[1].lower()], None
            elif kind == "runs":
                nums = [_num(x) for x in g if x is not None]
                before, lo, hi = "", (nums[0] if nums else 1.0), None
            else:
                before, lo, hi = "", _num(g[0]), _num(g[1]) if len(g) > 1 else None
            out.append(Claim(kind, m.group(0).strip(), lo, hi if hi is not None else lo, before, m.start()))
    return sorted(out, key=lambda c: c.start)


def _time_ok(c: Claim, candidates: list[float]) -> bool:
    """A duration matches a candidate that rounds to it at the claim's own precision ("225 s":
    224.5-225.5 s; "5.7 min": 5.65-5.75 min)."""
    m = re.match(r"\d+(?:\.(\d+))?\s?(\w+)", c.text)
    unit = _UNIT_S[m.group(2).lower()] if m else 1.0
    decimals = len(m.group(1) or "") if m else 0
    tol = 0.5 * 10 ** -decimals * unit + 1e-9
    return any(abs(c.lo - v) <= tol for v in candidates)


def _model_before(before: str, scope: Scope) -> str | None:
    words = re.findall(r"[\w.-]+", before.lower())
    names = {m.lower(): m for m in scope.models()}
    return names.get(words[-1]) if words else None


def check_prose(text: str, scope: Scope, where: str) -> list[str]:
    """One line per literal claim of ``text`` that the records of ``scope`` contradict."""
    lines: list[str] = []
    for c in find_claims(strip_placeholders(text), ("seeds", "cells", "epochs", "cores", "time")):
        try:
            bad = _contradiction(c, scope)
        except PageError as err:
            bad = str(err)
        if bad:
            word = re.findall(r"[\w.-]+", c.before)[-1:] if c.kind == "epochs" and _model_before(c.before, scope) else []
            shown = " ".join(word + [c.text])
            lines.append(f'{where}: "{shown}" but {bad} ({scope.label})')
    return lines


def _contradiction(c: Claim, scope: Scope) -> str | None:
    """What the records say instead of ``c``, or None when they agree."""
    if c.kind == "seeds":
        have = scope.seeds()
        return None if (c.lo, c.hi) == have else f"the records give {span(*have)} seeds per model"
    if c.kind == "cores":
        have = scope.cores()
        return None if (c.lo, c.lo) == have else f"the records ran on {span(*have)} CPU cores"
    if c.kind == "cells":
        n = len(scope.records)
        return None if c.lo == n else f"the records give {n} cells"
    if c.kind == "epochs":
        model = _model_before(c.before, scope)
        capped = re.search(r"\b(up to|at most|max(imum)?( of)?|cap( of)?)\s*$", c.before, re.I)
        have = scope.max_epochs(model) if capped else scope.epochs(model)
        if (c.lo, c.hi) == have:
            return None
        who = f"{model} " if model else ""
        return (f"the records give {who}an epoch cap of {span(*have)} epochs" if capped
                else f"the records give {who.strip() + ': ' if model else ''}{span(*have)} epochs")
    if _time_ok(c, scope.times()):
        return None
    caps = ", ".join(fmt_seconds(v) for v in scope.caps() if v is not None) or "none"
    tt = scope.train_times()
    trained = f"; train times {fmt_seconds(min(tt))} to {fmt_seconds(max(tt))}" if tt else ""
    return f"no time cap, mean train time or logged time of the records is that (caps: {caps}{trained})"


def check_runs(text: str, runs: int, where: str) -> list[str]:
    """One line per ``single run`` / ``N runs`` / ``mean of N`` in a published figure's own
    protocol that disagrees with its ``runs``."""
    return [f'{where}: "{c.text}" but the figure says runs: {runs}'
            for c in find_claims(strip_placeholders(text), ("runs",)) if c.lo != runs]
