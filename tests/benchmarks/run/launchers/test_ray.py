"""``--launcher ray`` with a real local Ray instance: the same cell ids and test metrics as
``inline`` (under a TMPDIR too long for Ray's sockets), a crashing cell becomes a failed record
while the others finish, the launcher stops the instance it started and leaves one it found
running."""

from __future__ import annotations

import argparse
import shutil
from pathlib import Path

import pytest

from benchmarks.run import records as R
from benchmarks.cli import main
from benchmarks.config.suite import expand, load_suite
from benchmarks.run.worker import PLUGINS_ENV
from tests.helpers.toy_task import register

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
    monkeypatch.setenv(PLUGINS_ENV, "tests.helpers.toy_task")
    monkeypatch.setenv("RAY_AUTH_MODE", "disabled")  # no token file in ~/.ray
    monkeypatch.setenv("RAY_USAGE_STATS_ENABLED", "0")
    # Ray starts its workers (the cells) at niceness +15: beside any CPU-bound process (the other
    # xdist worker, a busy machine) they starved, 20-30 s tests took 270-350 s. 0: the test's own
    monkeypatch.setenv("RAY_worker_niceness", "0")


def _cfg(tmp_path: Path, name: str, seeds: int = 2, crash: bool = False) -> Path:
    p = tmp_path / f"{name}.yaml"
    p.write_text(SUITE.format(seeds=seeds, extra=CRASH if crash else ""))
    return p


def _run(cfg: Path, out: Path, *extra: str) -> int:
    return main(["run", str(cfg), "--out", str(out), "--no-report", "--cache-dir", str(out.parent / "cache"), *extra])


def _records(out: Path) -> dict[str, dict]:
    return {r["cell_id"]: r for r in R.load_records(out)}


@pytest.fixture(scope="module")
def inline_ref(tmp_path_factory) -> tuple[Path, dict[str, dict]]:
    """The linear cells run by the ``inline`` launcher: the records every launcher must match."""
    tmp = tmp_path_factory.mktemp("inline")
    register()
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv(PLUGINS_ENV, "tests.helpers.toy_task")
        assert _run(_cfg(tmp, "ref"), tmp / "out", "--launcher", "inline") == 0
    return tmp / "out", _records(tmp / "out")


def test_ray_under_a_long_tmpdir_gives_inline_cells_and_metrics_and_a_crash_is_a_failed_record(
        inline_ref, tmp_path, monkeypatch, capsys):
    """Under a TMPDIR too long for Ray's sockets (issue 50: its session sockets live under
    ``$TMPDIR/ray``; an 80-character TMPDIR put them past 107 bytes and ``ray.init`` refused):
    the launcher gives Ray a short folder. One Ray start for both checks (each start costs 30-60 s
    of both CPU cores)."""
    long = tmp_path / ("t" * max(1, 90 - len(str(tmp_path))))
    long.mkdir()
    monkeypatch.delenv("RAY_TMPDIR", raising=False)
    monkeypatch.setenv("TMPDIR", str(long))
    cfg, want = _cfg(tmp_path, "with_crash", crash=True), inline_ref[1]
    assert not ray.is_initialized()
    assert _run(cfg, tmp_path / "ray", "--launcher", "ray") == 1
    text = capsys.readouterr().out
    assert not ray.is_initialized()  # the local instance it started is gone
    assert "submitted 3 cells to Ray (" in text
    got = _records(tmp_path / "ray")
    assert set(got) == {c.cell_id for c in expand(load_suite(cfg))} and set(want) < set(got)
    for cid, rec in want.items():
        assert got[cid]["status"] == "ok" and got[cid]["test"] == rec["test"]
        assert got[cid]["resources"]["launcher"] == "ray"
    (bad,) = [r for r in got.values() if r["model"] == "broken"]
    assert bad["status"] == "failed" and bad["reason"].startswith("crashed:") and "SIGSEGV" in bad["reason"]


def test_ray_uses_an_instance_already_running_and_gives_each_cell_its_gpu_share(inline_ref, tmp_path):
    from benchmarks.run.launchers import CellJob
    from benchmarks.run.launchers.ray_launcher import RayLauncher

    out = tmp_path / "out"
    shutil.copytree(inline_ref[0], out)
    cid, want = next(iter(inline_ref[1].items()))
    # a fake GPU: Ray only counts it, and sets CUDA_VISIBLE_DEVICES for the tasks that ask for a share
    ray.init(num_cpus=2, num_gpus=1, include_dashboard=False, log_to_driver=False, object_store_memory=128 * 2**20)
    try:
        job = CellJob(out, cid, "again", None, tmp_path / "cache", None, cpus=1, gpus=0.0, force=True)
        args = argparse.Namespace(ray_address=None, ray_cpus_per_cell=None, ray_gpus_per_cell=0.5)
        (res,) = RayLauncher(None, args).launch([job], log=lambda line: None)
        assert res.status == "ok" and ray.is_initialized()  # left running: it was not the launcher's
    finally:
        ray.shutdown()
    rec = _records(out)[cid]
    assert rec["resources"]["launcher"] == "ray" and rec["resources"]["cuda_visible_devices"] == "0"
    assert rec["test"] == want["test"] and rec["started"] != want["started"]


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


@pytest.mark.parametrize("argv,message", [
    (["--ray-gpus-per-cell", "-1"], "--ray-gpus-per-cell: -1 must be >= 0"),
    (["--ray-cpus-per-cell", "half"], "--ray-cpus-per-cell: 'half' is not a whole number"),
])
def test_bad_ray_options_are_one_line(argv, message, tmp_path, capsys):
    assert _run(_cfg(tmp_path, "x"), tmp_path / "out", "--launcher", "ray", *argv) == 2
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err
