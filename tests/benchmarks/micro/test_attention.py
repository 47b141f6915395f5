"""``attnbench bench attention``: config validation, planning, checks, and tiny end-to-end
sweeps through the CLI. Timing values are never asserted."""

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from benchmarks.micro import attention as ba
from benchmarks.config.schema import ConfigError
from tests.helpers.micro import oom_when, run_cli, write_config

REPO = Path(__file__).resolve().parents[3]

TINY = {
    "warmup": 1,
    "repeats": 2,
    "min_repeats": 1,
    "isolate": False,  # in-process: fast; isolation is covered by the OOM sweep below
    "sequence": {"lengths": [64, 128], "windows": [16], "heads": 2, "head_dim": 16},
    "band_compare": {"devices": ["cpu"], "lengths": [128], "windows": [8]},
    "graph": {"sizes": [{"nodes": 100, "edges": 400}, {"nodes": 200, "edges": 1000}]},
    "matmul": {"size": 64, "repeats": 2},
    "encoder": {"d_model": 16, "heads": 2, "dim_feedforward": 32, "lengths": [3, 7, 5]},
    "paired": {"repeats": 3, "min_repeats": 2},
}


# --------------------------------------------------------------------------- configs
@pytest.mark.parametrize("path", [ba.DEFAULT_CONFIG, ba.FULL_CONFIG])
def test_shipped_configs_validate_and_plan(path):
    cfg = ba.load_config(path)
    for device, dtype in (("cpu", "float32"), ("cuda", "bfloat16")):
        points = ba.plan_points(cfg, device, dtype)
        assert points[0]["kind"] == "matmul"
        methods = {p["method"] for p in points}
        assert {"ours_full", "sdpa", "naive", "ours_truncated_w128"} <= methods
        assert {"ours_graph", "pyg_transformerconv"} <= methods
        assert ("dense_masked" in methods) == (path == ba.FULL_CONFIG)  # the quick sweep leaves O(N^2) out
        assert ("sdpa_band_mask_w256" in methods) == (device == "cuda")
        assert {"ours_full/sdpa", "ours_graph/pyg_transformerconv", "ours_encoder/torch_encoder"} <= methods


def test_quick_config_runs_in_process_and_full_isolated():
    """The quick sweep (the main job's) skips the per-point process start; the full one keeps the caps."""
    assert ba.load_config(ba.DEFAULT_CONFIG)["isolate"] is False
    assert ba.load_config(ba.FULL_CONFIG)["isolate"] is True


def test_full_config_sizes():
    cfg = ba.load_config(ba.FULL_CONFIG)
    assert max(cfg["sequence"]["lengths"]["cpu"]) == 16384
    assert max(cfg["sequence"]["lengths"]["cuda"]) == 65536
    assert {"nodes": 200_000, "edges": 2_000_000} in cfg["graph"]["sizes"]


def test_unknown_key_is_an_error_naming_it(tmp_path):
    path = write_config(tmp_path, {"sequence": {"lenghts": [64]}})
    with pytest.raises(ConfigError, match=r"unknown key 'sequence.lenghts'.*lengths"):
        ba.load_config(path)
    path = write_config(tmp_path, {"repeat": 3})
    with pytest.raises(ConfigError, match=r"unknown key 'repeat'.*valid keys.*repeats"):
        ba.load_config(path)


def test_bad_values_are_errors(tmp_path):
    for data, pattern in (
        ({"sequence": {"methods": ["ours_full", "flash9"]}}, "flash9"),
        ({"repeats": 0}, "repeats"),
        ({"device": "tpu"}, "device"),
        ({"graph": {"sizes": [{"nodes": 10, "edge": 5}]}}, r"graph.sizes\[0\].edge"),
        ({"sequence": {"lengths": {"cpu": [64], "gpu": [64]}}}, "sequence.lengths.gpu"),
    ):
        with pytest.raises(ConfigError, match=pattern):
            ba.load_config(write_config(tmp_path, data))


def test_set_overrides(tmp_path):
    cfg = ba.load_config(ba.DEFAULT_CONFIG, overrides=["sequence.lengths=[64,128]", "repeats=2"])
    assert cfg["sequence"]["lengths"] == {"cpu": [64, 128], "cuda": [64, 128]}
    assert cfg["repeats"] == 2
    with pytest.raises(ConfigError, match="sequence.lenghts"):
        ba.load_config(ba.DEFAULT_CONFIG, overrides=["sequence.lenghts=[64]"])


