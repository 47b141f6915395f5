"""``attnbench bench complexity`` ("Why Self-Attention", Table 1 measured): the path-length
probe against closed forms, the sequential-operation counts, the fit helpers on exact power
laws, config validation and tiny end-to-end sweeps through the CLI. Timing values are never
asserted."""

import json
import math
import re

import pytest
import torch

from benchmarks.micro import complexity as bc
from benchmarks import report
from benchmarks.run.records import record_path, write_json_atomic
from benchmarks.config.schema import ConfigError
from tests.helpers.micro import oom_when, run_cli, write_config

TINY = {
    "warmup": 1,
    "repeats": 2,
    "min_repeats": 1,
    "isolate": False,  # in-process: fast; one isolated sweep below
    "heads": 2,
    "window": 4,
    "sweep_n": {"d": 16, "lengths": [32, 64]},
    "sweep_d": {"n": 32, "widths": [8, 16]},
    "path_length": {"lengths": [4, 9, 16], "windows": [2, 3], "kernels": [3], "dilated_kernels": [2]},
    "sequential_ops": {"lengths": [8, 32], "width": 8},
}


def smallest_power_at_least(k: int, n: int) -> int:
    """The fewest layers l with k**l >= n (causal dilated stack, dilations 1, k, k^2, ...)."""
    l = 0
    while k**l < n:
        l += 1
    return l


# --------------------------------------------------------------------------- path length
def _hops(kind, n, param=None):
    res = bc.probe_path_length(kind, n, param=param, width=4, heads=2)
    assert res["hops"] is not None, res
    h = res["hops"]
    reach = {p["hops"]: p["reach"] for p in res["probes"]}
    assert reach[h] == n - 1  # the answer was probed ...
    assert h == 1 or reach[h - 1] < n - 1  # ... and so was the hop count just below it
    return h


@pytest.mark.parametrize("n", [2, 3, 7, 16, 33])
def test_path_length_full_attention_is_one(n):
    assert _hops("self_attention", n) == 1


@pytest.mark.parametrize("kind", ["lstm", "gru"])
@pytest.mark.parametrize("n", [2, 3, 8, 21])
def test_path_length_recurrence_is_n_minus_1_time_steps(kind, n):
    assert _hops(kind, n) == n - 1


@pytest.mark.parametrize("k", [2, 3, 5])
@pytest.mark.parametrize("n", [2, 6, 13, 30])
def test_path_length_causal_conv(k, n):
    assert _hops("conv_causal", n, k) == math.ceil((n - 1) / (k - 1))


@pytest.mark.parametrize("k", [3, 5, 7])
@pytest.mark.parametrize("n", [2, 6, 13, 30])
def test_path_length_centred_conv(k, n):
    assert _hops("conv_centred", n, k) == math.ceil(2 * (n - 1) / (k - 1))


@pytest.mark.parametrize("r", [1, 2, 3, 5])
@pytest.mark.parametrize("n", [2, 6, 13, 30])
def test_path_length_truncated_attention(r, n):
    assert _hops("restricted_attention", n, r) == math.ceil((n - 1) / r)


@pytest.mark.parametrize("k", [2, 3])
@pytest.mark.parametrize("n", [2, 4, 5, 9, 27, 28])
def test_path_length_dilated_conv_is_log_k(k, n):
    assert _hops("dilated_conv", n, k) == smallest_power_at_least(k, n)


def test_expected_path_length_matches_the_formulas():
    assert bc.expected_path_length("self_attention", 50) == 1
    assert bc.expected_path_length("lstm", 50) == 49
    assert bc.expected_path_length("conv_causal", 50, 3) == math.ceil(49 / 2)
    assert bc.expected_path_length("conv_centred", 50, 5) == math.ceil(2 * 49 / 4)
    assert bc.expected_path_length("restricted_attention", 50, 4) == math.ceil(49 / 4)
    assert bc.expected_path_length("dilated_conv", 50, 3) == 4  # 3^3 = 27 < 50 <= 81
    with pytest.raises(ValueError, match="unknown probe kind"):
        bc.expected_path_length("transformer", 5)


