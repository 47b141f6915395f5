"""The vision report renderer: picks the best ViT of the report's ranking (lowest seed) and draws
its rollout maps; ignores malformed values; registers under ``rollout``."""

from __future__ import annotations

import pytest

from benchmarks.report import EXTRA_RENDERERS, ExtraContext, group_of
from benchmarks.report.domains import vision as ev


def _value(fill: float, grid=(2, 3), channels=1, n=2) -> dict:
    gh, gw = grid
    m = [[fill] * gw for _ in range(gh)]
    img = [[bytes((i * 7 + j) % 256 for j in range(12)).hex() for i in range(8)] for _ in range(channels)]
    return {"grid": list(grid), "patch_size": 4, "classes": ["a", "b", "c"],
            "images": [{"index": k, "label": k % 3, "pred": (k + 1) % 3, "map": m, "image": img} for k in range(n)]}


def _rec(model: str, seed: int, acc: float) -> dict:
    return {"suite": "suite", "task": "vision", "dataset": "mnist", "model": model, "seed": seed,
            "family": "attention", "status": "ok", "test": {"acc": acc}}


def _ctx(items, tmp_path, plots="plots"):
    return ExtraContext(ev.ROLLOUT_KEY, group_of([r for r, _ in items], "acc"), items, tmp_path / plots, tmp_path)


def test_decode_image():
    img = [["00ff10", "0102ab"], ["ffffff", "000000"]]  # 2 channels, 2 rows of 3 pixels
    assert ev.decode_image(img).tolist() == [[[0, 255, 16], [1, 2, 171]], [[255, 255, 255], [0, 0, 0]]]


def test_registered():
    assert EXTRA_RENDERERS[ev.ROLLOUT_KEY] is ev.render_rollout


def test_pick_record_best_mean_then_lowest_seed():
    items = [
        (_rec("vit", 1, 0.99), _value(0.1)), (_rec("vit", 0, 0.90), _value(0.2)),  # mean 0.945
        (_rec("vit_local", 2, 0.96), _value(0.3)), (_rec("vit_local", 1, 0.95), _value(0.4)),  # mean 0.955
        (_rec("vit_big", 0, 1.0), {"grid": [2, 3], "images": []}),  # malformed: ignored
    ]
    ranked = group_of([r for r, _ in items], "acc").ranked
    assert [m.model for m in ranked] == ["vit_big", "vit_local", "vit"]  # vit_big: best, but no valid rollout
    rec, value, result = ev.pick_record(items, ranked)
    assert rec["model"] == "vit_local" and rec["seed"] == 1 and value["images"][0]["map"][0][0] == 0.4
    assert result.mean == pytest.approx(0.955) and len(result.values) == 2
    bad = [(_rec("vit", 0, 0.5), {"grid": [2, 2], "images": [{"map": [[1]]}]})]
    assert ev.pick_record(bad, group_of([r for r, _ in bad], "acc").ranked) is None


@pytest.mark.parametrize("channels", [1, 3])
def test_render_writes_plot_and_sections(tmp_path, channels):
    items = [(_rec("vit", 0, 0.97), _value(1 / 6, channels=channels)), (_rec("vit", 1, 0.98), _value(1 / 6))]
    sec = ev.render_rollout(_ctx(items, tmp_path))
    png = tmp_path / "plots" / "rollout_suite_vision_mnist.png"
    assert png.is_file() and png.read_bytes()[:4] == b"\x89PNG"
    assert "plots/rollout_suite_vision_mnist.png" in sec.markdown
    assert "97.50% over 2 seeds" in sec.markdown and "seed 0" in sec.markdown and "2x3 patches" in sec.markdown
    assert "data:image/png;base64," in sec.html and "<b>vit</b>" in sec.html


def test_render_nothing_without_valid_items(tmp_path):
    assert ev.render_rollout(_ctx([(_rec("vit", 0, 0.9), {"bad": 1})], tmp_path, plots="")) is None
