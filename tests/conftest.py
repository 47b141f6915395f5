"""Shared test fixtures.

``shared_data``: the folder of real datasets (``$ATTNBENCH_DATA``, the variable the CLI reads for ``--data-dir``, or ``../shared/data``
beside the repository); tests that need it skip cleanly when it is absent. Treat it as
read-only: loaders copy or decompress into ``tmp_path``.

Parallel runs (pytest-xdist, ``-n 2 --dist loadgroup`` as in the README): tests that share one
external resource run on one worker, in the ``xdist_group`` :data:`GROUPS` gives them; each worker
uses one torch thread (two workers on two cores; a test that needs more sets it itself).
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]

# Every run measures a ~2 s speed fingerprint (benchmarks/run/fingerprint.py); tests keep it short.
# Set here, at import, so the CLI processes the tests start inherit it too.
os.environ.setdefault("ATTNBENCH_FINGERPRINT_S", "0.05")


#: xdist groups: a test in one of these folders, or using one of these fixtures, runs on the worker
#: that runs the rest of its group. "launchers": the session's local Slurm (one per worker would start
#: two clusters) and the Ray instances (one at a time: ~630 MB each, and an instance already running
#: must be the test's own).
GROUPS = {"launchers": ("tests/benchmarks/run/launchers/", "local_slurm")}


def _worker() -> str | None:
    return os.environ.get("PYTEST_XDIST_WORKER")


def pytest_configure(config: pytest.Config) -> None:
    if _worker():
        import torch

        torch.set_num_threads(1)
    # `-n N` alone means --dist load, which ignores the groups: use loadgroup whenever xdist distributes
    if getattr(config.option, "dist", "no") == "load":
        config.option.dist = "loadgroup"


@pytest.hookimpl(tryfirst=True)  # before xdist's own hook, which reads the group marks
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        path = Path(str(item.fspath)).resolve().relative_to(REPO).as_posix()
        for group, (folder, fixture) in GROUPS.items():
            if path.startswith(folder) or fixture in getattr(item, "fixturenames", ()):
                item.add_marker(pytest.mark.xdist_group(group))


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
