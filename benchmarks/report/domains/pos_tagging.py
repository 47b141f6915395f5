"""Report section of the POS-tagging task: a per-tag error table (``rec["extras"]["pos_confusion"]``).

Each record holds the test confusion matrix of its best checkpoint (gold rows x predicted
columns, tag names, OOV counts; written by :mod:`tasks.pos_tagging.module`). The renderer takes
the best attention model and the best baseline (the best RNN/CNN model; the best other
non-attention model when there is none) in the report's ranking of the group, sums their
matrices over seeds and shows, per tag: support (words per test set), each model's accuracy and
its most frequent confusion. Imported by the report (:func:`benchmarks.report.sections.load_sections`);
the record key is the domain's (:data:`tasks.pos_tagging.module.CONFUSION_KEY`).
"""

from __future__ import annotations

from typing import Any, Sequence

from benchmarks.report import EXTRA_RENDERERS, Bold, Code, ExtraContext, ExtraSection, ModelResult, Paragraph, Table
from tasks.pos_tagging.module import CONFUSION_KEY

__all__ = ["CONFUSION_KEY", "render_pos_confusion", "per_tag_rows", "pick_models"]



def _valid(value: Any) -> bool:
    try:
        tags, m = value["tags"], value["matrix"]
        return len(m) == len(tags) and all(len(r) == len(tags) for r in m)
    except (TypeError, KeyError):
        return False


def pick_models(items: list[tuple[dict, Any]], ranked: Sequence[ModelResult]
                ) -> tuple[str | None, str | None, dict[str, dict[str, Any]]]:
    """``(best attention model, best baseline model, per-model summary)`` in the order of
    ``ranked`` (the group's models, best first). The summary holds ``family``, ``mean`` (the
    model's mean of the group's metric), ``tags``, the ``matrix`` summed over the seeds of that
    mean, ``seeds`` (how many) and ``oov``."""
    by_name = {m.model: m for m in ranked}
    models: dict[str, dict[str, Any]] = {}
    for rec, value in items:
        m = by_name.get(rec.get("model"))
        if m is None or rec.get("seed") not in m.seeds or not _valid(value):
            continue
        s = models.setdefault(m.model, {"family": m.family, "mean": m.mean, "tags": list(value["tags"]),
                                        "matrix": None, "seeds": 0, "oov": [0, 0]})
        if list(value["tags"]) != s["tags"]:
            continue
        mat = value["matrix"]
        s["matrix"] = mat if s["matrix"] is None else [[a + b for a, b in zip(r1, r2)] for r1, r2 in zip(s["matrix"], mat)]
        s["seeds"] += 1
        oov = value.get("oov") or [0, 0]
        s["oov"] = [s["oov"][0] + oov[0], s["oov"][1] + oov[1]]
    order = [m.model for m in ranked if m.model in models]

    def best(families: Sequence[str] | None, exclude: str | None = None) -> str | None:
        return next((n for n in order if (families is None or models[n]["family"] in families)
                     and models[n]["family"] != exclude), None)

    return best(("attention",)), best(("rnn", "cnn")) or best(None, exclude="attention"), models


def _tag_stats(tags: list[str], matrix: list[list[int]], i: int) -> tuple[int, float | None, str]:
    row = matrix[i]
    total = sum(row)
    if not total:
        return 0, None, ""
    errors = total - row[i]
    conf = "-"
    if errors:
        j = max((k for k in range(len(row)) if k != i), key=lambda k: row[k])
        conf = f"{tags[j]} ({100 * row[j] / errors:.0f}% of errors)"
    return total, row[i] / total, conf


def per_tag_rows(models: dict[str, dict[str, Any]], names: list[str]) -> list[list[str]]:
    """Table rows: tag, support per test set, then accuracy and top confusion for each model,
    tags by decreasing support; a last row ``all`` and a row ``unseen words`` (OOV)."""
    first = models[names[0]]
    tags = first["tags"]
    rows = []
    for i, tag in sorted(enumerate(tags), key=lambda t: -sum(first["matrix"][t[0]])):
        support = sum(first["matrix"][i]) / first["seeds"]
        if not support:
            continue
        row = [tag, f"{support:.0f}"]
        for n in names:
            _, acc, conf = _tag_stats(tags, models[n]["matrix"], i)
            row += [f"{100 * acc:.2f}" if acc is not None else "-", conf]
        rows.append(row)
    total = sum(map(sum, first["matrix"])) / first["seeds"]
    row = ["all", f"{total:.0f}"]
    for n in names:
        mat = models[n]["matrix"]
        row += [f"{100 * sum(mat[k][k] for k in range(len(mat))) / max(sum(map(sum, mat)), 1):.2f}", ""]
    rows.append(row)
    if first["oov"][1]:
        row = ["unseen words", f"{first['oov'][1] / first['seeds']:.0f}"]
        for n in names:
            c, t = models[n]["oov"]
            row += [f"{100 * c / t:.2f}" if t else "-", ""]
        rows.append(row)
    return rows


def render_pos_confusion(ctx: ExtraContext) -> ExtraSection | None:
    """The per-tag table of the group's best attention model and best baseline."""
    attn, base, models = pick_models(ctx.items, ctx.ranked)
    names = [n for n in (attn, base) if n is not None]
    if not names:
        return None
    header = ["tag", "support"]
    for n in names:
        header += [f"{n} acc %", f"{n}: most frequent confusion"]
    who: list[Any] = []
    for n in names:
        who += [" and "] if who else []
        who += [Code(n), f" ({models[n]['family']}, mean test {ctx.metric} {100 * models[n]['mean']:.2f}% over "
                         f"{models[n]['seeds']} seed(s))"]
    intro = ["Per-tag test accuracy of the best attention model and the best baseline: ", *who,
             ". Support: words per test set; confusions summed over seeds."]
    return ExtraSection.from_blocks([Paragraph(Bold("POS tagging: per-tag errors")), Paragraph(intro),
                                     Table(header, per_tag_rows(models, names))])


EXTRA_RENDERERS[CONFUSION_KEY] = render_pos_confusion