# --------------------------------------------------------------------------- maths and checks
@pytest.mark.parametrize("L,window,causal", [(17, None, False), (17, None, True), (17, 3, False), (17, 3, True),
                                             (17, 16, False), (17, 0, False), (5, 9, True)])
def test_attended_pairs_matches_the_mask(L, window, causal):
    import attn_core

    if window is None:
        mask = attn_core.causal_mask(L) if causal else None
        expected = int(mask.sum()) if mask is not None else L * L
    else:
        expected = int(attn_core.window_mask(L, L, window, causal=causal).sum())
    assert ba.attended_pairs(L, window, causal) == expected


def _pt(kind, method, status="ok", time_ms=1.0, mem=100, **kw):
    return {"kind": kind, "method": method, "status": status, "time_ms": time_ms, "peak_mem_bytes": mem, **kw}


def _pair(ours, peer, ratios, status="ok", **where):
    """A paired point whose rounds have the given ratios ours / peer (fake times, nothing timed)."""
    return {"kind": "pair", "method": f"{ours}/{peer}", "ours": ours, "peer": peer, "status": status,
            "ours_ms": [10.0 * r for r in ratios], "peer_ms": [10.0] * len(ratios), "confidence": 0.95, **where}


SURE_FAST, SURE_SLOW, NEAR = [0.5, 0.52, 0.49, 0.51, 0.5], [1.5, 1.52, 1.49, 1.51, 1.5], [0.9, 1.3, 1.0, 1.2, 0.95]


def test_compute_checks():
    pts = [
        _pt("sequence", "ours_full", L=512, time_ms=5.0),  # L < 1024: no ratio check
        _pt("sequence", "sdpa", L=512, time_ms=1.0),
        _pt("sequence", "ours_full", L=1024, time_ms=50.0),  # separate points no longer decide time checks
        _pt("sequence", "sdpa", L=1024, time_ms=1.0),
        _pair("ours_full", "sdpa", SURE_FAST, L=1024),
        _pt("sequence", "ours_full", L=8192, time_ms=100.0, mem=10),
        _pt("sequence", "sdpa", L=8192, time_ms=50.0),
        _pair("ours_full", "sdpa", SURE_SLOW, L=8192),
        _pt("sequence", "ours_truncated_w128", L=8192, time_ms=10.0, mem=400),
        _pt("sequence", "ours_truncated_w128", L=4096, time_ms=5.0, mem=200),
        _pt("sequence", "ours_truncated_w128", L=2048, time_ms=5.0, mem=50),
        _pt("graph", "ours_graph", N=10, E=20, time_ms=1.0, mem=10),
        _pt("graph", "ours_graph", N=100, E=200, time_ms=2.0, mem=50),
        _pt("graph", "pyg_transformerconv", N=100, E=200, time_ms=4.0, mem=100),
        _pair("ours_graph", "pyg_transformerconv", NEAR, N=100, E=200),
        _pt("graph", "dense_masked", N=100, E=200, status="oom", time_ms=None, mem=None),
    ]
    checks = {c["name"]: c for c in ba.compute_checks(pts)}
    assert "time ours_full / sdpa @ L=512" not in checks
    fast, slow = checks["time ours_full / sdpa @ L=1024"], checks["time ours_full / sdpa @ L=8192"]
    assert (fast["pass"], fast["decision"], slow["pass"], slow["decision"]) == (True, "pass", False, "fail")
    assert fast["ci_low"] < fast["value"] < fast["ci_high"] <= 1.10 and fast["repeats"] == 5
    assert checks["speedup ours_truncated_w128 vs ours_full @ L=8192"]["value"] == 10.0
    assert checks["speedup ours_truncated_w128 vs ours_full @ L=8192"]["pass"] is True
    assert checks["peak mem ours_truncated_w128 L=4096 / L=2048"]["pass"] is False  # 4x
    assert checks["peak mem ours_truncated_w128 L=8192 / L=4096"]["pass"] is True  # 2x
    graph = checks["time ours_graph / pyg_transformerconv @ N=100 E=200"]
    assert graph["decision"] == "inconclusive" and graph["pass"] is None and graph["ci_low"] < 1.0 < graph["ci_high"]
    assert checks["peak mem ours_graph / pyg_transformerconv @ N=100 E=200"]["pass"] is True
    assert checks["dense_masked status @ N=100 E=200"]["pass"] is True
    assert not any("N=10 " in n for n in checks)  # only the largest graph
    assert ba.compute_checks([]) == []
    enc = [_pt("encoder", "ours_encoder", L=42, B=32, time_ms=1.3), _pt("encoder", "torch_encoder", L=42, B=32)]
    assert ba.compute_checks(enc) == []  # no paired point: no time check
    (c,) = ba.compute_checks(enc + [_pair("ours_encoder", "torch_encoder", SURE_SLOW, L=42, B=32)])
    assert c["name"] == "time ours_encoder / torch_encoder @ B=32 L=42" and c["pass"] is False
    # a failed point of ours fails its check; a failed baseline, or a failed pair, leaves it open
    pair = _pair("ours_full", "sdpa", SURE_FAST, L=2048)
    pts = [_pt("sequence", "ours_full", L=2048, status="oom"), _pt("sequence", "sdpa", L=2048), pair]
    assert ba.compute_checks(pts)[0]["pass"] is False
    pts = [_pt("sequence", "ours_full", L=2048), _pt("sequence", "sdpa", L=2048, status="timeout"), pair]
    assert ba.compute_checks(pts)[0]["pass"] is None
    pts = [_pt("sequence", "ours_full", L=2048), _pt("sequence", "sdpa", L=2048), dict(pair, status="error")]
    assert ba.compute_checks(pts)[0]["pass"] is None and "paired timing: error" in ba.compute_checks(pts)[0]["note"]


