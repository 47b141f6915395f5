"""``attnbench run CONFIG --tasks T1,T2``: a slice of a suite with the whole suite's cell ids."""

from __future__ import annotations

import re

from benchmarks.cli import main


def _listed(capsys, *args: str) -> dict[str, str]:
    assert main(["run", "quick", "--dry-run", *args]) == 0
    lines = [ln for ln in capsys.readouterr().out.splitlines()[1:] if re.match(r"^  [0-9a-f]{12}  ", ln)]
    return {line.split()[0]: line.split()[1] for line in lines}  # id -> task/dataset/model seed (the plan after them left out)


def test_a_slice_has_the_whole_suites_ids_for_its_tasks(capsys):
    whole = _listed(capsys)
    part = _listed(capsys, "--tasks", "graphs,speech")
    assert part and {label.split("/")[0] for label in part.values()} == {"graphs", "speech"}
    assert part == {cid: label for cid, label in whole.items() if label.split("/")[0] in ("graphs", "speech")}


def test_an_empty_task_list_is_one_line(capsys):
    assert main(["run", "quick", "--dry-run", "--tasks", " , "]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == ["attnbench: error: --tasks ' , ': expected task names separated by commas, e.g. graphs,pos_tagging; "
                   "suite 'quick' has: graphs, pos_tagging, translation, speech, vision"]


def test_a_task_the_suite_lacks_is_one_line(capsys):
    assert main(["run", "quick", "--dry-run", "--tasks", "graphs,audio"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == ["attnbench: error: --tasks 'graphs,audio': audio not in suite 'quick'; its tasks: graphs, "
                   "pos_tagging, translation, speech, vision"]
