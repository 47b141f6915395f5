"""Report sections of the speech task.

* ``EXTRA_RENDERERS["speech_confusion"]``: the test confusion matrices of a dataset group
  (``rec["extras"]["speech_confusion"] = {"form", "labels", "matrix"}``, true x predicted
  counts, written by :mod:`tasks.speech.module`), summed over seeds per model: a table of
  per-class recall for every model in the report's ranking of the group, the most confused
  pairs of the best model, and a heatmap per model (rows normalised).
* ``BENCH_RENDERERS["speech"]``: the speech scaling micro-benchmark (``bench_speech.json``, see
  :mod:`benchmarks.micro.speech`): time and peak memory per sequence vs length for each model, the
  target checks, the plot (:func:`plot_bench`, which the benchmark draws its own PNG with).

Renderers read result records only (no checkpoints). Imported by the report
(:func:`benchmarks.report.sections.load_sections`); the record key is the domain's
(:data:`tasks.speech.module.CONFUSION_KEY`).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from benchmarks.report import (
    BENCH_RENDERERS,
    EXTRA_RENDERERS,
    BenchContext,
    Block,
    Bold,
    ExtraContext,
    ExtraSection,
    Heading,
    check_result,
    Paragraph,
    Table,
)
from benchmarks.report.plots import FAMILY_COLORS, save_figure
from tasks.speech.module import CONFUSION_KEY

__all__ = ["CONFUSION_KEY", "BENCH_NAME", "render_confusion", "render_bench", "sum_confusions", "plot_bench"]

#: The micro-benchmark whose section this module renders (``attnbench bench speech``).
BENCH_NAME = "speech"


def sum_confusions(items: list[tuple[dict[str, Any], Any]]) -> tuple[list[str], dict[str, list[list[int]]]]:
    """Model -> confusion summed over its records (seeds); records whose labels differ from the
    first record's are skipped."""
    labels: list[str] | None = None
    out: dict[str, list[list[int]]] = {}
    for rec, val in items:
        if not isinstance(val, dict) or "matrix" not in val:
            continue
        labs = [str(x) for x in val.get("labels") or range(len(val["matrix"]))]
        labels = labels or labs
        if labs != labels:
            continue
        m = val["matrix"]
        model = str(rec.get("model"))
        if model not in out:
            out[model] = [[0] * len(labels) for _ in labels]
        for i, row in enumerate(m):
            for j, v in enumerate(row):
                out[model][i][j] += int(v)
    return labels or [], out


def _accuracy(m: list[list[int]]) -> float:
    total = sum(map(sum, m))
    return sum(m[i][i] for i in range(len(m))) / total if total else float("nan")


