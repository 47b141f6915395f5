"""Quality against training compute (issue 52, the compute axis): read off each record's learning
curve, no retraining. A family can lose at a small budget and win at a larger one.

Training compute after epoch ``e`` is ``(e + 1) * 3 * flops_per_sample * train_size``: the records'
FLOPs per sample are one evaluation step (forward and loss), and a training step is taken as three
of those (forward, backward for activations and for weights), the usual approximation. The quality
is the validation metric the curve logs after each epoch (the test metric exists only at the best
epoch), averaged over a model's seeds at each epoch.

A family's **frontier** at compute ``C`` is the best such value any of its models reached with at
most ``C``. Attention **overtakes** the best baseline (RNN or CNN) at the smallest compute from
which its frontier is at least the baseline's everywhere up to the largest compute both reached;
where it never does, the report says so ("not within the budget"). No interval: the seeds are
averaged, and the frontier is a maximum over models and epochs, a selection an interval would have
to account for.
"""

from __future__ import annotations

import math
from collections import defaultdict
from pathlib import Path
from typing import Any

from benchmarks.report.document import Block, Heading, Image, Paragraph, Table
from benchmarks.report.format import as_number, fmt_metric, fmt_si
from benchmarks.report.results import Analysis, Group, ModelResult

__all__ = ["model_curve", "frontier", "overtake", "group_compute", "compute_blocks"]

BASELINES = ("rnn", "cnn")


def model_curve(m: ModelResult) -> list[tuple[float, float]]:
    """``[(training FLOPs after the epoch, mean validation metric over seeds)]``, in epoch order;
    [] where the records lack FLOPs, a training size or a curve."""
    per_epoch: dict[int, list[float]] = defaultdict(list)
    step = None
    for rec in m.ok:
        fps = as_number((rec.get("cost") or {}).get("flops_per_sample"))
        size = as_number((rec.get("data") or {}).get("train_size"))
        if not fps or not size:
            return []
        step = 3.0 * fps * size
        for point in rec.get("curve") or []:
            v, e = as_number(point.get("val_metric")), point.get("epoch")
            if v is not None and math.isfinite(v) and isinstance(e, int):
                per_epoch[e].append(v)
    if step is None:
        return []
    return [((e + 1) * step, sum(vs) / len(vs)) for e, vs in sorted(per_epoch.items())]


def frontier(curves: list[list[tuple[float, float]]], mode: str) -> list[tuple[float, float]]:
    """The best value reached with at most each compute, over several curves (a step function
    given at every compute where it may change)."""
    sign = 1.0 if mode == "max" else -1.0
    points = sorted(p for c in curves for p in c)
    out, best = [], None
    for c, v in points:
        if best is None or sign * v > sign * best:
            best = v
        out.append((c, best))
    return out


def _at(front: list[tuple[float, float]], c: float) -> float | None:
    """The frontier's value at compute ``c`` (None before its first point)."""
    value = None
    for x, v in front:
        if x > c:
            break
        value = v
    return value


def overtake(att: list[tuple[float, float]], base: list[tuple[float, float]], mode: str) -> float | None:
    """The smallest compute from which ``att`` is at least ``base`` up to the largest compute both
    reached; None where it never holds."""
    if not att or not base:
        return None
    sign = 1.0 if mode == "max" else -1.0
    end = min(att[-1][0], base[-1][0])
    grid = sorted({x for x, _ in att + base if x <= end})
    since = None
    for x in grid:
        a, b = _at(att, x), _at(base, x)
        ahead = a is not None and (b is None or sign * a >= sign * b)
        since = (since if since is not None else x) if ahead else None
    return since


def group_compute(g: Group) -> dict[str, Any] | None:
    """One group's compute axis: ``fronts`` (family -> frontier), ``at`` (where attention
    overtakes the best RNN/CNN, or None), ``end`` (the largest compute both reached), ``said``
    (that in words) and ``best`` (family -> its best value, formatted); None without curves."""
    fams: dict[str, list[list[tuple[float, float]]]] = defaultdict(list)
    for m in g.models:
        curve = model_curve(m)
        if curve:
            fams[m.family].append(curve)
    if "attention" not in fams or not any(f in fams for f in BASELINES):
        return None
    fronts = {f: frontier(cs, g.mode) for f, cs in fams.items()}
    base = frontier([c for f in BASELINES for c in fams.get(f, [])], g.mode)
    at = overtake(fronts["attention"], base, g.mode)
    end = min(fronts["attention"][-1][0], base[-1][0])
    said = (f"from {fmt_si(at)} FLOPs on (up to {fmt_si(end)}, the largest compute both reached)" if at is not None
            else f"not within the budget (up to {fmt_si(end)} FLOPs, the largest compute both reached)")
    return {"fronts": fronts, "at": at, "end": end, "said": said,
            "best": {f: fmt_metric(fr[-1][1]) for f, fr in fronts.items()},
            "last": {f: fr[-1][1] for f, fr in fronts.items()}}


def compute_blocks(an: Analysis, plots_dir: Path, written: dict[str, Path], warn: Any) -> list[Block]:
    """Per group with learning curves and FLOPs (sweep points aside): each family's frontier and
    where attention overtakes the best baseline."""
    rows, figures = [], []
    for g in an.groups:
        c = None if g.point else group_compute(g)
        if c is None:
            continue
        rows.append([f"{g.task} / {g.dataset}", ", ".join(f"{f} {v}" for f, v in sorted(c["best"].items())), c["said"]])
        figures.append((g, c["fronts"], c["at"]))
    if not rows:
        return []
    blocks: list[Block] = [
        Heading(2, "Quality against training compute", "compute"),
        Table(["group", "best validation score per family (at its largest compute)",
               "attention at least the best RNN/CNN"], rows),
        Paragraph("Read off each record's learning curve: training compute after an epoch is (epochs) x 3 x the "
                  "record's FLOPs per sample (one evaluation step) x the training-set size; the quality is the "
                  "validation metric after that epoch, averaged over seeds. A family's frontier is the best value "
                  "any of its models reached within that compute. No interval: a maximum over models and epochs "
                  "is a selection.", "note"),
    ]
    from benchmarks.report.plots import FAMILY_COLORS, new_figure, save_figure

    for g, fronts, at in figures:
        name = f"compute__{g.task}__{''.join(ch if ch.isalnum() else '_' for ch in g.dataset)}.png"
        try:
            fig = new_figure()
            ax = fig.add_subplot(1, 1, 1)
            for fam, fr in sorted(fronts.items()):
                ax.step([x for x, _ in fr], [v for _, v in fr], where="post", color=FAMILY_COLORS.get(fam, "black"),
                        label=fam, lw=1.6)
            if at is not None:
                ax.axvline(at, color="black", ls=":", lw=1)
            ax.set_xscale("log")
            ax.set_xlabel("training compute (FLOPs, log)")
            ax.set_ylabel(f"validation {g.metric} (frontier)")
            ax.set_title(f"{g.task} / {g.dataset}: quality against compute", fontsize=10)
            ax.grid(True, alpha=0.3, which="both")
            ax.legend(fontsize=8)
            written[f"plots/{name}"] = save_figure(fig, plots_dir / name)
            blocks.append(Image(written[f"plots/{name}"], f"plots/{name}", f"{g.task} / {g.dataset} against compute"))
        except Exception as exc:  # noqa: BLE001 - a plot failure must not lose the report
            warn("plots", f"compute {g.task}/{g.dataset}: {type(exc).__name__}: {exc}")
    return blocks
