"""Report section of the translation task: cross-attention alignment heatmaps
(``rec["extras"]["translation_alignments"]``).

Each record holds, for the first few test sentences, the source pieces, the model's own
translation (pieces) and its cross-attention weights ``H x T x S`` in integer percent (the
Transformer's last decoder layer per head; one map for the RNN attention models and ConvS2S's
last layer; written by :mod:`tasks.translation.module`). Per model, the renderer draws one seed
(the lowest): a row per sentence, the head average first, then each head when there are
several. Imported by the report (:func:`benchmarks.report.sections.load_sections`); the record key
is the domain's (:data:`tasks.translation.module.ALIGNMENT_KEY`).
"""

from __future__ import annotations

import re
from typing import Any

from benchmarks.report import EXTRA_RENDERERS, Block, Bold, ExtraContext, ExtraSection, Heading, Paragraph
from benchmarks.report.plots import save_figure
from tasks.translation.module import ALIGNMENT_KEY

__all__ = ["ALIGNMENT_KEY", "render_alignments", "pick_records", "head_mean"]

_MAX_SENTENCES = 3


def _valid(value: Any) -> bool:
    try:
        sents = value["sentences"]
        for s in sents:
            w = s["weights"]
            if not w or len(w[0]) != len(s["hyp"]) or any(len(row) != len(s["src"]) for head in w for row in head):
                return False
        return bool(sents)
    except (TypeError, KeyError, IndexError):
        return False


def pick_records(items: list[tuple[dict[str, Any], Any]]) -> dict[str, tuple[dict[str, Any], Any]]:
    """model -> ``(record, value)`` of its lowest seed with a well-formed value, in model order."""
    out: dict[str, tuple[dict[str, Any], Any]] = {}
    for rec, value in sorted(items, key=lambda it: (str(it[0].get("model")), it[0].get("seed", 0))):
        if _valid(value) and rec.get("model") not in out:
            out[rec["model"]] = (rec, value)
    return out


def head_mean(weights: list[list[list[float]]]) -> list[list[float]]:
    """The average over heads of ``H x T x S`` weights -> ``T x S``."""
    h = len(weights)
    return [[sum(weights[k][t][s] for k in range(h)) / h for s in range(len(weights[0][t]))]
            for t in range(len(weights[0]))]


def _safe(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", name)


def _plot(value: dict[str, Any], title: str, path) -> None:
    from matplotlib.figure import Figure

    sents = value["sentences"][:_MAX_SENTENCES]
    heads = len(sents[0]["weights"])
    cols = 1 + (heads if heads > 1 else 0)
    fig = Figure(figsize=(3.2 * cols + 0.5, 3.0 * len(sents) + 0.6))
    axes = fig.subplots(len(sents), cols, squeeze=False)
    for r, s in enumerate(sents):
        maps = [("mean of heads" if heads > 1 else "attention", head_mean(s["weights"]))]
        maps += [(f"head {k + 1}", s["weights"][k]) for k in range(heads)] if heads > 1 else []
        for c, (label, m) in enumerate(maps):
            ax = axes[r][c]
            ax.imshow([[x / 100.0 for x in row] for row in m], cmap="Greys", vmin=0.0, vmax=1.0, aspect="auto")
            ax.set_xticks(range(len(s["src"])))
            ax.set_xticklabels(s["src"], rotation=90, fontsize=6)
            ax.set_yticks(range(len(s["hyp"])))
            ax.set_yticklabels(s["hyp"] if c == 0 else [], fontsize=6)
            ax.set_title(f"sentence {r + 1}: {label}", fontsize=7)
    fig.suptitle(title, fontsize=9)
    fig.tight_layout()
    save_figure(fig, path, dpi=110)


def render_alignments(ctx: ExtraContext) -> ExtraSection | None:
    """One heatmap figure per model (its lowest seed): source pieces across, the model's
    translation down; darker = more attention."""
    picked = pick_records(ctx.items)
    if not picked:
        return None
    intro = ("Cross-attention of each model's own test translation (first test sentences; one seed): "
             "source subwords across, output subwords down, darker = more weight. Transformer: last "
             "decoder layer, mean of heads then each head; ConvS2S: last decoder layer.")
    blocks: list[Block] = [Heading(4, f"Alignments ({ctx.dataset})"), Paragraph(intro)]
    for model, (rec, value) in picked.items():
        name = f"{_safe(ctx.suite)}_{_safe(ctx.task)}_{_safe(ctx.dataset)}_{_safe(model)}_alignments.png"
        path = ctx.plots_dir / name
        title = f"{model} ({rec.get('family')}), seed {rec.get('seed')}"
        _plot(value, title, path)
        first = value["sentences"][0]
        caption = f"{title}: \"{first.get('hyp_text', '')}\" (reference: \"{first.get('ref', '')}\")"
        blocks += [Paragraph([Bold(model), f": {caption}"]), ctx.image(path, f"{model} alignments")]
    return ExtraSection.from_blocks(blocks)


EXTRA_RENDERERS[ALIGNMENT_KEY] = render_alignments
