"""The results page's literal-claim scanner, its placeholders and its interval marks, on small
hand-made records (no reference run needed)."""

from __future__ import annotations

import pytest

from benchmarks.report import stats
from benchmarks.report.page import ci_text
from benchmarks.report.page_claims import check_prose, check_runs, find_claims
from benchmarks.report.page_facts import PageError, Scope, fill


def _rec(model: str, seed: int, epochs: int, cap: float | None, t: float, status: str = "ok") -> dict:
    return {"task": "t", "dataset": "d", "model": model, "seed": seed, "status": status, "epochs_run": epochs,
            "cost": {"train_time_s": t}, "data": {"train_size": 29000},
            "config": {"trainer": {"max_time_s": cap, "max_epochs": 10}, "model_params": {"heads": 8}},
            "env": {"git_commit": "abcdef0123", "cpu_count": 2}, "started": "2026-11-21T07:00:00+00:00",
            "finished": "2026-11-21T07:02:00+00:00"}


SCOPE = Scope("runs/x", [_rec("convs2s", s, 3, 140.0, 144.0) for s in range(3)]
              + [_rec("transformer", s, e, 140.0, 143.0) for s, e in ((0, 2), (1, 3), (2, 2))])


def test_find_claims_reads_ranges_and_number_words():
    got = [(c.kind, c.lo, c.hi) for c in find_claims("one to two epochs, 3-10 seeds, a 10-seed mean, 5.7 min",
                                                     ("seeds", "epochs", "time"))]
    assert ("epochs", 1, 2) in got and ("seeds", 3, 10) in got and ("seeds", 10, 10) in got
    assert ("time", pytest.approx(342.0), pytest.approx(342.0)) in got


def test_concurrency_is_no_cell_count():
    assert find_claims("two cells at once, 2 cells at a time", ("cells",)) == []
    assert [c.lo for c in find_claims("66 training cells", ("cells",))] == [66]


def test_check_prose_against_records():
    assert check_prose("3 seeds, 2-3 epochs, convs2s 3 epochs, 140 s per model, 6 cells", SCOPE, "w") == []
    lines = check_prose("one to two epochs; transformer 2 epochs; 4 seeds; 150 s", SCOPE, "page.yaml: w")
    assert len(lines) == 4
    assert lines[0] == 'page.yaml: w: "one to two epochs" but the records give 2-3 epochs (runs/x)'
    assert 'transformer 2 epochs" but the records give transformer: 2-3 epochs' in lines[1]
    assert "3 seeds per model" in lines[2] and "caps: 2.33 min" in lines[3]


def test_cpu_cores_are_checked():
    assert check_prose("on 2 CPU cores, a 2-core machine", SCOPE, "w") == []
    assert check_prose("a 4-core machine", SCOPE, "w") == ['w: "4-core" but the records ran on 2 CPU cores (runs/x)']


def test_placeholders_are_not_scanned_and_fill_from_records():
    text = "{seeds} seeds, {epochs:transformer} epochs, {cap}, {train_size} pairs, {config:model_params.heads} heads"
    assert check_prose(text, SCOPE, "w") == []
    assert fill(text, SCOPE, "w") == "3 seeds, 2-3 epochs, 140 s, 29,000 pairs, 8 heads"
    assert fill("{not_recorded:install 1.3 min}", SCOPE, "w") == "install 1.3 min"
    assert check_prose("{not_recorded:install 1.3 min}", SCOPE, "w") == []


@pytest.mark.parametrize("text, message", [
    ("{sedes}", "w: unknown placeholder {sedes} (known: "),
    ("{epochs:lstm}", "w: {epochs:lstm}: no records of model lstm in runs/x (it has: convs2s, transformer)"),
    ("{config:model_params.width}", "no record in runs/x has config.model_params.width"),
    ("{wall}", "no run.log in runs/x"),
    ("a { brace", "a brace that is no placeholder"),
])
def test_bad_placeholder_is_one_line(text, message):
    with pytest.raises(PageError) as err:
        fill(text, SCOPE, "w")
    assert message in str(err.value) and "\n" not in str(err.value)


def test_published_runs_claims():
    assert check_runs("their mean of 100 runs", 100, "w") == []
    assert check_runs("a single run with 200 epochs", 100, "w") == ['w: "a single run" but the figure says runs: 100']
    assert check_runs("best of 5", 1, "w") == ['w: "best of 5" but the figure says runs: 1']


def test_clipped_and_identical_intervals_are_marked():
    clipped = stats.Summary(3, 0.9333, 0.03, 0.8656, 1.0, 0.95, clipped=True)
    assert ci_text(clipped, "acc") == "[86.56, 100.00] (clipped)"
    tied = stats.Summary(3, 0.9025, 0.0, 0.9025, 0.9025, 0.95)
    assert ci_text(tied, "acc") == "n=3, identical"
    assert ci_text(stats.Summary(3, 0.5, 0.01, 0.49, 0.51, 0.95), "acc") == "[49.00, 51.00]"