def _plot_confusions(labels: list[str], mats: dict[str, list[list[int]]], path: Path, title: str) -> None:
    import numpy as np
    from matplotlib.figure import Figure

    n = len(mats)
    cols = min(n, 4)
    rows = -(-n // cols)
    fig = Figure(figsize=(3.6 * cols, 3.4 * rows))
    axes = fig.subplots(rows, cols, squeeze=False)
    for ax in axes.flat[n:]:
        ax.axis("off")
    for ax, (model, m) in zip(axes.flat, mats.items()):
        a = np.asarray(m, dtype=float)
        a = a / np.maximum(a.sum(1, keepdims=True), 1)
        ax.imshow(a, vmin=0, vmax=1, cmap="Blues")
        ax.set_title(f"{model} ({_accuracy(m):.1%})", fontsize=9)
        ticks = range(len(labels))
        ax.set_xticks(ticks)
        ax.set_yticks(ticks)
        ax.set_xticklabels(labels, fontsize=6, rotation=90)
        ax.set_yticklabels(labels, fontsize=6)
        ax.set_xlabel("predicted", fontsize=7)
        ax.set_ylabel("true", fontsize=7)
    fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    save_figure(fig, path, dpi=100)


def render_confusion(ctx: ExtraContext) -> ExtraSection | None:
    """Per-class recall of every model of the group (leaderboard order) and its heatmaps."""
    labels, mats = sum_confusions(ctx.items)
    if not mats:
        return None
    form = next((v.get("form") for _, v in ctx.items if isinstance(v, dict)), "classify")
    unit = "frames" if form == "tag" else "utterances"
    models = [m.model for m in ctx.group.models if m.model in mats]  # ranked; models without a mean last
    header = ["class"] + models
    rows = []
    for i, lab in enumerate(labels):
        cells = []
        for mo in models:
            n = sum(mats[mo][i])
            cells.append(f"{mats[mo][i][i] / n:.1%}" if n else "-")
        rows.append([lab] + cells)
    rows.append([Bold("all")] + [f"{_accuracy(mats[mo]):.2%}" for mo in models])
    best = mats[models[0]]
    pairs = sorted(((best[i][j], labels[i], labels[j]) for i in range(len(labels)) for j in range(len(labels))
                    if i != j and best[i][j]), reverse=True)[:5]
    confused = ", ".join(f"{t} -> {p} ({c})" for c, t, p in pairs) or "none"
    title = f"Test confusions ({ctx.task} / {ctx.dataset}, {unit}, summed over seeds)"
    intro = (f"Per-class recall on the test set ({unit}; columns ordered by overall accuracy). "
             f"Most confused (true -> predicted) for {models[0]}: {confused}.")
    blocks: list[Block] = [Heading(4, title), Paragraph(intro), Table(header, rows)]
    png = ctx.plots_dir / f"speech_confusion_{ctx.dataset}.png".replace("/", "_")
    try:
        _plot_confusions(labels, mats, png, title)
        blocks.append(ctx.image(png, "confusions"))
    except Exception:  # noqa: BLE001 - the table stands without the image
        pass
    return ExtraSection.from_blocks(blocks)


def _fmt_ms(x: Any) -> str:
    return "-" if x is None else (f"{x:.0f} ms" if x >= 100 else f"{x:.1f} ms")


def _fmt_mib(x: Any) -> str:
    return "-" if x is None else f"{x / (1 << 20):.0f} MiB"


def render_bench(ctx: BenchContext) -> ExtraSection | None:
    """Time / memory per model and length, the target checks and the plot."""
    doc = ctx.doc
    if not isinstance(doc, dict) or not doc.get("points"):
        return None
    pts = [r for r in doc["points"] if r.get("kind") == "speech"]
    lengths = sorted({r["L"] for r in pts})
    models = list(dict.fromkeys(r["method"] for r in pts))
    idx = {(r["method"], r["L"]): r for r in pts}

    def cell(m: str, L: int) -> str:
        r = idx.get((m, L))
        if r is None:
            return "-"
        if r["status"] != "ok":
            return r["status"].upper()
        return f"{_fmt_ms(r.get('time_ms_per_seq'))} / {_fmt_mib(r.get('peak_mem_bytes_per_seq'))}"

    family = {r["method"]: r.get("family", "") for r in pts}
    header = ["model", "family"] + [f"L={L}" for L in lengths]
    rows = [[m, str(family[m])] + [cell(m, L) for L in lengths] for m in models]
    checks = doc.get("checks") or []
    crow = [[check_result(c), c["name"],
             "-" if c.get("value") is None else f"{c['value']:.2f}", str(c.get("target")), str(c.get("note", ""))]
            for c in checks]
    env = doc.get("environment") or {}
    setup = doc.get("setup") or {}
    title = "Speech scaling: time and peak memory per sequence vs length"
    intro = (f"One training step (forward + frame cross-entropy + backward) of each speech model on one sequence "
             f"of L frames (100 frames = 1 s), on {env.get('device_name', '?')}, {setup.get('dtype', '?')}. "
             f"Cells: time / peak memory growth.")
    blocks: list[Block] = [Heading(3, title), Paragraph(intro), Table(header, rows)]
    if crow:
        blocks.append(Table(["verdict", "check", "value", "target", "note"], crow))
    try:
        png = ctx.plots_dir / "bench_speech.png"
        plot_bench(doc, png)
        blocks.append(ctx.image(png, "speech scaling"))
    except Exception:  # noqa: BLE001 - the tables stand without the plot
        pass
    return ExtraSection.from_blocks(blocks)


def plot_bench(doc: dict[str, Any], path: str | Path) -> None:
    """Log-log time and peak memory per sequence vs length, one line per model: full attention
    solid red (materialised: dotted dark red), truncated presets dashed oranges (attention's warm
    colours), the other families in the report's colours; an x at the
    top marks an OOM/timeout."""
    from matplotlib import colormaps
    from matplotlib.figure import Figure

    pts = [r for r in doc["points"] if r.get("kind") == "speech"]
    methods = list(dict.fromkeys(r["method"] for r in pts))
    trunc = [m for m in methods if any(r["method"] == m and r.get("pattern") == "truncated" for r in pts)]
    oranges = {m: colormaps["Oranges"](0.45 + 0.5 * i / max(len(trunc) - 1, 1)) for i, m in enumerate(trunc)}
    all_L = sorted({r["L"] for r in pts})
    fig = Figure(figsize=(13, 5))
    axes = fig.subplots(1, 2)
    for ax, key, scale, ylabel in ((axes[0], "time_ms_per_seq", 1.0, "train step time per sequence (ms)"),
                                   (axes[1], "peak_mem_bytes_per_seq", 1 / (1 << 20), "peak memory per sequence (MiB)")):
        for j, m in enumerate(methods):
            rs = sorted((r for r in pts if r["method"] == m), key=lambda r: r["L"])
            fam, pat, dense = rs[0].get("family"), rs[0].get("pattern"), rs[0].get("materialised")
            colour = ("darkred" if dense else "tab:red") if pat == "full" else oranges.get(m, FAMILY_COLORS.get(fam, "black"))
            ok = [(r["L"], r[key] * scale) for r in rs if r["status"] == "ok" and r.get(key)]
            if ok:
                style = ":" if dense else "--" if pat == "truncated" else "-"
                ax.plot(*zip(*ok), style, marker="o", ms=4, color=colour, label=f"{m} ({fam})")
            for r in rs:
                if r["status"] in ("oom", "timeout", "error"):
                    ax.plot([r["L"]], [0.97 - 0.035 * j], marker="x", ms=9, mew=2, color=colour,
                            transform=ax.get_xaxis_transform(), clip_on=False)
        if all_L:
            ax.set_xscale("log", base=2)
            ax.set_yscale("log")
            ax.set_xticks(all_L)
            ax.set_xticklabels([str(L) for L in all_L])
            ax.minorticks_off()
        ax.set_xlabel("sequence length (frames, 100 per second)")
        ax.set_ylabel(ylabel)
        ax.grid(True, alpha=0.3)
        if methods:
            ax.legend(fontsize=8)
    s = doc["setup"]
    fig.suptitle(f"speech models, one training step: {doc['environment'].get('device_name')}, {s['dtype']}, "
                 f"batch {s['batch']}, {s['num_features']} features", fontsize=10)
    fig.tight_layout()
    save_figure(fig, Path(path), dpi=110)


EXTRA_RENDERERS[CONFUSION_KEY] = render_confusion
BENCH_RENDERERS[BENCH_NAME] = render_bench