def test_pairs_are_planned_for_every_time_check():
    cfg = ba.load_config(ba.DEFAULT_CONFIG)
    pairs = [p for p in ba.plan_points(cfg, "cpu", "float32") if p["kind"] == "pair"]
    lengths = [L for L in cfg["sequence"]["lengths"]["cpu"] if L >= 1024]
    assert [(p["method"], p.get("L")) for p in pairs if p["ours"] == "ours_full"] == [("ours_full/sdpa", L) for L in lengths]
    largest = max(cfg["graph"]["sizes"], key=lambda s: s["nodes"])
    assert any(p["method"] == "ours_graph/pyg_transformerconv" and p["N"] == largest["nodes"] for p in pairs)
    assert any(p["method"] == "ours_encoder/torch_encoder" for p in pairs)
    assert all(p["kwargs"]["repeats"] == cfg["paired"]["repeats"] for p in pairs)
    off = ba.load_config(ba.DEFAULT_CONFIG, overrides=["paired.enabled=false"])
    assert not [p for p in ba.plan_points(off, "cpu", "float32") if p["kind"] == "pair"]


# --------------------------------------------------------------------------- end to end
def test_cli_tiny_sweep_end_to_end(tmp_path, capsys):
    cfg = write_config(tmp_path, TINY)
    out = tmp_path / "out"
    assert run_cli(["bench", "attention", "--config", cfg, "--out", out, "--device", "cpu"]) == 0
    doc = json.loads((out / "bench_attention.json").read_text())
    assert doc["status"] == "done"
    assert doc["config"]["sequence"]["lengths"]["cpu"] == [64, 128]
    for key in ("python", "torch", "torch_geometric", "device_name", "cpu_model", "git_commit", "git_dirty"):
        assert key in doc["environment"]
    assert doc["environment"]["attn_core_sha1"]
    assert all(p["attn_core_sha1"] == doc["environment"]["attn_core_sha1"] for p in doc["points"] if p["kind"] != "matmul")
    methods = {(p["method"], p.get("L"), p.get("N")) for p in doc["points"]}
    for m in ("ours_full", "sdpa", "naive", "ours_truncated_w16"):
        assert (m, 64, None) in methods and (m, 128, None) in methods
    assert ("sdpa_band_mask_w8", 128, None) in methods and ("ours_truncated_w8", 128, None) in methods
    for m in ("ours_graph", "pyg_transformerconv", "dense_masked"):
        assert (m, None, 200) in methods
    for m in ("ours_encoder", "torch_encoder"):
        assert (m, 7, None) in methods
    timed = {c["name"]: c for c in doc["checks"] if c["name"].startswith("time ")}
    assert set(timed) == {"time ours_encoder / torch_encoder @ B=3 L=7",
                          "time ours_graph / pyg_transformerconv @ N=200 E=1000"}
    assert all(c["decision"] in ("pass", "fail", "inconclusive") and c["repeats"] >= 2 for c in timed.values())
    bad = [p for p in doc["points"] if p["status"] != "ok"]
    assert not bad, bad
    pairs = [p for p in doc["points"] if p["kind"] == "pair"]
    assert len(pairs) == 2 and all(len(p["ours_ms"]) == len(p["peer_ms"]) == p["repeats"] for p in pairs)
    for p in doc["points"]:
        if p["kind"] == "pair":
            continue
        assert p["time_ms"] > 0 and len(p["times_ms"]) == p["repeats"]
        if p["kind"] != "matmul":
            assert p["peak_mem_bytes"] >= 0
    assert doc["matmul"]["tflops"] > 0
    seq = [p for p in doc["points"] if p["kind"] == "sequence"]
    assert all(p["tflops"] > 0 and p["matmul_fraction"] > 0 for p in seq)
    assert isinstance(doc["checks"], list)
    assert all({"name", "value", "target", "pass"} <= set(c) for c in doc["checks"])
    png = out / "bench_attention.png"
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    printed = capsys.readouterr().out
    n = len(doc["points"])
    assert re.search(rf"\[\s*1/{n}\]", printed) and f"[{n}/{n}]" in printed and "checks" in printed