def test_probe_hops_on_synthetic_models():
    def shift(s):  # each hop: y[i] = x[i] + x[i-1] + ... + x[i-s] (information moves <= s positions)
        def fwd(x, hops):
            for _ in range(hops):
                y = x.clone()
                for j in range(1, s + 1):
                    y[:, j:] = y[:, j:] + x[:, :-j]
                x = y
            return x
        return fwd

    for s, n in ((1, 9), (3, 10), (4, 30)):
        res = bc.probe_hops(shift(s), n, 2, max_hops=100)
        assert res["hops"] == math.ceil((n - 1) / s)
    never = bc.probe_hops(lambda x, hops: x * 2, 5, 2, max_hops=8)  # positions never mix
    assert never["hops"] is None and "does not reach" in never["reason"]


# --------------------------------------------------------------------------- sequential operations
def test_sequential_steps_counted_from_the_implementation():
    for n in (4, 16):
        for rnn in ("lstm", "gru"):
            r = bc.count_sequential(rnn, n, width=8, heads=2)
            assert r["steps"] == n == r["loop_iterations"]
            assert r["max_abs_diff_vs_fused"] < 1e-10  # the loop is the fused module's computation
            assert r["critical_path_ops"] > n  # at least one op per step
        for layer in ("self_attention", "conv", "dilated_conv", "self_attention_op"):
            assert bc.count_sequential(layer, n, width=8, heads=2)["steps"] == 1
    a = [bc.count_sequential("self_attention", n, width=8, heads=2)["critical_path_ops"] for n in (8, 64)]
    assert a[0] == a[1]  # no loop over positions: the same chain at any n
    lstm = [bc.count_sequential("lstm", n, width=8, heads=2)["critical_path_ops"] for n in (8, 16)]
    assert lstm[1] - lstm[0] == (lstm[1] - lstm[0]) // 8 * 8 and lstm[1] > lstm[0]  # grows per step


def test_critical_path_ops():
    x = torch.randn(3, requires_grad=True)
    y = ((x * 2) + 1).sin()
    assert bc.critical_path_ops(y, x) == 3
    other = torch.randn(3, requires_grad=True)
    assert bc.critical_path_ops(other * 2, x) is None
    z = x.exp() + (x * 3).sin().cos()  # longest branch wins
    assert bc.critical_path_ops(z, x) == 4


# --------------------------------------------------------------------------- fits
@pytest.mark.parametrize("e", [0.5, 1.0, 2.0, 3.0])
def test_fit_power_law_recovers_exact_exponents(e):
    xs = [64, 128, 256, 512, 1024]
    fit = bc.fit_power_law(xs, [3.5 * x**e for x in xs])
    assert fit["exponent"] == pytest.approx(e, abs=1e-9)
    assert fit["stderr"] == pytest.approx(0, abs=1e-9)
    assert fit["tail_exponent"] == pytest.approx(e, abs=1e-9)
    assert all(s == pytest.approx(e) for s in fit["local_exponents"])
    assert fit["r2"] == pytest.approx(1.0) and fit["points"] == 5 and fit["x_range"] == [64, 1024]


def test_fit_power_law_spread_and_missing_values():
    xs = [1, 2, 4, 8]
    fit = bc.fit_power_law(xs, [1, 2, 8, 64])  # local slopes 1, 2, 3
    assert fit["local_min"] == pytest.approx(1) and fit["local_max"] == pytest.approx(3)
    assert fit["stderr"] > 0 and fit["tail_exponent"] == pytest.approx(2.5)
    fit = bc.fit_power_law([1, 2, 4, 8], [None, 4, 0, 16])  # None and 0 left out
    assert fit["points"] == 2 and fit["exponent"] == pytest.approx(1) and fit["stderr"] is None
    assert bc.fit_power_law([1, 2], [5, None]) is None


def test_fit_growth_names_the_right_model():
    ns = [8, 16, 32, 64, 128]
    assert bc.fit_growth([{"n": n, "y": 1} for n in ns])["best"] == "O(1)"
    assert bc.fit_growth([{"n": n, "y": n - 1} for n in ns])["best"] == "O(n)"
    log = [{"n": n, "y": smallest_power_at_least(k, n), "base": k} for n in ns for k in (2, 3)]
    assert bc.fit_growth(log)["best"] == "O(log n)"
    ratio = [{"n": n, "y": math.ceil((n - 1) / r), "reach": r} for n in ns for r in (2, 4, 8)]
    fit = bc.fit_growth(ratio)
    assert fit["best"] == "O(n/r)" and fit["models"]["O(n/r)"]["r2"] > fit["models"]["O(n)"]["r2"]
    assert bc.fit_growth(ratio, ratio_label="O(n/k)")["best"] == "O(n/k)"
    assert bc.fit_growth([])["best"] is None


