"""Issue 21: calibrated time budgets (the scaling arithmetic with a fixed fingerprint, their
validation, unchanged cell ids), the stop block of every record, the report's time-cap marker
and mixed-budget warning, and ``attnbench env``. No timing assertions."""

from __future__ import annotations

import json

import pytest

from benchmarks.run import budget as B
from benchmarks.run import fingerprint as F
from benchmarks.run import records as R
from benchmarks.report import budget as report_budget
from benchmarks.cli import main
from benchmarks.run.budget import cell_timeout
from benchmarks.run.runner import RunOptions, run_suite
from benchmarks.config.schema import ConfigError
from benchmarks.config.suite import expand, validate_suite
from tests.helpers import toy_task
toy_task.register()
REF = "cpu-2core-amd-epyc-avx2"


@pytest.fixture(autouse=True)
def _short_fingerprint(monkeypatch):
    monkeypatch.setenv(F.FINGERPRINT_ENV, "0.05")


def _fp(factor: float) -> dict:
    """A fingerprint ``factor`` times as fast as the reference on every rate."""
    ref = B.REFERENCES[REF]
    return {"device": "cpu", "dtype": "float32", **{k: ref[k] * factor for k in F.RATES}}


def _suite(trainer: dict, cell_trainer: dict | None = None, models=("linear",)) -> dict:
    return {"suite": "b", "seeds": 1, "trainer": {"accelerator": "cpu", **trainer},
            "cells": [{"task": "toy", "dataset": "points", "models": list(models), "trainer": cell_trainer or {}}]}


# ----------------------------------------------------------------------------- arithmetic
def test_scale_is_the_geometric_mean_of_reference_over_this_machine():
    assert B.scale_factor(_fp(0.5), B.REFERENCES[REF]) == pytest.approx(2.0)  # half as fast: twice the time
    assert B.scale_factor(_fp(4.0), B.REFERENCES[REF]) == pytest.approx(0.25)
    ref = B.REFERENCES[REF]
    mixed = {"matmul_gflops": ref["matmul_gflops"] * 2, "conv_gflops": ref["conv_gflops"] / 2,
             "lstm_steps_per_s": ref["lstm_steps_per_s"] / 8}
    assert B.scale_factor(mixed, ref) == pytest.approx((0.5 * 2 * 8) ** (1 / 3))  # stored without the step rate
    # kernels and a whole training step weigh half each: kernels 2x slower, steps 8x slower -> 4x
    half = {**_fp(0.5), "train_steps_per_s": ref["train_steps_per_s"] / 8}
    assert B.scale_factor(half, ref) == pytest.approx((2 * 8) ** 0.5)
    assert "train_steps_per_s at equal weight" in B.resolve_budget({"seconds": 1, "reference": REF}, half)[1]["rule"]
    seconds, detail = B.resolve_budget({"seconds": 420, "reference": REF}, _fp(0.5))
    assert seconds == pytest.approx(840) and detail["scale"] == pytest.approx(2.0) and detail["reference_s"] == 420
    assert B.resolve_budget(420.0, _fp(0.5)) == (420.0, None)  # a raw cap is never scaled
    assert B.resolve_budget(None, None) == (None, None)
    with pytest.raises(ValueError, match="lstm_steps_per_s"):
        B.scale_factor({**_fp(1), "lstm_steps_per_s": None}, ref)


def test_cell_timeout_follows_the_scaled_budget():
    cfg = {"trainer": {"max_time_s": {"seconds": 100, "reference": REF}}}
    assert cell_timeout(cfg, _fp(0.5)) == pytest.approx(2 * 200 + 600)
    assert cell_timeout(cfg, None) == pytest.approx(2 * 400 + 600)  # not known yet: generous
    assert cell_timeout({"trainer": {"max_time_s": 50.0}}, _fp(0.5)) == 700
    assert cell_timeout({"trainer": {}}, None) is None


# ----------------------------------------------------------------------------- validation
@pytest.mark.parametrize("bad", [{"seconds": 0, "reference": REF}, {"seconds": 10}, {"seconds": 10, "reference": "laptop"},
                                 {"seconds": 10, "reference": REF, "calibrated": True}, "420", True, -1])
def test_a_bad_budget_is_one_line_naming_key_value_and_forms(bad):
    with pytest.raises(ConfigError) as info:
        validate_suite(_suite({"max_time_s": bad}), source="x.yaml")
    msg = str(info.value)
    assert "\n" not in msg and f"x.yaml: trainer.max_time_s={bad!r} is invalid" in msg
    assert "{seconds: S > 0, reference: NAME}" in msg and REF in msg


