"""Issue 32: renaming model parameters changes no cell id and no model output. The fixtures were
recorded before any rename by tests/fixtures/names/make_fixtures.py: cell ids from main 643f520,
model outputs again at the graph kernel's target-sorted edges (main after 704246b; no rename yet).
"""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

FIX = Path(__file__).resolve().parents[2] / "fixtures" / "names"
_spec = importlib.util.spec_from_file_location("names_fixtures", FIX / "make_fixtures.py")
make = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(make)


def test_every_shipped_config_keeps_its_cell_ids():
    """Every cell a shipped config had keeps its id, in order (cells added since may sit between)."""
    now, before = make.cell_ids(), json.loads((FIX / "cell_ids.json").read_text())
    for config, ids in before.items():
        kept = [i for i in now.get(config, []) if i in set(ids)]
        assert kept == ids, f"{config}: ids lost or reordered: {sorted(set(ids) - set(kept))[:5]}"


@pytest.mark.slow
def test_every_model_output_is_bit_identical():
    """Bit-identical (sha256 of the output bytes) on a CPU of the capability that recorded the
    fixture (``cpu_capability.txt``); elsewhere float kernels differ in the last bits (AVX-512 vs
    AVX2), so shapes must match exactly and sums to 1e-5 relative."""
    import torch

    now, before = make.model_outputs(), json.loads((FIX / "model_outputs.json").read_text())
    assert sorted(now) == sorted(before)
    same_cpu = torch.backends.cpu.get_cpu_capability() == (FIX / "cpu_capability.txt").read_text().strip()
    for key, want in before.items():
        got = now[key]
        assert got["shape"] == want["shape"], key
        assert got["sum"] == pytest.approx(want["sum"], rel=1e-5, abs=1e-6), key
        if same_cpu:
            assert got["sha256"] == want["sha256"], f"{key}: output bits changed"
