"""The picture of a sweep (issue 52): the test metric with its 95% interval against the axis, one
line per model, the crossover of each expectation marked (a dotted line at the interpolated value,
a shaded band over its interval)."""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path
from typing import Any

from benchmarks.report.plots import FAMILY_COLORS, line_styles, new_figure, save_figure

__all__ = ["plot_sweep", "plot_sweep_cost"]


def _axis_ticks(ax, xs: list[float]) -> None:
    """Ticks at the axis values themselves, plain numbers (log scale when they span a decade)."""
    from matplotlib.ticker import FixedLocator, NullLocator

    if xs and xs[0] > 0 and xs[-1] / xs[0] >= 10:
        ax.set_xscale("log")
    ax.xaxis.set_major_locator(FixedLocator(xs))
    ax.xaxis.set_minor_locator(NullLocator())
    ax.set_xticklabels([f"{x:g}" for x in xs])


def plot_sweep(res: Any, path: Path) -> Path | None:
    """Metric against the axis (mean and 95% t-interval over seeds), one line per model, for a
    :class:`benchmarks.report.sweeps.SweepResult` ``res``; the crossovers marked. None when no point has a numeric axis value and a result."""
    series: dict[str, list[tuple[float, float, float, float]]] = defaultdict(list)
    family: dict[str, str] = {}
    for v, g in zip(res.values, res.groups):
        if not isinstance(v, (int, float)) or isinstance(v, bool):
            continue
        for m in g.models:
            if m.mean is None:
                continue
            s = m.summary
            lo = s.ci_low if s.ci_low is not None else m.mean
            hi = s.ci_high if s.ci_high is not None else m.mean
            series[m.model].append((float(v), m.mean, lo, hi))
            family[m.model] = m.family
    if not series:
        return None
    fig = new_figure()
    ax = fig.add_subplot(1, 1, 1)
    style = line_styles()
    for model, pts in sorted(series.items()):
        pts.sort()
        xs, ys = [p[0] for p in pts], [p[1] for p in pts]
        color = FAMILY_COLORS.get(family[model], "black")
        ax.plot(xs, ys, style(family[model]), marker="o", ms=4, lw=1.5, color=color, label=f"{model} ({family[model]})")
        ax.fill_between(xs, [p[2] for p in pts], [p[3] for p in pts], color=color, alpha=0.12, lw=0)
    xs_all = sorted({p[0] for pts in series.values() for p in pts})
    _axis_ticks(ax, xs_all)
    for i, (text, c) in enumerate(res.crossovers.items()):
        if c.at is None:
            continue
        ax.axvline(c.at, color="black", ls=":", lw=1)
        lo = c.low if c.low is not None else xs_all[0]
        hi = c.high if c.high is not None else xs_all[-1]
        ax.axvspan(lo, hi, color="black", alpha=0.06)
        ax.annotate(f"{text}: flips ≈ {c.at:.3g}", (c.at, 0.02 + 0.06 * i), xycoords=("data", "axes fraction"),
                    fontsize=7, rotation=0, ha="left")
    g0 = res.groups[0]
    ax.set_xlabel(res.axis)
    ax.set_ylabel(f"test {g0.metric} ({'higher' if g0.mode == 'max' else 'lower'} is better), 95% CI")
    ax.set_title(f"{res.title}: along {res.axis}", fontsize=10)
    ax.grid(True, alpha=0.3, which="both")
    ax.legend(fontsize=8)
    return save_figure(fig, path)


def plot_sweep_cost(res: Any, path: Path) -> Path | None:
    """Training time per sample and peak memory against the axis, one line per model (log y): how
    each model's cost grows with the axis (attention's L^2 against truncated attention's L*w).
    None when no point has both a numeric axis value and a measured cost."""
    panels = (("train_samples_per_s", "training time per sample (ms)", lambda v: 1000.0 / v),
              ("peak_mem_bytes", "peak memory (MB)", lambda v: v / 2**20))
    series: dict[str, dict[str, list[tuple[float, float]]]] = defaultdict(lambda: defaultdict(list))
    family: dict[str, str] = {}
    for v, g in zip(res.values, res.groups):
        if not isinstance(v, (int, float)) or isinstance(v, bool):
            continue
        for m in g.models:
            for key, _, scale in panels:
                c = (m.cost or {}).get(key)
                if isinstance(c, (int, float)) and c > 0:
                    series[key][m.model].append((float(v), scale(c)))
                    family[m.model] = m.family
    if not any(series.values()):
        return None
    fig = new_figure((10.0, 4.0))
    style = line_styles()
    styles = {model: style(family[model]) for model in sorted(family)}  # one style per model in both panels
    for i, (key, label, _) in enumerate(panels):
        ax = fig.add_subplot(1, 2, i + 1)
        for model, pts in sorted(series[key].items()):
            pts.sort()
            ax.plot([p[0] for p in pts], [p[1] for p in pts], styles[model], marker="o", ms=4, lw=1.5,
                    color=FAMILY_COLORS.get(family[model], "black"), label=f"{model} ({family[model]})")
        _axis_ticks(ax, sorted({p[0] for pts in series[key].values() for p in pts}))
        ax.set_yscale("log")
        ax.set_xlabel(res.axis)
        ax.set_ylabel(label)
        ax.grid(True, alpha=0.3, which="both")
        if i == 0:
            ax.legend(fontsize=7)
    fig.suptitle(f"{res.title}: cost along {res.axis}", fontsize=10)
    return save_figure(fig, path)
