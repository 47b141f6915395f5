"""The machinery every micro-benchmark shares (:mod:`benchmarks.micro.checks`,
:mod:`benchmarks.micro.sweep`, :mod:`benchmarks.micro.common`), tested on its own through a toy
benchmark of a few lines (:mod:`tests.helpers.micro`): checks and their table, config loading
with overrides, the sweep's skip/record/close flow and the entry point's exit code."""

from __future__ import annotations

import json

import pytest

from benchmarks.config.schema import ConfigError
from benchmarks.micro.checks import check, doubling_check, format_checks, ratio_check
from benchmarks.micro.common import point_record, run_point, status_line, timing_text
from tests.helpers.micro import load_toy_config, run_cli, run_toy_sweep, toy_config, toy_main, write_config

QUIET = {"log": lambda s: None}


# --------------------------------------------------------------------------- checks
def test_check_rounds_floats_and_keeps_extras():
    assert check("a", 1.234567, "<= 2", True, ours=3) == {"name": "a", "value": 1.2346, "target": "<= 2",
                                                          "pass": True, "ours": 3}
    assert check("a", 1.234567, "info", None, digits=2)["value"] == 1.23
    assert check("a", "oom", "oom (expected)", True)["value"] == "oom"


def test_a_failing_check_is_a_fail_line_in_the_table():
    checks = [check("speedup", 2.0, ">= 5", False, note="too slow"), check("ratio", 0.5, "<= 1", True),
              check("exponent", 1.98765, "2 (paper)", None, tail=2.01), check("cpu", 1.0, "<= 1", True, value_cpu_time=1.5)]
    lines = format_checks(checks).splitlines()
    assert lines[0] == "checks:"
    assert lines[1].split()[:2] == ["FAIL", "speedup"] and lines[1].endswith("target >= 5  (too slow)")
    assert lines[2].split()[:2] == ["PASS", "ratio"] and "   0.500  target <= 1" in lines[2]
    assert lines[3].startswith("  info") and "1.988" in lines[3] and lines[3].endswith("[largest 3 points: 2.010]")
    assert lines[4].endswith("[cpu-time ratio 1.500]")
    assert "0.50  target" in format_checks(checks, precision=2)
    assert format_checks([], empty="checks: none here") == "checks: none here"


def _pt(status="ok", time_ms=2.0, mem=100, method="m"):
    return {"method": method, "status": status, "time_ms": time_ms, "peak_mem_bytes": mem, "reason": "r"}


def test_ratio_check_failed_ours_fails_failed_baseline_is_open():
    ok = ratio_check("t", _pt(time_ms=1.0), _pt(time_ms=2.0), "<= 1", lambda v: v <= 1)
    assert ok["value"] == 0.5 and ok["pass"] is True and ok["ours"] == 1.0 and ok["baseline"] == 2.0
    assert ratio_check("t", _pt(status="oom"), _pt(), "<= 1", lambda v: v <= 1)["pass"] is False
    assert ratio_check("t", _pt(), _pt(status="timeout"), "<= 1", lambda v: v <= 1)["pass"] is None
    assert ratio_check("t", _pt(mem=0), _pt(), "<= 1", lambda v: v <= 1, key="peak_mem_bytes")["pass"] is None
    assert ratio_check("t", None, _pt(), "<= 1", lambda v: v <= 1) is None


def test_doubling_check():
    assert doubling_check("m", _pt(mem=100), _pt(mem=200), 2.3)["pass"] is True
    grew = doubling_check("m", _pt(mem=100), _pt(mem=400), 2.3)
    assert grew["pass"] is False and grew["target"] == "<= 2.3" and grew["value"] == 4.0
    assert doubling_check("m", _pt(mem=100), _pt(mem=400), None)["pass"] is None  # info only
    oom = doubling_check("m", _pt(), _pt(status="oom"), 2.3)
    assert oom["pass"] is False and oom["note"] == "status ok / oom"
    assert doubling_check("m", _pt(mem=0), _pt(), 2.3)["note"] == "zero peak at the smaller L"


# --------------------------------------------------------------------------- configs
def test_load_config_overrides_and_dtype(tmp_path):
    path = toy_config(tmp_path)
    cfg = load_toy_config(path, overrides=["sizes=[3, 5]", "limit=2.5"], dtype="auto")
    assert cfg["sizes"] == [3, 5] and cfg["limit"] == 2.5 and cfg["dtype"] == "float64"
    assert cfg["config_path"] == str(path) and cfg["point_timeout_s"] == {"cpu": 10.0, "cuda": 10.0}


