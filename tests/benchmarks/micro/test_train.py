"""``attnbench bench train`` (benchmarks.micro.train): the sync counter, the probe on the real
cell path, the bare loop against a hand-written reference loop, the config and a tiny sweep
through the CLI (toy task, in-process)."""

from __future__ import annotations

import copy
import json
import statistics

import pytest
import torch

from benchmarks.cli import main as cli
from benchmarks.config.schema import ConfigError
from benchmarks.config.suite import expand, validate_suite
from benchmarks.micro import train as bt
from benchmarks.micro.train.bare import bare_loop, bare_step
from benchmarks.micro.train.probe import StepProbe, fitted_steps, probed_cell
from benchmarks.micro.train.syncs import SyncCounter
from benchmarks.run.runner import RunOptions
from tests.helpers import toy_task

toy_task.register()

TOY_SUITE = {"suite": "toy", "seeds": 1, "trainer": {"max_epochs": 3, "accelerator": "cpu"},
             "cells": [{"task": "toy", "dataset": "points", "models": ["linear"]}]}


# --------------------------------------------------------------------------- syncs
def test_sync_counter_counts_scalar_reads_and_data_dependent_shapes():
    x = torch.randn(6)
    with SyncCounter() as syncs:
        (x * 2 + 1).exp().sum()  # sync-free
    assert syncs.total == 0
    with SyncCounter() as syncs:
        float(x.sum())
        x[x > 0]
        torch.nonzero(x)
        torch.unique(x)
    assert syncs.by_op["aten._local_scalar_dense"] == 1 and syncs.by_op["aten.nonzero"] == 1
    assert syncs.by_op["aten.index (boolean mask)"] == 1 and syncs.total == 4


def test_sync_counter_counts_every_op_dispatched_and_on_a_gpu_run_the_device_ones_only():
    x = torch.randn(6)
    with SyncCounter() as c:
        (x * 2 + 1).exp()  # mul, add, exp
    assert c.ops == 3 and c.total == 0
    with SyncCounter() as c:
        torch.randn(3, 3, requires_grad=True).mm(torch.randn(3, 3)).sum().backward()
    assert c.ops >= 4  # the backward's ops too (below autograd)
    with SyncCounter(host_ops=False) as c:  # a GPU run: host tensors launch nothing
        (x * 2 + 1).exp()
    assert c.ops == 0


def test_sync_counter_leaves_out_an_optimisers_host_step_counters_only():
    torch.manual_seed(0)
    net = torch.nn.Linear(3, 2)
    opt = torch.optim.AdamW(net.parameters())

    def closure():  # forward and backward inside optimizer.step, as Lightning runs them
        opt.zero_grad()
        loss = net(torch.randn(4, 3)).sum()
        loss.backward()
        loss.item()
        return loss

    opt.step(closure)  # the state (step counters) exists from here on
    with SyncCounter() as syncs:
        for _ in range(3):
            opt.step(closure)
    assert syncs.total == 3  # the three loss.item(), not AdamW's reads of its step counters


# --------------------------------------------------------------------------- probe and bare loop
def _toy_cell():
    return expand(validate_suite(copy.deepcopy(TOY_SUITE)))[0]


def test_probe_times_the_real_cell_path_and_keeps_its_batches(tmp_path):
    probe = StepProbe(warmup=2, steps=4, sync_steps=2)
    rec = probed_cell(_toy_cell(), "t", RunOptions(out=tmp_path, cache_dir=tmp_path / "c", log=lambda s: None), probe)
    s = probe.summary()
    assert rec["status"] == "ok", rec["reason"]
    # 3 batches an epoch (160 points / 64): the timed runs stop at each epoch's last batch
    assert s["steps"] == 4 and len(probe.batches) == 4 and s["steps_per_s"] > 0
    assert sum(n for n, _ in s["segments"]) == 4 and len(s["segments"]) >= 2
    assert s["sync_steps"] == 2 and s["syncs_per_step"] == 0  # the NaN guard reads the loss once an epoch
    assert probe.i == probe.total == 8 and rec["epochs_run"] <= 3


def test_fitted_steps_fit_the_target_at_the_warm_up_pace():
    # the first warm-up step (allocator, caches, compile) is left out of the median
    assert fitted_steps([9.0, 0.1, 0.2, 0.1], target_s=1.0, lo=1, hi=50) == 10
    assert fitted_steps([0.5], target_s=1.0, lo=1, hi=50) == 2
    assert fitted_steps([9.0, 0.001], target_s=1.0, lo=1, hi=50) == 50  # at most hi
    assert fitted_steps([9.0, 2.0], target_s=1.0, lo=3, hi=50) == 3  # at least lo
    assert fitted_steps([9.0, 2.0], target_s=1.0, lo=10, hi=4) == 4  # hi wins where lo > hi
    assert fitted_steps([], target_s=1.0, lo=1, hi=7) == 7  # no warm-up: no fit


