"""The report's "Attention variants across domains" section, from records only."""

from __future__ import annotations

import pytest

from benchmarks import report
from benchmarks.run.records import record_path, write_json_atomic
from benchmarks.report.variants import spearman
from tests.helpers.records import cid as _cid
from tests.helpers.records import make_record as _record

# two domains, acc (max): per pattern (model) the accuracies of seeds 0-2
RUNS = {
    ("toy", "synth"): {"full": (0.90, 0.91, 0.92), "performer": (0.95, 0.96, 0.97), "linear": (0.80, 0.81, 0.82),
                       "nystrom": (0.70, 0.71, 0.72)},
    ("tagging", "synth2"): {"full": (0.60, 0.61, 0.62), "performer": (0.75, 0.76, 0.77), "linear": (0.50, 0.52, 0.54),
                            "nystrom": (0.65, 0.66, 0.67)},
}


def _write(root, runs) -> None:
    for (task, ds), patterns in runs.items():
        for pattern, vals in patterns.items():
            for seed, v in enumerate(vals):
                rec = _record(task, ds, "transformer", seed, "acc", "max", v)
                model = f"transformer_{pattern}"
                rec.update(model=model, pattern=pattern, cell_id=_cid(task, ds, model, seed))
                rec["cost"]["train_time_s"] = 100.0 if pattern == "full" else 50.0
                write_json_atomic(record_path(root / "variants", rec), rec)


def test_spearman():
    assert spearman({"a": 1, "b": 2, "c": 3}, {"a": 1, "b": 2, "c": 3}) == (1.0, 3)
    assert spearman({"a": 1, "b": 2, "c": 3}, {"a": 3, "b": 2, "c": 1}) == (-1.0, 3)
    assert spearman({"a": 1, "b": 2, "x": 3}, {"a": 1, "b": 2, "y": 3}) == (None, 2)
    rho, n = spearman({"a": 1, "b": 2, "c": 3, "d": 4}, {"a": 1, "b": 2, "c": 4, "d": 3})
    assert n == 4 and rho == pytest.approx(0.8)
    # a tie shares the average place: ranks (1, 2.5, 2.5) against (1, 2, 3) is Pearson's r of those, 1.5 / sqrt(3)
    rho, n = spearman({"a": 1, "b": 2.5, "c": 2.5}, {"a": 1, "b": 2, "c": 3})
    assert n == 3 and rho == pytest.approx(1.5 / 3 ** 0.5)
    assert spearman({"a": 2, "b": 2, "c": 2}, {"a": 1, "b": 2, "c": 3}) == (None, 3)  # no order on one side


def test_tied_patterns_share_their_place(tmp_path):
    """Equal means (graphs: full, linear and nystrom predicted the same nodes) are one shared
    place, shown #2= and counted 3.0 in the mean rank, not an arbitrary 2, 3, 4."""
    tied = {("toy", "synth"): {"performer": (0.9, 0.9, 0.9), "full": (0.5, 0.6, 0.7), "linear": (0.5, 0.6, 0.7),
                               "nystrom": (0.5, 0.6, 0.7)}}
    _write(tmp_path, tied)
    report.write_report(tmp_path / "variants")
    md = (tmp_path / "variants" / "REPORT.md").read_text()
    rows = {ln.split("|")[1].strip(): ln for ln in md[md.index("## Attention variants"):].splitlines()
            if ln.startswith("| ")}
    assert "(#1; transformer_performer)" in rows["performer"] and rows["performer"].endswith("| 1.0 (1) |")
    for p in ("full", "linear", "nystrom"):
        assert f"(#2=; transformer_{p})" in rows[p] and rows[p].endswith("| 3.0 (1) |")