@pytest.mark.parametrize("line,match", [
    ("sizes", "sizes"),  # no '='
    ("sizez=[1]", r"unknown key 'sizez'.*sizes"),
    ("limit=fast", "limit"),
])
def test_a_bad_override_line_is_a_config_error(tmp_path, line, match):
    with pytest.raises(ConfigError, match=match):
        load_toy_config(toy_config(tmp_path), overrides=[line])


def test_the_benchmarks_own_checks_run_after_validation(tmp_path):
    with pytest.raises(ConfigError, match="fail_at and oom_at name the same size 2"):
        load_toy_config(toy_config(tmp_path, fail_at=2, oom_at=2))
    with pytest.raises(ConfigError, match="not found"):
        load_toy_config(tmp_path / "none.yaml")


# --------------------------------------------------------------------------- one point
def test_run_point_skips_a_larger_size_after_an_oom():
    failed: dict = {}
    kw = dict(group="g", failed=failed, skip_on=("oom", "timeout"), skip_after_failure=True, isolate=False,
              timeout_s=None, mem_cap_bytes=None)
    p = {"target": "tests.helpers.micro:point_toy", "kwargs": {"size": 2, "oom": True}, "size": 2}
    assert run_point(p, where="size=2", **kw)["status"] == "oom" and failed == {"g": ("oom", "size=2")}
    skipped = run_point(dict(p, kwargs={"size": 4}), where="size=4", **kw)
    assert skipped["status"] == "skipped" and "oom already at size=2" in skipped["reason"]
    assert run_point(dict(p, kwargs={"size": 4}), where="size=4", **dict(kw, skip_after_failure=False))["status"] == "ok"
    record = point_record(p, skipped, ("status", "reason"))
    assert record == {"size": 2, "status": "skipped", "reason": skipped["reason"], "skipped_because": "oom"}


def test_status_line():
    r = {"status": "ok", "time_ms": 1.5, "min_ms": 1.0, "iqr_ms": 0.25, "repeats": 3, "cpu_median_ms": 1.4}
    assert status_line("[1/2]", r, timing_text) == "[1/2] ok          1.50 ms (min 1.00, IQR 0.25, n=3, cpu 1.40)"
    assert status_line("[2/2]", {"status": "timeout", "reason": "120 s"}, timing_text) == "[2/2] TIMEOUT 120 s"


# --------------------------------------------------------------------------- the sweep and the entry point
def test_main_exit_code_is_0_when_a_check_fails(tmp_path):
    out = tmp_path / "out"
    assert toy_main(config=toy_config(tmp_path), out=out, device="cpu", sets=["limit=1"], **QUIET) == 0
    doc = json.loads((out / "bench_toy.json").read_text())
    assert doc["status"] == "done" and doc["benchmark"] == "toy" and doc["wall_time_s"] > 0
    assert [p["size"] for p in doc["points"]] == [1, 2, 4] and all(p["status"] == "ok" for p in doc["points"])
    assert doc["checks"] == [{"name": "time @ largest size", "value": 4.0, "target": "<= 1", "pass": False}]
    assert doc["config"]["config_path"].endswith("toy.yaml") and doc["setup"]["isolate"] is False
    assert "plot" not in doc and not (out / "bench_toy.png").exists()


def test_main_exit_code_is_0_when_points_fail(tmp_path):
    """A raising point is recorded and the sweep goes on; an out-of-memory point skips the larger sizes."""
    out = tmp_path / "out"
    printed: list[str] = []
    code = toy_main(config=toy_config(tmp_path, sizes=[1, 2, 4, 8], fail_at=1, oom_at=2), out=out, device="cpu",
                    log=printed.append)
    assert code == 0
    doc = json.loads((out / "bench_toy.json").read_text())
    assert [p["status"] for p in doc["points"]] == ["error", "oom", "skipped", "skipped"]
    assert "toy point failed at size 1" in doc["points"][0]["reason"]
    assert doc["points"][2]["skipped_because"] == "oom"
    assert doc["checks"][0]["pass"] is False
    assert printed[0].startswith("attnbench bench toy: 4 points on ") and "per-point limit 10 s" in printed[0]
    assert "[4/4] size=8 skipped" in printed and any(s.startswith("checks:\n  FAIL") for s in printed)
    assert printed[-1].startswith("done in ")


def test_main_raises_on_a_bad_config_and_writes_nothing(tmp_path):
    with pytest.raises(ConfigError, match="sizez"):
        toy_main(config=toy_config(tmp_path), out=tmp_path / "out", sets=["sizez=[1]"], **QUIET)
    assert not (tmp_path / "out").exists()


