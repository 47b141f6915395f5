"""The report's own plots (matplotlib, no display): quality against train time and parameters,
learning curves, quality against the training-set size. Each returns the PNG's path, or None
when the group has nothing to draw."""

from __future__ import annotations

import math
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any, Callable, Iterable

from tasks.common.io import write_atomic

from benchmarks.report import stats
from benchmarks.report.format import as_number, fmt_si
from benchmarks.report.results import FAMILIES, Group, ModelResult

__all__ = ["FAMILY_COLORS", "new_figure", "line_styles", "save_figure", "plot_quality_vs", "plot_curves", "plot_datasize", "plot_rank_grid", "rank_places", "train_size"]

FAMILY_COLORS = {"attention": "tab:red", "rnn": "tab:blue", "cnn": "tab:green", "other": "tab:gray"}


def new_figure(figsize=(7.0, 4.5)):
    from matplotlib.figure import Figure

    return Figure(figsize=figsize, dpi=100)


def save_figure(fig, path: Path, dpi: float | None = None) -> Path:
    """Write a :class:`matplotlib.figure.Figure` (not pyplot: nothing to close) as a PNG, atomically:
    a reader never sees half a file. The report's plots and the domains' sections save through it."""
    return write_atomic(path, lambda tmp: fig.savefig(tmp, format="png", bbox_inches="tight", dpi=dpi))


def _legend_families(ax, families: Iterable[str]) -> None:
    from matplotlib.lines import Line2D

    fams = [f for f in FAMILIES if f in set(families)] + sorted(set(families) - set(FAMILIES))
    handles = [Line2D([], [], marker="o", ls="", color=FAMILY_COLORS.get(f, "black"), label=f) for f in fams]
    if handles:
        ax.legend(handles=handles, fontsize=8, title="family", title_fontsize=8)


def line_styles() -> Callable[[str], str]:
    """A line style per call for a family: solid for its first model, then dashed, dotted, ..."""
    styles = ["-", "--", ":", "-."]
    count: Counter = Counter()

    def style(family: str) -> str:
        ls = styles[count[family] % len(styles)]
        count[family] += 1
        return ls

    return style


def _log_axis_labels(ax, xs: list[float], unit_fmt: Callable[[float], str]) -> None:
    """Plain tick labels on a log x axis (``12 s``, ``120k``); within a decade, evenly spaced
    ticks (a log axis has none there); some room around the points."""
    from matplotlib.ticker import FuncFormatter, MaxNLocator, NullFormatter, NullLocator

    lo, hi = min(xs), max(xs)
    pad = 1.5 if hi == lo else max(1.05, (hi / lo) ** 0.1)
    ax.set_xlim(lo / pad, hi * pad)
    if hi * pad / (lo / pad) < 10:
        ax.xaxis.set_major_locator(MaxNLocator(5))
        ax.xaxis.set_minor_locator(NullLocator())
    ax.xaxis.set_major_formatter(FuncFormatter(lambda x, _pos: unit_fmt(x)))
    ax.xaxis.set_minor_formatter(NullFormatter())


def plot_quality_vs(g: Group, xkey: str, xlabel: str, path: Path, title: str,
                    unit_fmt: Callable[[float], str] = fmt_si) -> Path | None:
    """Test metric (mean ± std) against a cost column on a log axis, one point per model."""
    pts = [(m, as_number(m.cost.get(xkey))) for m in g.models if m.mean is not None]
    pts = [(m, x) for m, x in pts if x is not None and x > 0]
    if not pts:
        return None
    fig = new_figure()
    ax = fig.add_subplot(1, 1, 1)
    for m, x in pts:
        c = FAMILY_COLORS.get(m.family, "black")
        ax.errorbar([x], [m.mean], yerr=[[m.summary.std or 0.0]] if m.summary.std is not None else None,
                    fmt="o", color=c, capsize=3, ms=6)
        ax.annotate(m.model, (x, m.mean), xytext=(4, 4), textcoords="offset points", fontsize=7)
    ax.set_xscale("log")
    _log_axis_labels(ax, [x for _, x in pts], unit_fmt)
    ax.set_xlabel(xlabel)
    ax.set_ylabel(f"test {g.metric} ({'higher' if g.mode == 'max' else 'lower'} is better)")
    ax.set_title(title, fontsize=10)
    ax.grid(True, alpha=0.3, which="both")
    _legend_families(ax, [m.family for m, _ in pts])
    return save_figure(fig, path)


