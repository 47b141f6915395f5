"""Speech report renderers: confusions (in the report's ranking of the group) and the scaling
benchmark's section."""

from __future__ import annotations

from benchmarks.report import BENCH_RENDERERS, EXTRA_RENDERERS, BenchContext, ExtraContext, group_of
from benchmarks.micro import speech as bench_speech
from benchmarks.report.domains import speech as R
from tests.helpers.speech import bench_points


def _rec(model: str, seed: int, acc: float) -> dict:
    return {"model": model, "seed": seed, "task": "speech", "dataset": "fsdd", "status": "ok", "test": {"acc": acc}}


def _conf(matrix, labels=("a", "b", "c"), form="classify"):
    return {"form": form, "labels": list(labels), "matrix": matrix}


def test_renderers_registered():
    assert EXTRA_RENDERERS[R.CONFUSION_KEY] is R.render_confusion
    assert BENCH_RENDERERS[R.BENCH_NAME] is R.render_bench


def test_confusions_summed_over_seeds_and_recall_table(tmp_path):
    items = [
        (_rec("cnn", 0, 14 / 15), _conf([[5, 0, 0], [1, 4, 0], [0, 0, 5]])),
        (_rec("cnn", 1, 14 / 15), _conf([[4, 1, 0], [0, 5, 0], [0, 0, 5]])),
        (_rec("lstm", 0, 11 / 15), _conf([[2, 3, 0], [0, 5, 0], [0, 1, 4]])),
        (_rec("odd", 0, 1.0), _conf([[1]], labels=("z",))),  # other labels: skipped
    ]
    labels, mats = R.sum_confusions(items)
    assert labels == ["a", "b", "c"] and set(mats) == {"cnn", "lstm"}
    assert mats["cnn"] == [[9, 1, 0], [1, 9, 0], [0, 0, 10]]
    group = group_of([r for r, _ in items], "acc")
    sec = R.render_confusion(ExtraContext(R.CONFUSION_KEY, group, items, tmp_path / "plots", tmp_path))
    assert sec is not None
    lines = sec.markdown.splitlines()
    header = next(line for line in lines if line.startswith("| class"))
    assert header == "| class | cnn | lstm |"  # best first: cnn 28/30, lstm 11/15
    assert "| a | 90.0% | 40.0% |" in lines and "| c | 100.0% | 80.0% |" in lines
    assert "| **all** | 93.33% | 73.33% |" in lines
    assert "a -> b (1)" in sec.markdown and "b -> a (1)" in sec.markdown
    assert (tmp_path / "plots" / "speech_confusion_fsdd.png").stat().st_size > 0
    assert "data:image/png;base64," in sec.html and "<table>" in sec.html


def test_bench_renderer_table_and_plot(tmp_path):
    doc = {"points": bench_points(), "checks": bench_speech.compute_checks(bench_points(), 4000),
           "setup": {"dtype": "float32", "batch": 1, "num_features": 40}, "environment": {"device_name": "CPU X"}}
    sec = R.render_bench(BenchContext("speech", tmp_path, doc, tmp_path / "plots", tmp_path))
    assert "| transformer | attention | 100 ms / 381 MiB | 400 ms / 1526 MiB |" in sec.markdown
    assert "| lstm | rnn | OOM | OOM |" in sec.markdown
    assert "PASS" in sec.markdown and "plots/bench_speech.png" in sec.markdown
    assert (tmp_path / "plots" / "bench_speech.png").stat().st_size > 0
    assert R.render_bench(BenchContext("speech", tmp_path, None, tmp_path, tmp_path)) is None


def test_confusion_columns_follow_the_groups_ranking(tmp_path):
    """Columns in leaderboard order (the group's metric), not re-ranked from the matrices."""
    items = [(_rec("cnn", 0, 0.5), _conf([[5, 0, 0], [0, 5, 0], [0, 0, 5]])),
             (_rec("lstm", 0, 0.9), _conf([[2, 3, 0], [0, 5, 0], [0, 1, 4]]))]
    group = group_of([r for r, _ in items], "acc")
    sec = R.render_confusion(ExtraContext(R.CONFUSION_KEY, group, items, tmp_path / "plots", tmp_path))
    assert "| class | lstm | cnn |" in sec.markdown.splitlines()
    assert "for lstm:" in sec.markdown
