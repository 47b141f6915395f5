"""'Does the small answer predict the big one?': verdict agreement, crossover agreement, and the
rule that every disagreement carries its reason and no agreement carries a stale one."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
import yaml

from benchmarks.report.page import PAGE_SPEC, build_page
from benchmarks.report.page_facts import PageError
from benchmarks.report.page_predicts import agreement, crossovers_agree


@pytest.mark.parametrize("small, big, want", [
    ("wins", "wins", "agree"), ("loses", "loses", "agree"), ("level (±1.00)", "level (±0.50)", "agree"),
    ("wins", "loses", "disagree"), ("level (±1.00)", "loses", "disagree"), ("wins", "level (±1.00)", "disagree"),
    ("undecided", "wins", "undecided"), ("loses", "undecided", "undecided"),
])
def test_agreement_by_direction(small, big, want):
    assert agreement(small, big) == want


def _x(at=None, low=None, high=None, better=(), worse=()):
    return SimpleNamespace(at=at, low=low, high=high, better_at=list(better), worse_at=list(worse))


def test_crossovers_agree_when_their_intervals_meet():
    assert crossovers_agree(_x(0.42, 0.34, 0.47), _x(0.45, 0.40, 0.55)) == "agree"
    assert crossovers_agree(_x(0.42, 0.34, 0.47), _x(0.70, 0.60, 0.80)) == "disagree"
    assert crossovers_agree(_x(0.42, None, 0.47), _x(0.30, None, 0.35)) == "agree"  # open below: both
    assert crossovers_agree(_x(0.42, 0.34, 0.47), _x(better=[0.1, 0.5])) == "disagree"
    assert crossovers_agree(_x(better=[1, 2]), _x(better=[3])) == "agree"
    assert crossovers_agree(_x(better=[1]), _x(worse=[3])) == "disagree"
    assert crossovers_agree(_x(), _x(better=[3])) == "undecided"


def _spec_with(tmp_path, edit) -> str:
    spec = yaml.safe_load(PAGE_SPEC.read_text(encoding="utf-8"))
    edit(spec["predicts"])
    path = tmp_path / "page.yaml"
    path.write_text(yaml.safe_dump(spec), encoding="utf-8")
    (tmp_path / "reference").symlink_to(PAGE_SPEC.parent / "reference")
    return str(path)


def test_the_committed_section_is_on_the_page():
    text = build_page(PAGE_SPEC)
    assert "## Does the small answer predict the big one?" in text
    assert "| Graphs | attention vs best CNN |" in text
    assert "| Translation | Bahdanau attention over none along sentence length (rnn_bahdanau - rnn_noattn" in text


def test_a_disagreement_without_its_reason_is_refused(tmp_path):
    def drop(predicts):
        for p in predicts:
            p.pop("reasons", None)
    with pytest.raises(PageError, match=r"disagree: give the reason as reasons\.(rnn|cnn|'cnn > other')"):
        build_page(_spec_with(tmp_path, drop))


def test_a_reason_beside_an_agreement_is_refused(tmp_path):
    def add(predicts):
        vision = next(p for p in predicts if p["domain"] == "Vision")  # attention loses to the CNN in both
        vision["reasons"] = {**(vision.get("reasons") or {}), "cnn": "stale words"}
    with pytest.raises(PageError, match=r"now agree: remove reasons\.cnn"):
        build_page(_spec_with(tmp_path, add))


@pytest.mark.parametrize("edit, needle", [
    (lambda p: p[0].update(small="quick"), "small: a mapping with folder and diagnostic expected"),
    (lambda p: p[0].update(sweep=["x"]), r"sweep: a mapping \(or a list of them\) with small and real"),
    (lambda p: p[0].update(sweep="x"), r"sweep: a mapping \(or a list of them\) with small and real"),
    (lambda p: p[0].update(reasons="because"), "reasons: a mapping"),
    (lambda p: p[0].update(headline="Nowhere"), "no headline titled 'Nowhere'"),
])
def test_a_malformed_entry_is_one_page_error(tmp_path, edit, needle):
    with pytest.raises(PageError, match=needle):
        build_page(_spec_with(tmp_path, edit))


def test_a_length_comparison_the_records_do_not_have_is_refused(tmp_path):
    def rename(predicts):
        entry = next(p for p in predicts if p["domain"] == "Translation")
        entry["sweep"][0]["real"]["length"] = "transformer - nope"
    with pytest.raises(PageError, match=r"no comparison 'transformer - nope' by length in .*translation\w* \(it has: "):
        build_page(_spec_with(tmp_path, rename))
