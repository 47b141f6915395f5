"""The tests behind the verdicts (issue 51 item 2): p-values that agree with the intervals, zero-width
intervals that never decide, TOST within a margin, Holm over the family, and the family's best model
chosen on validation -- each on fresh random inputs against the plain definition."""

from __future__ import annotations

import json

import numpy as np
import pytest
from scipy import stats as st

from benchmarks import report
from benchmarks.report import stats
from benchmarks.report.analysis import best_of, val_mean
from benchmarks.report.diagnostics import CONTRADICTED, MATCHED, NOT_SIGNIFICANT
from benchmarks.report.results import Group, ModelResult
from benchmarks.report.tests_of import difference_p, equivalence_p, holm
from benchmarks.run.records import MANIFEST, record_path, write_json_atomic
from tests.helpers.records import SUITE, cid, make_record


@pytest.mark.parametrize("seed", range(20))
def test_p_values_agree_with_the_intervals(seed):
    rng = np.random.default_rng(1000 + seed)
    n = int(rng.integers(3, 9))
    a = rng.normal(0.8, 0.03, n)
    b = a - rng.normal(rng.uniform(-0.03, 0.03), 0.02, n)
    seeds = list(range(n))
    paired = stats.compare(a, b, seeds, seeds)
    assert paired.p == pytest.approx(st.ttest_rel(a, b).pvalue) and paired.test == "paired t-test"
    assert (paired.p < 0.05) == (paired.ci_low > 0 or paired.ci_high < 0)
    welch = stats.compare(a, b[:-1], seeds, seeds[:-1])
    assert welch.p == pytest.approx(st.ttest_ind(a, b[:-1], equal_var=False).pvalue)
    assert (welch.p < 0.05) == (welch.ci_low > 0 or welch.ci_high < 0)


def test_identical_seeds_never_decide_a_verdict():
    """The committed quick report said 'worse ... every seed gives the same difference (n=3)':
    2 of 144 utterances on each seed. The exact sign-flip test gives p = 0.25."""
    a, b = [0.9722, 0.9653, 0.9792], [0.9861, 0.9792, 0.9931]  # b - a = 2/144 on every seed
    d = stats.compare(a, b, [0, 1, 2], [0, 1, 2])
    assert d.identical and d.p == pytest.approx(0.25) and "sign-flip" in d.test
    assert stats.verdict(d, "max") == stats.NO_DIFFERENCE
    seven = stats.compare([x + 0.01 for x in range(7)], list(range(7)), list(range(7)), list(range(7)))
    assert seven.p == pytest.approx(2 / 2**7) and stats.verdict(seven, "max") == stats.BETTER
    flat = stats.compare([0.5] * 3, [0.4] * 4, [0, 1, 2], [0, 1, 2, 3])  # no spread, unpaired
    assert flat.p == pytest.approx(1 / 35 * 2, rel=1e-6) or flat.p >= 0.05
    assert stats.verdict(flat, "max") == (stats.BETTER if flat.p < 0.05 else stats.NO_DIFFERENCE)


@pytest.mark.parametrize("seed", range(20))
def test_tost_is_the_90_percent_interval_inside_the_margin(seed):
    from statsmodels.stats.weightstats import ttost_paired

    rng = np.random.default_rng(seed)
    n, margin = int(rng.integers(3, 10)), 0.02
    a = rng.normal(0.9, 0.02, n)
    b = a - rng.normal(rng.uniform(-0.03, 0.03), 0.01, n)
    p, test = equivalence_p(a, b, margin, list(range(n)), list(range(n)))
    assert test == "TOST, paired t-tests" and p == pytest.approx(ttost_paired(a, b, -margin, margin)[0])
    d = stats.paired_difference(a, b, confidence=0.90)
    assert (p < 0.05) == (-margin < d.ci_low and d.ci_high < margin)


def test_tost_with_zero_spread_is_exact_and_undecided_at_three_seeds():
    p, test = equivalence_p([0.9, 0.8, 0.7], [0.9, 0.8, 0.7], 0.05, [0, 1, 2], [0, 1, 2])
    assert p == pytest.approx(0.125) and "exact" in test  # 1/2^3: no three seeds are proof
    with pytest.raises(ValueError):
        equivalence_p([1, 2], [1, 2], 0.0)


def test_holm_against_its_definition():
    rng = np.random.default_rng(7)
    for _ in range(20):
        ps = list(rng.uniform(0, 0.2, int(rng.integers(1, 15))))
        m, order = len(ps), np.argsort(ps)
        want, running = [0.0] * m, 0.0
        for rank, i in enumerate(order):
            running = max(running, min(1.0, (m - rank) * ps[i]))
            want[i] = running
        assert holm(ps) == pytest.approx(want)
    assert holm([None, 0.01]) == [None, 0.01]