def test_sweep_records_oom_and_continues(tmp_path, monkeypatch):
    oom_when(monkeypatch, ba, "point_sequence", lambda kw: kw["impl"] == "naive" and kw["L"] == 128)
    cfg = dict(TINY, matmul={"enabled": False}, graph={"sizes": []}, band_compare={"devices": []},
               encoder={"enabled": False})
    cfg["sequence"] = dict(TINY["sequence"], lengths=[64, 128, 256], methods=["naive", "sdpa"])
    path = write_config(tmp_path, cfg)
    assert run_cli(["bench", "attention", "--config", path, "--out", tmp_path, "--device", "cpu"]) == 0
    doc = json.loads((tmp_path / "bench_attention.json").read_text())
    status = {(p["method"], p["L"]): p["status"] for p in doc["points"]}
    assert status == {
        ("naive", 64): "ok", ("sdpa", 64): "ok",
        ("naive", 128): "oom", ("sdpa", 128): "ok",
        ("naive", 256): "skipped", ("sdpa", 256): "ok",  # larger L after an OOM is not attempted
    }
    oom = next(p for p in doc["points"] if p["status"] == "oom")
    assert "not enough memory" in oom["reason"]


def test_isolated_sweep_memory_cap_oom(tmp_path):
    """A real allocation over the per-point cap, in a worker process: recorded, sweep goes on."""
    cfg = {
        "warmup": 1, "repeats": 1, "min_repeats": 1, "mem_cap_gb": 0.05,
        "sequence": {"lengths": [64, 4096, 8192], "methods": ["naive"], "windows": []},
        "band_compare": {"devices": []}, "graph": {"sizes": []}, "matmul": {"enabled": False},
        "encoder": {"enabled": False}, "plot": False,
    }
    path = write_config(tmp_path, cfg)
    assert run_cli(["bench", "attention", "--config", path, "--out", tmp_path, "--device", "cpu"]) == 0
    doc = json.loads((tmp_path / "bench_attention.json").read_text())
    assert [p["status"] for p in doc["points"]] == ["ok", "oom", "skipped"]


# --------------------------------------------------------------------------- CLI errors
def test_cli_unknown_bench_name(capsys):
    assert run_cli(["bench", "nope"]) == 2
    err = capsys.readouterr().err
    assert "unknown micro-benchmark 'nope'" in err and "attention" in err and "Traceback" not in err


def test_cli_missing_config_and_usage(tmp_path, capsys):
    assert run_cli(["bench", "attention", "--config", tmp_path / "none.yaml"]) == 2
    assert "not found" in capsys.readouterr().err
    assert run_cli([]) == 2  # no subcommand: argparse usage error
    assert run_cli(["list"]) == 0
    assert "attention" in capsys.readouterr().out


def test_module_entry_point_unknown_name():
    proc = subprocess.run([sys.executable, "-m", "benchmarks", "bench", "nope"], cwd=REPO,
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2
    assert "valid names: attention" in proc.stderr and "Traceback" not in proc.stderr