def test_growth_class():
    assert bc.growth_class(0.0) == "O(1)" and bc.growth_class(1.02) == "O(n)"
    assert bc.growth_class(0.5) == "O(n^0.50)" and bc.growth_class(None) is None


# --------------------------------------------------------------------------- configs
def test_shipped_config_validates_and_plans():
    cfg = bc.load_config(bc.DEFAULT_CONFIG)
    for device in ("cpu", "cuda"):
        points = bc.plan_points(cfg, device, "float32")
        assert {p["layer"] for p in points} == set(bc.LAYERS)
        keys = [(p["layer"], p["n"], p["d"]) for p in points]
        assert len(keys) == len(set(keys))  # the point shared by both sweeps runs once
        shared = [p for p in points if p["sweeps"] == ["n", "d"]]
        assert len(shared) == len(bc.LAYERS)
        lengths = cfg["sweep_n"]["lengths"][device]
        assert sorted({p["n"] for p in points if "n" in p["sweeps"]}) == sorted(lengths)
    assert cfg["max_n"]["lstm"] == {"cpu": 4096, "cuda": 16384} and cfg["max_n"]["conv"] is None


def test_max_n_caps_a_layer(tmp_path):
    cfg = bc.load_config(write_config(tmp_path, {**TINY, "max_n": {"gru": 32}}))
    capped = [p for p in bc.plan_points(cfg, "cpu", "float32") if "cap" in p]
    assert [(p["layer"], p["n"]) for p in capped] == [("gru", 64)]


@pytest.mark.parametrize("data,pattern", [
    ({"sweep_n": {"lenghts": [64]}}, r"unknown key 'sweep_n.lenghts'.*lengths"),
    ({"repeat": 3}, r"unknown key 'repeat'.*repeats"),
    ({"layers": ["transformer"]}, r"layers\[0\]='transformer' is invalid: expected one of .*self_attention"),
    ({"path_length": {"kinds": ["conv"]}}, r"path_length.kinds\[0\]='conv'.*conv_causal"),
    ({"max_n": {"lstn": 64}}, r"unknown key 'max_n.lstn'.*lstm"),
    ({"heads": 3}, r"heads=3 must divide every width d"),
    ({"kernel": 4}, r"kernel=4 is invalid: expected an odd kernel"),
    ({"path_length": {"kernels": [4]}}, r"centred probe needs odd kernels"),
    ({"min_repeats": 9}, r"min_repeats=9 must be <= repeats"),
    ({"sweep_n": {"lengths": {"cpu": [64], "gpu": [64]}}}, r"sweep_n.lengths.gpu"),
])
def test_bad_configs_are_errors(tmp_path, data, pattern):
    with pytest.raises(ConfigError, match=pattern):
        bc.load_config(write_config(tmp_path, data))


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the error on a machine without a GPU")
def test_cli_cuda_without_gpu_is_a_clean_error(tmp_path, capsys):
    assert run_cli(["bench", "complexity", "--config", write_config(tmp_path, TINY), "--out", tmp_path,
                    "--device", "cuda"]) == 2
    assert "torch.cuda.is_available() is False" in capsys.readouterr().err


