"""bench recurrence's attention peers, float32-error points and summary table: config keys,
planning, and the table (exponents, crossovers, depth, path length) on made-up points."""

from __future__ import annotations

import math

import pytest

from benchmarks.config.schema import ConfigError
from benchmarks.micro import recurrence as br
from benchmarks.micro.recurrence import table as bt

from tests.helpers.micro import tiny_recurrence_config as _tiny


@pytest.mark.parametrize("extra,message", [
    ({"attention": {"heads": 3}}, r"attention.heads=3 must divide d_model=8 \(or set attention.enabled: false\)"),
    ({"attention": {"window": 0}}, r"attention.window=0 is invalid: expected an integer >= 1"),
    ({"attention": {"nope": 1}}, r"unknown key 'attention.nope'; valid keys of attention: enabled, heads, window"),
    ({"f32_error": {"length": 1}}, r"f32_error.length=1 is invalid: expected an integer >= 2"),
    ({"report_length": 0}, r"report_length=0 is invalid"),
])
def test_bad_new_keys_are_one_line_naming_the_key(tmp_path, extra, message):
    with pytest.raises(ConfigError, match=message) as err:
        br.load_config(_tiny(tmp_path, **extra))
    assert "\n" not in str(err.value)


def test_heads_need_not_divide_d_model_when_the_attention_is_off(tmp_path):
    cfg = br.load_config(_tiny(tmp_path, attention={"enabled": False, "heads": 3}))
    assert not any(p["family"] == "attention" for p in br.plan_points(cfg, "cpu"))


def test_attention_peers_run_bench_attentions_point_on_the_same_batch_and_width(tmp_path):
    cfg = br.load_config(_tiny(tmp_path, attention={"heads": 2, "window": 4, "causal": True}))
    att = {(p["method"], p["L"]): p for p in br.plan_points(cfg, "cpu") if p["family"] == "attention"}
    assert set(att) == {(m, L) for m in ("sdpa", "truncated_w4") for L in (8, 32)}
    p = att[("truncated_w4", 32)]
    assert p["target"] == "benchmarks.micro.attention:point_sequence"
    assert {k: p["kwargs"][k] for k in ("impl", "window", "batch", "heads", "head_dim", "causal", "L")} == {
        "impl": "ours_truncated", "window": 4, "batch": 2, "heads": 2, "head_dim": 4, "causal": True, "L": 32}
    assert att[("sdpa", 8)]["kwargs"]["impl"] == "sdpa" and att[("sdpa", 8)]["kwargs"]["window"] is None


def test_float32_error_points_cover_scans_peers_and_recurrences_not_attention(tmp_path):
    cfg = br.load_config(_tiny(tmp_path, recurrences=["lru"]))
    errs = [p for p in br.plan_points(cfg, "cpu") if p["kind"] == "f32_error"]
    assert [p["method"] for p in errs] == ["scan_doubling", "scan_loop", "torch_gru", "torch_lstm", "lru", "mamba2"]
    assert all(p["L"] == 40 and p["kwargs"]["L"] == 40 and p["kwargs"]["batch"] == 2 for p in errs)
    off = br.load_config(_tiny(tmp_path, f32_error={"enabled": False}))
    assert not any(p["kind"] == "f32_error" for p in br.plan_points(off, "cpu"))


def test_float32_error_point_measures_the_error_of_the_sequential_loop():
    r = br.point_f32_error(method="scan_loop", family="scan", params={}, L=3000, batch=1, d_model=4, seed=0, threads=1)
    assert r["status"] == "ok" and 0 < r["f32_rel_err"] < 1e-4 and r["f64_max_abs"] > 1


def _pt(method, family, L, ms, mem=1 << 20, params=None, status="ok"):
    return {"kind": "recurrence", "method": method, "family": family, "params": params or {}, "L": L,
            "status": status, "time_ms": ms if status == "ok" else None, "peak_mem_bytes": mem}


