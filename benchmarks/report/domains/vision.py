"""Report section of the vision task: attention-rollout maps (``rec["extras"]["rollout"]``).

Each ViT record holds, for a few fixed test images, the image (uint8, downsampled) and its
attention-rollout map over the patch grid (Abnar & Zuidema 2020; each map sums to 1; written by
:mod:`tasks.vision.module`). The renderer takes the best model of the report's ranking of the
group that has valid maps, its lowest seed, and draws each image above the same image with the
map laid over it (one cell per patch). Imported by the report
(:func:`benchmarks.report.sections.load_sections`); the record key is the domain's
(:data:`tasks.vision.module.ROLLOUT_KEY`).
"""

from __future__ import annotations

import re
from typing import Any, Sequence

from benchmarks.report import EXTRA_RENDERERS, Bold, ExtraContext, ExtraSection, ModelResult, Paragraph
from benchmarks.report.plots import save_figure
from tasks.vision.module import ROLLOUT_KEY

__all__ = ["ROLLOUT_KEY", "pick_record", "render_rollout", "plot_rollout", "decode_image"]



def _valid(value: Any) -> bool:
    try:
        gh, gw = value["grid"]
        return bool(value["images"]) and all(
            len(im["map"]) == gh and all(len(r) == gw for r in im["map"]) and len(im["image"]) in (1, 3)
            for im in value["images"]
        )
    except (TypeError, KeyError, ValueError):
        return False


def pick_record(items: list[tuple[dict, Any]], ranked: Sequence[ModelResult]
                ) -> tuple[dict, Any, ModelResult] | None:
    """``(record, value, its model's result)``: the lowest seed with a valid rollout of the first
    model in ``ranked`` (the group's models, best first) that has one; None if none has."""
    for m in ranked:
        runs = [(rec, value) for rec, value in items if rec.get("model") == m.model and _valid(value)]
        if runs:
            rec, value = min(runs, key=lambda r: (not isinstance(r[0].get("seed"), int), r[0].get("seed") or 0))
            return rec, value, m
    return None


def decode_image(image: list[list[str]]) -> Any:
    """The stored image (per channel, one hex string per row of uint8 pixels) -> ``(C, h, w)`` uint8."""
    import numpy as np

    return np.array([[list(bytes.fromhex(row)) for row in ch] for ch in image], dtype=np.uint8)


def _rgb(image: list[list[str]]) -> Any:
    a = decode_image(image)  # (C, h, w)
    return a[0] if a.shape[0] == 1 else a.transpose(1, 2, 0)


def plot_rollout(value: dict[str, Any], path: Any, title: str) -> None:
    """Two rows: the images, then the images with the rollout map over them (patch cells)."""
    import numpy as np
    from matplotlib.figure import Figure

    images = value["images"]
    classes = value.get("classes") or []
    n = len(images)
    fig = Figure(figsize=(1.9 * n + 0.6, 4.2))
    axes = fig.subplots(2, n, squeeze=False)
    mappable = None
    vmax = max(max(max(r) for r in im["map"]) for im in images) or 1.0  # one colour scale for all maps
    for j, im in enumerate(images):
        img = _rgb(im["image"])
        h, w = img.shape[:2]
        m = np.asarray(im["map"], dtype=float)
        name = (lambda k: classes[k] if 0 <= k < len(classes) else str(k))
        for ax in axes[:, j]:
            ax.imshow(img, cmap="gray" if img.ndim == 2 else None, extent=(0, w, h, 0))
            ax.set_xticks([])
            ax.set_yticks([])
        mappable = axes[1, j].imshow(m, cmap="inferno", alpha=0.6, extent=(0, w, h, 0), interpolation="nearest",
                                     vmin=0, vmax=vmax)
        mark = "" if im["label"] == im["pred"] else " ✗"
        axes[0, j].set_title(f"#{im['index']}: {name(im['label'])}\npred {name(im['pred'])}{mark}", fontsize=8)
    axes[0, 0].set_ylabel("image", fontsize=8)
    axes[1, 0].set_ylabel("rollout", fontsize=8)
    if mappable is not None:
        fig.colorbar(mappable, ax=axes[1, :].tolist(), fraction=0.02, pad=0.01, label="share of the output")
    fig.suptitle(title, fontsize=9)
    save_figure(fig, path, dpi=110)


def render_rollout(ctx: ExtraContext) -> ExtraSection | None:
    """The rollout maps of the best ViT of the group (its lowest seed)."""
    picked = pick_record(ctx.items, ctx.ranked)
    if picked is None:
        return None
    rec, value, result = picked
    mean, seeds = result.mean, len(result.values)
    gh, gw = value["grid"]
    slug = re.sub(r"[^A-Za-z0-9_.-]+", "_", f"rollout_{ctx.suite}_{ctx.task}_{ctx.dataset}")
    path = ctx.plots_dir / f"{slug}.png"
    model, seed = rec.get("model"), rec.get("seed")
    plot_rollout(value, path, f"{ctx.task}/{ctx.dataset}: attention rollout of {model} (seed {seed})")
    text = ["Attention rollout (Abnar & Zuidema 2020) of ", Bold(str(model)),
            f", the ViT with the best mean test accuracy ({100 * mean:.2f}% over {seeds} "
            f"seed{'s' if seeds != 1 else ''}); seed {seed}, {len(value['images'])} fixed test images (the first of "
            f"each class, in class order). Head-averaged attention plus the identity, rows renormalised, multiplied "
            f"through the layers; each map is the share of the pooled output that flows from each of the {gh}x{gw} "
            f"patches ({value.get('patch_size', '?')} px) and sums to 1. ✗ marks a wrong prediction."]
    return ExtraSection.from_blocks([Paragraph(Bold("Attention rollout")), Paragraph(text),
                                     ctx.image(path, "attention rollout")])


EXTRA_RENDERERS[ROLLOUT_KEY] = render_rollout
