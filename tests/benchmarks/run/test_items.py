"""Per-item test outcomes beside each record (issue 51 item 2; DESIGN.md "Intervals need the data"):
one tiny cell per domain (and per speech form) trains one epoch through the worker, and its sidecar
holds one outcome per test unit whose mean is the record's test accuracy, or whose per-sentence
statistics give the record's test BLEU again."""

from __future__ import annotations

import copy
import json

import numpy as np
import pytest

from benchmarks.config.suite import expand, validate_suite
from benchmarks.run import items as I
from benchmarks.run import records as R
from benchmarks.run.cell import RunOptions
from benchmarks.run.worker import execute_cell
from tests.helpers.domains import GRAPHS_DATA, SPEECH_DATA, SPEECH_FRAMES, TRANSLATION_DATA

POS_SMALL = {"word_dim": 16, "char_dim": 8, "char_out": 16, "d_model": 32}
#: id -> (task, dataset, dataset params, model, model params, unit, group)
CELLS = {
    "graphs": ("graphs", "sbm", GRAPHS_DATA, "gcn", {"d_model": 16}, "node", None),
    "pos_tagging": ("pos_tagging", "synthetic", {"num_train": 120, "num_val": 40, "num_test": 70, "batch_size": 16,
                                                 "eval_batch_size": 16}, "mlp", POS_SMALL, "token", "sentence"),
    "speech": ("speech", "synthetic", {**SPEECH_DATA, "batch_size": 4}, "frame_mlp", {"d_model": 16},
               "utterance", None),
    "speech_frames": ("speech", "synthetic_frames", {**SPEECH_FRAMES, "batch_size": 4, "max_tokens": None},
                      "frame_mlp", {"d_model": 16}, "frame", "utterance"),
    "vision": ("vision", "synthetic", {"num_train": 64, "num_val": 32, "num_test": 50, "batch_size": 16,
                                       "eval_batch_size": 16}, "patch_bag", {"d_model": 16}, "image", None),
    "translation": ("translation", "synthetic", {**TRANSLATION_DATA, "num_train": 200, "eval_batch_size": 8},
                    "rnn_noattn", {"embedding_dim": 16, "hidden_size": 16}, "sentence", None),
}


def _cell(task: str, dataset: str, data: dict, model: str, params: dict):
    suite = {"suite": "items", "seeds": 1, "trainer": {"max_epochs": 1, "accelerator": "cpu"},
             "cells": [{"task": task, "dataset": dataset, "dataset_params": copy.deepcopy(data), "models": [model],
                        "model_params": {model: dict(params)}}]}
    return expand(validate_suite(suite))[0]


@pytest.mark.parametrize("name", list(CELLS))
def test_a_cell_keeps_one_outcome_per_test_unit_beside_its_record(name, tmp_path):
    task, dataset, data, model, params, unit, group = CELLS[name]
    cell = _cell(task, dataset, data, model, params)
    opts = RunOptions(out=tmp_path / "out", cache_dir=tmp_path / "cache", log=lambda s: None)
    status, rec, path = execute_cell(cell, "items", opts)
    assert status == "ok", rec.get("reason")
    pointer = rec["items"]
    side = I.items_path(path)
    assert pointer["file"] == side.name and side.is_file() and pointer["unit"] == unit
    assert list(R.iter_record_files(opts.out)) == [path]  # the sidecar is no record
    items = I.load_items(path)
    assert items is not None and items.unit == unit and len(items.ids) == len(items.values) == pointer["n"]
    assert (np.diff(items.ids) > 0).all()  # data order
    assert items.group == group and (items.group_of is None) == (group is None)
    if task == "translation":
        assert items.values.shape == (pointer["n"], 10) and items.metric == "bleu"
        assert pointer["n"] == data["num_test"] and (items.ids == np.arange(data["num_test"])).all()
        assert I.score(items) == pytest.approx(rec["test"]["bleu"], abs=1e-9)
    else:
        assert items.values.dtype == bool
        assert I.score(items) == pytest.approx(rec["test"]["acc"], abs=1e-6)  # the failing check
    # the units the dataset holds, in its order: a sentence's words (an utterance's frames) together,
    # the examples by dataset index, however the test batches were bucketed by length
    if group is not None:
        assert (np.diff(items.group_of) >= 0).all()
        assert np.bincount(items.group_of).tolist() == _test_lengths(cell, tmp_path)
    if unit in ("image", "utterance"):
        assert (items.ids == np.arange(pointer["n"])).all()
    assert json.loads(side.read_text())["schema"] == I.SCHEMA


def _test_lengths(cell, tmp_path) -> list[int]:
    """Each test example's length (words, frames), in dataset order."""
    from tasks.common.registry import get_task

    ds = get_task(cell.task).datasets.get(cell.dataset)
    dm = ds.build(None, tmp_path / "cache", cell.seed, **cell.config["dataset_params"])
    test = dm.splits["test"]
    return [dm.length(test[i]) for i in range(len(test))]


