"""The decoding micro-benchmark (benchmarks.micro.decode): config, planning, the cache it
builds at length L, the checks, and a tiny sweep through the CLI."""

from __future__ import annotations

import json

import pytest
import torch

import attn_core
from benchmarks.cli import main as cli
from benchmarks.config.schema import ConfigError
from benchmarks.micro import decode as bd


def _tiny(tmp_path, **extra) -> str:
    body = {"device": "cpu", "warmup": 1, "repeats": 2, "min_repeats": 1, "isolate": False, "batch": 2, "d_model": 16,
            "num_heads": 2, "num_layers": 2, "source_length": 5, "lengths": [8, 32],
            "params": {"truncated": {"window": 4}, "local_global": {"window": 4, "global_tokens": 2}},
            "check_length": 32, **extra}
    p = tmp_path / "decode.yaml"
    p.write_text("benchmark: decode\n" + "\n".join(f"{k}: {json.dumps(v)}" for k, v in body.items()) + "\n")
    return str(p)


def test_shipped_config_plans_every_decoding_pattern_and_the_peer():
    cfg = bd.load_config()
    points = bd.plan_points(cfg, "cpu")
    caches = {p["method"]: p["cache"] for p in points}
    assert caches[bd.PEER] == "none" and caches["full"] == "kv" and caches["truncated"] == "kv"
    assert caches["linear"] == "state" and caches["performer"] == "state"
    assert "nystrom" not in caches and "linformer" not in caches  # they cannot decode one token at a time
    assert {p["L"] for p in points} == set(cfg["lengths"]["cpu"]) and cfg["check_length"]["cpu"] in cfg["lengths"]["cpu"]


def test_a_pattern_that_cannot_decode_is_one_line_naming_the_valid_ones(tmp_path):
    with pytest.raises(ConfigError, match=r"'nystrom' cannot decode one token at a time; valid: full, truncated"):
        bd.load_config(_tiny(tmp_path, patterns=["full", "nystrom"]))
    with pytest.raises(ConfigError, match="patterns=.*expected 'all' or a list"):
        bd.load_config(_tiny(tmp_path, patterns="full"))
    with pytest.raises(ConfigError, match="patterns: pattern_params=.*unknown key.*'nope'"):
        bd.load_config(_tiny(tmp_path, params={"linear": {"nope": 1}}))


@pytest.mark.parametrize("pattern", ["full", "truncated", "linear", "performer"])
def test_the_cache_at_length_L_has_L_positions_and_decodes(pattern):
    params = attn_core.resolve_params(pattern, bd.DEFAULT_PARAMS.get(pattern, {}))
    dec = attn_core.TransformerDecoder(16, 2, 2, dropout=0.0, pattern=pattern, pattern_params=params).eval()
    gen = torch.Generator().manual_seed(0)
    memory, x = torch.randn(3, 5, 16, generator=gen), torch.randn(3, 1, 16, generator=gen)
    recurrent = attn_core.get_pattern(pattern).recurrence is not None
    sizes = {}
    with torch.inference_mode():
        for L in (4, 64):
            cache = bd._cache_at(dec, memory, x, L, recurrent=recurrent, warm_tokens=3, gen=gen)
            assert dec.cache_length(cache) == L
            sizes[L] = {k: tuple(v.shape) for k, v in cache.items() if ".self_" in k}
            out, new = dec.step(x, cache)
            assert out.shape == (3, 1, 16) and torch.isfinite(out).all() and dec.cache_length(new) == L + 1
    if recurrent:
        assert sizes[4] == sizes[64]  # a fixed-size state
    else:
        assert sizes[64]["kv.0.self_k"] == (3, 2, 64, 8) and sizes[4]["kv.1.self_v"] == (3, 2, 4, 8)


def _pt(method, L, ms, cache="kv", cache_bytes=100, status="ok"):
    return {"kind": "decode", "method": method, "cache": cache, "L": L, "status": status, "time_ms": ms,
            "cache_bytes": cache_bytes}