def test_section_table_ranks_and_correlation(tmp_path):
    _write(tmp_path, RUNS)
    report.write_report(tmp_path / "variants")
    md = (tmp_path / "variants" / "REPORT.md").read_text()
    section = md[md.index("## Attention variants across domains"):]
    lines = [ln.split("|")[1:-1] for ln in section.splitlines() if ln.startswith("| ")]
    col = {c.strip(): i for i, c in enumerate(lines[0])}
    rows = {ln[0].strip(): ln for ln in lines[1:]}
    toy, tagging = col["toy / synth"], col["tagging / synth2"]
    assert "0.96 ± " in rows["performer"][toy] and "(#1; transformer_performer)" in rows["performer"][toy]
    assert "(#4; transformer_nystrom)" in rows["nystrom"][toy]
    assert "(#2; transformer_nystrom)" in rows["nystrom"][tagging]
    # mean rank over both domains, rows sorted by it: performer 1, full (2+3)/2, nystrom (4+2)/2, linear 3.5
    assert [r.strip() for r in rows["nystrom"][-1:]] == ["3.0 (2)"] and rows["full"][-1].strip() == "2.5 (2)"
    assert list(rows)[:4] == ["performer", "full", "nystrom", "linear"]
    assert "· 50 s ·" in rows["linear"][toy] and "· 1.67 min ·" in rows["full"][toy]
    # toy ranks performer, full, linear, nystrom; tagging performer, nystrom, full, linear: d^2 = 6, rho = 1 - 36/60 = 0.4
    assert "| tagging / synth2 | toy / synth | 4 | +0.40 |" in section
    # the machine each column ran on (the helper's records: one CPU)
    assert rows["machine"][toy].strip() == rows["machine"][tagging].strip() != "–"
    assert "Attention variants across domains" in (tmp_path / "variants" / "report.html").read_text()
    # the ranks as a heat map, shown right after the table
    png = tmp_path / "variants" / "plots" / "variants_ranks.png"
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert section.index("](plots/variants_ranks.png)") < section.index("Spearman rank correlation")


def test_a_column_from_two_machines_names_both(tmp_path):
    _write(tmp_path, RUNS)
    for path in (tmp_path / "variants").rglob("*.json"):  # one domain's nystrom ran on an AVX-512 machine
        if "synth2" in str(path) and "nystrom" in str(path):
            rec = __import__("json").loads(path.read_text())
            rec["env"].update(cpu_model="AMD EPYC", cpu_capability="AVX512", cpu_count=2)
            write_json_atomic(path, rec)
    report.write_report(tmp_path / "variants")
    md = (tmp_path / "variants" / "REPORT.md").read_text()
    machine = next(ln for ln in md[md.index("## Attention variants"):].splitlines() if ln.startswith("| machine"))
    assert "AMD EPYC AVX512 2 cores (3)" in machine and machine.count("(") >= 2
    assert "tagging / synth2: records from 2 machines" in md  # and the table's warning says so


def test_no_section_without_an_efficient_pattern(tmp_path):
    _write(tmp_path, {k: {"full": v["full"]} for k, v in RUNS.items()})
    report.write_report(tmp_path / "variants")
    assert "Attention variants" not in (tmp_path / "variants" / "REPORT.md").read_text()
    assert not (tmp_path / "variants" / "plots" / "variants_ranks.png").exists()


def test_rank_grid_colours_each_column_by_place(tmp_path):
    import math

    from benchmarks.report.plots import plot_rank_grid, rank_places

    assert plot_rank_grid(["a"], ["d"], [[None]], tmp_path / "none.png", "t") is None  # nothing ran: no plot
    # column 0: 3 entries, a tie shares place 2.5; column 1: one entry (middle colour), one not run
    cells = [[(1.0, 3, "#1"), None], [(2.5, 3, "#2="), (1.0, 1, "#1")], [(2.5, 3, "#2="), None]]
    grid = rank_places(cells, 2)
    assert grid[:, 0].tolist() == [0.0, 0.75, 0.75] and grid[1, 1] == 0.5
    assert math.isnan(grid[0, 1]) and math.isnan(grid[2, 1])
    out = plot_rank_grid(["a", "b", "c"], ["toy / synth", "tagging / synth2"], cells, tmp_path / "g.png", "t")
    assert out == tmp_path / "g.png" and out.read_bytes()[:4] == b"\x89PNG"