def plot_curves(g: Group, path: Path, title: str) -> Path | None:
    """Validation metric per epoch, mean over the seeds that reached the epoch, per model."""
    series = []
    for m in g.models:
        by_epoch: dict[Any, list[float]] = defaultdict(list)
        for r in m.ok:
            for pt in r.get("curve") or []:
                if not isinstance(pt, dict):
                    continue
                e, v = as_number(pt.get("epoch")), as_number(pt.get("val_metric"))
                if e is not None and v is not None and math.isfinite(v):
                    by_epoch[e].append(v)
        if by_epoch:
            es = sorted(by_epoch)
            series.append((m, es, [stats.mean(by_epoch[e]) for e in es]))
    if not series:
        return None
    fig = new_figure()
    ax = fig.add_subplot(1, 1, 1)
    style = line_styles()
    for m, es, ys in series:
        ls = style(m.family)
        ax.plot(es, ys, ls, color=FAMILY_COLORS.get(m.family, "black"), label=f"{m.model} ({m.family})", lw=1.5,
                marker="o" if len(es) <= 30 else None, ms=3)
    from matplotlib.ticker import MaxNLocator

    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax.set_xlabel("epoch")
    ax.set_ylabel(f"validation {g.metric} (mean over seeds)")
    ax.set_title(title, fontsize=10)
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=7)
    return save_figure(fig, path)


def train_size(m: ModelResult) -> float | None:
    """The mean number of training examples of a model's ok records (None when unrecorded)."""
    sizes = [as_number((r.get("data") or {}).get("train_size")) for r in m.ok if isinstance(r.get("data"), dict)]
    sizes = [x for x in sizes if x is not None]
    return stats.mean(sizes) if sizes else None


def plot_datasize(gs: list[Group], path: Path, title: str) -> Path | None:
    """Test metric (mean ± std over seeds) against the training-set size, one line per model."""
    series: dict[str, list[tuple[float, float, float]]] = defaultdict(list)
    family: dict[str, str] = {}
    for g in gs:
        for m in g.models:
            if m.mean is None:
                continue
            x = train_size(m) or g.train_fraction
            series[m.model].append((x, m.mean, m.summary.std or 0.0))
            family[m.model] = m.family
    series = {k: sorted(v) for k, v in series.items() if v}
    if not series:
        return None
    fig = new_figure()
    ax = fig.add_subplot(1, 1, 1)
    style = line_styles()
    for model, pts in sorted(series.items()):
        ls = style(family[model])
        ax.errorbar([p[0] for p in pts], [p[1] for p in pts], yerr=[p[2] for p in pts], fmt=ls, marker="o",
                    color=FAMILY_COLORS.get(family[model], "black"), capsize=3, ms=4, lw=1.5,
                    label=f"{model} ({family[model]})")
    ax.set_xscale("log")
    _log_axis_labels(ax, [p[0] for pts in series.values() for p in pts], fmt_si)
    g0 = gs[0]
    ax.set_xlabel("training examples (log)")
    ax.set_ylabel(f"test {g0.metric} ({'higher' if g0.mode == 'max' else 'lower'} is better)")
    ax.set_title(title, fontsize=10)
    ax.grid(True, alpha=0.3, which="both")
    ax.legend(fontsize=8)
    return save_figure(fig, path)


def rank_places(cells: list[list[tuple[float, int, str] | None]], n_columns: int) -> Any:
    """The heat map's values: each entry's place within its column, 0 (first) to 1 (last), 0.5
    for an entry alone in its column, NaN where nothing ran; a numpy array (rows, columns)."""
    import numpy as np

    grid = np.full((len(cells), n_columns), np.nan)
    for i, row in enumerate(cells):
        for j, c in enumerate(row):
            if c is not None:
                rank, n, _ = c
                grid[i, j] = 0.5 if n <= 1 else (rank - 1) / (n - 1)
    return grid


def plot_rank_grid(rows: list[str], columns: list[str], cells: list[list[tuple[float, int, str] | None]],
                   path: Path, title: str) -> Path | None:
    """A rank heat map: ``cells[i][j]`` is row i's ``(rank, entries ranked in column j, label)``
    or None (not run there, left blank). Colour is the place within its column, from best (green)
    to last (red), so columns with different numbers of entries read alike."""
    if not rows or not columns or not any(c for r in cells for c in r):
        return None
    import numpy as np

    grid = rank_places(cells, len(columns))
    fig = new_figure((1.2 + 1.55 * len(columns), 0.9 + 0.5 * len(rows)))
    ax = fig.add_subplot(1, 1, 1)
    ax.imshow(np.ma.masked_invalid(grid), cmap="RdYlGn_r", vmin=0.0, vmax=1.0, aspect="auto")
    for i, row in enumerate(cells):
        for j, c in enumerate(row):
            ax.text(j, i, "–" if c is None else c[2], ha="center", va="center", fontsize=7,
                    color="gray" if c is None else "black")
    ax.set_xticks(range(len(columns)), [c.replace(" / ", "\n") for c in columns], fontsize=8)
    ax.set_yticks(range(len(rows)), rows, fontsize=8)
    ax.tick_params(length=0)
    ax.set_title(title, fontsize=10)
    return save_figure(fig, path)
