"""``attnbench list``: one aligned line per shipped config (name, device, cells, wall time) with
its description below (issue 45)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml

from benchmarks.cli import main
from benchmarks.cli.listing import WALL_LINE, config_summary, print_configs, wall_of
from benchmarks.config import CONFIG_DIR
from benchmarks.config.micro import MICRO_BENCHMARKS
from benchmarks.config.suite import expand, load_suite

SHIPPED = sorted(CONFIG_DIR.glob("*.yaml"))
MICRO = {c for b in MICRO_BENCHMARKS.values() for c in b.configs}


@pytest.fixture(scope="module")
def listing() -> dict[str, tuple[str, str]]:
    """``list``'s configs section: name -> (its line, the description line below it)."""
    import contextlib
    import io

    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        assert main(["list"]) == 0
    lines = buf.getvalue().split("\nconfigs (", 1)[1].splitlines()[2:]
    rows = {}
    for i, line in enumerate(lines):
        if re.match(r"^  \S", line):
            rows[line.split()[0]] = (line, lines[i + 1] if i + 1 < len(lines) else "")
    return rows


def test_every_shipped_config_has_one_line_with_its_description(listing):
    assert sorted(listing) == [p.stem for p in SHIPPED]
    for path in SHIPPED:
        line, below = listing[path.stem]
        if path.name in MICRO:
            continue
        described = yaml.safe_load(path.read_text())["description"]
        assert below.strip() == described, path.name


def test_suite_lines_give_the_cells_of_a_dry_run(listing):
    for path in SHIPPED:
        if path.name in MICRO:
            continue
        cfg = load_suite(path)
        line, _ = listing[path.stem]
        assert f" {len(expand(cfg))} cells" in line, line
    assert re.search(r"^  graphs +auto +50 cells +", listing["graphs"][0])
    assert re.search(r"^  quick +cpu +99 cells \+ bench attention +", listing["quick"][0])
    assert "48 cells + bench speech" in listing["speech"][0]


def test_device_column(listing):
    for name, (line, _) in listing.items():
        device = line.split()[1]
        if name.endswith("_gpu"):
            assert device == "gpu", line
        elif name in ("quick", "when"):  # synthetic data on CPU, minutes a cell
            assert device == "cpu", line
        else:
            assert device == "auto", line  # the CPU budgets and the micro-benchmarks: CUDA when present


def test_micro_benchmark_configs_name_their_command(listing):
    line, below = listing["bench_attention"]
    assert re.search(r"^  bench_attention +auto +bench attention +", line)
    assert below.strip() == "attention scaling (run: attnbench bench attention)"
    _, below = listing["bench_attention_full"]
    assert below.strip().endswith("(run: attnbench bench attention --config benchmarks/configs/bench_attention_full.yaml)")
    assert "(run: attnbench bench decode)" in listing["bench_decode"][1]


def test_the_columns_are_aligned(listing):
    lines = [line for line, _ in listing.values()]
    starts = {tuple(m.start() for m in re.finditer(r"(?<=  )\S", line))[:3] for line in lines}
    assert len(starts) == 1, starts


def test_gpu_configs_state_an_estimated_wall_time(listing):
    for name, (line, _) in listing.items():
        if name.endswith("_gpu"):
            assert ", estimated for one " in line, line


def test_every_wall_line_of_a_shipped_config_is_in_the_fixed_form():
    for path in SHIPPED:
        for line in path.read_text().splitlines():
            if re.match(r"^#\s*wall:", line):
                assert WALL_LINE.match(line), f"{path.name}: {line}"


@pytest.mark.parametrize("header,wall", [
    ("# title\n# wall: 46 min, measured 2026-11-21 on a 2-core AMD EPYC\nsuite: x\n",
     "46 min, measured 2026-11-21 on a 2-core AMD EPYC"),
    ("# wall: ~3 h, estimated for one GPU\n", "~3 h, estimated for one GPU"),
    ("# no wall time here\nsuite: x\n", "not stated"),
    ("suite: x\n# wall: 3 min, measured later\n", "not stated"),  # only the header counts
    ("# wall: about an hour\n", "not stated (its '# wall:' line says neither measured nor estimated)"),
    ("# the wall time of this config\n", "not stated"),
])
def test_wall_of_reads_the_header_wall_line(header, wall):
    assert wall_of(header) == wall


def test_an_invalid_config_is_one_line_not_an_error(tmp_path, capsys):
    (tmp_path / "broken.yaml").write_text("# wall: 1 min, measured today\nsuite: broken\ncells: [{task: chess, dataset: x}]\n")
    (tmp_path / "ok.yaml").write_text(
        "suite: ok\ndescription: two seeds\nseeds: 2\ntrainer: {accelerator: cpu}\n"
        "cells: [{task: graphs, dataset: sbm, models: [gcn]}]\n")
    print_configs(tmp_path)
    out = capsys.readouterr().out.splitlines()
    assert re.search(r"^  broken +\? +invalid here \(attnbench run broken --dry-run says why\) +1 min, measured today$",
                     out[2])
    assert re.search(r"^  ok +cpu +2 cells +not stated$", out[3]) and out[4].strip() == "two seeds"
    assert config_summary(tmp_path / "ok.yaml").size == "2 cells"
