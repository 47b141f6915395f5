"""Issue 32: renaming model parameters changes no cell id and no model output. The fixtures were
recorded from main (643f520) before any rename by tests/fixtures/names/make_fixtures.py."""

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
    assert make.model_outputs() == json.loads((FIX / "model_outputs.json").read_text())
