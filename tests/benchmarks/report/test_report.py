"""benchmarks.report on a synthetic results folder written with the record schema.

Suite ``synthetic``:

* ``toy/synth`` (acc, max): ``transformer`` (attention) seeds 0-2, ``lstm`` (rnn) seeds 0-1 with
  seed 2 in the manifest but never run (missing), ``tcn`` (cnn) seeds 0-1 plus seed 2 failed.
  The transformer is clearly best -> "better" against both (Welch: the seed sets differ).
* ``tagging/synth2`` (per, min): ``transformer`` vs ``gru`` (rnn), same seeds -> paired;
  the transformer's error is clearly higher -> "worse"; no CNN -> "no cnn baseline run".
"""

from __future__ import annotations

import argparse
import csv
import re
import struct
import zlib
from pathlib import Path

import numpy as np
import pytest

from benchmarks import report
from benchmarks.report import stats
from benchmarks.run.records import MANIFEST, record_path, write_json_atomic
from tests.helpers.records import ACC, FAILED_REASON, FAMILY, PATTERN, PER, SUITE
from tests.helpers.records import cid as _cid
from tests.helpers.records import make_record as _record

def _tiny_png() -> bytes:
    def chunk(tag: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + tag + data + struct.pack(">I", zlib.crc32(tag + data) & 0xFFFFFFFF)

    raw = b"\x00\xff\x00\x00"  # one red pixel, filter byte 0
    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", 1, 1, 8, 2, 0, 0, 0))
            + chunk(b"IDAT", zlib.compress(raw)) + chunk(b"IEND", b""))


def make_results(root: Path) -> dict:
    suite_dir = root / SUITE
    cells, written = [], []

    def add(rec):
        write_json_atomic(record_path(suite_dir, rec), rec)
        written.append(rec)

    for model, vals in ACC.items():
        for seed, v in vals.items():
            add(_record("toy", "synth", model, seed, "acc", "max", v,
                        commit="b" * 40 if (model, seed) == ("lstm", 1) else "a" * 40))
    add(_record("toy", "synth", "tcn", 2, "acc", "max", None, status="failed", reason=FAILED_REASON))
    for model, vals in PER.items():
        for seed, v in vals.items():
            add(_record("tagging", "synth2", model, seed, "per", "min", v))
    for (task, ds, models) in (("toy", "synth", ("transformer", "lstm", "tcn")), ("tagging", "synth2", ("transformer", "gru"))):
        for model in models:
            for seed in (0, 1, 2):
                cells.append({"cell_id": _cid(task, ds, model, seed), "task": task, "dataset": ds, "model": model,
                              "family": FAMILY[model], "pattern": PATTERN.get(model), "seed": seed,
                              "config": {"task": task}})
    write_json_atomic(suite_dir / MANIFEST, {"suite": SUITE, "config": {"suite": SUITE}, "cells": cells})
    bench = root / "bench" / "attention"
    write_json_atomic(bench / "bench_attention.json", {
        "benchmark": "attention", "schema_version": 1, "status": "done",
        "setup": {"device": "cpu", "dtype": "float32"}, "environment": {"device_name": "Test CPU 9000"},
        "points": [],
        "checks": [{"name": "time ours_full / sdpa @ L=1024", "value": 1.0312, "target": "<= 1.10", "pass": True},
                   {"name": "dense_masked status @ N=1000 E=5000", "value": "ok", "target": "oom (expected)",
                    "pass": None, "note": "dense attention fit in memory"}],
    })
    (bench / "bench_attention.png").write_bytes(_tiny_png())
    return {"suite_dir": suite_dir, "records": written, "missing_cell": _cid("toy", "synth", "lstm", 2),
            "failed_cell": _cid("toy", "synth", "tcn", 2)}


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    root = tmp_path_factory.mktemp("results")
    info = make_results(root)
    confusion_calls = []

    def render_confusion(ctx: report.ExtraContext):
        confusion_calls.append((ctx.task, ctx.dataset, len(ctx.items)))
        ranked = [(m.model, round(m.mean, 4)) for m in ctx.ranked]
        confusion_calls.append((ctx.metric, ctx.mode, ranked))
        return report.ExtraSection(f"CONFUSION-MD {ctx.task} {len(ctx.items)}", f"<p>CONFUSION-HTML {ctx.task}</p>")

    report.EXTRA_RENDERERS["confusion"] = render_confusion
    try:
        written = report.write_report(info["suite_dir"])
    finally:
        del report.EXTRA_RENDERERS["confusion"]
    info.update(written=written, confusion_calls=confusion_calls,
                md=(info["suite_dir"] / "REPORT.md").read_text(encoding="utf-8"),
                html=(info["suite_dir"] / "report.html").read_text(encoding="utf-8"))
    with open(info["suite_dir"] / "summary.csv", newline="", encoding="utf-8") as f:
        info["csv"] = list(csv.DictReader(f))
    return info


