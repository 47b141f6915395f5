"""Speech report renderers (confusions, scaling benchmark) and the speech micro-benchmark's
planning, checks and one real point."""

from __future__ import annotations

import json

import pytest

from benchmarks import bench_speech
from benchmarks.extras import speech as R
from benchmarks.report import BENCH_RENDERERS, EXTRA_RENDERERS, BenchContext, ExtraContext
from benchmarks.schema import ConfigError


def _rec(model: str, seed: int) -> dict:
    return {"model": model, "seed": seed, "task": "speech", "dataset": "fsdd"}


def _conf(matrix, labels=("a", "b", "c"), form="classify"):
    return {"form": form, "labels": list(labels), "matrix": matrix}


def test_renderers_registered():
    assert EXTRA_RENDERERS["speech_confusion"] is R.render_confusion
    assert BENCH_RENDERERS["speech"] is R.render_bench


def test_confusions_summed_over_seeds_and_recall_table(tmp_path):
    items = [
        (_rec("cnn", 0), _conf([[5, 0, 0], [1, 4, 0], [0, 0, 5]])),
        (_rec("cnn", 1), _conf([[4, 1, 0], [0, 5, 0], [0, 0, 5]])),
        (_rec("lstm", 0), _conf([[2, 3, 0], [0, 5, 0], [0, 1, 4]])),
        (_rec("odd", 0), _conf([[1]], labels=("z",))),  # other labels: skipped
    ]
    labels, mats = R.sum_confusions(items)
    assert labels == ["a", "b", "c"] and set(mats) == {"cnn", "lstm"}
    assert mats["cnn"] == [[9, 1, 0], [1, 9, 0], [0, 0, 10]]
    sec = R.render_confusion(ExtraContext("speech_confusion", "s", "speech", "fsdd", items, tmp_path / "plots", tmp_path))
    assert sec is not None
    lines = sec.markdown.splitlines()
    header = next(line for line in lines if line.startswith("| class"))
    assert header == "| class | cnn | lstm |"  # best first: cnn 28/30, lstm 11/15
    assert "| a | 90.0% | 40.0% |" in lines and "| c | 100.0% | 80.0% |" in lines
    assert "| **all** | 93.33% | 73.33% |" in lines
    assert "a -> b (1)" in sec.markdown and "b -> a (1)" in sec.markdown
    assert (tmp_path / "plots" / "speech_confusion_fsdd.png").stat().st_size > 0
    assert "data:image/png;base64," in sec.html and "<table>" in sec.html


def _points():
    pts = []
    for L, (tf, mf) in {2000: (100.0, 400e6), 4000: (400.0, 1600e6)}.items():
        pts.append({"kind": "speech", "method": "transformer", "family": "attention", "pattern": "full", "L": L,
                    "status": "ok", "time_ms": tf, "peak_mem_bytes": mf, "time_ms_per_seq": tf,
                    "peak_mem_bytes_per_seq": mf})
        for m, (t, mem) in {"transformer_w8": (tf / 8, mf / 10), "transformer_w64": (tf / 2, mf / 3)}.items():
            pts.append({"kind": "speech", "method": m, "family": "attention", "pattern": "truncated", "L": L,
                        "status": "ok", "time_ms": t, "peak_mem_bytes": mem, "time_ms_per_seq": t,
                        "peak_mem_bytes_per_seq": mem})
        pts.append({"kind": "speech", "method": "lstm", "family": "rnn", "pattern": None, "L": L, "status": "oom",
                    "reason": "x"})
    return pts


def test_checks_compare_the_best_truncated_preset():
    checks = bench_speech.compute_checks(_points(), 4000)
    by = {c["name"]: c for c in checks}
    sp = by["speedup best truncated (transformer_w8) vs transformer @ L=4000"]
    assert sp["value"] == 8.0 and sp["pass"] is True and sp["target"] == ">= 3"
    mem = by["memory best truncated (transformer_w8) vs transformer @ L=4000"]
    assert mem["value"] == 10.0 and mem["pass"] is True
    assert by["speedup transformer_w64 vs transformer @ L=4000"]["value"] == 2.0
    # a weaker best preset fails the targets
    pts = [p for p in _points() if p["method"] != "transformer_w8"]
    checks = bench_speech.compute_checks(pts, 4000)
    assert [c["pass"] for c in checks if c["pass"] is not None] == [False, False]
    # full attention out of memory: the truncated presets that ran pass
    pts = [dict(p, status="oom") if p["method"] == "transformer" else p for p in _points()]
    assert all(c["pass"] for c in bench_speech.compute_checks(pts, 4000))
    assert bench_speech.compute_checks(_points(), 1234)[0]["pass"] is None


def test_checks_also_against_the_materialised_reference():
    """The fused full-attention point gives the issue's checks; a materialised point adds the
    same checks against it, and never replaces the fused one."""
    dense = [{"kind": "speech", "method": bench_speech.MATERIALISED, "family": "attention", "pattern": "full",
              "materialised": True, "L": 4000, "status": "ok", "time_ms": 800.0, "peak_mem_bytes": 3200e6}]
    # a fused kernel as cheap as the w64 preset: the target fails against it, passes against dense
    pts = [dict(p, time_ms=p["time_ms"] / 4, peak_mem_bytes=p["peak_mem_bytes"] / 4)
           if p["method"] == "transformer" else p for p in _points()]
    by = {c["name"]: c for c in bench_speech.compute_checks(pts + dense, 4000)}
    fused = by["memory best truncated (transformer_w8) vs transformer @ L=4000"]
    assert fused["value"] == 2.5 and fused["pass"] is False
    ref = by[f"memory best truncated (transformer_w8) vs {bench_speech.MATERIALISED} @ L=4000"]
    assert ref["value"] == 20.0 and ref["pass"] is True
    assert by[f"speedup best truncated (transformer_w8) vs {bench_speech.MATERIALISED} @ L=4000"]["value"] == 16.0
    # listed first, the materialised point is still not taken for the fused one
    assert bench_speech.compute_checks(dense + pts, 4000) == bench_speech.compute_checks(pts + dense, 4000)


def test_bench_renderer_table_and_plot(tmp_path):
    doc = {"points": _points(), "checks": bench_speech.compute_checks(_points(), 4000),
           "setup": {"dtype": "float32", "batch": 1, "num_features": 40}, "environment": {"device_name": "CPU X"}}
    sec = R.render_bench(BenchContext("speech", tmp_path, doc, tmp_path / "plots", tmp_path))
    assert "| transformer | attention | 100 ms / 381 MiB | 400 ms / 1526 MiB |" in sec.markdown
    assert "| lstm | rnn | OOM | OOM |" in sec.markdown
    assert "PASS" in sec.markdown and "plots/bench_speech.png" in sec.markdown
    assert (tmp_path / "plots" / "bench_speech.png").stat().st_size > 0
    assert R.render_bench(BenchContext("speech", tmp_path, None, tmp_path, tmp_path)) is None


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
