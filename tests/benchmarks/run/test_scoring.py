"""Extra test sets, kept weights and ``attnbench eval`` (issue 16: trained models are kept and
re-usable), end to end on a tiny real suite."""

from __future__ import annotations

import json
import pickle

import pytest
import torch

from benchmarks.run import records as R
from benchmarks.run import scoring as S
from benchmarks.cli import main
from benchmarks.config.schema import ConfigError
from benchmarks.config.suite import expand, load_suite
from tests.helpers.suites import config_text, run_config

TINY = config_text("scored.yaml")


@pytest.fixture(scope="module")
def scored(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("scored")
    code, out, cfg = run_config(tmp, TINY, "--keep-checkpoints", "--launcher", "inline", "--no-report")
    (rec_path,) = list(R.iter_record_files(out))
    return code, out, cfg, rec_path, tmp / "cache"


def _load(path):
    return json.loads(path.read_text())


def test_cell_scores_each_test_set_and_keeps_its_weights(scored):
    code, out, _, path, _ = scored
    assert code == 0
    rec = _load(path)
    assert rec["status"] == "ok"
    more = rec["test_sets"]["more"]
    assert more["params"] == {"num_test": 90} and more["by"] == "run" and 0 <= more["metrics"]["acc"] <= 1
    assert more["data"]["num_test"] == 90 and "error" not in more
    # a "test set" that changes the training data is refused, stored with its reason; the cell stands
    assert "changes the data the model was trained on" in rec["test_sets"]["other_train"]["error"]
    ck = rec["checkpoint"]
    weights = S.weights_path(path)
    assert ck["file"] == weights.name and weights.is_file() and ck["bytes"] == weights.stat().st_size
    obj = torch.load(weights, weights_only=True)  # loadable without running any code
    assert obj["format"] == S.WEIGHTS_FORMAT and obj["cell_id"] == rec["cell_id"]
    assert rec["data"]["info"]["num_train"] == 160 and "num_test" not in rec["data"]["info"]


def test_eval_reproduces_the_run_time_score_from_the_kept_weights(scored, capsys):
    _, out, _, path, cache = scored
    assert main(["eval", str(out), "--dataset-params", "num_test=90", "--name", "again",
                 "--cache-dir", str(cache)]) == 0
    rec = _load(path)
    # the kept weights are the best-validation weights the cell tested: same data, same number
    assert rec["test_sets"]["again"]["metrics"]["acc"] == pytest.approx(rec["test_sets"]["more"]["metrics"]["acc"], abs=1e-9)
    assert rec["test_sets"]["again"]["by"] == "eval"
    report = (out / "REPORT.md").read_text()
    assert "### Test sets" in report and "again: acc" in report and "more: acc" in report
    capsys.readouterr()
    assert main(["eval", str(out), "--dataset-params", "num_test=90", "--name", "again", "--cache-dir", str(cache),
                 "--no-report"]) == 0
    assert "scored 0, skipped 1" in capsys.readouterr().out


@pytest.mark.parametrize("argv,message", [
    (["--dataset-params", "nosuch=1"], "unknown key '--dataset-params (dataset pos_tagging/synthetic).nosuch'"),
    (["--dataset-params", "num_test=0"], "num_test=0 is invalid: expected an integer >= 1"),
    (["--dataset-params", "num_test=40"], "it changes nothing"),
    (["--dataset-params", "num_test"], "expected KEY=VALUE"),
    (["--dataset-params", "num_test=50", "--model", "transformer"], "no finished cell of the selection kept its weights"),
])
def test_eval_refuses_bad_arguments_in_one_line(scored, capsys, argv, message):
    _, out, *_ = scored
    assert main(["eval", str(out), *argv]) == 2
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err


def test_eval_refuses_tampered_weights_and_fails_that_cell_only(scored, tmp_path, capsys):
    _, out, _, path, cache = scored
    weights = S.weights_path(path)
    good = weights.read_bytes()
    try:
        weights.write_bytes(good[:-10] + b"0123456789")
        assert main(["eval", str(out), "--dataset-params", "num_test=70", "--cache-dir", str(cache), "--no-report"]) == 1
        assert "sha256 differs" in capsys.readouterr().out
        assert "70" not in _load(path)["test_sets"]
    finally:
        weights.write_bytes(good)


def test_load_weights_runs_no_code(tmp_path):
    class Evil:
        def __reduce__(self):
            return (print, ("pwned",))

    bad = tmp_path / "w.pt"
    bad.write_bytes(pickle.dumps({"format": S.WEIGHTS_FORMAT, "state_dict": {}, "x": Evil()}))
    with pytest.raises(S.TestSetError, match="not loadable as weights only"):
        S.load_weights(bad)
    torch.save({"state_dict": {}}, tmp_path / "other.pt")
    with pytest.raises(S.TestSetError, match="not an attnbench weights file"):
        S.load_weights(tmp_path / "other.pt")
    with pytest.raises(S.TestSetError, match="no kept weights"):
        S.load_weights(tmp_path / "missing.pt")


def test_check_same_training_data_names_what_changed():
    S.check_same_training_data("a", {"num_train": 5, "num_test": 3, "max_frames": 9}, {"num_train": 5, "num_test": 7})
    with pytest.raises(S.TestSetError, match=r"test set 'b' changes .*num_words \(10 -> 12\)"):
        S.check_same_training_data("b", {"num_words": 10}, {"num_words": 12})


def _suite(tmp_path, test_sets: str):
    cfg = tmp_path / "s.yaml"
    cfg.write_text(TINY.split("    test_sets:")[0] + test_sets)
    return cfg


@pytest.mark.parametrize("block,message", [
    ("    test_sets: [1]\n", "expected a mapping {name: {dataset param: value}}"),
    ("    test_sets: {test: {num_test: 5}}\n", "test set name 'test' is invalid"),
    ("    test_sets: {'a b': {num_test: 5}}\n", "test set name 'a b' is invalid"),
    ("    test_sets: {x: {}}\n", "expected a non-empty mapping"),
    ("    test_sets: {x: {nosuch: 1}}\n", "unknown key 'cells[0].test_sets.x.nosuch'"),
    ("    test_sets: {x: {num_test: 40}}\n", "it changes nothing"),
])
def test_test_sets_are_validated_before_anything_runs(tmp_path, block, message):
    with pytest.raises(ConfigError, match=None) as err:
        load_suite(_suite(tmp_path, block))
    assert message in str(err.value)


def test_test_sets_enter_the_cell_config_only_when_given(tmp_path):
    plain = expand(load_suite(_suite(tmp_path, "")))[0]
    extra = expand(load_suite(_suite(tmp_path, "    test_sets: {x: {num_test: 50}}\n")))[0]
    assert "test_sets" not in plain.config and extra.config["test_sets"] == {"x": {"num_test": 50}}
    assert plain.cell_id != extra.cell_id
