"""The POS-tagging report renderer: model choice (the report's ranking of the group), per-tag
numbers, robustness."""

from __future__ import annotations

import random

from benchmarks.report import EXTRA_RENDERERS, ExtraContext, group_of
from benchmarks.report.domains.pos_tagging import CONFUSION_KEY, per_tag_rows, pick_models, render_pos_confusion

TAGS = ["NOUN", "VERB", "DET"]


def _rec(model, family, acc, seed=0):
    return {"model": model, "family": family, "seed": seed, "status": "ok", "test": {"acc": acc}}


def _value(matrix, oov=(3, 4)):
    return {"tags": TAGS, "matrix": matrix, "oov": list(oov)}


def _group(items, metric="acc"):
    return group_of([rec for rec, _ in items], metric)


def _ctx(items, tmp_path):
    return ExtraContext(CONFUSION_KEY, _group(items), items, tmp_path / "plots", tmp_path)


def test_registered():
    assert EXTRA_RENDERERS[CONFUSION_KEY] is render_pos_confusion


def test_picks_best_attention_and_best_baseline_by_mean_acc():
    m = [[5, 0, 0], [0, 5, 0], [0, 0, 5]]
    items = [
        (_rec("transformer", "attention", 0.90), _value(m)), (_rec("transformer", "attention", 0.80, 1), _value(m)),
        (_rec("transformer_truncated", "attention", 0.86), _value(m)),
        (_rec("bilstm", "rnn", 0.84), _value(m)), (_rec("cnn", "cnn", 0.88), _value(m)),
        (_rec("mlp", "other", 0.95), _value(m)),  # the floor is never "the baseline" while rnn/cnn exist
    ]
    attn, base, models = pick_models(items, _group(items).ranked)
    assert (attn, base) == ("transformer_truncated", "cnn")  # 0.86 > mean(0.90, 0.80)
    assert abs(models["transformer"]["mean"] - 0.85) < 1e-12 and models["transformer"]["seeds"] == 2
    floor = [it for it in items if it[0]["family"] in ("attention", "other")]
    attn, base, _ = pick_models(floor, _group(floor).ranked)
    assert base == "mlp"


def test_follows_the_groups_metric_and_direction_not_accuracy():
    m = [[5, 0, 0], [0, 5, 0], [0, 0, 5]]
    items = [(_rec("transformer", "attention", 0.90), _value(m)), (_rec("transformer_truncated", "attention", 0.80), _value(m)),
             (_rec("bilstm", "rnn", 0.70), _value(m)), (_rec("cnn", "cnn", 0.60), _value(m))]
    for rec, _ in items:  # an error rate: lower is better, the opposite order of acc
        rec["test"]["err"] = 1 - rec["test"]["acc"]
    assert pick_models(items, group_of([r for r, _ in items], "err", "min").ranked)[:2] == ("transformer", "bilstm")
    assert pick_models(items, group_of([r for r, _ in items], "err", "max").ranked)[:2] == ("transformer_truncated", "cnn")


def test_per_tag_numbers_against_a_reference(tmp_path):
    rng = random.Random(0)
    mats = {k: [[[rng.randint(0, 9) for _ in TAGS] for _ in TAGS] for _ in range(2)] for k in ("a", "b")}
    for k in mats:  # same gold support in both seeds of both models (one test set)
        for s in range(2):
            for i in range(3):
                row = mats[k][s][i]
                row[i] += 30 - sum(row)
    items = [(_rec("a", "attention", 0.9, s), _value(mats["a"][s])) for s in range(2)]
    items += [(_rec("b", "rnn", 0.8, s), _value(mats["b"][s], oov=(1, 4))) for s in range(2)]
    _, _, models = pick_models(items, _group(items).ranked)
    rows = per_tag_rows(models, ["a", "b"])
    by_tag = {r[0]: r for r in rows}
    for i, tag in enumerate(TAGS):
        for col, k in ((2, "a"), (4, "b")):
            summed = [mats[k][0][i][j] + mats[k][1][i][j] for j in range(3)]
            assert by_tag[tag][1] == "30"
            assert by_tag[tag][col] == f"{100 * summed[i] / sum(summed):.2f}"
            others = [j for j in range(3) if j != i]
            j = max(others, key=lambda j: summed[j])
            if sum(summed) > summed[i]:
                assert by_tag[tag][col + 1].startswith(TAGS[j] + " (")
    assert by_tag["unseen words"][2] == "75.00" and by_tag["unseen words"][4] == "25.00"
    sec = render_pos_confusion(_ctx(items, tmp_path))
    assert "| NOUN | 30 |" in sec.markdown and "<table>" in sec.html and "`a`" in sec.markdown


def test_skips_malformed_and_empty(tmp_path):
    assert render_pos_confusion(_ctx([], tmp_path)) is None
    bad = [(_rec("t", "attention", 0.9), {"tags": TAGS, "matrix": [[1, 2]]}), (_rec("u", "rnn", 0.9), None)]
    assert render_pos_confusion(_ctx(bad, tmp_path)) is None
    ok = [(_rec("t", "attention", 0.9), _value([[1, 0, 0], [0, 0, 0], [0, 0, 1]]))]
    sec = render_pos_confusion(_ctx(bad + ok, tmp_path))
    assert "VERB" not in sec.markdown.split("| all")[0].split("---|")[-1]  # zero-support tags are left out