def test_summary_table_exponents_crossovers_depth_and_path_on_made_up_points():
    Ls = (256, 1024, 4096, 16384)
    points = [_pt("torch_lstm", "peer", L, L / 64) for L in Ls]                     # k = 1, 4 ms at 256
    points += [_pt("sdpa", "attention", L, (L / 256) ** 2, params={"window": None}) for L in Ls]  # k = 2
    points += [_pt("truncated_w128", "attention", L, L / 128, params={"window": 128}) for L in Ls]
    points += [_pt("lru", "recurrence", L, 16 * (L / 256) ** 0.5) for L in Ls]      # k = 0.5
    points += [_pt("mamba2", "recurrence", L, 1.0, params={"chunk_size": 64}) for L in Ls[:3]]
    points += [_pt("mamba2", "recurrence", 16384, None, status="oom")]
    points += [{"kind": "f32_error", "method": "lru", "family": "recurrence", "L": 5000, "status": "ok",
                "f32_rel_err": 3e-7}]
    rows = {r["method"]: r for r in bt.summary_table(points, report_length=4096)}
    assert list(rows) == ["torch_lstm", "sdpa", "truncated_w128", "lru", "mamba2"]
    assert rows["sdpa"]["time_exponent"]["exponent"] == pytest.approx(2.0)
    assert rows["lru"]["time_exponent"]["exponent"] == pytest.approx(0.5) and rows["lru"]["time_class"] == "O(n^0.50)"
    assert rows["torch_lstm"]["time_class"] == "O(n)" and rows["lru"]["time_ms"] == pytest.approx(64.0)
    # lru / lstm = 4 (L / 256)^-0.5: 1 at L = 4096, as fast from there on
    lstm = rows["lru"]["crossovers"]["torch_lstm"]
    assert lstm["state"] == "crosses" and lstm["from_L"] == 4096 and lstm["at_L"] == pytest.approx(4096.0)
    # lru / sdpa = 16 (L / 256)^-1.5: 1 at L = 256 * 16^(2/3) = 1625.5, measured from 4096
    sdpa = rows["lru"]["crossovers"]["sdpa"]
    assert sdpa["from_L"] == 4096 and sdpa["at_L"] == pytest.approx(256 * 16 ** (2 / 3))
    assert rows["torch_lstm"]["crossovers"]["torch_lstm"] is None and rows["sdpa"]["crossovers"]["sdpa"] is None
    assert rows["mamba2"]["time_exponent"]["points"] == 3 and rows["mamba2"]["time_ms"] == 1.0
    assert rows["lru"]["f32_rel_err"] == 3e-7 and rows["sdpa"]["f32_rel_err"] is None
    depth = {m: r["sequential_depth"] for m, r in rows.items()}
    assert depth == {"torch_lstm": 4096, "sdpa": 1, "truncated_w128": 1, "lru": 24, "mamba2": 12}
    path = {m: r["path_length"] for m, r in rows.items()}
    assert path == {"torch_lstm": 4095, "sdpa": 1, "truncated_w128": 32, "lru": 4095, "mamba2": 4095}
    text = bt.format_table(list(rows.values()), 4096)
    assert "~4096" in text and f"~{256 * 16 ** (2 / 3):.0f}" in text and "f32 err@5000" in text.splitlines()[0]


@pytest.mark.parametrize("method,family,L,depth", [
    ("scan_doubling", "scan", 1, 0), ("scan_doubling", "scan", 2, 2), ("scan_doubling", "scan", 5, 4),
    ("scan_loop", "scan", 5, 5), ("torch_gru", "peer", 7, 7), ("s4d", "recurrence", 1 << 20, 3),
    ("mamba2", "recurrence", 64, 0), ("mamba2", "recurrence", 65, 2), ("mamba2", "recurrence", 64 * 9, 6),
    ("plugin_rnn", "recurrence", 8, None),
])
def test_sequential_depth_rule(method, family, L, depth):
    assert bt.sequential_depth(method, family, L)[0] == depth


def test_depth_of_the_doubling_scan_is_its_recursion_levels_twice():
    """2 per level of attn_core.recurrent.scan._doubling (combine down, fill in up), its
    recursive calls counted."""
    import torch

    from attn_core.recurrent import scan

    for L in (1, 2, 3, 8, 9, 100, 4096):
        levels, real = [0], scan._doubling

        def counting(a, b):
            levels[0] += 1
            return real(a, b)

        scan._doubling = counting
        try:
            real(torch.ones(L, 1), torch.ones(L, 1))
        finally:
            scan._doubling = real
        calls = levels[0] + 1  # the recursive calls went through the patched name, plus the first
        assert bt.sequential_depth("scan_doubling", "scan", L)[0] == 2 * (calls - 1) == 2 * math.floor(math.log2(L))


def test_a_timing_timeout_skips_that_rows_longer_timings_but_not_its_float32_error(tmp_path, monkeypatch):
    from benchmarks.run import measure

    real = measure.execute

    def fake(target, kwargs, **kw):  # min_rnn's timing point "times out"
        if target.endswith(":point_recurrence") and kwargs["method"] == "min_rnn":
            return {"status": "timeout", "reason": "fake timeout"}
        return real(target, kwargs, **kw)

    monkeypatch.setattr(measure, "execute", fake)
    cfg = br.load_config(_tiny(tmp_path, recurrences=["min_rnn"], params={}, peers=False, scan=False,
                               attention={"enabled": False}, plot=False))
    doc = br.run_sweep(cfg, tmp_path / "out", log=lambda s: None)
    got = {(r["kind"], r["L"]): r["status"] for r in doc["points"]}
    assert got == {("recurrence", 8): "timeout", ("recurrence", 32): "skipped", ("f32_error", 40): "ok"}
    row = doc["table"][0]
    assert row["status"] == "skipped" and row["time_exponent"] is None and row["f32_rel_err"] > 0
