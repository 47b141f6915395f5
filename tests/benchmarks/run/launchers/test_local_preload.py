"""The local pool's forkserver preloads the run's domains' heavy modules and freezes them last."""

from __future__ import annotations

import subprocess
import sys
from types import SimpleNamespace

from benchmarks.run.launchers import local


def _preload(monkeypatch, tasks: set[str]) -> list[str]:
    got: list[list[str]] = []
    fake = SimpleNamespace(set_forkserver_preload=lambda mods: got.append(list(mods)))
    monkeypatch.setattr(local.mp, "get_context", lambda kind: fake)
    launcher = local.LocalLauncher(SimpleNamespace())
    assert launcher._context(tasks) is fake
    return got[0]


def test_a_graph_run_preloads_pyg_and_every_run_freezes_last(monkeypatch):
    graphs = _preload(monkeypatch, {"graphs", "vision"})
    assert "tasks.graphs.warm" in graphs and graphs[-1] == local.FREEZE
    assert graphs[:len(local.PRELOAD)] == local.PRELOAD
    vision = _preload(monkeypatch, {"vision"})
    assert "tasks.graphs.warm" not in vision and vision[-1] == local.FREEZE


def test_the_warm_module_imports_pyg_quietly():
    code = ("import warnings; warnings.simplefilter('error'); import tasks.graphs.warm, sys; "
            "assert 'torch_geometric.nn' in sys.modules")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
