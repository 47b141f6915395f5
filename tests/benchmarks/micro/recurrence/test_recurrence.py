"""The recurrence micro-benchmark (benchmarks.micro.recurrence): config, planning, checks on
made-up points, and a tiny sweep end to end (JSON, plot, exit code)."""

from __future__ import annotations

import json

import pytest

from benchmarks.config.schema import ConfigError
from benchmarks.micro import recurrence as br
from benchmarks.micro.recurrence.points import build_layer
from tests.helpers.micro import tiny_recurrence_config as _tiny


def test_shipped_config_plans_every_recurrence_the_scans_and_the_peers():
    cfg = br.load_config()
    points = [p for p in br.plan_points(cfg, "cpu") if p["kind"] == "recurrence"]
    methods = {p["method"]: p["family"] for p in points}
    assert methods == {"scan_doubling": "scan", "scan_loop": "scan", "torch_gru": "peer", "torch_lstm": "peer",
                       "sdpa": "attention", "truncated_w128": "attention",
                       "min_rnn": "recurrence", "s4d": "recurrence", "mamba2": "recurrence", "lru": "recurrence"}
    assert {p["L"] for p in points} == set(cfg["lengths"]["cpu"]) and cfg["check_length"]["cpu"] in cfg["lengths"]["cpu"]
    assert cfg["report_length"]["cpu"] in cfg["lengths"]["cpu"]


def test_the_loop_stops_at_its_longest_length(tmp_path):
    cfg = br.load_config(_tiny(tmp_path, loop_max_length=8))
    loop = [p["L"] for p in br.plan_points(cfg, "cpu") if p["method"] == "scan_loop" and p["kind"] == "recurrence"]
    assert loop == [8]


def test_bad_recurrences_are_one_line_naming_the_valid_ones(tmp_path):
    with pytest.raises(ConfigError, match=r"recurrences: recurrence='gru' is invalid: expected one of 'min_rnn', "):
        br.load_config(_tiny(tmp_path, recurrences=["gru"]))
    with pytest.raises(ConfigError, match=r"recurrences='lru' is invalid: expected 'all' or a list"):
        br.load_config(_tiny(tmp_path, recurrences="lru"))
    with pytest.raises(ConfigError, match=r"unknown key\(s\) 'nope' for recurrence='lru'"):
        br.load_config(_tiny(tmp_path, params={"lru": {"nope": 1}, "mamba2": {"headdim": 4}}))


def _pt(method, family, L, ms, status="ok"):
    return {"method": method, "family": family, "L": L, "status": status, "time_ms": ms}


def test_checks_catch_a_quadratic_layer_and_a_slow_scan():
    points = [_pt("scan_doubling", "scan", 8, 1.0), _pt("scan_loop", "scan", 8, 2.0),
              _pt("scan_doubling", "scan", 64, 20.0), _pt("scan_loop", "scan", 64, 10.0),
              _pt("torch_gru", "peer", 8, 1.0), _pt("torch_gru", "peer", 64, 64.0),
              _pt("lru", "recurrence", 8, 1.0), _pt("lru", "recurrence", 64, 8.0),
              _pt("quad", "recurrence", 8, 1.0), _pt("quad", "recurrence", 64, 64.0)]
    checks = {c["name"]: c for c in br.compute_checks(points, check_length=64, linear_limit=3.0)}
    assert checks["speedup scan_doubling vs scan_loop @ L=64"]["pass"] is False
    assert checks["lru: time per position L=64 / L=8"]["pass"] is True
    assert checks["quad: time per position L=64 / L=8"]["pass"] is False
    assert checks["torch_gru: time per position L=64 / L=8"]["pass"] is None  # a peer's growth is information
    assert checks["lru time / torch_gru @ L=64"]["value"] == 0.125 and checks["lru time / torch_gru @ L=64"]["pass"] is None