def test_files_written(built):
    w, d = built["written"], built["suite_dir"]
    for key in ("REPORT.md", "report.html", "summary.csv"):
        assert w[key] == d / key and w[key].is_file()
    plots = sorted(k for k in w if k.startswith("plots/"))
    assert "plots/bench_attention.png" in plots
    for stem in ("toy__synth", "tagging__synth2"):
        for kind in ("quality_vs_time", "quality_vs_params", "learning_curves"):
            assert f"plots/{stem}__{kind}.png" in plots
    for k in plots:
        assert w[k].read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_exact_means_in_markdown_and_csv(built):
    md, rows = built["md"], built["csv"]
    assert len(rows) == 5
    by = {(r["task"], r["model"]): r for r in rows}
    for task, table in (("toy", ACC), ("tagging", PER)):
        for model, vals in table.items():
            v = list(vals.values())
            exp = stats.summarize(v)
            row = by[(task, model)]
            assert float(row["mean"]) == float(np.mean(v)) == exp.mean  # exact, full precision
            assert float(row["std"]) == exp.std
            assert float(row["ci_low"]) == exp.ci_low and float(row["ci_high"]) == exp.ci_high
            assert f"{exp.mean:.4g} ± {exp.std:.4g}" in md
            assert row["family"] == FAMILY[model] and int(row["n_ok"]) == len(v)
    tcn = by[("toy", "tcn")]
    assert (tcn["n_ok"], tcn["n_failed"], tcn["n_missing"]) == ("2", "1", "0")
    lstm = by[("toy", "lstm")]
    assert (lstm["n_ok"], lstm["n_failed"], lstm["n_missing"]) == ("2", "0", "1")
    tr = by[("toy", "transformer")]
    assert tr["params"] == "120000" and float(tr["flops_per_sample"]) == 2.5e6
    assert float(tr["train_time_s_mean"]) == float(np.mean([10.0 + s + 1.2 for s in (0, 1, 2)]))
    assert float(tr["train_samples_per_s"]) == 1001.0 and float(tr["train_tokens_per_s"]) == 32000.0
    assert tr["peak_mem_bytes"] == "52000000" and tr["peak_mem_kind"] == "cpu_rss_growth"
    assert tr["pattern"] == "full" and tr["metric"] == "acc" and tr["mode"] == "max"


def test_leaderboard_order_and_units(built):
    md = built["md"]
    toy = md[md.index("## toy / synth"):md.index("## tagging")] if md.index("## toy / synth") < md.index("## tagging") \
        else md[md.index("## toy / synth"):]
    order = [toy.index(f"| {m} |") for m in ("transformer", "tcn", "lstm")]
    assert order == sorted(order)
    assert "CPU RSS growth" in toy and "49.6 MiB" in toy  # max over seeds: 52e6 bytes
    assert "32k tok/s" in toy and "120k" in toy
    tag = md[md.index("## tagging / synth2"):]
    assert tag.index("| gru |") < tag.index("| transformer |")  # per: lower is better


