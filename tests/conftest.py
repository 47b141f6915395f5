"""Shared test fixtures.

``shared_data``: the folder of real datasets (``$ATTNBENCH_DATA``, the variable the CLI reads for ``--data-dir``, or ``../shared/data``
beside the repository); tests that need it skip cleanly when it is absent. Treat it as
read-only: loaders copy or decompress into ``tmp_path``.

Parallel runs (pytest-xdist, ``-n 3`` as in the README): the tests under a folder of
:data:`GROUPS` share one external resource (or one costly module fixture) and run on one
worker, one after another (the scheduler below); each worker uses one torch thread, and so do the
processes its tests start (three workers on two cores: the tests wait on their processes a third
of the time; a test that needs more threads sets it itself).
"""

from __future__ import annotations

import gc
import os
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parents[1]

# Every run measures a ~2 s speed fingerprint (benchmarks/run/fingerprint.py); tests keep it short.
# Set here, at import, so the CLI processes the tests start inherit it too.
os.environ.setdefault("ATTNBENCH_FINGERPRINT_S", "0.05")


#: xdist groups: group -> the folders whose tests run on one worker. "launchers": the session's
#: local Slurm (one per worker would start two clusters) and the Ray instances (one at a time: ~630 MB
#: each, and an instance already running must be the test's own). By folder, not by an
#: ``xdist_group`` mark: xdist <= 3.8 marks a group by rewriting ``item._nodeid``, which pytest 9
#: ignores (the groups silently did nothing); the scheduler sees only node ids, so a path rule.
GROUPS = {"launchers": ("tests/benchmarks/run/launchers/",),
          # modules whose costly module-scoped fixture (a CLI run, a tuning, fresh interpreters)
          # would otherwise be built once on every worker that draws one of their tests
          "cli_run": ("tests/benchmarks/cli/test_cli_run.py",),
          "layering": ("tests/test_layering.py",),
          "scoring": ("tests/benchmarks/run/test_scoring.py",),
          "tune": ("tests/benchmarks/cli/test_tune.py",),
          # the committed page's folders are analysed once per process (~14 s of CPU): once, not per worker
          "page": ("tests/benchmarks/report/test_page.py", "tests/benchmarks/report/test_page_check.py",
                   "tests/benchmarks/report/test_page_predicts.py")}
#: a fixture of a shared resource -> the group its users must be in (checked at collection)
GROUP_FIXTURES = {"local_slurm": "launchers"}


def _group(nodeid: str) -> str | None:
    return next((g for g, folders in GROUPS.items() if nodeid.startswith(folders)), None)


def pytest_configure(config: pytest.Config) -> None:
    if os.environ.get("PYTEST_XDIST_WORKER"):
        import torch

        torch.set_num_threads(1)
        # and the processes its tests start (CLI drivers, Slurm/Ray jobs): the workers already fill
        # the cores, and a second OpenMP thread waiting for a busy core costs ~10x per step
        os.environ.setdefault("OMP_NUM_THREADS", "1")


def pytest_collection_finish(session: pytest.Session) -> None:
    """Everything alive after collection (torch, the test items: ~600k objects) lives to the end:
    frozen out of the collector, so the full collections the tests cause (a finished cell's
    ``gc.collect()``) scan only what the tests made (they took a quarter of a cell test's CPU)."""
    gc.freeze()


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        for fixture, group in GROUP_FIXTURES.items():
            if fixture in getattr(item, "fixturenames", ()) and _group(item.nodeid) != group:
                raise pytest.UsageError(f"{item.nodeid} uses the {fixture} fixture: move it under "
                                        f"{' or '.join(GROUPS[group])} (its xdist group {group!r})")


@pytest.hookimpl(optionalhook=True)  # a hook of pytest-xdist: unknown (and unused) without it
def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    """``--dist load`` (``-n N`` alone) and ``loadgroup``: each test is its own unit of work, except
    a group's tests, which make one unit (xdist's LoadScope scheduler; units of most tests first)."""
    if config.getvalue("dist") not in ("load", "loadgroup"):
        return None  # loadscope, loadfile, each ...: xdist's own
    from xdist.scheduler import LoadScopeScheduling

    class GroupScheduling(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return _group(nodeid) or nodeid

    return GroupScheduling(config, log)


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