def test_a_tiny_sweep_writes_its_json_plot_and_table(tmp_path):
    out = tmp_path / "out"
    log: list[str] = []
    assert br.main(config=_tiny(tmp_path, recurrences=["min_rnn", "mamba2"], peers=False), out=out, log=log.append) == 0
    doc = json.loads((out / "bench_recurrence.json").read_text())
    assert doc["status"] == "done" and doc["plot"] == "bench_recurrence.png" and (out / "bench_recurrence.png").stat().st_size
    timed = [r for r in doc["points"] if r["kind"] == "recurrence"]
    rows = ("scan_doubling", "scan_loop", "sdpa", "truncated_w4", "min_rnn", "mamba2")
    assert {(r["method"], r["L"]) for r in timed} == {(m, L) for m in rows for L in (8, 32)}
    assert all(r["status"] == "ok" and r["time_ms"] > 0 for r in timed)
    errors = {r["method"]: r for r in doc["points"] if r["kind"] == "f32_error"}
    assert set(errors) == {"scan_doubling", "scan_loop", "min_rnn", "mamba2"}  # not the attention
    assert all(r["L"] == 40 and 0 < r["f32_rel_err"] < 1e-5 for r in errors.values())
    assert [r["method"] for r in doc["table"]] == list(rows)
    row = {r["method"]: r for r in doc["table"]}
    assert row["min_rnn"]["time_ms"] == next(r["time_ms"] for r in timed if r["method"] == "min_rnn" and r["L"] == 32)
    assert row["min_rnn"]["time_exponent"]["points"] == 2
    assert row["min_rnn"]["f32_rel_err"] == errors["min_rnn"]["f32_rel_err"]
    assert row["min_rnn"]["crossovers"]["torch_lstm"] is None  # no LSTM in this run
    assert row["min_rnn"]["crossovers"]["sdpa"]["state"] in ("always", "never", "crosses")
    assert row["sdpa"]["crossovers"]["sdpa"] is None and row["truncated_w4"]["path_length"] == 8  # ceil(31 / 4)
    assert any(line.startswith("method ") and "ms@32" in line for line in log)
    assert any(c["name"].startswith("speedup scan_doubling vs scan_loop") for c in doc["checks"])
    assert not any(c["name"].startswith(("sdpa:", "truncated_w4:")) and c["pass"] is not None for c in doc["checks"])


def test_backends_add_a_row_per_scan_path_of_the_recurrences_that_take_one(tmp_path):
    cfg = br.load_config(_tiny(tmp_path, backends=["pure", "fla"]))
    assert cfg["resolved_recurrences"]["min_rnn@fla"] == {"backend": "fla"}
    assert cfg["resolved_recurrences"]["mamba2@fla"] == {"headdim": 4, "chunk_size": 8, "backend": "fla"}
    assert "s4d@fla" not in cfg["resolved_recurrences"] and "lru@fla" not in cfg["resolved_recurrences"]
    points = br.plan_points(cfg, "cpu")
    timed = {p["method"] for p in points if p["kind"] == "recurrence"}
    assert {"min_rnn", "min_rnn@fla", "mamba2", "mamba2@fla"} <= timed
    errors = {p["method"] for p in points if p["kind"] == "f32_error"}
    assert "min_rnn" in errors and "min_rnn@fla" not in errors  # the error point runs on the CPU
    net, _ = build_layer("min_rnn@fla", "recurrence", {"backend": "fla"}, 8)
    assert type(net).__name__ == "MinRNN" and net.backend == "fla"
    with pytest.raises(ConfigError, match=r"backends=\['pure', 'cuda'\] is invalid: 'cuda' is not a backend; "
                                          r"valid: pure, fla"):
        br.load_config(_tiny(tmp_path, backends=["pure", "cuda"]))


def test_a_backend_row_is_checked_against_its_pure_path():
    points = [_pt("min_rnn", "recurrence", 64, 4.0), _pt("min_rnn@fla", "recurrence", 64, 1.0)]
    checks = {c["name"]: c for c in br.compute_checks(points, check_length=64, linear_limit=3.0)}
    c = checks["speedup min_rnn@fla vs min_rnn @ L=64"]
    assert c["value"] == 4.0 and c["pass"] is None
