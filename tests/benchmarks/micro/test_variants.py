"""The ``variants`` section of ``attnbench bench attention``: planning, config errors, checks on
made-up points, and a tiny in-process sweep. Timing values are never asserted."""

from __future__ import annotations

import json

import pytest
import yaml

import attn_core
from benchmarks.micro import attention as ba
from benchmarks.micro.attention import variants as bv
from benchmarks.config.schema import ConfigError

VARIANTS_CONFIG = ba.CONFIG_DIR / "bench_attention_variants.yaml"


def test_the_default_sweep_plans_no_variants():
    for path in (ba.DEFAULT_CONFIG, ba.FULL_CONFIG):
        cfg = ba.load_config(path)
        assert not cfg["variants"]["enabled"]
        assert not [p for p in ba.plan_points(cfg, "cpu", "float32") if p["kind"] == bv.KIND]


def test_the_variants_config_plans_every_sequence_pattern_next_to_sdpa():
    cfg = ba.load_config(VARIANTS_CONFIG)
    for device in ("cpu", "cuda"):
        points = ba.plan_points(cfg, device, "float32")
        assert {p["kind"] for p in points} == {bv.KIND}  # only the variants in this config
        lengths = cfg["variants"]["lengths"][device]
        want = {bv.BASELINE, *attn_core.list_patterns(kind="sequence")}
        assert {(p["pattern"], p["L"]) for p in points} == {(n, L) for n in want for L in lengths}
    params = {p["pattern"]: p["pattern_params"] for p in points}
    assert params["truncated"] == {"window": 128} and params["local_global"] == {"window": 128, "global_tokens": 16}
    assert params["linformer"] == {"k_proj": 128}


def test_cpu_variant_points_take_memory_from_a_second_worker(tmp_path):
    """CPU: times from a worker with the default allocator, the peak from a second one with a
    fixed mmap threshold (bv.CPU_MEMORY_NOTE says why); CUDA, in-process runs, or the setting
    off: one worker measures both."""
    cfg = ba.load_config(VARIANTS_CONFIG)
    cpu = ba.plan_points(cfg, "cpu", "float32")
    assert all(p["kwargs"]["memory"] is False for p in cpu)
    assert all(p["memory_run"]["kwargs"] == {"timing": False, "memory": True} for p in cpu)
    assert cpu[0]["memory_run"]["env"] == {"MALLOC_MMAP_THRESHOLD_": str(bv.MMAP_THRESHOLD)}
    for plan in (ba.plan_points(cfg, "cuda", "float32"),
                 ba.plan_points(ba.load_config(VARIANTS_CONFIG, overrides=["isolate=false"]), "cpu", "float32"),
                 ba.plan_points(ba.load_config(VARIANTS_CONFIG, overrides=["variants.cpu_memory_worker=false"]),
                                "cpu", "float32")):
        assert plan and not any("memory_run" in p or "memory" in p["kwargs"] for p in plan)


def test_a_variant_point_measures_time_or_memory_alone():
    kw = dict(pattern="linear", params={}, L=64, batch=1, heads=2, head_dim=8, causal=False, dtype="float32",
              device="cpu", seed=0, warmup=1, repeats=2, min_repeats=1, target_s=None)
    timed = bv.point_variant(**kw, memory=False)
    assert timed["time_ms"] > 0 and "peak_mem_bytes" not in timed
    mem = bv.point_variant(**kw, timing=False)
    assert "time_ms" not in mem and mem["peak_mem_bytes"] >= 0 and mem["mem_method"].startswith("rss_hwm")


def test_causal_sweeps_keep_causal_patterns_only(tmp_path):
    path = tmp_path / "c.yaml"
    path.write_text(yaml.safe_dump({"sequence": {"causal": True}, "variants": {"enabled": True}}))
    pats = {p["pattern"] for p in ba.plan_points(ba.load_config(path), "cpu", "float32") if p["kind"] == bv.KIND}
    assert "nystrom" not in pats and "linformer" not in pats and {"performer", "linear"} <= pats


