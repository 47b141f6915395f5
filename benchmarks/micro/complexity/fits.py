"""Fits of ``attnbench bench complexity``: power-law exponents of time and memory (log-log least
squares with standard error, local and largest-points slopes), growth models of path lengths
(``1``, ``log n``, ``n/r``, ``n``) and exponents as classes. Pure Python: no torch."""

from __future__ import annotations

import math
from typing import Iterable, Sequence

__all__ = ["fit_power_law", "fit_growth", "growth_class", "GROWTH_MODELS"]


def _lstsq_line(xs: Sequence[float], ys: Sequence[float]) -> dict:
    """Least-squares ``y = a x + b``: slope, intercept, slope standard error, R^2, RMSE."""
    m = len(xs)
    mx, my = sum(xs) / m, sum(ys) / m
    sxx = sum((x - mx) ** 2 for x in xs)
    syy = sum((y - my) ** 2 for y in ys)
    if sxx == 0:
        return {"slope": None, "intercept": my, "stderr": None, "r2": None, "rmse": math.sqrt(syy / m)}
    a = sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / sxx
    b = my - a * mx
    ss_res = sum((y - (a * x + b)) ** 2 for x, y in zip(xs, ys))
    se = math.sqrt(ss_res / (m - 2) / sxx) if m > 2 else None
    r2 = None if syy == 0 else 1.0 - ss_res / syy
    return {"slope": a, "intercept": b, "stderr": se, "r2": r2, "rmse": math.sqrt(ss_res / m)}


def fit_power_law(xs: Iterable[float], ys: Iterable[float]) -> dict | None:
    """Exponent of ``y ~ c x^e``: the slope of the least-squares line through ``(log x, log y)``.

    Returns ``exponent``, ``stderr`` (of the slope; ``None`` with two points), ``r2``,
    ``points``, ``local_exponents`` (slopes between neighbouring points, ascending ``x``: their
    range is the spread of the exponent over the sweep), ``tail_exponent`` (the fit over the
    largest three points, where fixed per-call costs matter least) and ``x_range``.
    Non-positive or missing values are left out; ``None`` when fewer than two points remain."""
    pts = sorted((float(x), float(y)) for x, y in zip(xs, ys)
                 if x is not None and y is not None and x > 0 and y > 0 and math.isfinite(y))
    # one value per x (median of duplicates)
    by_x: dict[float, list[float]] = {}
    for x, y in pts:
        by_x.setdefault(x, []).append(y)
    pts = [(x, sorted(v)[len(v) // 2]) for x, v in sorted(by_x.items())]
    if len(pts) < 2:
        return None
    lx = [math.log(x) for x, _ in pts]
    ly = [math.log(y) for _, y in pts]
    line = _lstsq_line(lx, ly)
    local = [(ly[i + 1] - ly[i]) / (lx[i + 1] - lx[i]) for i in range(len(pts) - 1)]
    tail = _lstsq_line(lx[-3:], ly[-3:])["slope"] if len(pts) >= 3 else local[-1]
    return {
        "exponent": line["slope"], "stderr": line["stderr"], "r2": line["r2"], "points": len(pts),
        "local_exponents": local, "local_min": min(local), "local_max": max(local), "tail_exponent": tail,
        "x_range": [pts[0][0], pts[-1][0]],
    }


#: Growth models for path lengths, simplest first (ties in R^2 go to the simpler model).
GROWTH_MODELS = ("O(1)", "O(log n)", "O(n/r)", "O(n)")


def fit_growth(points: Sequence[dict], *, ratio_label: str = "O(n/r)") -> dict:
    """Fit ``y`` (``points``: dicts with ``n``, ``y`` and optionally ``base`` for ``log_base n``
    and ``reach`` for ``n / reach``) against the growth models ``1``, ``log n``, ``n/r`` and
    ``n``, each as ``y = a f + b`` by least squares. Returns ``models`` (per model: ``a``,
    ``b``, ``r2``, ``rmse``) and ``best``: constant data -> ``O(1)``; otherwise the highest R^2
    (within 1e-9, the simpler model). ``O(n/r)`` is fitted only when every point has a
    ``reach``; it is reported under ``ratio_label`` (e.g. ``O(n/k)`` for convolutions)."""
    pts = [p for p in points if p.get("y") is not None]
    if not pts:
        return {"best": None, "models": {}, "points": 0}
    ys = [float(p["y"]) for p in pts]
    feats: dict[str, list[float]] = {
        "O(log n)": [math.log(p["n"]) / math.log(p.get("base") or math.e) for p in pts],
        "O(n)": [float(p["n"]) for p in pts],
    }
    if all(p.get("reach") for p in pts):
        feats["O(n/r)"] = [p["n"] / p["reach"] for p in pts]
    models: dict[str, dict] = {}
    const = _lstsq_line([0.0] * len(ys), ys)
    models["O(1)"] = {"a": 0.0, "b": const["intercept"], "r2": None if const["rmse"] else 1.0, "rmse": const["rmse"]}
    for name, xs in feats.items():
        fit = _lstsq_line(xs, ys)
        models[name] = {"a": fit["slope"], "b": fit["intercept"], "r2": fit["r2"], "rmse": fit["rmse"]}
    if max(ys) == min(ys):
        best = "O(1)"
    else:
        ranked = [(m, models[m]["r2"]) for m in GROWTH_MODELS if m in models and models[m]["r2"] is not None]
        top = max(r for _, r in ranked)
        best = next(m for m, r in ranked if r >= top - 1e-9)
    label = {"O(n/r)": ratio_label}
    return {"best": label.get(best, best), "models": {label.get(k, k): v for k, v in models.items()},
            "points": len(pts)}


def growth_class(exponent: float | None) -> str | None:
    """A power-law exponent in ``n`` as a class: < 0.25 -> ``O(1)``, 0.75-1.25 -> ``O(n)``,
    else ``O(n^e)``."""
    if exponent is None:
        return None
    if exponent < 0.25:
        return "O(1)"
    if 0.75 <= exponent <= 1.25:
        return "O(n)"
    return f"O(n^{exponent:.2f})"
