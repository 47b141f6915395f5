"""Cell ids of the modern recurrences survive new parameters: ``backend`` (issue 31) was added to
every domain's ``modern_rnn`` after records existed, and a parameter left at its default must
not change an id (``omit_when_default``), or every finished cell would run again."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from benchmarks.config.suite import expand, load_suite

ROOT = Path(__file__).resolve().parents[3]
CONFIG = ROOT / "benchmarks" / "configs" / "modern_recurrence.yaml"
REFERENCE = ROOT / "results" / "reference" / "cpu-2core-amd-epyc-avx2"
#: the modern_recurrence records of each slice (not the peers of other configs beside them)
RECORDS = [REFERENCE / f"modern_recurrence_{s}" / "runs" for s in ("pos", "speech", "translation")]
MODERN = ("mingru", "minlstm", "s4d", "mamba2", "lru")


def _ids(overrides: list[str] = ()) -> dict[int, str]:
    """Cell ids in expansion order (the same cells whatever the overrides)."""
    return dict(enumerate(c.cell_id for c in expand(load_suite(CONFIG, overrides))))


def test_kernel_at_its_default_keeps_every_cell_id():
    raw = load_suite(CONFIG)
    sets = [f"cells.{i}.model_params.{m}.backend=pure" for i, cell in enumerate(raw["cells"])
            for m in cell["models"] if m in MODERN]
    assert len(sets) >= 10  # every domain's modern cells
    assert _ids(sets) == _ids()
    assert _ids([sets[0].replace("=pure", "=fla")]) != _ids()  # another backend is another cell


def test_committed_modern_records_are_cells_of_the_config_today():
    records = sorted(p for d in RECORDS for p in d.rglob("*.json"))
    if not records:
        pytest.skip("no modern_recurrence reference records")
    ids = set(_ids().values())
    for path in records:
        rec = json.loads(path.read_text())
        assert rec["cell_id"] in ids, f"{path.name}: its cell id is no longer one of the config's"