@pytest.mark.parametrize("variants,match", [
    ({"enabled": True, "patterns": ["nope"]}, r"variants: pattern='nope' is invalid: expected one of"),
    ({"enabled": True, "patterns": ["graph"]}, r"variants: pattern='graph' is invalid: it is a graph pattern"),
    ({"enabled": True, "params": {"performer": {"featurez": 2}}}, r"unknown key\(s\) 'featurez'"),
    ({"enabled": True, "patterns": "some"}, r"variants.patterns='some' is invalid"),
])
def test_bad_variant_settings_are_one_line_errors(tmp_path, variants, match):
    path = tmp_path / "c.yaml"
    path.write_text(yaml.safe_dump({"variants": variants}))
    with pytest.raises(ConfigError, match=match) as err:
        ba.load_config(path)
    assert "\n" not in str(err.value)


def _pt(pattern, L, ms, mem, status="ok"):
    return {"kind": bv.KIND, "pattern": pattern, "method": f"variant_{pattern}", "L": L, "status": status,
            "time_ms": ms, "peak_mem_bytes": mem}


def test_variant_checks_memory_growth_and_crossover():
    pts = [_pt("sdpa", L, t, 10 * L) for L, t in ((1024, 1.0), (2048, 4.0), (4096, 16.0), (8192, 64.0))]
    pts += [_pt("performer", L, t, m) for L, t, m in ((1024, 2.0, 100), (2048, 3.0, 200), (4096, 6.0, 400),
                                                      (8192, 12.0, 1000))]
    pts += [_pt("full", L, t, L * L) for L, t in ((1024, 1.1), (2048, 4.4), (4096, 17.6), (8192, 70.4))]
    checks = {c["name"]: c for c in bv.variant_checks(pts, growth_limit=2.3)}
    assert checks["peak mem variant_performer L=4096 / L=2048"]["pass"] is True
    assert checks["peak mem variant_performer L=8192 / L=4096"]["pass"] is False  # 2.5x
    assert "peak mem variant_performer L=2048 / L=1024" not in checks  # from 2048 on only
    assert not any(n.startswith("peak mem variant_full") for n in checks)  # L^2: no memory target
    cross = checks["speed crossover variant_performer vs variant_sdpa"]
    assert cross["value"] == 2048 and cross["pass"] is None and cross["note"] == "slower below L=2048"
    slow = checks["speed crossover variant_full vs variant_sdpa"]
    assert slow["value"] is None and "slower than SDPA at the largest measured L=8192" in slow["note"]


def test_a_failed_larger_point_fails_the_memory_check():
    pts = [_pt("sdpa", L, 1.0, 1) for L in (2048, 4096)]
    pts += [_pt("linear", 2048, 1.0, 100), _pt("linear", 4096, None, None, status="oom")]
    c = next(c for c in bv.variant_checks(pts) if c["name"].startswith("peak mem"))
    assert c["pass"] is False and "oom" in c["note"]


def test_tiny_variant_sweep_end_to_end(tmp_path):
    cfg = {
        "warmup": 1, "repeats": 1, "min_repeats": 1, "isolate": False, "plot": False,
        "sequence": {"lengths": [], "methods": [], "heads": 2, "head_dim": 8},
        "band_compare": {"devices": []}, "graph": {"sizes": [], "methods": []}, "matmul": {"enabled": False},
        "encoder": {"enabled": False},
        "variants": {"enabled": True, "lengths": [32, 64],
                     "params": {"truncated": {"window": 4}, "local_global": {"window": 4, "global_tokens": 2},
                                "performer": {"features": 8}, "linformer": {"k_proj": 8}, "nystrom": {"landmarks": 4}}},
    }
    path = tmp_path / "c.yaml"
    path.write_text(yaml.safe_dump(cfg))
    doc = ba.run_sweep(ba.load_config(path, device="cpu"), tmp_path / "out", log=lambda m: None)
    pts = [p for p in doc["points"] if p["kind"] == bv.KIND]
    assert len(pts) == 2 * (1 + len(attn_core.list_patterns(kind="sequence")))
    assert all(p["status"] == "ok" and p["time_ms"] > 0 for p in pts), [p for p in pts if p["status"] != "ok"]
    assert next(p for p in pts if p["pattern"] == "linformer")["pattern_params"] == {"k_proj": 8}
    names = {c["name"] for c in doc["checks"]}
    assert "speed crossover variant_performer vs variant_sdpa" in names
    saved = json.loads((tmp_path / "out" / "bench_attention.json").read_text())
    assert saved["checks"] == doc["checks"]
