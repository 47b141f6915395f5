"""A mistyped config, task, dataset or model name gets the nearest valid names in its one line
(issue 45): ``... unknown model 'bilsm'; did you mean bilstm? valid: ...``."""

from __future__ import annotations

import pytest

from benchmarks.cli import main
from tasks.common.registry import UnknownNameError, get_task
from tasks.common.suggest import did_you_mean, nearest
from tests.helpers.hostile import one_error_line


def test_nearest_and_did_you_mean():
    assert nearest("bilsm", ["cnn", "bilstm", "mlp"]) == ["bilstm"]
    assert nearest("zzz", ["cnn", "bilstm"]) == []
    assert did_you_mean("zzz", ["cnn"]) == ""
    assert did_you_mean("quikc", ["quick", "graphs"]) == "did you mean quick?"
    assert did_you_mean("synthetc", ["synthetic", "synthetic_far", "ud"]) == "did you mean synthetic or synthetic_far?"


def test_a_registry_lookup_suggests_and_still_lists_the_valid_names():
    with pytest.raises(UnknownNameError) as err:
        get_task("pos_tagging").models.get("bilsm")
    msg = str(err.value)
    assert msg.startswith("unknown model of task 'pos_tagging' 'bilsm'; did you mean bilstm")
    assert "? valid: bilstm, cnn," in msg
    with pytest.raises(UnknownNameError, match=r"unknown task 'chess'; valid: "):  # nothing near: no suggestion
        get_task("chess")




@pytest.mark.parametrize("argv,expected", [
    (["run", "quikc"], "attnbench: error: config file not found: quikc; did you mean quick? (shipped configs: "),
    (["run", "benchmarks/configs/trnaslation.yaml", "--dry-run"],
     "; did you mean translation"),
    (["run", "quick", "--dry-run", "--set", "cells=[{task: pos_taging, dataset: synthetic}]"],
     "cells[0].task: unknown task 'pos_taging'; did you mean pos_tagging? valid: graphs, pos_tagging,"),
    (["run", "quick", "--dry-run", "--set", "cells=[{task: pos_tagging, dataset: synthetc}]"],
     "cells[0].dataset: unknown dataset of task 'pos_tagging' 'synthetc'; did you mean synthetic or synthetic_far? "
     "valid: synthetic, synthetic_far, ud"),
    (["run", "quick", "--dry-run", "--set", "cells=[{task: pos_tagging, dataset: ud, models: [bilsm]}]"],
     "cells[0].models: unknown model of task 'pos_tagging' 'bilsm'; did you mean bilstm"),
    (["data", "vison_gpu"], "config file not found: vison_gpu; did you mean vision_gpu"),
])
def test_bad_names_get_the_nearest_valid_ones_in_one_line(argv, expected, capsys):
    assert main(argv) == 2
    assert expected in one_error_line(capsys)