def test_a_plot_failure_is_recorded_and_the_data_kept(tmp_path):
    def broken_plot(doc, path):
        raise RuntimeError("no display")

    cfg = load_toy_config(toy_config(tmp_path, plot=True), device="cpu")
    doc = run_toy_sweep(cfg, tmp_path / "out", plot_fn=broken_plot, **QUIET)
    saved = json.loads((tmp_path / "out" / "bench_toy.json").read_text())
    assert saved["plot_error"] == doc["plot_error"] == "RuntimeError: no display"
    assert saved["status"] == "done" and len(saved["points"]) == 3


@pytest.mark.parametrize("name,data,key", [
    ("attention", {"sequence": {"lenghts": [64]}}, "sequence.lenghts"),
    ("complexity", {"sweep_n": {"lenghts": [64]}}, "sweep_n.lenghts"),
    ("speech", {"benchmark": "speech", "lenghts": [64]}, "lenghts"),
])
def test_every_benchmark_exits_2_on_a_bad_config_key_and_writes_nothing(tmp_path, capsys, name, data, key):
    assert run_cli(["bench", name, "--config", write_config(tmp_path, data), "--out", tmp_path]) == 2
    err = capsys.readouterr().err
    assert f"unknown key '{key}'" in err and "lengths" in err and "Traceback" not in err
    assert not (tmp_path / f"bench_{name}.json").exists()


def test_run_point_takes_memory_from_a_second_worker_with_its_own_environment():
    """``memory_run``: the time from the first worker, the peak from a second one started with
    its own environment (the CPU allocator setting of the variants sweep); a failure in the
    second worker fails the point and says where."""
    second = {"kwargs": {"timing": False, "memory": True}, "env": {"ATTNBENCH_TOY_PEAK": "777"},
              "note": "second worker"}
    p = {"target": "tests.helpers.micro:point_phases", "kwargs": {"size": 3, "memory": False}, "memory_run": second}
    kw = dict(group="g", skip_on=("oom", "timeout"), skip_after_failure=True, timeout_s=120, mem_cap_bytes=None)
    rec = run_point(p, where="size=3", failed={}, isolate=True, **kw)
    assert rec["status"] == "ok" and rec["time_ms"] == 3.0, rec
    assert rec["peak_mem_bytes"] == 777 and rec["mem_method"] == "env, second worker"
    failed: dict = {}
    oom_second = {**second, "kwargs": {"timing": False, "memory": True, "oom": True}}
    bad = run_point(dict(p, memory_run=oom_second), where="size=3", failed=failed, isolate=True, **kw)
    assert bad["status"] == "oom" and bad["reason"].startswith("memory worker: ") and "time_ms" in bad
    assert failed == {"g": ("oom", "size=3")}
    # in-process runs cannot set a worker's environment: one run, as before
    inline = run_point(dict(p, kwargs={"size": 3}), where="size=3", failed={}, isolate=False, **kw)
    assert inline["peak_mem_bytes"] == 3 * 1024 and inline["mem_method"] == "env"


# --------------------------------------------------------------------------- busy machine
def test_busy_warning_ignores_the_runs_own_finished_workers():
    """The 1-minute load still counts the workers a run just finished: a warning needs other
    tasks runnable now as well (issue 34)."""
    from benchmarks.micro.common import busy_warning

    calls = []

    def now(value):
        return lambda: calls.append(value) or value

    env = {"load_average": [1.75, 1.2, 0.8], "cpu_count": 2}
    assert busy_warning(dict(env), "cpu", now(0.1)) is None  # only our own past load
    busy_env = dict(env)
    msg = busy_warning(busy_env, "cpu", now(1.5))
    assert msg == "machine busy at start: load average 1.75 on 2 cores, 1.5 other tasks runnable"
    assert busy_env["runnable_others"] == 1.5  # recorded with the environment
    assert busy_warning(dict(env), "cpu", now(None)).startswith("machine busy at start: load average 1.75")
    calls.clear()
    assert busy_warning({"load_average": [0.3, 0, 0], "cpu_count": 2}, "cpu", now(5.0)) is None
    assert busy_warning(dict(env), "cuda", now(5.0)) is None
    assert calls == []  # a quiet load average or a GPU run samples nothing


def test_runnable_others_reads_the_machine():
    from benchmarks.micro.common import runnable_others

    v = runnable_others(samples=3, interval_s=0.01)
    assert v is None or v >= 0.0
