"""``trainer.compile``: opt-in per cell, absent from the cell ids while false (every shipped
config keeps its ids), the network compiled in the worker with its compile time stored apart
from the train time, and a network that cannot compile failing its cell with one line."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from benchmarks.config.schema import ConfigError, load_yaml
from benchmarks.config.suite import expand, load_suite, validate_suite
from benchmarks.run import callbacks as CB
from benchmarks.run import records as R
from benchmarks.run.runner import RunOptions, run_suite
from tests.helpers import toy_task

toy_task.register()
CONFIGS = Path(__file__).resolve().parents[3] / "benchmarks" / "configs"

#: ids of quick.yaml cells as main computed them before ``trainer.compile`` existed (its frozen
#: copy, tests/helpers/configs/quick_v1.yaml: the shipped one is now the diagnostics)
QUICK_IDS = {"graphs/sbm/graph_attention seed=0": "950b060b60bd", "graphs/sbm/gcn seed=1": "b86c16dc0d95",
             "pos_tagging/synthetic/transformer seed=0": "a634125011d8",
             "translation/synthetic/convs2s seed=0": "af3efc500d69", "speech/synthetic/cnn seed=0": "47fe4ad23256"}


def test_quick_ids_unchanged():
    from tests.helpers.suites import QUICK_V1

    ids = {c.label: c.cell_id for c in expand(load_suite(QUICK_V1))}
    assert {k: ids[k] for k in QUICK_IDS} == QUICK_IDS


@pytest.mark.parametrize("path", sorted(CONFIGS.glob("*.yaml")), ids=lambda p: p.stem)
def test_compile_false_keeps_every_shipped_id(path):
    if "benchmark" in load_yaml(path):
        pytest.skip("a micro-benchmark config, not a suite")
    plain = [c.cell_id for c in expand(load_suite(path))]
    off = [c.cell_id for c in expand(load_suite(path, ["trainer.compile=false"]))]
    on = [c.cell_id for c in expand(load_suite(path, ["trainer.compile=true"]))]
    assert plain == off
    assert not set(on) & set(plain)  # a compiled cell is a cell of its own


def test_compile_value_validated():
    cfg = {"suite": "t", "trainer": {"compile": "yes"}, "cells": [{"task": "toy", "dataset": "points"}]}
    with pytest.raises(ConfigError, match=r"trainer.compile='yes' is invalid"):
        validate_suite(cfg)


def _run(tmp_path, compile_: bool):
    cfg = validate_suite({"suite": "t", "seeds": 1, "trainer": {"max_epochs": 2, "accelerator": "cpu",
                                                                  "compile": compile_},
                          "cells": [{"task": "toy", "dataset": "points", "models": ["linear"]}]})
    lines: list[str] = []
    summary = run_suite(cfg, RunOptions(out=tmp_path / "out", cache_dir=tmp_path / "cache", log=lines.append))
    return summary, R.load_records(tmp_path / "out")[0]


def test_compiled_cell_records_compile_time_apart(tmp_path):
    summary, rec = _run(tmp_path, True)  # the one real torch.compile (inductor) of the tests: slow on CPU
    assert rec["status"] == "ok", rec["reason"]
    cost = rec["cost"]
    assert rec["config"]["trainer"]["compile"] is True
    assert cost["compile_s"] > 0 and cost["compile"]["train"]["first_batch_s"] > cost["compile"]["train"]["steady_batch_s"]
    assert cost["train_time_with_compile_s"] == pytest.approx(cost["train_time_s"] + cost["compile_s"], abs=2e-3)
    assert cost["train_compute_s"] < cost["train_compute_with_compile_s"]
    assert "first batches of a shape" in cost["compile"]["method"] and cost["compile"]["mode"] == "default"


def test_network_that_cannot_compile_fails_with_one_line(tmp_path, monkeypatch):
    def refuse(gm, example_inputs):
        raise RuntimeError("this backend compiles nothing")

    monkeypatch.setitem(CB.COMPILE_KWARGS, "backend", refuse)
    summary, rec = _run(tmp_path, True)
    assert rec["status"] == "failed" and summary.failed
    assert rec["reason"].startswith("trainer.compile: torch.compile could not compile model 'linear' (")
    assert "this backend compiles nothing" in rec["reason"] and "\n" not in rec["reason"]
    assert rec["reason"].endswith("set trainer.compile: false for this cell")


# ----------------------------------------------------------------------------- reduce-overhead
def test_compile_modes_and_buckets_validated():
    base = {"suite": "t", "cells": [{"task": "toy", "dataset": "points"}]}
    for ok in ("default", "reduce-overhead", True, False):
        validate_suite({**base, "trainer": {"compile": ok}})
    for bad, key in ((1, "compile"), ("max-autotune", "compile"), (0, "length_buckets"), ([16, 8], "length_buckets"),
                     ([8, 8], "length_buckets"), ([], "length_buckets"), (True, "length_buckets")):
        with pytest.raises(ConfigError, match=re.escape(f"trainer.{key}={bad!r} is invalid: expected ")):
            validate_suite({**base, "trainer": {key: bad}})


@pytest.mark.parametrize("path", [CONFIGS / "quick.yaml", CONFIGS / "pos_tagging_gpu.yaml"], ids=lambda p: p.stem)
def test_length_buckets_null_keeps_ids(path):
    plain = [c.cell_id for c in expand(load_suite(path))]
    assert plain == [c.cell_id for c in expand(load_suite(path, ["trainer.length_buckets=null"]))]
    assert not set(plain) & {c.cell_id for c in expand(load_suite(path, ["trainer.length_buckets=4"]))}


def _counting_backend(counts: dict[str, int]):
    """An AOTAutograd backend that runs the traced graphs as they are and counts forward and
    backward graphs (Inductor's CUDA graphs need a GPU; what is captured is the same)."""
    from functorch.compile import make_boxed_func
    from torch._dynamo.backends.common import aot_autograd

    def count(kind):
        def compiler(gm, example_inputs):
            counts[kind] += 1
            return make_boxed_func(gm.forward)
        return compiler

    return aot_autograd(fw_compiler=count("fw"), bw_compiler=count("bw"))


def test_reduce_overhead_one_graph_per_bucket(tmp_path, monkeypatch):
    """POS tagging with reduce-overhead: batches padded to length buckets, the training epoch
    holds at most one batch shape per bucket and the whole network compiles to at most one graph
    per shape (fullgraph: a graph break would fail the cell), each with its backward."""
    counts = {"fw": 0, "bw": 0}
    monkeypatch.setitem(CB.COMPILE_KWARGS, "backend", _counting_backend(counts))
    cfg = validate_suite({"suite": "t", "seeds": 1, "trainer": {"max_epochs": 2, "accelerator": "cpu",
                                                                  "compile": "reduce-overhead", "length_buckets": 3},
                          "cells": [{"task": "pos_tagging", "dataset": "synthetic", "models": ["transformer"],
                                     "dataset_params": {"num_train": 300, "num_val": 60, "num_test": 60},
                                     "model_params": {"transformer": {"d_model": 16, "num_heads": 2, "num_layers": 1,
                                                                      "dim_feedforward": 32, "word_dim": 8,
                                                                      "char_out": 8}}}]})
    run_suite(cfg, RunOptions(out=tmp_path / "out", cache_dir=tmp_path / "cache", log=lambda *a: None))
    rec = R.load_records(tmp_path / "out")[0]
    assert rec["status"] == "ok", rec["reason"]
    info, padding = rec["cost"]["compile"], rec["cost"]["padding"]
    buckets = padding["buckets"]
    assert info["mode"] == "reduce-overhead" and 1 < len(buckets) <= 3
    assert 1 <= info["shapes"]["train"] <= len(buckets) and info["graphs"]["train"] == info["shapes"]["train"]
    assert info["shapes"]["train"] == padding["shapes_per_epoch"]
    assert info["shapes"]["val"] <= 2 * len(buckets) and info["graphs"]["val"] <= info["shapes"]["val"]
    assert counts["fw"] == info["graphs"]["total"] and counts["bw"] == info["graphs"]["train"]
    assert padding["overhead"] >= padding["batch_longest"]["overhead"] >= 0
    assert padding["positions"] == padding["batch_longest"]["positions"]
    from benchmarks.report import write_report

    text = write_report(tmp_path / "out", tmp_path / "report")["REPORT.md"].read_text()
    assert ("transformer: compile reduce-overhead: " f"{info['shapes']['train']} training shape(s), "
            f"{info['graphs']['train']} graph(s)") in text and f"buckets {','.join(map(str, buckets))}: padding" in text


def test_uncapturable_model_fails_with_one_line(tmp_path, monkeypatch):
    monkeypatch.setitem(CB.COMPILE_KWARGS, "backend", "eager")
    cfg = validate_suite({"suite": "t", "seeds": 1, "trainer": {"max_epochs": 1, "accelerator": "cpu",
                                                                  "compile": "reduce-overhead"},
                          "cells": [{"task": "toy", "dataset": "points", "models": ["broken"],
                                     "model_params": {"broken": {"kind": "host_read"}}}]})
    summary = run_suite(cfg, RunOptions(out=tmp_path / "out", cache_dir=tmp_path / "cache", log=lambda *a: None))
    rec = R.load_records(tmp_path / "out")[0]
    assert rec["status"] == "failed" and summary.failed
    assert rec["reason"].startswith("trainer.compile: reduce-overhead could not capture model 'broken' as one graph (")
    assert "\n" not in rec["reason"] and rec["reason"].endswith("set trainer.compile: default (graph breaks "
                                                                "allowed) or false for this cell")
    # the same model compiles with graph breaks allowed
    cfg["trainer"]["compile"] = "default"
    run_suite(cfg, RunOptions(out=tmp_path / "out2", cache_dir=tmp_path / "cache", log=lambda *a: None))
    assert R.load_records(tmp_path / "out2")[0]["status"] == "ok"