def test_plain_budgets_keep_their_ids_and_calibrated_ones_are_kept_as_given():
    plain_int = expand(validate_suite(_suite({"max_time_s": 30})))[0]
    plain_float = expand(validate_suite(_suite({"max_time_s": 30.0})))[0]
    assert plain_int.cell_id == plain_float.cell_id and plain_int.config["trainer"]["max_time_s"] == 30.0
    cal = expand(validate_suite(_suite({}, {"max_time_s": {"seconds": 30, "reference": REF}})))[0]
    assert cal.config["trainer"]["max_time_s"] == {"seconds": 30, "reference": REF}
    assert cal.cell_id != plain_int.cell_id


# ----------------------------------------------------------------------------- records
def test_every_record_says_what_ended_training(tmp_path):
    cfg = validate_suite({"suite": "b", "seeds": 1, "trainer": {"accelerator": "cpu", "max_epochs": 40},
                          "cells": [{"task": "toy", "dataset": "points", "models": ["linear"], "trainer": {"max_epochs": 3}},
                                    {"task": "toy", "dataset": "points", "models": ["linear"], "trainer": {"max_steps": 5}},
                                    {"task": "toy", "dataset": "points", "models": ["linear"], "module_params": {"lr": 1e-12},
                                     "trainer": {"early_stopping_patience": 2}},
                                    {"task": "toy", "dataset": "points", "models": ["broken"],
                                     "model_params": {"broken": {"kind": "slow"}},
                                     # epochs without end: only the cap can stop it, however slow the
                                     # loaded machine's fingerprint makes the calibrated cap
                                     "trainer": {"max_epochs": 100_000,
                                                 "max_time_s": {"seconds": 0.5, "reference": REF}}}]})
    out = tmp_path / "out"
    run_suite(cfg, RunOptions(out=out, cache_dir=tmp_path / "cache", log=lambda m: None))
    manifest_fp = json.loads((out / "suite.json").read_text())["fingerprint"]
    assert manifest_fp["device"] == "cpu" and all(manifest_fp[k] > 0 for k in F.RATES)
    stops = {}
    for rec in R.load_records(out):
        assert rec["status"] == "ok", rec["reason"]
        assert rec["env"]["fingerprint"] == manifest_fp and "cpu_vector" in rec["env"]
        stops[rec["stop"]["reason"]] = rec["stop"]
    assert set(stops) == {"max_epochs", "max_steps", "early_stopping", "time_cap"}
    assert stops["max_epochs"]["epochs"] == 3 and stops["max_epochs"]["at_epoch"] == 2
    assert stops["max_steps"]["steps"] == 5 and not stops["max_steps"]["time_cap_hit"]
    assert stops["early_stopping"]["at_epoch"] >= 2 and stops["early_stopping"]["epochs"] < 40
    capped = stops["time_cap"]
    assert capped["time_cap_hit"] and capped["epochs"] < 100_000 and capped["calibration"]["fingerprint"] == "run"
    scale = B.scale_factor(manifest_fp, B.REFERENCES[REF])
    assert capped["time_cap_s"] == pytest.approx(0.5 * scale, abs=1e-3)


# ----------------------------------------------------------------------------- report
class _M:
    def __init__(self, model, reasons):
        self.model = model
        self.ok = [{"stop": {"reason": r, "epochs": 6, "max_epochs": 21, "time_cap_s": 420.0}} if r else {}
                   for r in reasons]


class _G:
    def __init__(self, models):
        self.models = models


def test_report_marks_time_capped_models_and_warns_on_mixed_budgets():
    vit, cnn = _M("vit", ["time_cap", "max_epochs"]), _M("cnn", ["max_epochs", "early_stopping"])
    assert report_budget.model_marker(vit.ok) == "†" and report_budget.model_marker(cnn.ok) == ""
    note = report_budget.leaderboard_note([vit, cnn])
    assert note.startswith("†") and "vit: 1 of 2 seed(s) at epoch 6 of 21 (420 s cap)" in note and "cnn" not in note
    (warning,) = report_budget.budget_warnings([_G([vit, cnn])], lambda g: "vision / mnist")
    assert "vision / mnist" in warning and "vit by epochs (1), time cap (1)" in warning
    assert report_budget.budget_warnings([_G([cnn])], str) == []  # early stopping is the epoch budget's rule