def test_verdicts(built):
    an = report.analyse(built["suite_dir"])
    g = {(x.task, x.dataset): x for x in an.groups}
    toy = {c.baseline_family: c for c in g[("toy", "synth")].comparisons}
    # lstm and tcn have 2 successful seeds: below 3, no verdict (issue 34)
    assert toy["rnn"].verdict == toy["cnn"].verdict == stats.TOO_FEW
    assert toy["rnn"].difference.method == "welch"  # seed sets differ (lstm seed 2 missing)
    assert toy["rnn"].difference.diff == pytest.approx(0.92 - 0.61)
    tag = {c.baseline_family: c for c in g[("tagging", "synth2")].comparisons}
    assert tag["rnn"].verdict == "worse" and tag["rnn"].difference.method == "paired"
    assert tag["cnn"].verdict is None and tag["cnn"].message == "no cnn baseline run"
    md = built["md"]
    assert "too few seeds (n=2) to compare transformer with lstm" in md
    assert "too few seeds (n=2) to compare transformer with tcn" in md
    assert "transformer is worse than gru" in md and "no cnn baseline run" in md
    overview = md[md.index("## Overview"):md.index("## toy / synth")]
    assert "| too few seeds (n=2) | too few seeds (n=2) |" in overview  # the overview states n
    assert "| worse (n=3) | no cnn baseline run |" in overview
    assert "better than" not in md


def test_warnings(built):
    md = built["md"]
    warn = md[md.index("## Warnings"):]
    assert "toy/synth/tcn seed=2" in warn and FAILED_REASON in warn and built["failed_cell"] in warn
    assert "toy/synth/lstm seed=2" in warn and built["missing_cell"] in warn
    assert "unequal numbers of successful seeds" in warn
    assert "different git commits" in warn and "bbbbbbbbbbbb" in warn
    assert "Test CPU 9000" in md and "DIFFER" in md  # environment block says the commits disagree


def test_html_self_contained(built):
    html = built["html"]
    imgs = re.findall(r"<img [^>]*>", html)
    assert len(imgs) == 7  # 3 plots x 2 groups + bench
    assert all('src="data:image/png;base64,' in i for i in imgs)
    assert not re.search(r"""(href|src)\s*=\s*["']?(https?:)?//""", html)
    assert "<script" not in html and "<link" not in html
    assert "<table>" in html and "<style>" in html
    assert "toy/synth/tcn seed=2" in html


def test_bench_section_and_extras(built):
    md = built["md"]
    assert "Attention scaling benchmark" in md and "![" in md and "plots/bench_attention.png" in md
    assert "time ours_full / sdpa @ L=1024" in md and "| PASS |" in md and "1.031" in md
    assert "CONFUSION-MD toy 7" in md and "CONFUSION-HTML toy" in built["html"]
    calls = built["confusion_calls"]
    assert sorted(c for c in calls if len(c) == 3 and isinstance(c[2], int)) == [("tagging", "synth2", 6), ("toy", "synth", 7)]
    # the renderer gets the group as the leaderboard ranks it, with its metric and direction
    assert ("acc", "max", [("transformer", 0.92), ("tcn", 0.72), ("lstm", 0.61)]) in calls
    assert ("per", "min", [("gru", 0.21), ("transformer", 0.3133)]) in calls
    assert "unknown_artefact" in md  # listed as not rendered


def test_find_bench_candidates(tmp_path):
    assert report.find_bench_attention([tmp_path / "nope", tmp_path]) is None
    (tmp_path / "b").mkdir()
    (tmp_path / "b" / "bench_attention.png").write_bytes(_tiny_png())
    found = report.find_bench_attention([tmp_path, tmp_path / "b"])
    assert found.png_path == tmp_path / "b" / "bench_attention.png" and found.json_path is None
    assert tmp_path / "bench" / "attention" in report.bench_candidate_dirs(tmp_path)


def test_empty_folder_and_cli_helper(tmp_path, capsys):
    with pytest.raises(report.ReportError):
        report.write_report(tmp_path)
    with pytest.raises(report.ReportError):
        report.write_report(tmp_path / "absent")
    # a folder with one record, n=1: CI undefined, reported as such; separate out dir
    rec = _record("toy", "synth", "transformer", 0, "acc", "max", 0.5)
    write_json_atomic(record_path(tmp_path / "s", rec), rec)
    parser = argparse.ArgumentParser()
    report.add_report_arguments(parser)
    args = parser.parse_args([str(tmp_path / "s"), "--out", str(tmp_path / "out"), "--bench-dir", str(tmp_path)])
    assert report.run_report_command(args) == 0
    md = (tmp_path / "out" / "REPORT.md").read_text(encoding="utf-8")
    assert "undefined (n=1)" in md and "no rnn baseline run" in md and "no cnn baseline run" in md
    assert "REPORT.md" in capsys.readouterr().out


