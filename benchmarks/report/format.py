"""How the report writes numbers: one place for every cell, sentence and CSV value, so that a
domain section formats a metric, a size or a duration exactly as the leaderboard does."""

from __future__ import annotations

import math
import re
from typing import Any

__all__ = ["as_number", "fmt_metric", "fmt_si", "fmt_bytes", "fmt_seconds", "fmt_ci", "csv_value", "slug", "interval_text"]


def as_number(x: Any) -> float | None:
    """``x`` as a float; None for None, booleans and anything that is not a number."""
    if x is None or isinstance(x, bool):
        return None
    try:
        v = float(x)
    except (TypeError, ValueError):
        return None
    return v


def fmt_metric(x: Any) -> str:
    """A metric value with 4 significant digits (``–`` when absent)."""
    v = as_number(x)
    return "–" if v is None else f"{v:.4g}"


def fmt_si(x: Any, unit: str = "") -> str:
    """``1.23M``, ``456k``: 3 significant digits with an SI suffix."""
    v = as_number(x)
    if v is None:
        return "–"
    if not math.isfinite(v):
        return f"{v}{unit}"
    return _scaled(v, ((1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k")), "{:.3g}{}" + unit, f"{v:.3g}{unit}")


def _scaled(v: float, units: tuple[tuple[float, str], ...], fmt: str, small: str) -> str:
    """``v`` in the largest of ``units`` (factor, suffix) it reaches, else ``small``."""
    for factor, suffix in units:
        if abs(v) >= factor:
            return fmt.format(v / factor, suffix)
    return small


def fmt_bytes(x: Any) -> str:
    """A size in binary units (``1.5 GiB``)."""
    v = as_number(x)
    if v is None:
        return "–"
    return _scaled(v, ((1 << 40, "TiB"), (1 << 30, "GiB"), (1 << 20, "MiB"), (1 << 10, "KiB")), "{:.3g} {}", f"{v:.0f} B")


def fmt_seconds(x: Any) -> str:
    """A duration in s, min or h (3 significant digits)."""
    v = as_number(x)
    if v is None:
        return "–"
    if abs(v) < 60:
        return f"{v:.3g} s"
    if abs(v) < 3600:
        return f"{v / 60:.3g} min"
    return f"{v / 3600:.3g} h"


def fmt_ci(lo: Any, hi: Any, n: int | None = None, *, clipped: bool = False, identical: bool = False) -> str:
    """``[lo, hi]``; ``undefined (n=1)`` when the interval does not exist; ``n=2, identical`` for
    a zero spread (a zero-width interval would claim certainty); ``[lo, hi] (clipped)`` when it
    was cut to the metric's range."""
    if lo is None or hi is None:
        return f"undefined (n={n})" if n is not None else "undefined"
    if identical:
        return f"n={n}, identical" if n is not None else "identical"
    return f"[{fmt_metric(lo)}, {fmt_metric(hi)}]" + (" (clipped)" if clipped else "")


def csv_value(x: Any) -> str:
    """A summary.csv cell: empty for None, lower-case booleans, full-precision floats."""
    if x is None:
        return ""
    if isinstance(x, bool):
        return str(x).lower()
    if isinstance(x, int):
        return str(x)
    if isinstance(x, float):
        return repr(x)
    if hasattr(x, "item"):
        return csv_value(x.item())
    return str(x)


def slug(*parts: str) -> str:
    """A file-name and anchor-safe name from parts (empty parts left out), joined by ``__``."""
    return "__".join(re.sub(r"[^A-Za-z0-9._-]+", "_", str(p)) for p in parts if p)


def interval_text(c: dict) -> str:
    """``95% CI 0.98-1.08, 10 interleaved rounds`` of an interval check ('' for other checks)."""
    if "decision" not in c or "repeats" not in c:
        return ""
    conf = f"{round(100 * c.get('confidence', 0.95))}% CI"
    ci = "undefined" if c.get("ci_low") is None else f"{c['ci_low']:.3f}-{c['ci_high']:.3f}"
    return f"{conf} {ci}, {c['repeats']} interleaved rounds"
