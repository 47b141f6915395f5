"""``attnbench profile CONFIG --cell ID|INDEX``: one cell of the quick config profiled on the
CPU, and the one-line errors for a bad id, a bad index and bad options."""

from __future__ import annotations

import json

import pytest

from benchmarks.cli import main as cli
from benchmarks.config.suite import expand, load_suite
from benchmarks.config import CONFIG_DIR

#: the pos_tagging MLP floor of quick.yaml (seed 0): one of its smallest, fastest cells
SMALL = "pos_tagging/synthetic_far/mlp seed=0"


def _quick_index(label: str) -> tuple[int, str]:
    cells = expand(load_suite(CONFIG_DIR / "quick.yaml"))
    i = next(k for k, c in enumerate(cells) if c.label == label)
    return i, cells[i].cell_id


def test_profile_of_the_quick_configs_small_cell_on_cpu(tmp_path, capsys):
    index, cid = _quick_index(SMALL)
    out = tmp_path / "prof"
    code = cli(["profile", "quick", "--cell", str(index), "--steps", "2", "--warmup", "1", "--out", str(out),
                "--cache-dir", str(tmp_path / "cache")])
    printed = capsys.readouterr().out
    assert code == 0, printed
    assert f"cell {SMALL} ({cid}), device cpu" in printed
    assert "steps/s: " in printed and "syncs per step: " in printed and "GPU busy fraction: n/a (CPU)" in printed
    assert "top ops by self CPU time over 2 profiled steps:" in printed and "Self CPU" in printed
    assert f"Chrome trace: {out / 'trace.json'}" in printed
    trace = json.loads((out / "trace.json").read_text())
    assert trace["traceEvents"]
    rec = json.loads((out / "profile.json").read_text())
    assert rec["cell_id"] == cid and rec["steps"] == 2 and rec["sync_steps"] == 2 and rec["profile_steps"] == 2
    assert rec["steps_per_s"] > 0 and rec["syncs_per_step"] is not None
    assert (out / "profile.txt").read_text().startswith(f"cell {SMALL}")
    assert not list(out.glob(".*.tmp")) and not (out / "runs").exists()  # no record stored, no temporary left
    assert not (out / ".checkpoints").exists()


def test_the_same_cell_by_its_id(tmp_path):
    from benchmarks.cli.profile import pick_cell

    cells = expand(load_suite(CONFIG_DIR / "quick.yaml"))
    index, cid = _quick_index(SMALL)
    assert pick_cell(cells, cid, "quick") is cells[index] and pick_cell(cells, str(index), "quick") is cells[index]


@pytest.mark.parametrize("cell,message", [
    ("0123456789ab", "attnbench: error: --cell '0123456789ab': no cell with this id in quick (99 cells; give an id or "
                     "an index 0-98 as attnbench run quick --dry-run lists them)"),
    ("99", "attnbench: error: --cell 99: no cell at index 99 in quick (valid indices: 0-98; attnbench run quick "
           "--dry-run lists them)"),
    ("-1", "attnbench: error: --cell -1: no cell at index -1 in quick (valid indices: 0-98;"),
])
def test_a_bad_cell_is_one_line(cell, message, capsys, tmp_path):
    assert cli(["profile", "quick", "--cell", cell, "--out", str(tmp_path / "p")]) == 2
    err = capsys.readouterr().err
    assert err.startswith(message) and err.count("\n") == 1 and "Traceback" not in err
    assert not (tmp_path / "p").exists()


@pytest.mark.parametrize("args,message", [
    (["nosuch", "--cell", "0"], "attnbench: error: config file not found: nosuch (shipped configs:"),
    (["quick", "--cell", "0", "--steps", "0"], "attnbench: error: --steps 0: expected an integer >= 1"),
    (["quick", "--cell", "0", "--set", "trainer.compile=maybe"], "trainer.compile='maybe' is invalid"),
])
def test_bad_config_or_options_are_one_line(args, message, capsys):
    assert cli(["profile", *args]) == 2
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1
