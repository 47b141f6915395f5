"""The report's view of extra test sets (``test_sets`` in records: named in a cell's config or
added later by ``attnbench eval``): one table per task with each model's test metric on its
own test split and on every other test set, mean ± std and CI over seeds.

Reads only records; a record without ``test_sets`` adds nothing, so older reports are unchanged.
"""

from __future__ import annotations

from typing import Any, Callable, Iterable

from benchmarks.report import stats
__all__ = ["test_set_names", "test_set_table"]


def test_set_names(records: Iterable[dict[str, Any]]) -> list[str]:
    """The extra test sets any of ``records`` was scored on, sorted."""
    return sorted({n for r in records for n in (r.get("test_sets") or {}) if isinstance(n, str)})


def _cell(values: list[float], confidence: float, bounds: Any, fmt: Callable[[Any], str]) -> str:
    s = stats.summarize(values, confidence, bounds=bounds)
    if s.mean is None:
        return "–"
    text = fmt(s.mean) + (f" ± {fmt(s.std)}" if s.std is not None else "")
    if s.ci_low is not None:
        text += f" [{fmt(s.ci_low)}, {fmt(s.ci_high)}]"
    return text + f" (n={s.n})"


def test_set_table(models: list[Any], metric: str, confidence: float, bounds: Any, fmt: Callable[[Any], str],
                   warn: Callable[[str], None]) -> tuple[list[str], list[list[str]]] | None:
    """``(headers, rows)``: a row per model (in leaderboard order), a column for its own test
    split and one per extra test set; ``None`` when no record has extra test sets. A test set
    that failed for a record is warned about once per model and left out of its mean."""
    names = test_set_names(r for m in models for r in m.ok)
    if not names:
        return None
    pct = int(round(confidence * 100))
    headers = ["model", "family", f"own test: {metric}", *[f"{n}: {metric}" for n in names]]
    rows = []
    for m in models:
        row = [m.model, m.family, _cell(list(m.values), confidence, bounds, fmt)]
        for name in names:
            values, errors = [], []
            for r in m.ok:
                entry = (r.get("test_sets") or {}).get(name)
                if not isinstance(entry, dict):
                    continue
                value = (entry.get("metrics") or {}).get(metric)
                if entry.get("error") or not isinstance(value, (int, float)):
                    errors.append(f"seed {r.get('seed')}: {entry.get('error') or 'no ' + metric}")
                else:
                    values.append(float(value))
            if errors:
                warn(f"{m.model}: test set {name!r} failed for {len(errors)} seed(s): {errors[0]}")
            row.append(_cell(values, confidence, bounds, fmt))
        rows.append(row)
    headers[2] += f" (mean ± std [{pct}% CI])"
    return headers, rows