# --------------------------------------------------------------------------- end to end
def test_cli_tiny_sweep_end_to_end(tmp_path, capsys):
    out = tmp_path / "bench" / "complexity"
    assert run_cli(["bench", "complexity", "--config", write_config(tmp_path, TINY), "--out", out,
                    "--device", "cpu"]) == 0
    doc = json.loads((out / "bench_complexity.json").read_text())
    assert doc["status"] == "done" and doc["benchmark"] == "complexity"
    assert doc["environment"]["attn_core_sha1"] and "device_name" in doc["environment"]
    bad = [p for p in doc["points"] if p["status"] != "ok"]
    assert not bad, bad
    assert len(doc["points"]) == len(bc.LAYERS) * 3  # 2 lengths + 2 widths - 1 shared point
    for p in doc["points"]:
        assert p["time_ms"] > 0 and p["peak_mem_bytes"] >= 0 and len(p["times_ms"]) == p["repeats"]
    for layer in bc.LAYERS:
        assert doc["fits"][layer]["time_n"]["points"] == 2 and doc["fits"][layer]["time_d"]["points"] == 2
    rows = {r["layer"]: r for r in doc["table"]}
    assert rows["self_attention"]["paper_complexity"] == "O(n^2·d)" and rows["lstm"]["paper_row"] == "Recurrent"
    assert rows["lstm"]["sequential_class"] == "O(n)" and rows["conv"]["sequential_class"] == "O(1)"
    assert {p["probe"] for p in rows["conv"]["path"]} == {"conv_causal", "conv_centred"}
    checks = {c["name"]: c for c in doc["checks"]}
    structural = [c for c in doc["checks"] if c["pass"] is not None]
    assert structural and all(c["pass"] for c in structural), [c for c in structural if not c["pass"]]
    assert checks["path length dilated_conv: best fit"]["value"] == "O(log n)"
    assert checks["path length restricted_attention: best fit"]["value"] == "O(n/r)"
    kinds = doc["path_length"]["kinds"]
    assert [p["hops"] for p in kinds["gru"]["points"]] == [3, 8, 15]
    assert (out / "bench_complexity.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    printed = capsys.readouterr().out
    n = len(doc["points"])
    assert re.search(rf"\[\s*1/{n}\]", printed) and f"[{n}/{n}]" in printed
    assert "Table 1, measured" in printed and "checks:" in printed

    # the report finds it next to a suite folder (results/<suite> and results/bench/complexity)
    from tests.helpers.records import make_record as _record

    rec = _record("toy", "synth", "transformer", 0, "acc", "max", 0.5)
    write_json_atomic(record_path(tmp_path / "suite", rec), rec)
    written = report.write_report(tmp_path / "suite")
    md = written["REPORT.md"].read_text(encoding="utf-8")
    assert "## Why self-attention: Table 1 measured" in md
    assert "plots/bench_complexity.png" in md and "plots/bench_complexity.png" in written
    assert "O(n^2·d)" in md and "[paper 2]" in md and "O(log n)" in md
    assert "data:image/png;base64," in written["report.html"].read_text(encoding="utf-8")


def test_isolated_sweep_and_oom_recorded(tmp_path, monkeypatch):
    """One isolated sweep (fresh worker processes), then an in-process one where a point
    raises an out-of-memory error: recorded, larger sizes of that layer skipped, the rest runs."""
    cfg = {**TINY, "isolate": True, "layers": ["conv"], "sweep_n": {"d": 8, "lengths": [16, 32]},
           "sweep_d": {"n": 16, "widths": [8]}, "path_length": {"enabled": False},
           "sequential_ops": {"enabled": False}, "plot": False}
    assert run_cli(["bench", "complexity", "--config", write_config(tmp_path, cfg), "--out", tmp_path / "iso",
                    "--device", "cpu"]) == 0
    doc = json.loads((tmp_path / "iso" / "bench_complexity.json").read_text())
    assert [p["status"] for p in doc["points"]] == ["ok", "ok"] and all("process_wall_s" in p for p in doc["points"])

    oom_when(monkeypatch, bc, "point_layer", lambda kw: kw["layer"] == "self_attention" and kw["n"] == 64)
    cfg = {**TINY, "layers": ["self_attention", "conv"], "sweep_n": {"d": 8, "lengths": [32, 64, 128]},
           "sweep_d": {"n": 32, "widths": [8]}, "path_length": {"enabled": False},
           "sequential_ops": {"enabled": False}}
    assert run_cli(["bench", "complexity", "--config", write_config(tmp_path, cfg), "--out", tmp_path / "oom",
                    "--device", "cpu"]) == 0
    doc = json.loads((tmp_path / "oom" / "bench_complexity.json").read_text())
    status = {(p["layer"], p["n"]): p["status"] for p in doc["points"]}
    assert status == {("self_attention", 32): "ok", ("conv", 32): "ok", ("self_attention", 64): "oom",
                      ("conv", 64): "ok", ("self_attention", 128): "skipped", ("conv", 128): "ok"}
    assert doc["fits"]["self_attention"]["time_n"] is None  # one ok point: no fit
    assert doc["fits"]["self_attention"]["failed_n"][0]["status"] == "oom"
    assert doc["fits"]["conv"]["time_n"]["points"] == 3
    assert (tmp_path / "oom" / "bench_complexity.png").is_file()
