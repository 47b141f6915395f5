"""Shared test fixtures.

``shared_data``: the folder of real datasets (``$ATTNBENCH_DATA``, the variable the CLI reads for ``--data-dir``, or ``../shared/data``
beside the repository); tests that need it skip cleanly when it is absent. Treat it as
read-only: loaders copy or decompress into ``tmp_path``.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]

# Every run measures a ~2 s speed fingerprint (benchmarks/run/fingerprint.py); tests keep it short.
# Set here, at import, so the CLI processes the tests start inherit it too.
os.environ.setdefault("ATTNBENCH_FINGERPRINT_S", "0.05")


def shared_data_root() -> Path | None:
    env = os.environ.get("ATTNBENCH_DATA")
    root = Path(env) if env else REPO.parent / "shared" / "data"
    return root if root.is_dir() else None


@pytest.fixture
def shared_data():
    """The shared data folder, or skip the test when it is absent."""
    root = shared_data_root()
    if root is None:
        pytest.skip("../shared/data (or $ATTNBENCH_DATA) is absent")
    return root