def test_records_without_a_stop_block_report_as_before():
    old = _M("vit", [None, None])
    assert report_budget.model_marker(old.ok) == "" and report_budget.leaderboard_note([old]) is None
    assert report_budget.budget_warnings([_G([old, _M("cnn", ["time_cap"])])], str) == []
    assert report_budget.environment_rows([{"cpu_model": "AMD EPYC"}], str) == []


def test_environment_rows_show_distinct_fingerprints():
    fp = {**_fp(1.0), "threads": 2}
    rows = dict(report_budget.environment_rows([{"fingerprint": fp, "cpu_vector": ["avx2"]}] * 2,
                                               lambda vs: "; ".join(sorted(set(map(str, vs))))))
    assert rows["CPU vector units"] == "avx2" and rows["speed fingerprint"] == F.format_fingerprint(fp)


# ----------------------------------------------------------------------------- attnbench env
def test_env_prints_identity_and_a_fresh_fingerprint(capsys):
    assert main(["env", "--json", "--seconds", "0.05", "--threads", "1"]) == 0
    env = json.loads(capsys.readouterr().out)
    assert env["fingerprint"]["threads"] == 1 and env["cpu_model"] and "cpu_vector" in env
    assert REF in env["calibrated_budget_scale"]
    assert main(["env", "--seconds", "0"]) == 2
    assert "--seconds 0.0: expected seconds in (0, 60]" in capsys.readouterr().err


def test_bad_fingerprint_time_is_one_clear_line(monkeypatch):
    monkeypatch.setenv(F.FINGERPRINT_ENV, "lots")
    with pytest.raises(ConfigError, match=r"ATTNBENCH_FINGERPRINT_S='lots' is invalid: expected seconds in \[0, 60\]"):
        F.configured_seconds()
    monkeypatch.setenv(F.FINGERPRINT_ENV, "0")
    assert F.measure_for_run("cpu", "32-true", 1) is None


# ----------------------------------------------------------------------------- machines in one table
def _rec(model, reason, fp=None, **env):
    env = {"device": "cpu", "cpu_model": "AMD EPYC", "cpu_capability": "AVX2", "cpu_count": 2, **env}
    if fp is not None:
        env["fingerprint"] = fp
    return {"model": model, "stop": {"reason": reason}, "env": env}


class _Recs:
    def __init__(self, model, recs):
        self.model, self.ok = model, recs


def test_report_warns_when_one_table_mixes_machines():
    # same kind, same speed: no warning
    same = _G([_Recs("vit", [_rec("vit", "time_cap", _fp(1.0))]), _Recs("cnn", [_rec("cnn", "time_cap", _fp(1.1))])])
    assert report_budget.machine_warnings([same], str) == []
    # an AVX-512 record beside AVX2 ones: named, with counts
    kinds = _G([_Recs("vit", [_rec("vit", "max_epochs", cpu_capability="AVX512")]),
                _Recs("cnn", [_rec("cnn", "max_epochs"), _rec("cnn", "max_epochs")])])
    (w,) = report_budget.machine_warnings([kinds], lambda g: "vision / mnist")
    assert w.startswith("vision / mnist: records from 2 machines") and "AMD EPYC AVX2 2 cores: 2" in w
    assert "AMD EPYC AVX512 2 cores: 1" in w
    # one kind of machine, but the time-capped cells ran 1.5x slower on one of them (a loaded or slower VM)
    slow = _G([_Recs("vit", [_rec("vit", "time_cap", _fp(1.0))]), _Recs("cnn", [_rec("cnn", "time_cap", _fp(1 / 1.5))])])
    (w,) = report_budget.machine_warnings([slow], lambda g: "t")
    assert "1.50x apart in speed" in w and "fastest, vit" in w and "slowest, cnn" in w
    # the same spread in epoch-budgeted cells is not about quality (the clock did not stop them)
    epochs = _G([_Recs("vit", [_rec("vit", "max_epochs", _fp(1.0))]), _Recs("cnn", [_rec("cnn", "max_epochs", _fp(0.5))])])
    assert report_budget.machine_warnings([epochs], str) == []
    # a GPU record: named by its device name
    gpu = _G([_Recs("vit", [_rec("vit", "max_epochs", device="cuda", device_name="NVIDIA H100")]),
              _Recs("cnn", [_rec("cnn", "max_epochs")])])
    (w,) = report_budget.machine_warnings([gpu], str)
    assert "NVIDIA H100: 1" in w
