"""The speech micro-benchmark (benchmarks.micro.speech): planning, checks and one real point."""

from __future__ import annotations

import json

import pytest

from benchmarks.config.schema import ConfigError
from benchmarks.micro import speech as bench_speech
from tests.helpers.speech import bench_points


def test_points_name_the_model_function_by_its_module():
    assert all(p["target"] == "benchmarks.micro.speech:point_model" for p in bench_speech.plan_points(bench_speech.load_config(), "cpu"))



def test_checks_compare_the_best_truncated_preset():
    checks = bench_speech.compute_checks(bench_points(), 4000)
    by = {c["name"]: c for c in checks}
    sp = by["speedup best truncated (transformer_w8) vs transformer @ L=4000"]
    assert sp["value"] == 8.0 and sp["pass"] is True and sp["target"] == ">= 3"
    mem = by["memory best truncated (transformer_w8) vs transformer @ L=4000"]
    assert mem["value"] == 10.0 and mem["pass"] is True
    assert by["speedup transformer_w64 vs transformer @ L=4000"]["value"] == 2.0
    # a weaker best preset fails the targets
    pts = [p for p in bench_points() if p["method"] != "transformer_w8"]
    checks = bench_speech.compute_checks(pts, 4000)
    assert [c["pass"] for c in checks if c["pass"] is not None] == [False, False]
    # full attention out of memory: the truncated presets that ran pass
    pts = [dict(p, status="oom") if p["method"] == "transformer" else p for p in bench_points()]
    assert all(c["pass"] for c in bench_speech.compute_checks(pts, 4000))
    assert bench_speech.compute_checks(bench_points(), 1234)[0]["pass"] is None


def test_checks_also_against_the_materialised_reference():
    """The fused full-attention point gives the issue's checks; a materialised point adds the
    same checks against it, and never replaces the fused one."""
    dense = [{"kind": "speech", "method": bench_speech.MATERIALISED, "family": "attention", "pattern": "full",
              "materialised": True, "L": 4000, "status": "ok", "time_ms": 800.0, "peak_mem_bytes": 3200e6}]
    # a fused kernel as cheap as the w64 preset: the target fails against it, passes against dense
    pts = [dict(p, time_ms=p["time_ms"] / 4, peak_mem_bytes=p["peak_mem_bytes"] / 4)
           if p["method"] == "transformer" else p for p in bench_points()]
    by = {c["name"]: c for c in bench_speech.compute_checks(pts + dense, 4000)}
    fused = by["memory best truncated (transformer_w8) vs transformer @ L=4000"]
    assert fused["value"] == 2.5 and fused["pass"] is False
    ref = by[f"memory best truncated (transformer_w8) vs {bench_speech.MATERIALISED} @ L=4000"]
    assert ref["value"] == 20.0 and ref["pass"] is True
    assert by[f"speedup best truncated (transformer_w8) vs {bench_speech.MATERIALISED} @ L=4000"]["value"] == 16.0
    # listed first, the materialised point is still not taken for the fused one
    assert bench_speech.compute_checks(dense + pts, 4000) == bench_speech.compute_checks(pts + dense, 4000)


def test_bench_config_validated(tmp_path):
    cfg = bench_speech.load_config()
    assert cfg["check_length"] in cfg["lengths"]["cpu"] and "transformer" in cfg["models"]
    bad = tmp_path / "b.yaml"
    bad.write_text("benchmark: speech\nmodels: [transformer, conformer]\n")
    with pytest.raises(ConfigError, match="conformer.*transformer_w16"):
        bench_speech.load_config(bad)
    bad.write_text("benchmark: speech\nwindows: [8]\n")
    with pytest.raises(ConfigError, match="windows"):
        bench_speech.load_config(bad)
    pts = bench_speech.plan_points(cfg, "cpu")
    assert [p["L"] for p in pts] == sorted(p["L"] for p in pts)
    assert cfg["materialised_reference"] is True
    assert {p["method"] for p in pts} == {*cfg["models"], bench_speech.MATERIALISED}
    assert len(pts) == (len(cfg["models"]) + 1) * len(cfg["lengths"]["cpu"])
    dense = [p for p in pts if p.get("materialised")]
    assert all(p["kwargs"]["materialise"] and p["kwargs"]["model"] == "transformer" for p in dense)


def test_one_real_sweep_inline(tmp_path):
    """A tiny sweep (no isolation) measures real steps and writes the JSON and the plot."""
    sets = ["isolate=false", "lengths.cpu=[40, 80]", "models=[transformer, transformer_w8, cnn]", "repeats=1",
            "materialised_reference=true",
            "min_repeats=1", "warmup=0", "check_length=80", "model_params={d_model: 16}"]  # every model takes d_model
    code = bench_speech.main(out=tmp_path, device="cpu", sets=sets, log=lambda s: None)
    assert code == 0
    doc = json.loads((tmp_path / "bench_speech.json").read_text())
    assert doc["status"] == "done" and len(doc["points"]) == 8
    assert all(p["status"] == "ok" and p["time_ms"] > 0 for p in doc["points"])
    assert {p["params"] for p in doc["points"] if p["method"].startswith("transformer")} != {0}
    assert any(c["name"].startswith("speedup best truncated") for c in doc["checks"])
    assert (tmp_path / "bench_speech.png").is_file()