def test_a_target_cuts_the_timed_steps_after_the_warm_up(tmp_path):
    probe = StepProbe(warmup=3, steps=40, sync_steps=1, target_s=1e-9, min_steps=2)
    rec = probed_cell(_toy_cell(), "t", RunOptions(out=tmp_path, cache_dir=tmp_path / "c", log=lambda s: None), probe)
    assert rec["status"] == "ok", rec["reason"]
    assert probe.steps == 2 and probe.summary()["steps"] == 2 and len(probe.batches) == 2
    assert probe.i == probe.total == 3 + 2 + 1 and len(probe._warm) == 3


def test_bare_step_matches_a_hand_written_loop():
    torch.manual_seed(0)
    module = toy_task.TASKS.get("toy").make_module(torch.nn.Linear(4, 2), {}, lr=0.05)
    ref = copy.deepcopy(module.net)
    batches = [(torch.randn(8, 4), torch.randint(0, 2, (8,))) for _ in range(3)]
    step, _ = bare_step(module, precision="32-true", clip=0.5)
    opt = torch.optim.AdamW(ref.parameters(), lr=0.05, weight_decay=0.0)  # TaskModule's default
    for b in batches * 2:
        step(b)
        opt.zero_grad()
        torch.nn.functional.cross_entropy(ref(b[0]), b[1]).backward()
        torch.nn.utils.clip_grad_norm_(ref.parameters(), 0.5)
        opt.step()
    for p, q in zip(module.net.parameters(), ref.parameters()):
        torch.testing.assert_close(p, q, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("compiled", [False, True])
def test_a_compiled_networks_bare_step_begins_a_cuda_graph_step_each_time(compiled, monkeypatch):
    marks = []
    monkeypatch.setattr(torch.compiler, "cudagraph_mark_step_begin", lambda: marks.append(1))
    module = toy_task.TASKS.get("toy").make_module(torch.nn.Linear(4, 2), {}, lr=0.05)
    step, _ = bare_step(module, precision="32-true", clip=None, compiled=compiled)
    for _ in range(3):
        step((torch.randn(8, 4), torch.randint(0, 2, (8,))))
    assert len(marks) == (3 if compiled else 0)


def test_bare_loop_measures_the_phases():
    module = toy_task.TASKS.get("toy").make_module(torch.nn.Linear(4, 2), {}, lr=0.05)
    batches = [(torch.randn(8, 4), torch.randint(0, 2, (8,)))]
    r = bare_loop(module, batches, device="cpu", precision="32-true", clip=None, warmup=1, steps=3, sync_steps=2)
    assert r["steps"] == 3 and r["steps_per_s"] > 0 and r["syncs_per_step"] == 0 and "gpu_busy_fraction" not in r


# --------------------------------------------------------------------------- config and sweep
def _config(tmp_path, **extra):
    suite = tmp_path / "toy_suite.yaml"
    suite.write_text(json.dumps(TOY_SUITE))
    body = {"benchmark": "train", "device": "cpu", "isolate": False, "warmup": 1, "repeats": 3, "sync_steps": 1,
            "rounds": 2, "loader_batches": 4, "suite": str(suite), "models": {"toy": ["linear"]}, **extra}
    p = tmp_path / "bench_train.yaml"
    p.write_text(json.dumps(body))
    return str(p)


def test_shipped_config_names_an_attention_model_and_a_baseline_per_domain():
    cfg = bt.load_config()
    cells = bt.select_cells(cfg, real=False, device="cpu")
    fams = {}
    for c in cells:
        fams.setdefault(c.task, []).append(c.family)
    assert set(fams) == set(bt.DOMAINS)
    assert all(f[0] == "attention" and f[1] != "attention" for f in fams.values())
    assert all(c.seed == 0 and c.config["trainer"]["accelerator"] == "cpu" for c in cells)


def test_suite_set_overrides_the_measured_cells_and_a_bad_one_is_one_line(tmp_path):
    cfg = bt.load_config(overrides=["suite_set=[trainer.compile=true]"])
    cells = bt.select_cells(cfg, real=False, device="cpu")
    assert cells and all(c.config["trainer"]["compile"] is True for c in cells)
    plain = {c.cell_id for c in bt.select_cells(bt.load_config(), real=False, device="cpu")}
    assert not plain & {c.cell_id for c in cells}  # compile is part of the cell id
    cfg = bt.load_config(overrides=["suite_set=[trainer.nosuch=1]"])
    with pytest.raises(ConfigError, match=r"suite_set=\['trainer.nosuch=1'\] on quick: .*unknown key 'trainer.nosuch'"):
        bt.select_cells(cfg, real=False, device="cpu")


@pytest.mark.parametrize("models,match", [
    ({"chess": ["x"]}, r"models.chess: no cell of task 'chess' in suite .*; tasks there: toy"),
    ({"toy": ["lstm"]}, r"models.toy: model 'lstm' has no cell in suite .*; valid: linear"),
])
def test_a_model_or_task_not_in_the_suite_is_one_line(tmp_path, models, match):
    cfg = bt.load_config(_config(tmp_path, models=models))
    with pytest.raises(ConfigError, match=match):
        bt.select_cells(cfg, real=False, device="cpu")


def test_bad_models_value_and_missing_suite_are_config_errors(tmp_path):
    with pytest.raises(ConfigError, match=r"models=\[\] is invalid: expected \{task: \[model, \.\.\.\]\}"):
        bt.load_config(_config(tmp_path, models=[]))
    cfg = bt.load_config(_config(tmp_path, suite="nosuch"))
    with pytest.raises(ConfigError, match=r"suite config 'nosuch' not found \(a path, or one of: .*quick"):
        bt.select_cells(cfg, real=False, device="cpu")


def test_the_first_rounds_fit_sets_every_rounds_and_the_bare_loops_steps(tmp_path):
    out = tmp_path / "out"
    cfg = _config(tmp_path, repeats=30, min_repeats=2, target_point_s=0)
    assert cli(["bench", "train", "--config", cfg, "--out", str(out)]) == 0
    (p,) = json.loads((out / "bench_train.json").read_text())["points"]
    assert p["status"] == "ok", p.get("reason")
    assert p["timed_steps"] == 2
    assert [r["steps"] for r in p["cell_rounds"]] == [2, 2] and [r["steps"] for r in p["bare_rounds"]] == [2, 2]


def test_tiny_sweep_through_the_cli(tmp_path, capsys):
    out = tmp_path / "out"
    assert cli(["bench", "train", "--config", _config(tmp_path), "--out", str(out)]) == 0
    doc = json.loads((out / "bench_train.json").read_text())
    assert doc["status"] == "done" and (out / "bench_train.png").exists()
    (p,) = doc["points"]
    assert p["status"] == "ok", p.get("reason")
    assert p["method"] == "toy/linear" and len(p["ratios"]) == 2 and p["cell_status"] == ["ok", "ok"]
    per_round = [c["steps_per_s"] / b["steps_per_s"] for c, b in zip(p["cell_rounds"], p["bare_rounds"])]
    assert p["ratios"] == pytest.approx(per_round) and p["ratio"] == pytest.approx(statistics.median(per_round))
    assert p["bare_syncs_per_step"] == 0 and p["cell_syncs_per_step"] == 0 and p["loader_batches_per_s"] > 0
    # the same network, loss and optimiser: the cell path dispatches at least the bare loop's ops
    assert 0 < p["bare_ops_per_step"] <= p["cell_ops_per_step"]
    (chk,) = [c for c in doc["checks"] if c["name"] == "toy/linear: cell / bare steps/s"]
    assert chk["target"] == ">= 0.9" and chk["pass"] == (p["ratio"] >= 0.9)
    printed = capsys.readouterr().out
    assert "| toy/linear |" in printed and "cell / bare steps/s" in printed


def test_data_dir_is_for_bench_train_only(tmp_path, capsys):
    assert cli(["bench", "decode", "--data-dir", str(tmp_path)]) == 2
    assert "--data-dir applies to bench train only, not to bench decode" in capsys.readouterr().err
    assert cli(["bench", "train", "--data-dir", str(tmp_path / "none")]) == 2
    assert f"--data-dir {tmp_path / 'none'}: no such directory" in capsys.readouterr().err


def test_gpu_busy_time_is_the_union_of_kernels_inside_the_profiled_windows():
    from benchmarks.micro.train.probe import covered

    windows = [(0.0, 10.0), (20.0, 30.0)]
    assert covered([(1.0, 3.0), (2.0, 4.0)], windows) == 3.0  # overlapping (or duplicated) kernels: once
    assert covered([(12.0, 18.0)], windows) == 0.0  # between the windows (validation): not counted
    assert covered([(8.0, 22.0)], windows) == 4.0  # clipped to the windows
    assert covered([(1.0, 2.0)] * 5 + [(25.0, 26.0)], windows + [(0.0, 5.0)]) == 2.0


def test_gpu_busy_fraction_reads_the_window_ranges_and_the_cuda_events():
    from types import SimpleNamespace as NS

    from torch.autograd import DeviceType

    from benchmarks.micro.train.probe import WINDOW, busy_fraction

    def ev(name, dev, a, b, annotation=False):
        return NS(name=name, device_type=dev, time_range=NS(start=a, end=b), is_user_annotation=annotation)

    evs = [ev(WINDOW, DeviceType.CPU, 0, 100), ev(WINDOW, DeviceType.CPU, 200, 300),
           ev("aten::mm", DeviceType.CPU, 0, 90),  # a CPU op: never GPU time
           ev("gemm", DeviceType.CUDA, 10, 50), ev("gemm", DeviceType.CUDA, 10, 50),  # recorded twice
           ev("val_kernel", DeviceType.CUDA, 120, 180),  # between the windows
           ev("gemm", DeviceType.CUDA, 250, 270),
           # a record_function range's GPU side (Kineto's gpu_user_annotation: first to last kernel inside it),
           # which spanned the whole window on an H100 and read every loop as ~95% busy: not a kernel
           ev(WINDOW, DeviceType.CUDA, 0, 100, annotation=True),
           ev("[pl][module]net", DeviceType.CUDA, 200, 300, annotation=True)]
    assert busy_fraction(NS(events=lambda: evs)) == pytest.approx(60 / 200)
    assert busy_fraction(NS(events=lambda: evs[:3])) is None  # no CUDA activity (a CPU run)
    assert busy_fraction(NS(events=lambda: evs[2:])) is None  # no window


def test_the_profiled_window_is_one_range_of_the_profile_around_its_steps():
    from torch.autograd import DeviceType

    from benchmarks.micro.train.probe import WINDOW, profiled_window

    synced = []
    x = torch.randn(64, 64)
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as prof:
        torch.sin(x)  # outside
        with profiled_window(lambda: synced.append(1)):
            for _ in range(3):
                torch.mm(x, x)
    (win,) = [e for e in prof.events() if e.name == WINDOW]
    mms = [e for e in prof.events() if e.name == "aten::mm"]
    sins = [e for e in prof.events() if e.name == "aten::sin"]
    assert win.device_type == DeviceType.CPU and synced == [1, 1] and len(mms) == 3
    assert all(win.time_range.start <= e.time_range.start <= e.time_range.end <= win.time_range.end for e in mms)
    assert all(e.time_range.end <= win.time_range.start for e in sins)


def test_on_a_gpu_run_reads_of_host_tensors_are_no_syncs():
    x = torch.randn(6)
    with SyncCounter(host_ops=False) as syncs:  # what the probe and the bare loop use on CUDA
        float(x.sum())
        torch.nonzero(x)
    assert syncs.total == 0


def test_a_compiled_cell_is_measured_with_its_syncs_left_uncounted(tmp_path, monkeypatch):
    # reduce-overhead compiles with fullgraph=True, and torch.compile runs no graph under a
    # TorchDispatchMode (the sync counter): before the fix every compiled row failed, in the cell
    # path or in the bare loop that reuses the cell's compiled network
    from benchmarks.run import callbacks as CB

    monkeypatch.setitem(CB.COMPILE_KWARGS, "backend", "eager")  # a real graph, no inductor codegen
    out = tmp_path / "out"
    cfg = _config(tmp_path, rounds=1, suite_set=["trainer.compile=reduce-overhead"])
    assert cli(["bench", "train", "--config", cfg, "--out", str(out)]) == 0
    (p,) = json.loads((out / "bench_train.json").read_text())["points"]
    assert p["status"] == "ok", p.get("reason")
    assert p["compile"] == "reduce-overhead" and p["cell_status"] == ["ok"]
    assert p["cell_steps_per_s"] > 0 and p["bare_steps_per_s"] > 0
    assert p["cell_syncs_per_step"] is None and p["bare_syncs_per_step"] is None
    # uncompiled, both sides count them
    cfg = _config(tmp_path, rounds=1)
    assert cli(["bench", "train", "--config", cfg, "--out", str(out)]) == 0
    (p,) = json.loads((out / "bench_train.json").read_text())["points"]
    assert p["compile"] is None and p["cell_syncs_per_step"] == 0 and p["bare_syncs_per_step"] == 0
