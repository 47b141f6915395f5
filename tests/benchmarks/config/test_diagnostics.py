"""A suite's ``diagnostics:`` and the cells' ``diagnostic:`` tags are checked before any cell
runs: every bad name, relation or side is one line naming the key and the valid choices.
Calls benchmarks.config.suite directly: no training."""

from __future__ import annotations

import pytest

from benchmarks.config.diagnostics import parse_expectation
from benchmarks.config.schema import ConfigError
from benchmarks.config.suite import expand, validate_suite


def _suite(expect, tag="neighbours", diagnostics=None, margin=0.02):
    body = {"tests": "labels follow the neighbours", "why": "message passing", "expect": expect, "margin": margin}
    return {"suite": "t", "seeds": 3, "trainer": {"max_epochs": 2, "accelerator": "cpu"},
            "diagnostics": {"neighbours": body} if diagnostics is None else diagnostics,
            "cells": [{"task": "graphs", "dataset": "sbm", "diagnostic": tag, "models": ["graph_attention", "gcn", "mlp"]}]}


def _problems(cfg) -> list[str]:
    with pytest.raises(ConfigError) as err:
        validate_suite(cfg, source="s.yaml")
    return err.value.problems


def test_valid_diagnostic_tags_the_cells():
    cfg = validate_suite(_suite(["attention > other", "gcn ~ graph_attention", "mlp < cnn"]), source="s.yaml")
    cells = expand(cfg)
    assert {c.config["diagnostic"] for c in cells} == {"neighbours"}
    assert cfg["diagnostics"]["neighbours"]["title"] == ""  # defaults filled in
    untagged = _suite([])
    del untagged["cells"][0]["diagnostic"], untagged["diagnostics"]
    ids_untagged = {c.cell_id for c in expand(validate_suite(untagged, source="s.yaml"))}
    assert ids_untagged.isdisjoint(c.cell_id for c in cells)  # the tag is part of the cell ids
    assert all("diagnostic" not in c.config for c in expand(validate_suite(untagged, source="s.yaml")))
    other = validate_suite(_suite(["attention > other", "gcn ~ graph_attention", "mlp < cnn"], margin=0.05), source="s.yaml")
    assert {c.cell_id for c in expand(other)} == {c.cell_id for c in cells}  # a margin is no part of the cell ids


@pytest.mark.parametrize("margin, needle", [
    (None, "diagnostics.neighbours.expect[1]='gcn ~ graph_attention' needs diagnostics.neighbours.margin"),
    (0.0, "diagnostics.neighbours.margin=0.0 is invalid"),
    ("x", "diagnostics.neighbours.margin='x' is invalid"),
])
def test_a_level_expectation_needs_a_positive_margin(margin, needle):
    problems = _problems(_suite(["attention > other", "gcn ~ graph_attention"], margin=margin))
    assert any(needle in p for p in problems), problems
    assert not any("cells[0].diagnostic" in p for p in problems), problems  # no echo of the bad body


@pytest.mark.parametrize("expect, needles", [
    (["attention >> other"], ["expect[0]='attention >> other' is invalid", "REL one of >, <, ~"]),
    (["attention"], ["expect[0]='attention' is invalid"]),
    (["gcn > gcn"], ["compares 'gcn' with itself"]),
    (["rnn > cnn"], ["'rnn' is neither a family nor a model", "valid: families attention, cnn, other; models "
                                                                 "graph_attention, gcn, mlp"]),
    (["attention > bilstm"], ["'bilstm' is neither a family nor a model"]),
])
def test_bad_expectations(expect, needles):
    problems = _problems(_suite(expect))
    assert len(problems) == 1, problems
    line = problems[0]
    assert "\n" not in line and line.startswith("s.yaml: diagnostics.neighbours.expect[0]")
    for n in needles:
        assert n in line


def test_unknown_tag_lists_the_defined_ones():
    problems = _problems(_suite(["attention > other"], tag="neighbors"))
    assert any("cells[0].diagnostic='neighbors' is invalid: expected one of neighbours" in p for p in problems)
    assert len(problems) == 1, problems  # no echo: "neighbours: no cell runs it"


def test_diagnostic_without_cells_and_missing_keys():
    diags = {"neighbours": {"tests": "a", "why": "b"}, "orphan": {"tests": "a", "why": "b"},
             "bare": {"expect": []}}
    problems = _problems(_suite([], diagnostics=diags))
    assert any("diagnostics.orphan: no cell runs it" in p for p in problems)
    assert any("diagnostics.bare" in p and "tests" in p for p in problems)


def test_not_a_mapping():
    problems = _problems(_suite([], diagnostics=["a > b"]))
    assert any("diagnostics=['a > b'] is invalid: expected a mapping" in p for p in problems)


def test_parse_expectation_spacing():
    e = parse_expectation("  attention>cnn ", "x", "s")
    assert (e.left, e.rel, e.right, e.text) == ("attention", ">", "cnn", "attention > cnn")


def test_no_cascade_after_an_earlier_problem():
    cfg = _suite(["attention > other"])
    cfg["seeds"] = 0
    problems = _problems(cfg)
    assert len(problems) == 1 and "seeds=0 is invalid" in problems[0], problems
