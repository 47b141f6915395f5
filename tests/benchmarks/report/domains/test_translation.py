"""The translation report renderer: alignment heatmaps from records only."""

from __future__ import annotations

import random

from benchmarks.report import EXTRA_RENDERERS, ExtraContext, group_of
from benchmarks.report.domains.translation import ALIGNMENT_KEY, head_mean, pick_records, render_alignments


def _sentence(heads: int, t: int, s: int, rng: random.Random) -> dict:
    weights = []
    for _ in range(heads):
        rows = []
        for _ in range(t):
            raw = [rng.random() for _ in range(s)]
            rows.append([round(100 * x / sum(raw)) for x in raw])
        weights.append(rows)
    return {"src": [f"▁s{i}" for i in range(s)], "hyp": [f"▁t{i}" for i in range(t - 1)] + ["</s>"],
            "ref": "t0 t1", "hyp_text": "t0 t1", "weights": weights}


def _value(heads: int, seed: int = 0) -> dict:
    rng = random.Random(seed)
    return {"kind": "X", "heads": heads, "sentences": [_sentence(heads, 4 + i, 5 + i, rng) for i in range(3)]}


def _rec(model: str, family: str, seed: int) -> dict:
    return {"suite": "quick", "task": "translation", "dataset": "synthetic", "model": model, "family": family,
            "seed": seed, "status": "ok", "test": {"bleu": 10.0}}


def _ctx(items, tmp_path):
    return ExtraContext(ALIGNMENT_KEY, group_of([r for r, _ in items], "bleu"), items, tmp_path / "plots", tmp_path)


def test_registered():
    assert EXTRA_RENDERERS[ALIGNMENT_KEY] is render_alignments


def test_head_mean_matches_a_manual_average():
    rng = random.Random(1)
    w = [[[rng.random() for _ in range(5)] for _ in range(3)] for _ in range(4)]  # (H, T, S)
    m = head_mean(w)
    for t in range(3):
        for s in range(5):
            assert abs(m[t][s] - sum(w[h][t][s] for h in range(4)) / 4) < 1e-12


def test_picks_the_lowest_seed_and_skips_malformed_values():
    good1, good0 = _value(2, 1), _value(2, 0)
    bad = _value(1)
    bad["sentences"][0]["weights"][0].pop()  # T rows no longer match the hypothesis
    items = [(_rec("transformer", "attention", 1), good1), (_rec("transformer", "attention", 0), good0),
             (_rec("rnn_bahdanau", "rnn", 0), bad), (_rec("rnn_bahdanau", "rnn", 1), _value(1, 5)),
             (_rec("convs2s", "cnn", 0), {"nonsense": 1})]
    picked = pick_records(items)
    assert list(picked) == ["rnn_bahdanau", "transformer"]
    assert picked["transformer"][1] is good0 and picked["rnn_bahdanau"][0]["seed"] == 1


def test_renders_one_png_per_model(tmp_path):
    items = [(_rec("transformer", "attention", 0), _value(4)), (_rec("rnn_luong_dot", "rnn", 0), _value(1))]
    sec = render_alignments(_ctx(items, tmp_path))
    assert sec is not None
    pngs = sorted(p.name for p in (tmp_path / "plots").glob("*.png"))
    assert pngs == ["quick_translation_synthetic_rnn_luong_dot_alignments.png",
                    "quick_translation_synthetic_transformer_alignments.png"]
    for name in pngs:
        assert f"(plots/{name})" in sec.markdown
        assert (tmp_path / "plots" / name).read_bytes()[:4] == b"\x89PNG"
    assert sec.html.count("data:image/png;base64,") == 2


def test_nothing_to_render(tmp_path):
    assert render_alignments(_ctx([(_rec("rnn_noattn", "other", 0), {})], tmp_path)) is None