def test_edge_records_are_warned_not_pooled(tmp_path):
    """NaN metric, a duplicate seed (latest kept), a record outside the manifest, an unreadable
    file; analyse() only (no plots)."""
    s = tmp_path / "s"
    write_json_atomic(s / MANIFEST, {"suite": SUITE, "cells": [
        {"cell_id": _cid("toy", "synth", m, 0), "task": "toy", "dataset": "synth", "model": m, "seed": 0}
        for m in ("transformer", "lstm")]})
    nan = _record("toy", "synth", "transformer", 0, "acc", "max", float("nan"))
    old = _record("toy", "synth", "lstm", 0, "acc", "max", 0.5, hour=9)
    new = {**_record("toy", "synth", "lstm", 0, "acc", "max", 0.55, hour=11), "cell_id": "feedfacecafe"}
    for r in (nan, old, new):
        write_json_atomic(record_path(s, r), r)
    (s / "runs" / "junk.json").write_text("{not json", encoding="utf-8")
    an = report.analyse(s)
    (g,) = an.groups
    m = {x.model: x for x in g.models}
    assert m["lstm"].values == [0.55] and m["transformer"].values == []
    assert g.comparisons[0].verdict is None and "no successful attention run" in g.comparisons[0].message
    w = an.warnings
    assert len(w["duplicates"]) == 1 and "feedfacecafe" in w["duplicates"][0]
    assert "is None" in w["no_metric"][0]  # NaN is written as null (strict JSON)
    assert "feedfacecafe" in w["stale"][0]
    assert "junk.json" in w["unreadable"][0]


def test_combined_report_of_two_slices_of_one_suite(tmp_path):
    """Two folders that ran slices of one suite (each manifest lists the whole suite) and
    share one cell: a cell no folder ran is missing once, not once per manifest, and the
    duplicate warning names each record's folder."""
    cells = [{"cell_id": _cid("toy", "synth", m, 0), "task": "toy", "dataset": "synth", "model": m, "seed": 0}
             for m in ("transformer", "lstm", "tcn")]
    a, b = tmp_path / "machine_a", tmp_path / "machine_b"
    paths = {}
    for folder, hour in ((a, 9), (b, 11)):
        write_json_atomic(folder / MANIFEST, {"suite": SUITE, "cells": cells})
        rec = _record("toy", "synth", "transformer", 0, "acc", "max", 0.5 + hour / 100, hour=hour)
        paths[folder] = record_path(folder, rec)
        write_json_atomic(paths[folder], rec)
    rec = _record("toy", "synth", "lstm", 0, "acc", "max", 0.6)
    write_json_atomic(record_path(a, rec), rec)
    an = report.analyse([a, b])
    assert len(an.warnings["missing"]) == 1 and "tcn" in an.warnings["missing"][0]
    (dup,) = an.warnings["duplicates"]
    assert str(paths[a]) in dup and dup.endswith(f"using the latest ({paths[b]})")
    (g,) = an.groups
    assert {m.model: m.values for m in g.models}["transformer"] == [0.61]  # the later-finished record
    assert "machine_a" not in report.analyse(a).warnings["missing"][0]  # one folder: paths inside it


