"""The report tells the truth about itself (issue 34 item 1, issue 33 item 5): every failed
micro-benchmark check and every warning a benchmark stored reaches the Warnings section and the
top of the Overview; expected outcomes read as passes; broken inputs are warnings naming the
file, never an exception; text from configs and records is escaped in report.html."""

from __future__ import annotations

from pathlib import Path

from benchmarks import report
from benchmarks.run.records import MANIFEST, record_path, write_json_atomic
from tests.helpers.records import SUITE, make_record

BUSY = "machine busy at start: load average 1.75 on 2 cores"
FAILED_CHECK = "time ours_graph / pyg_transformerconv @ N=5000 E=50000"


def _suite(root: Path, *, description: str = "a suite", reason: str = "boom") -> Path:
    """A suite folder: 3 seeds of two models (one seed failed with ``reason``), its manifest,
    and an attention benchmark with a failed check, a busy-machine warning and an OOM check
    that does not apply at the sizes measured."""
    d = root / SUITE
    cells = []
    for model, vals in (("transformer", (0.9, 0.91, 0.92)), ("lstm", (0.6, 0.62, 0.61))):
        for seed, v in enumerate(vals):
            rec = make_record("toy", "synth", model, seed, "acc", "max", v)
            write_json_atomic(record_path(d, rec), rec)
            cells.append({"cell_id": rec["cell_id"], "task": "toy", "dataset": "synth", "model": model, "seed": seed})
    bad = make_record("toy", "synth", "transformer", 3, "acc", "max", None, status="failed", reason=reason)
    write_json_atomic(record_path(d, bad), bad)
    cells.append({"cell_id": bad["cell_id"], "task": "toy", "dataset": "synth", "model": "transformer", "seed": 3})
    write_json_atomic(d / MANIFEST, {"suite": SUITE, "config": {"suite": SUITE, "description": description},
                                     "cells": cells})
    write_json_atomic(d / "bench" / "attention" / "bench_attention.json", {
        "benchmark": "attention", "status": "done", "warnings": [BUSY], "points": [],
        "checks": [
            {"name": FAILED_CHECK, "value": 1.056, "target": "<= 1.0", "pass": False},
            {"name": "time ours_full / sdpa @ L=1024", "value": 1.01, "target": "<= 1.10", "pass": True},
            {"name": "dense_masked status @ N=5000 E=50000", "value": "ok", "target": "oom (expected)", "pass": None,
             "note": "dense attention fit in memory at this size"},
        ]})
    return d


def test_failed_checks_and_stored_warnings_reach_warnings_and_overview(tmp_path):
    d = _suite(tmp_path)
    md = report.write_report(d)["REPORT.md"].read_text(encoding="utf-8")
    warn = md[md.index("## Warnings"):]
    top = md[md.index("## Overview"):md.index("## toy / synth")]
    assert "None." not in warn
    for part in (warn, top):
        assert f"FAIL {FAILED_CHECK}: 1.056 (target <= 1.0)" in part
        assert BUSY in part
    assert "### Failed micro-benchmark checks (1)" in warn and "### Micro-benchmark warnings (1)" in warn
    assert warn.index("### Failed micro-benchmark checks") == warn.index("### ")  # listed first
    assert top.index("warning(s)") < top.index("| task / dataset |")  # at the top, before the table
    # the check table: a target that does not apply at this size is not a failure, nor bare "info"
    assert "| not applicable | dense_masked status @ N=5000 E=50000 | ok | oom (expected) |" in md
    assert "| PASS | time ours_full / sdpa" in md and f"| FAIL | {FAILED_CHECK}" in md
    # what attnbench run needs to exit 1 on a failed check
    lines = report.failed_checks(d)
    assert len(lines) == 1 and FAILED_CHECK in lines[0] and "bench_attention.json" in lines[0]


def test_no_failed_check_no_warning(tmp_path):
    d = _suite(tmp_path)
    p = d / "bench" / "attention" / "bench_attention.json"
    doc = __import__("json").loads(p.read_text())
    doc["checks"][0]["pass"], doc["warnings"] = True, []
    write_json_atomic(p, doc)
    assert report.failed_checks(d) == []
    md = report.write_report(d)["REPORT.md"].read_text(encoding="utf-8")
    assert "Failed micro-benchmark checks" not in md and "Micro-benchmark warnings" not in md


def test_time_capped_models_are_a_warning(tmp_path):
    d = _suite(tmp_path)
    rec = make_record("toy", "synth", "lstm", 0, "acc", "max", 0.6)
    rec["stop"] = {"reason": "time_cap", "epochs": 4, "max_epochs": 10, "time_cap_s": 30}
    write_json_atomic(record_path(d, rec), rec)
    md = report.write_report(d)["REPORT.md"].read_text(encoding="utf-8")
    warn = md[md.index("## Warnings"):]
    assert "### Training ended by the time cap (1)" in warn and "lstm: 1 of 3 seed(s) at epoch 4 of 10" in warn


