"""Costs and labels mean what they say (issue 34 item 3): FLOPs counted before recurrent layers
were are marked, and a window that covers every input is reported as full attention."""

from __future__ import annotations

from benchmarks import report
from benchmarks.report.tables import leaderboard_table, pattern_label
from benchmarks.run.flops import FLOPS_RULE
from tests.helpers.records import make_record


def _recs(*, rule: str | None = None, window: int = 64, max_len: int | None = 58):
    out = []
    for seed in range(3):
        lstm = make_record("toy", "synth", "lstm", seed, "acc", "max", 0.6 + seed / 100)
        att = make_record("toy", "synth", "transformer", seed, "acc", "max", 0.9 + seed / 100)
        att["pattern"] = "truncated"
        att["config"]["model_params"] = {"window": window}
        if max_len is not None:
            att["data"]["max_len"] = max_len
        for r in (lstm, att):
            if rule:
                r["cost"]["flops_rule"] = rule
        out += [lstm, att]
    return out


def _row(g, model):
    t = leaderboard_table(g)
    return dict(zip(t.headers, next(r for r in t.rows if r[1].startswith(model))))


def test_flops_of_recurrent_models_without_the_rule_are_marked():
    g = report.group_of(_recs(), "acc")
    assert _row(g, "lstm")["FLOPs/sample"] == "2.5M ‡" and _row(g, "transformer")["FLOPs/sample"] == "2.5M ‡"
    from benchmarks.report.tables import flops_note
    note = flops_note(g)
    assert note.startswith("‡ FLOPs/sample possibly not counting: transformer: attention products of SDPA on CPU; "
                           "lstm: recurrent layers") or note.startswith(
        "‡ FLOPs/sample possibly not counting: lstm: recurrent layers; transformer: attention products")
    # records of the previous rule counted recurrent layers but not CPU SDPA
    before = report.group_of(_recs(rule="matmul+recurrent"), "acc")
    assert _row(before, "lstm")["FLOPs/sample"] == "2.5M" and _row(before, "transformer")["FLOPs/sample"] == "2.5M ‡"
    counted = report.group_of(_recs(rule=FLOPS_RULE), "acc")
    assert _row(counted, "lstm")["FLOPs/sample"] == "2.5M" and flops_note(counted) is None


def test_a_window_covering_every_input_is_reported_as_full_attention(tmp_path):
    g = report.group_of(_recs(window=64, max_len=58), "acc")
    att = next(m for m in g.models if m.model == "transformer")
    assert pattern_label(att) == "truncated (w=64) = full: inputs <= 58"
    assert _row(g, "transformer")["pattern"] == "truncated (w=64) = full: inputs <= 58"
    for window, max_len in ((64, 200), (64, None), (56, 58)):
        g = report.group_of(_recs(window=window, max_len=max_len), "acc")
        assert pattern_label(next(m for m in g.models if m.model == "transformer")) == "truncated"
    # |i - j| <= w covers inputs of w + 1 positions
    assert report.results.effective_pattern("truncated", 57, 58) == "full"
    assert report.results.effective_pattern("truncated", 56, 58) is None
    assert report.results.effective_pattern("full", 8, 4) is None


def test_window_from_pattern_params_and_local_global_count_as_full():
    """A window given in ``pattern_params`` (the local_global presets) is read, and local_global
    whose window covers every input is full attention as truncated is; other patterns never."""
    from benchmarks.report.results import effective_pattern, record_window

    rec = {"config": {"model_params": {"pattern": "local_global", "pattern_params": {"window": 4}}}}
    assert record_window(rec) == 4
    assert effective_pattern("local_global", 4, 5) == "full"
    assert effective_pattern("local_global", 4, 6) is None
    assert effective_pattern("linformer", 100, 5) is None
    assert record_window({"config": {"model_params": {"window": True}}}) is None