# --------------------------------------------------------------------------- complexity bench (Table 1)
def _complexity_doc() -> dict:
    fit = lambda e, se, top: {"exponent": e, "stderr": se, "tail_exponent": top, "points": 5}  # noqa: E731
    return {
        "benchmark": "complexity", "schema_version": 1, "status": "done", "wall_time_s": 201.5,
        "setup": {"device": "cpu", "dtype": "float32", "batch": 1, "heads": 4, "window": 32, "kernel": 3,
                  "sweep_n": {"d": 128, "lengths": [128, 256]}, "sweep_d": {"n": 1024, "widths": [64, 128]},
                  "layers": {"self_attention": "MultiHeadAttention full", "lstm": "nn.LSTM"}},
        "environment": {"device_name": "Test CPU 9000", "date": "2026-11-20T10:00:00+00:00"},
        "paper": {"rows": {"self_attention": {"row": "Self-Attention", "complexity": "O(n^2·d)",
                                              "sequential": "O(1)", "path": "O(1)"},
                           "recurrent": {"row": "Recurrent", "complexity": "O(n·d^2)", "sequential": "O(n)",
                                         "path": "O(n)"}}},
        "points": [{"layer": "lstm", "n": 8192, "d": 128, "status": "oom", "sweeps": ["n"]}],
        "table": [
            {"layer": "self_attention", "paper_row": "Self-Attention", "paper_complexity": "O(n^2·d)",
             "paper_exp_n": 2.0, "paper_exp_d": 1.0, "paper_sequential": "O(1)", "paper_path": "O(1)",
             "time_exp_n": fit(1.93, 0.04, 1.97), "time_exp_d": fit(1.1, 0.1, 1.2), "mem_exp_n": fit(0.9, 0.02, 1.0),
             "mem_exp_d": None, "sequential_steps": {"64": 1, "4096": 1}, "sequential_class": "O(1)",
             "path": [{"probe": "self_attention", "best": "O(1)", "all_match": True,
                       "hops": [{"n": 8, "param": None, "hops": 1}, {"n": 128, "param": None, "hops": 1}]}]},
            {"layer": "lstm", "paper_row": "Recurrent", "paper_complexity": "O(n·d^2)", "paper_exp_n": 1.0,
             "paper_exp_d": 2.0, "paper_sequential": "O(n)", "paper_path": "O(n)",
             "time_exp_n": fit(0.97, 0.01, 0.98), "time_exp_d": None, "mem_exp_n": None, "mem_exp_d": None,
             "sequential_steps": {"64": 64, "4096": 4096}, "sequential_class": "O(n)",
             "path": [{"probe": "lstm", "best": "O(n)", "all_match": False,
                       "hops": [{"n": 8, "param": None, "hops": 7}, {"n": 128, "param": None, "hops": 127}]}]},
        ],
        "path_length": {"method": "autograd reachability", "kinds": {
            "restricted_attention": {"paper": "O(n/r)", "all_match": True,
                                     "fit": {"best": "O(n/r)", "models": {"O(1)": {"r2": None}, "O(n/r)": {"r2": 0.998}}},
                                     "points": [{"n": 8, "param": 2, "hops": 4}, {"n": 16, "param": 2, "hops": 8}]}}},
        "sequential_ops": {"method": "hooks and autograd", "layers": {
            "lstm": {"paper": "O(n)", "steps_class": "O(n)", "critical_path_class": "O(n)",
                     "points": [{"n": 64, "steps": 64, "critical_path_ops": 514}]}}},
        "checks": [{"name": "path length lstm: probe == closed form", "value": "4/5", "target": "all", "pass": False},
                   {"name": "time exponent in n: self_attention", "value": 1.93, "target": "2 (paper)", "pass": None}],
    }