# --------------------------------------------------------------------------- the sidecar alone
def _outcomes(n_sent: int = 1500, seed: int = 0):
    """~25k tokens of a POS test set: correctness grouped by sentence, as the module gives them."""
    from tasks.common.module import ItemOutcomes

    rng = np.random.default_rng(seed)
    sizes = rng.integers(1, 33, n_sent)
    values = rng.random(int(sizes.sum())) < 0.93
    return ItemOutcomes("token", np.arange(len(values)), values, "sentence", np.arange(n_sent), sizes)


def _record(tmp_path, items, name="seed0-abc.json"):
    path = tmp_path / "runs" / name
    pointer = I.write_items(path, items, cell_id="abc", metric="acc")
    R.write_json_atomic(path, {"schema": R.SCHEMA_VERSION, "cell_id": "abc", "metric": {"name": "acc"},
                               "items": pointer})
    return path, pointer


def test_the_sidecar_is_compact_and_reads_back_exactly(tmp_path):
    out = _outcomes()
    path, pointer = _record(tmp_path, out)
    assert pointer["n"] == len(out.values) > 20000 and pointer["bytes"] < 10000  # a few KB for ~25k tokens
    items = I.load_items(path)
    assert (items.values == out.values).all() and (items.ids == out.ids).all() and items.metric == "acc"
    assert (items.group_of == np.repeat(np.arange(1500), out.group_sizes)).all()
    (rec,) = R.load_records(tmp_path)  # a loaded record (with _path) works as well
    assert (I.load_items(rec).values == out.values).all()
    take = np.random.default_rng(1).integers(0, len(out.values), len(out.values))  # a resample
    assert I.score(items, take) == pytest.approx(out.values[take].mean())


def test_a_per_unit_axis_reads_back_with_its_name(tmp_path):
    out = _outcomes(200)
    out.axis, out.axis_values = "head_distance", np.random.default_rng(2).integers(0, 40, len(out.values))
    path, _ = _record(tmp_path, out)
    items = I.load_items(path)
    assert items.axis == "head_distance" and (items.axis_values == out.axis_values).all()
    assert I.load_items(_record(tmp_path, _outcomes(20), "seed1-x.json")[0]).axis is None


def test_ids_and_statistics_round_trip():
    for a in (np.array([0, 5, 300]), np.array([[1, 70000], [2, 3]]), np.array([-1, 2**40]), np.zeros(0, np.int64)):
        back = I.decode_ints(json.loads(json.dumps(I.encode_ints(a))))
        assert back.dtype == np.int64 and back.shape == a.shape and (back == a).all()
    assert I.encode_ints(np.array([3, 255]))["dtype"] == "uint8"


def test_a_record_without_items_or_with_a_wrong_sidecar_gives_none(tmp_path):
    old = tmp_path / "runs" / "old.json"
    R.write_json_atomic(old, {"schema": R.SCHEMA_VERSION, "cell_id": "x"})
    assert I.load_items(old) is None  # a record from before
    path, _ = _record(tmp_path, _outcomes(10))
    I.write_items(path, _outcomes(10, seed=1), cell_id="abc", metric="acc")  # another run's sidecar
    with pytest.warns(UserWarning, match="sha256 differs"):
        assert I.load_items(path) is None
    I.items_path(path).unlink()
    with pytest.warns(UserWarning, match="not readable"):
        assert I.load_items(path) is None
    with pytest.raises(ValueError, match="_path"):
        I.load_items({"items": {"file": "x.items"}})


def test_vectorised_bleu_equals_sacrebleus_on_random_statistics():
    """bleu_rows (the bootstrap's fast path) against bleu_from_stats (sacreBLEU) row by row, with the
    edge cases drawn on purpose: orders without a match (smoothing), no match at all, an order without
    n-grams, a system shorter than the reference, an empty system."""
    rng = np.random.default_rng()
    total = rng.integers(0, 60, size=(400, 4))
    total[rng.random(400) < 0.05, 3] = 0  # an order without n-grams
    correct = np.minimum(total, rng.integers(0, 40, size=(400, 4)))
    correct[rng.random((400, 4)) < 0.3] = 0  # orders without a match
    correct[rng.random(400) < 0.05] = 0  # no match at all
    sys_len = rng.integers(0, 80, size=400)
    sys_len[rng.random(400) < 0.03] = 0
    ref_len = rng.integers(1, 80, size=400)
    stats = np.column_stack([sys_len, ref_len, correct, total])  # (R, 10)
    want = np.array([I.bleu_from_stats(row) for row in stats])
    np.testing.assert_allclose(I.bleu_rows(stats), want, rtol=1e-12, atol=1e-12)
    assert (want == 0).any() and (want > 0).any()
