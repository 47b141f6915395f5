"""One verdict rule for the results page: the best attention model of a group against the best
model of a family (both chosen on validation), in words. Used by the headline table and by the
table that asks whether a synthetic diagnostic predicts its real-data headline."""

from __future__ import annotations

from typing import Any

from benchmarks.report import stats
from benchmarks.report.analysis import best_of, compare_models
from benchmarks.report.page_facts import shown_number
from benchmarks.report.results import CONFIDENCE, Group, ModelResult

__all__ = ["VERDICT_WORD", "pair_verdict", "family_verdict", "direction"]

VERDICT_WORD = {stats.BETTER: "wins", stats.WORSE: "loses", stats.NO_DIFFERENCE: "level", stats.TOO_FEW: "too few seeds"}


def pair_verdict(g: Group, a: ModelResult | None, b: ModelResult | None) -> tuple[stats.Difference | None, str | None]:
    """``a - b`` with its interval and verdict (None, None when either model is missing)."""
    if a is None or b is None:
        return None, None
    return compare_models(g, a, b, CONFIDENCE)


def family_verdict(g: Group, fam: str, margin: Any = None) -> tuple[stats.Difference | None, str, float | None]:
    """(difference, word, p) of the best attention model against the best ``fam`` model. The word
    is 'wins'/'loses' by the two-sided test (the exact permutation test with zero spread);
    otherwise 'level (±m)' when two one-sided tests put it within ``margin`` (the metric's
    units), else 'undecided'. ``p`` is the p-value behind the word (None: no test)."""
    from benchmarks.report.tests_of import equivalence_p

    att, base = best_of(g, "attention"), best_of(g, fam)
    d, v = pair_verdict(g, att, base)
    if d is None:
        return None, "–", None
    word, p = VERDICT_WORD[v], d.p
    if v == stats.NO_DIFFERENCE:
        p = equivalence_p(att.values, base.values, float(margin), att.seeds, base.seeds)[0] if margin else None
        word = f"level (±{shown_number(float(margin), g.metric)})" if p is not None and p < 1.0 - CONFIDENCE else "undecided"
    return d, word, p


def direction(word: str) -> str | None:
    """'+' (attention wins), '-' (loses), '=' (level) or None (undecided, no test)."""
    return {"wins": "+", "loses": "-"}.get(word) or ("=" if word.startswith("level") else None)