def test_checks_flat_recurrent_steps_full_vs_peer_and_the_crossover():
    pts = [_pt(bd.PEER, 64, 5.0, "none", 0), _pt(bd.PEER, 1024, 400.0, "none", 0),
           _pt("full", 64, 2.0, cache_bytes=64), _pt("full", 1024, 10.0, cache_bytes=1024),
           _pt("linear", 64, 3.0, "state"), _pt("linear", 1024, 3.3, "state"),
           _pt("performer", 64, 3.0, "state"), _pt("performer", 1024, 6.0, "state", cache_bytes=200)]
    by = {c["name"]: c for c in bd.compute_checks(pts, flat_limit=1.5, check_length=1024)}
    assert by["linear: step time L=1024 / L=64"]["pass"] is True
    assert by["linear: cache bytes L=1024 / L=64"]["pass"] is True
    assert by["performer: step time L=1024 / L=64"]["pass"] is False  # 2x: not flat
    assert by["performer: cache bytes L=1024 / L=64"]["pass"] is False  # the state grew
    assert by[f"speedup full (kv cache) vs {bd.PEER} @ L=1024"]["value"] == 40.0
    assert by["linear: crossover vs full (shortest L from which it is as fast)"]["value"] == 1024
    # slower than full at every L: no crossover
    pts[4:6] = [_pt("linear", 64, 3.0, "state"), _pt("linear", 1024, 30.0, "state")]
    by = {c["name"]: c for c in bd.compute_checks(pts, flat_limit=50, check_length=1024)}
    assert by["linear: crossover vs full (shortest L from which it is as fast)"]["value"] is None
    # full out of memory at 1024 where linear ran: linear wins there; linear failing is never faster
    oom = [dict(p, status="oom", time_ms=None) if p["method"] == "full" and p["L"] == 1024 else p for p in pts]
    by = {c["name"]: c for c in bd.compute_checks(oom, flat_limit=50, check_length=1024)}
    assert by["linear: crossover vs full (shortest L from which it is as fast)"]["value"] == 1024
    both = [dict(p, status="oom", time_ms=None) if p["L"] == 1024 and p["method"] in ("full", "linear") else p
            for p in pts]
    by = {c["name"]: c for c in bd.compute_checks(both, flat_limit=50, check_length=1024)}
    assert by["linear: crossover vs full (shortest L from which it is as fast)"]["value"] is None
    # a failed full point: the check fails; a failed peer leaves it undecided
    failed = [dict(p, status="oom") if p["method"] == "full" and p["L"] == 1024 else p for p in pts]
    assert {c["name"]: c for c in bd.compute_checks(failed, flat_limit=50, check_length=1024)}[
        f"speedup full (kv cache) vs {bd.PEER} @ L=1024"]["pass"] is False
    # check_length not measured (or the peer switched off): the check says so, undecided
    missing = {c["name"]: c for c in bd.compute_checks(pts, flat_limit=50, check_length=512)}[
        f"speedup full (kv cache) vs {bd.PEER} @ L=512"]
    assert missing["pass"] is None and "no full-attention or no peer point" in missing["note"]
    failed = [dict(p, status="timeout") if p["method"] == bd.PEER and p["L"] == 1024 else p for p in pts]
    assert {c["name"]: c for c in bd.compute_checks(failed, flat_limit=50, check_length=1024)}[
        f"speedup full (kv cache) vs {bd.PEER} @ L=1024"]["pass"] is None


def test_cli_tiny_sweep_end_to_end(tmp_path, capsys):
    out = tmp_path / "out"
    assert cli(["bench", "decode", "--config", _tiny(tmp_path), "--out", str(out)]) == 0
    doc = json.loads((out / "bench_decode.json").read_text())
    assert doc["status"] == "done" and doc["environment"]["attn_core_sha1"]
    bad = [p for p in doc["points"] if p["status"] != "ok"]
    assert not bad, bad
    methods = {(p["method"], p["L"]) for p in doc["points"]}
    for m in (bd.PEER, "full", "truncated", "local_global", "linear", "performer"):
        assert (m, 8) in methods and (m, 32) in methods
    kv = {p["L"]: p["cache_bytes"] for p in doc["points"] if p["method"] == "full"}
    assert kv[32] == 4 * kv[8] == 2 * 2 * 2 * 2 * 32 * 8 * 4  # layers x (k, v) x B x H x L x Dh x 4 bytes
    names = {c["name"] for c in doc["checks"]}
    assert "linear: cache bytes L=32 / L=8" in names and f"speedup full (kv cache) vs {bd.PEER} @ L=32" in names
    assert (out / "bench_decode.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert "checks:" in capsys.readouterr().out