def test_holm_does_not_scan_the_callers_heap():
    """statsmodels' Holm runs a full gc.collect(): in a process that froze nothing (the CLI), the
    objects alive before the call are frozen out of it (an old cycle survives it) and the freeze is
    undone afterwards; a process's own freeze (the test workers') is left as it was."""
    import gc
    import weakref

    class Node:
        pass

    outer = gc.get_freeze_count()
    gc.unfreeze()  # as the CLI runs it
    gc.disable()
    try:
        holm([0.5])
        assert gc.get_freeze_count() == 0
        a, b = Node(), Node()
        a.other, b.other = b, a
        old = weakref.ref(a)
        del a, b  # garbage only a full collection can free
        assert holm([0.01, 0.04]) == pytest.approx([0.02, 0.04])
        assert old() is not None and gc.get_freeze_count() == 0
        gc.collect()
        assert old() is None
        gc.freeze()  # a freeze of the caller's own stays
        holm([0.5])
        assert gc.get_freeze_count() > 0
    finally:
        gc.enable()
        if not outer:
            gc.unfreeze()


def _group(models: dict[str, tuple[list[float], list[float]]]) -> Group:
    """A ranked group of toy models: name -> (test values, validation values)."""
    out = []
    for name, (test, val) in models.items():
        m = ModelResult(SUITE, "toy", "synth", name, "attention" if name != "lstm" else "rnn", None)
        m.ok = [{"best_val": {"value": v}} for v in val]
        m.values, m.seeds = list(test), list(range(len(test)))
        m.summary = stats.summarize(test)
        out.append(m)
    out.sort(key=lambda m: -m.mean)
    return Group(SUITE, "toy", "synth", "acc", "max", out)


def test_the_best_of_a_family_is_chosen_on_validation():
    g = _group({"transformer": ([0.80, 0.81, 0.82], [0.70, 0.71, 0.72]),  # best on test
                "tcn": ([0.78, 0.79, 0.80], [0.75, 0.76, 0.77]),          # best on validation
                "lstm": ([0.5, 0.5, 0.5], [0.5, 0.5, 0.5])})
    assert g.models[0].model == "transformer" and val_mean(g.models[1]) == pytest.approx(0.76)
    assert best_of(g, "attention").model == "tcn"
    g.models[1].ok[0] = {}  # a record without a validation score: by test, as before
    assert best_of(g, "attention").model == "transformer"


def _diag(root, values, expect, margin):
    suite_dir = root / SUITE
    cells = []
    for model, vals in values.items():
        for seed, v in enumerate(vals):
            rec = make_record("toy", "synth", model, seed, "acc", "max", v)
            rec["config"]["diagnostic"] = "d"
            write_json_atomic(record_path(suite_dir, rec), rec)
            cells.append({"cell_id": cid("toy", "synth", model, seed), "task": "toy", "dataset": "synth",
                          "model": model, "family": rec["family"], "seed": seed, "config": rec["config"]})
    body = {"title": "D", "tests": "t.", "why": "w.", "expect": expect, "margin": margin}
    write_json_atomic(suite_dir / MANIFEST, {"suite": SUITE, "cells": cells,
                                             "config": {"suite": SUITE, "diagnostics": {"d": body}}})
    report.write_report(suite_dir)
    return {r["expect"]: r for r in json.loads((suite_dir / "diagnostics.json").read_text(encoding="utf-8"))}


def test_level_is_decided_by_the_margin_not_by_an_interval_holding_zero(tmp_path):
    # a tight, consistent gap of 1.8 points: 'different' by the interval, level within +-3 points
    tight = {"transformer": [0.883, 0.881, 0.885], "tcn": [0.901, 0.899, 0.904]}
    rows = _diag(tmp_path / "a", tight, ["attention ~ cnn"], 0.03)
    assert rows["attention ~ cnn"]["outcome"] == MATCHED and rows["attention ~ cnn"]["margin"] == 0.03
    assert rows["attention ~ cnn"]["ci_high"] < 0 and rows["attention ~ cnn"]["test"] == "TOST, paired t-tests"
    # the same gap against a margin of 1 point: significantly different
    assert _diag(tmp_path / "b", tight, ["attention ~ cnn"], 0.01)["attention ~ cnn"]["outcome"] == CONTRADICTED
    # a noisy pair: its interval holds 0 (the old rule matched it), but nothing shows it level
    noisy = {"transformer": [0.70, 0.90, 0.80], "tcn": [0.85, 0.72, 0.83]}
    assert _diag(tmp_path / "c", noisy, ["attention ~ cnn"], 0.03)["attention ~ cnn"]["outcome"] == NOT_SIGNIFICANT


def test_holm_can_undo_a_raw_match(tmp_path):
    # four expectations, each with a raw p just under 0.05: none survives Holm over the family
    vals = {"transformer": [0.80, 0.83, 0.86, 0.90], "lstm": [0.78, 0.78, 0.84, 0.85], "tcn": [0.77, 0.79, 0.83, 0.86]}
    rows = _diag(tmp_path, vals, ["attention > rnn", "attention > cnn", "transformer > lstm", "transformer > tcn"], 0.02)
    raw = [r for r in rows.values() if r["outcome"] == MATCHED and r["p"] < 0.05]
    assert raw and all(r["p_holm"] >= r["p"] for r in rows.values())
    assert any(r["outcome_holm"] == NOT_SIGNIFICANT for r in raw), {k: (r["p"], r["p_holm"]) for k, r in rows.items()}