def test_complexity_section(tmp_path):
    rec = _record("toy", "synth", "transformer", 0, "acc", "max", 0.5)
    write_json_atomic(record_path(tmp_path / "s", rec), rec)
    cx = tmp_path / "bench" / "complexity"
    write_json_atomic(cx / "bench_complexity.json", _complexity_doc())
    (cx / "bench_complexity.png").write_bytes(_tiny_png())
    written = report.write_report(tmp_path / "s")
    md = written["REPORT.md"].read_text(encoding="utf-8")
    html = written["report.html"].read_text(encoding="utf-8")
    assert "## Why self-attention: Table 1 measured" in md and "Why self-attention: Table 1 measured" in html
    assert "### The paper's table" in md and "| Recurrent | O(n·d^2) | O(n) | O(n) |" in md
    # side by side: the paper's column next to the measured one
    row = next(line for line in md.splitlines() if line.startswith("| self_attention | Self-Attention |"))
    assert "O(n^2·d)" in row and "1.93 ± 0.04 (top 1.97) [paper 2]" in row and "n=4096: 1" in row
    assert "self_attention: O(1); n=128: 1 hops" in row
    lstm = next(line for line in md.splitlines() if line.startswith("| lstm | Recurrent |"))
    assert "O(n) (n=64: 64, n=4096: 4096)" in lstm and "probe ≠ closed form" in lstm and "– [paper 2]" in lstm
    assert "### Memory" in md and "0.90 ± 0.02 (top 1.00)" in md
    assert "| restricted_attention | O(n/r) | O(n/r) | yes | O(1): –, O(n/r): 0.998 | r=2: 8:4 16:8 |" in md
    assert "| lstm | O(n) | O(n) | 64:64 | O(n) | 64:514 |" in md
    assert "Points not measured: lstm n=8192 d=128: oom" in md
    assert "plots/bench_complexity.png" in md and written["plots/bench_complexity.png"].is_file()
    assert "| FAIL | path length lstm: probe == closed form | 4/5 | all |" in md
    assert html.count("data:image/png;base64,") >= 2


def test_find_bench_complexity_and_unreadable_json(tmp_path):
    assert report.find_bench_complexity(report.bench_candidate_dirs(tmp_path, "complexity")) is None
    assert tmp_path / "bench" / "complexity" in report.bench_candidate_dirs(tmp_path, "complexity")
    rec = _record("toy", "synth", "transformer", 0, "acc", "max", 0.5)
    write_json_atomic(record_path(tmp_path / "s", rec), rec)
    (tmp_path / "b").mkdir()
    (tmp_path / "b" / "bench_complexity.json").write_text("{broken", encoding="utf-8")
    found = report.find_bench_complexity([tmp_path / "b"])
    assert found.json_path == tmp_path / "b" / "bench_complexity.json" and found.doc is None
    written = report.write_report(tmp_path / "s", tmp_path / "out", bench_dirs=[tmp_path / "b"])
    md = written["REPORT.md"].read_text(encoding="utf-8")
    assert "Why self-attention: Table 1 measured" in md and "bench_complexity.json: not readable as JSON" in md
    assert md.count("bench_complexity.json: not readable") == 2  # under Warnings and at the top of the Overview


def test_document_blocks_render_to_markdown_and_html(tmp_path):
    """The public document model a domain section builds with: spans, escaping, images."""
    png = tmp_path / "plots" / "p.png"
    png.parent.mkdir()
    png.write_bytes(_tiny_png())
    blocks = [report.Heading(4, "Title <x>"), report.Paragraph(["see ", report.Code("a|b"), " and ", report.Bold("c")]),
              report.Table(["h|1", "h2"], [["x|y", report.Bold("all")]]), report.Image.of(png, tmp_path, "a plot")]
    md = report.render_markdown(blocks)
    assert md == ("#### Title <x>\n\nsee `a|b` and **c**\n\n| h\\|1 | h2 |\n|---|---|\n| x\\|y | **all** |\n\n"
                  "![a plot](plots/p.png)\n")
    html = report.render_html_fragment(blocks)
    assert "<h4>Title &lt;x&gt;</h4>" in html and "<p>see <code>a|b</code> and <b>c</b></p>" in html
    assert "<td>x|y</td><td><b>all</b></td>" in html and 'alt="a plot"' in html and "base64," in html
    sec = report.ExtraSection.from_blocks(blocks)
    assert (sec.markdown, sec.html) == (md, html)


def test_group_of_ranks_records_like_the_report():
    recs = [_record("toy", "synth", model, seed, "acc", "max", v) for model, vals in ACC.items() for seed, v in vals.items()]
    g = report.group_of(recs, "acc")
    assert [m.model for m in g.ranked] == ["transformer", "tcn", "lstm"]
    assert (g.task, g.dataset, g.metric, g.mode) == ("toy", "synth", "acc", "max")
    assert [m.model for m in report.group_of(recs, "acc", "min").ranked] == ["lstm", "tcn", "transformer"]
    assert g.comparisons[0].verdict == stats.TOO_FEW  # lstm: 2 seeds
