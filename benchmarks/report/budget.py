"""The report's view of budgets and machines: which budget ended each model's training (a
marker on time-capped leaderboard rows, a warning when one table's models stopped for different
kinds of budget) and the speed fingerprint rows of the environment block.

Reads only records: a record without a ``stop`` block (written before it existed) is neither
marked nor warned about, so older reports come out as before.
"""

from __future__ import annotations

from collections import Counter
from typing import Any, Callable, Iterable

from benchmarks.run.fingerprint import format_fingerprint

#: the leaderboard's marker on a model some of whose seeds were ended by the time cap
TIME_CAP_MARK = "†"
#: kinds of budget a stop reason belongs to (early stopping ends by the epoch budget's rule)
BUDGET_KIND = {"max_epochs": "epochs", "early_stopping": "epochs", "max_steps": "steps", "time_cap": "time cap"}


def stop_reasons(records: Iterable[dict[str, Any]]) -> Counter:
    """Stop reasons of the records that say what ended their training."""
    return Counter(str(r["stop"].get("reason")) for r in records if isinstance(r.get("stop"), dict))


def time_capped(records: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
    """The records whose training the time cap ended."""
    return [r for r in records if isinstance(r.get("stop"), dict) and r["stop"].get("reason") == "time_cap"]


def model_marker(ok_records: list[dict[str, Any]]) -> str:
    """:data:`TIME_CAP_MARK` when the time cap ended any of a model's seeds, else empty."""
    return TIME_CAP_MARK if time_capped(ok_records) else ""


def leaderboard_note(models: Iterable[Any]) -> str | None:
    """The footnote under a leaderboard with time-capped models: which, how many seeds, and
    the epochs they reached against their epoch budget."""
    parts = []
    for m in models:
        capped = time_capped(m.ok)
        if not capped:
            continue
        epochs = sorted({int(r["stop"].get("epochs") or 0) for r in capped})
        budget = sorted({r["stop"].get("max_epochs") for r in capped}, key=str)
        caps = sorted({round(float(r["stop"].get("time_cap_s") or 0)) for r in capped})
        span = f"{epochs[0]}" if len(epochs) == 1 else f"{epochs[0]}-{epochs[-1]}"
        parts.append(f"{m.model}: {len(capped)} of {len(m.ok)} seed(s) at epoch {span} of "
                     f"{'/'.join(map(str, budget))} ({'/'.join(map(str, caps))} s cap)")
    if not parts:
        return None
    return (f"{TIME_CAP_MARK} the time cap (max_time_s), not the epoch budget, ended training: " + "; ".join(parts)
            + ". On another machine these models reach other epochs: compare with care.")


def budget_warnings(groups: Iterable[Any], title: Callable[[Any], str]) -> list[str]:
    """One warning per group whose models were stopped by different kinds of budget (e.g.
    one by its epochs, another by the clock)."""
    out = []
    for g in groups:
        kinds: dict[str, Counter] = {}
        for m in g.models:
            reasons = stop_reasons(m.ok)
            if reasons:
                kinds[m.model] = Counter({BUDGET_KIND.get(k, k): n for k, n in reasons.items()})
        distinct = {k for c in kinds.values() for k in c}
        if len(distinct) > 1:
            by = "; ".join(f"{model} by {', '.join(f'{k} ({n})' for k, n in sorted(c.items()))}"
                           for model, c in kinds.items())
            out.append(f"{title(g)}: models were stopped by different kinds of budget ({by}): "
                       f"the comparison is not at equal epochs nor at equal time")
    return out


def environment_rows(envs: list[dict[str, Any]], distinct: Callable[[Iterable[Any]], str]) -> list[list[str]]:
    """Environment-block rows: CPU identity (vector units, MHz), GPU driver and the speed
    fingerprint, as distinct values with record counts (``distinct``); none for old records."""
    rows = []
    for label, key in (("CPU vector units", "cpu_vector"), ("CPU kernels (torch)", "cpu_capability"),
                       ("CPU MHz", "cpu_mhz"), ("GPU driver", "gpu_driver")):
        values = [e.get(key) for e in envs]
        if any(v is not None for v in values):
            rows.append([label, distinct(" ".join(v) if isinstance(v, list) else v for v in values)])
    fps = [e.get("fingerprint") if isinstance(e.get("fingerprint"), dict) else None for e in envs]
    if any(fps):
        rows.append(["speed fingerprint", distinct(format_fingerprint(fp) if fp else None for fp in fps)])
    return rows


__all__ = ["TIME_CAP_MARK", "BUDGET_KIND", "stop_reasons", "time_capped", "model_marker",
           "leaderboard_note", "budget_warnings", "environment_rows"]