def test_broken_inputs_are_warnings_naming_the_file(tmp_path):
    d = _suite(tmp_path)
    wrong = make_record("toy", "synth", "lstm", 7, "acc", "max", 0.5)
    wrong.update(cost=[1, 2], env="x")
    p_wrong = record_path(d, wrong)
    write_json_atomic(p_wrong, wrong)
    typed = make_record("toy", "synth", "lstm", 8, "acc", "max", 0.5)
    typed["metric"] = {"name": ["acc"], "mode": "max"}
    p_typed = record_path(d, typed)
    write_json_atomic(p_typed, typed)
    foreign = {**make_record("toy", "synth", "lstm", 9, "acc", "max", 0.99), "suite": "another"}
    p_foreign = record_path(d, foreign)
    write_json_atomic(p_foreign, foreign)
    nested = d / "old" / MANIFEST
    nested.parent.mkdir()
    nested.write_text('{"suite": "synthetic", "cells": {"not": "a list"}}', encoding="utf-8")
    (d / "runs" / "garbage.json").write_text("{not json", encoding="utf-8")

    written = report.write_report(d)
    md = written["REPORT.md"].read_text(encoding="utf-8")
    warn = md[md.index("## Warnings"):]
    assert f"{p_wrong}: field 'cost' is a list ([1, 2]), expected an object; left out of the report" in warn
    assert f"{p_typed}: field 'metric.name' is a list" in warn
    assert f"{p_foreign}: a record of suite 'another' in the folder of suite(s) synthetic" in warn
    assert f"{nested}: field 'cells' is an object, expected a list" in warn
    assert "garbage.json" in warn
    # the report stands on the good records: the three seeds of each model, the leaderboard as before
    an = report.analyse(d)
    (g,) = an.groups
    assert {m.model: len(m.values) for m in g.models} == {"transformer": 3, "lstm": 3}
    assert "0.99" not in md.split("## Warnings")[0]
    assert "Traceback" not in md and "TypeError" not in md and "AttributeError" not in md


def test_nothing_usable_is_one_clear_error(tmp_path):
    d = tmp_path / "s"
    rec = {**make_record("toy", "synth", "lstm", 0, "acc", "max", 0.5), "test": "high"}
    write_json_atomic(record_path(d, rec), rec)
    try:
        report.write_report(d)
    except report.ReportError as err:
        msg = str(err)
    else:
        raise AssertionError("expected a ReportError")
    assert "no attnbench result records" in msg and "field 'test' is a string ('high')" in msg
    assert "\n" not in msg


def test_text_from_configs_and_records_is_escaped_in_html(tmp_path):
    d = _suite(tmp_path, description="<script>alert('desc')</script>", reason="<script>alert('reason')</script>")
    html = report.write_report(d)["report.html"].read_text(encoding="utf-8")
    assert "<script" not in html
    assert "&lt;script&gt;alert(&#x27;desc&#x27;)&lt;/script&gt;" in html
    assert "&lt;script&gt;alert(&#x27;reason&#x27;)&lt;/script&gt;" in html


def _wrong(value):
    return "text" if isinstance(value, (list, dict)) else ["a", "list"]


FIELDS = sorted(report.inputs.RECORD_FIELDS)
NESTED = [("cost", {"params": "many"}), ("test", {"acc": "high"}), ("metric", {"name": ["acc"], "mode": "max"}),
          ("curve", ["x"]), ("env", {"fingerprint": "fast", "git_commit": 5, "date": 3}),
          ("data", {"info": 5, "checksum": ["x"], "max_len": "long"}), ("stop", {"reason": 5, "epochs": "x"}),
          ("resources", {"cells_sharing_device": "two"}), ("extras", {"confusion": "x"}),
          ("config", {"model_params": "x", "trainer": 5}), ("test_sets", {"other": "x"})]


def test_any_field_of_the_wrong_type_is_a_warning_never_an_exception(tmp_path):
    """Every top-level field of the wrong type, and nested fields of the wrong type, in one folder:
    the report is written, each bad file named; none of it raises."""
    d = _suite(tmp_path)
    bad_paths = []
    for i, key in enumerate(FIELDS):
        rec = make_record("toy", "synth", "lstm", 100 + i, "acc", "max", 0.5)
        bad_paths.append(record_path(d, rec))  # where the good record would lie
        rec[key] = _wrong(rec.get(key))
        write_json_atomic(bad_paths[-1], rec)
    for i, (key, value) in enumerate(NESTED):
        rec = make_record("toy", "synth", "transformer", 200 + i, "acc", "max", 0.5)
        rec[key] = value
        write_json_atomic(record_path(d, rec), rec)
    md = report.write_report(d)["REPORT.md"].read_text(encoding="utf-8")
    for p in bad_paths:
        assert str(p) in md


def test_check_results_read_as_what_they_are():
    assert report.check_result({"pass": True, "target": "oom (expected)", "value": "oom"}) == "PASS"
    assert report.check_result({"pass": None, "target": "oom (expected)", "value": "ok"}) == "not applicable"
    assert report.check_result({"pass": None, "target": "2 (paper)"}) == "info"
    assert report.check_result({"pass": None, "target": "info"}) == "info"
    assert report.check_result({"pass": False, "target": "<= 1.0"}) == "FAIL"
