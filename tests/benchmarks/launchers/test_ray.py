"""``--launcher ray`` with a real local Ray instance: the same cell ids and test metrics as
``inline``, a crashing cell becomes a failed record while the others finish, the launcher stops
the instance it started and leaves one it found running."""

from __future__ import annotations

from pathlib import Path

import pytest

from benchmarks import records as R
from benchmarks.cli import main
from benchmarks.suite import expand, load_suite
from benchmarks.worker import PLUGINS_ENV
from tests.benchmarks.toy_task import register

ray = pytest.importorskip("ray", reason="the ray launcher needs Ray: pip install 'attnbench[ray]'")
# Lightning's hint when srun is on PATH (a machine with Slurm) but did not start the inline runs
pytestmark = pytest.mark.filterwarnings("ignore:The `srun` command is available:UserWarning")

SUITE = """
suite: ray
seeds: {seeds}
trainer: {{max_epochs: 2, accelerator: cpu, deterministic: true}}
cells:
  - task: toy
    dataset: points
    models: [linear]
{extra}"""

CRASH = """  - task: toy
    dataset: points
    models: [broken]
    seeds: 1
    model_params: {broken: {kind: segfault}}
"""


@pytest.fixture(autouse=True)
def _plugin_and_quiet_ray(monkeypatch):
    register()
    monkeypatch.setenv(PLUGINS_ENV, "tests.benchmarks.toy_task")
    monkeypatch.setenv("RAY_AUTH_MODE", "disabled")  # no token file in ~/.ray
    monkeypatch.setenv("RAY_USAGE_STATS_ENABLED", "0")


def _cfg(tmp_path: Path, name: str, seeds: int = 2, crash: bool = False) -> Path:
    p = tmp_path / f"{name}.yaml"
    p.write_text(SUITE.format(seeds=seeds, extra=CRASH if crash else ""))
    return p


def _run(cfg: Path, out: Path, *extra: str) -> int:
    return main(["run", str(cfg), "--out", str(out), "--no-report", "--cache-dir", str(out.parent / "cache"), *extra])


def _records(out: Path) -> dict[str, dict]:
    return {r["cell_id"]: r for r in R.load_records(out)}


def test_ray_gives_inline_cells_and_metrics_and_a_crash_is_a_failed_record(tmp_path, capsys):
    cfg, ref = _cfg(tmp_path, "with_crash", crash=True), _cfg(tmp_path, "ref")
    assert _run(ref, tmp_path / "inline", "--launcher", "inline") == 0
    assert not ray.is_initialized()
    assert _run(cfg, tmp_path / "ray", "--launcher", "ray") == 1
    text = capsys.readouterr().out
    assert not ray.is_initialized()  # the local instance it started is gone
    assert "submitted 3 cells to Ray (" in text
    got, want = _records(tmp_path / "ray"), _records(tmp_path / "inline")
    assert set(got) == {c.cell_id for c in expand(load_suite(cfg))} and set(want) < set(got)
    for cid, rec in want.items():
        assert got[cid]["status"] == "ok" and got[cid]["test"] == rec["test"]
        assert got[cid]["resources"]["launcher"] == "ray"
    (bad,) = [r for r in got.values() if r["model"] == "broken"]
    assert bad["status"] == "failed" and bad["reason"].startswith("crashed:") and "SIGSEGV" in bad["reason"]


def test_ray_uses_an_instance_already_running_and_leaves_it(tmp_path):
    ray.init(num_cpus=2, resources={"cell_slot": 2}, include_dashboard=False, log_to_driver=False,
             object_store_memory=128 * 2**20)
    try:
        assert _run(_cfg(tmp_path, "one", seeds=1), tmp_path / "out", "--launcher", "ray") == 0
        assert ray.is_initialized() and ray.cluster_resources().get("cell_slot") == 2
    finally:
        ray.shutdown()
    (rec,) = R.load_records(tmp_path / "out")
    assert rec["status"] == "ok" and rec["resources"]["launcher"] == "ray"


def test_missing_ray_is_one_line(monkeypatch, tmp_path, capsys):
    import builtins

    real_import = builtins.__import__

    def no_ray(name, *args, **kwargs):
        if name == "ray" or name.startswith("ray."):
            raise ImportError("No module named 'ray'")
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_ray)
    assert _run(_cfg(tmp_path, "x"), tmp_path / "out", "--launcher", "ray") == 2
    err = capsys.readouterr().err
    assert "the ray launcher needs Ray: pip install 'attnbench[ray]'" in err and "Traceback" not in err


def test_an_unreachable_cluster_is_one_line(tmp_path, capsys):
    assert _run(_cfg(tmp_path, "x"), tmp_path / "out", "--launcher", "ray", "--ray-address", "127.0.0.1:1") == 2
    err = capsys.readouterr().err
    assert "could not start or reach the Ray cluster at '127.0.0.1:1'" in err and "Traceback" not in err
