"""The local pool, with real worker processes: a crash of any kind costs only its cell, each
cell is trained once however many drivers share the folder, a killed driver resumes, workers
get their share of the cores and their GPU slot, and the records equal ``inline``'s."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from benchmarks.run import records as R
from benchmarks.cli import main
from benchmarks.run.worker import PLUGINS_ENV
from tests.helpers.procs import communicate_all
from tests.helpers.toy_task import register

REPO = Path(__file__).resolve().parents[3]
PLUGIN = "tests.helpers.toy_task"

SUITE = """
suite: pool
seeds: {seeds}
trainer: {{max_epochs: {epochs}, accelerator: cpu, deterministic: true}}
cells:
  - task: toy
    dataset: points
    models: [{models}]
    {params}
"""


@pytest.fixture(autouse=True)
def _plugin(monkeypatch):
    register()
    monkeypatch.setenv(PLUGINS_ENV, PLUGIN)


def _cfg(tmp_path: Path, models: str = "linear", seeds: int = 2, epochs: int = 2, params: str = "") -> Path:
    p = tmp_path / "suite.yaml"
    p.write_text(SUITE.format(models=models, seeds=seeds, epochs=epochs, params=params))
    return p


def _records(out: Path) -> dict[tuple, dict]:
    return {(r["model"], r["seed"]): r for r in R.load_records(out)}


def test_pool_records_equal_inline_records(tmp_path, capsys):
    cfg = _cfg(tmp_path, seeds=3)
    assert main(["run", str(cfg), "--out", str(tmp_path / "inline"), "--launcher", "inline", "--no-report"]) == 0
    assert main(["run", str(cfg), "--out", str(tmp_path / "pool"), "--jobs", "2", "--no-report"]) == 0
    a, b = _records(tmp_path / "inline"), _records(tmp_path / "pool")
    assert a.keys() == b.keys() and len(a) == 3
    for k in a:
        assert a[k]["cell_id"] == b[k]["cell_id"] and a[k]["test"] == b[k]["test"]
        assert b[k]["resources"]["launcher"] == "local" and a[k]["resources"]["launcher"] == "inline"
        assert (tmp_path / "pool" / Path(b[k]["_path"]).relative_to(tmp_path / "pool")).with_suffix(".log").exists()


@pytest.mark.parametrize("kind,cause", [
    ("segfault", "SIGSEGV"),
    ("sigkill", "SIGKILL"),
    ("exit137", "exit code 137"),
])
def test_a_crashing_cell_becomes_a_failed_record_and_the_rest_goes_on(kind, cause, tmp_path, capsys):
    cfg = _cfg(tmp_path, models="broken, linear", seeds=1, params=f"model_params: {{broken: {{kind: {kind}}}}}")
    out = tmp_path / "out"
    code = main(["run", str(cfg), "--out", str(out), "--jobs", "2", "--no-report"])
    stdout, err = capsys.readouterr()
    assert code == 1, stdout + err
    recs = _records(out)
    assert recs[("linear", 0)]["status"] == "ok"
    bad = recs[("broken", 0)]
    assert bad["status"] == "failed" and cause in bad["reason"] and bad["reason"].startswith("crashed:")
    # a kill from outside (the OOM killer's SIGKILL) is retried by the next run; a segfault is the cell's own
    assert bad["failure"] == ("cell" if kind == "segfault" else "external")
    assert "log_tail" in bad and bad["cost"]["peak_mem_bytes"] is None or bad["cost"]["peak_mem_bytes"] > 0
    if kind == "segfault":
        assert "Fatal Python error" in bad["log_tail"] or "Segmentation fault" in bad["log_tail"]
    assert not list(out.rglob("*.claim"))
    assert "Traceback" not in err


def test_a_hanging_cell_is_killed_at_its_limit(tmp_path, capsys):
    cfg = _cfg(tmp_path, models="broken", seeds=1, params="model_params: {broken: {kind: hang}}")
    out = tmp_path / "out"
    t0 = time.monotonic()
    # a short limit keeps the test short (it was 20 s); without the kill the run would hang (sleep 3600)
    code = main(["run", str(cfg), "--out", str(out), "--cell-timeout", "5", "--no-report"])
    assert code == 1 and time.monotonic() - t0 < 120
    (rec,) = R.load_records(out)
    assert rec["status"] == "failed" and "timed out after 5 s" in rec["reason"]


def test_threads_per_worker_and_gpu_slots(tmp_path, capsys):
    cfg = _cfg(tmp_path, seeds=4)
    out = tmp_path / "out"
    assert main(["run", str(cfg), "--out", str(out), "--gpus", "0,1", "--cells-per-gpu", "1", "--no-report"]) == 0
    recs = list(_records(out).values())
    assert sorted({r["resources"]["gpu_index"] for r in recs}) == ["0", "1"]
    assert all(r["resources"]["cuda_visible_devices"] == r["resources"]["gpu_index"] for r in recs)
    cores = len(os.sched_getaffinity(0))
    assert all(r["resources"]["cpu_threads"] == max(1, cores // 2) for r in recs)
    out2 = tmp_path / "packed"
    assert main(["run", str(cfg), "--out", str(out2), "--gpus", "0", "--cells-per-gpu", "2", "--no-report"]) == 0
    # two share the GPU where there are two cores for them (a packed worker per core at most)
    assert {r["resources"]["cells_sharing_device"] for r in _records(out2).values()} == {min(2, cores)}


def test_packing_time_budgeted_cells_warns_or_is_refused(tmp_path, capsys):
    cfg = _cfg(tmp_path, seeds=1, params="trainer: {max_time_s: 30}")
    code = main(["run", str(cfg), "--out", str(tmp_path / "o"), "--gpus", "0", "--cells-per-gpu", "2", "--strict-sharing"])
    assert code == 2 and "shares a GPU" in capsys.readouterr().err
    assert main(["run", str(cfg), "--out", str(tmp_path / "o"), "--gpus", "0", "--cells-per-gpu", "2", "--no-report"]) == 0
    assert "warning:" in capsys.readouterr().err


@pytest.mark.parametrize("argv,needle", [
    (["--jobs", "0"], "--jobs"), (["--gpus", "a,b"], "--gpus"), (["--gpus", "0,0"], "--gpus"),
    (["--cells-per-gpu", "0"], "--cells-per-gpu"), (["--launcher", "inline", "--jobs", "2"], "local launcher"),
    (["--cell-timeout", "-1"], "--cell-timeout"),
])
def test_bad_launcher_options_are_one_line(argv, needle, tmp_path, capsys):
    assert main(["run", str(_cfg(tmp_path)), "--out", str(tmp_path / "o"), *argv]) == 2
    err = capsys.readouterr().err
    assert needle in err and "Traceback" not in err


def _driver(argv: list[str], env: dict) -> subprocess.Popen:
    code = "import sys; from benchmarks.cli import main; sys.exit(main(sys.argv[1:]))"
    return subprocess.Popen([sys.executable, "-c", code, *argv], cwd=REPO, env=env, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)


@pytest.mark.slow
def test_two_drivers_with_two_workers_each_train_every_cell_once(tmp_path, capsys):
    cfg = _cfg(tmp_path, models="broken", seeds=4, epochs=2, params="model_params: {broken: {kind: slow}}")
    out, starts = tmp_path / "out", tmp_path / "starts.txt"
    env = {**os.environ, PLUGINS_ENV: PLUGIN, "ATTNBENCH_TOY_STARTS": str(starts), "PYTHONPATH": str(REPO)}
    drivers = [_driver(["run", str(cfg), "--out", str(out), "--jobs", "2", "--no-report"], env) for _ in range(2)]
    for d, (so, se) in zip(drivers, communicate_all(drivers)):  # a time-out kills both
        assert d.returncode == 0, se[-3000:]
    recs = R.load_records(out)
    assert len(recs) == 4 and all(r["status"] == "ok" for r in recs)
    assert len(starts.read_text().split()) == 4  # one training start per cell, over 4 workers
    assert main(["status", str(out)]) == 0  # in this process: the drivers are the processes under test
    assert "4 cells: 4 done, 0 failed, 0 running, 0 pending" in capsys.readouterr().out


@pytest.mark.slow
def test_killing_the_driver_leaves_nothing_half_done_and_a_rerun_resumes(tmp_path, capsys):
    """The driver is a process of its own (it gets the SIGINT); the status checks and the rerun run
    in this process (no second ~9 s interpreter start): the same CLI code on the same folder."""
    cfg = _cfg(tmp_path, models="broken", seeds=3, epochs=3, params="model_params: {broken: {kind: slow}}")
    out = tmp_path / "out"
    env = {**os.environ, PLUGINS_ENV: PLUGIN, "PYTHONPATH": str(REPO)}
    d = _driver(["run", str(cfg), "--out", str(out), "--jobs", "1", "--no-report"], env)
    deadline = time.monotonic() + 240  # polled: a starved CPU only waits longer
    while time.monotonic() < deadline and d.poll() is None and len(R.load_records(out) if out.exists() else []) < 1:
        time.sleep(0.2)
    d.send_signal(signal.SIGINT)
    so, se = communicate_all([d])[0]
    assert d.returncode == 130 and "attnbench: interrupted" in se, se[-2000:]
    assert "Traceback" not in so + se, se[-2000:]
    done = R.load_records(out)
    assert 1 <= len(done) < 3 and all(r["status"] == "ok" for r in done)
    capsys.readouterr()
    deadline = time.monotonic() + 60  # a worker on a starved CPU may still be releasing its claim: poll
    while True:
        assert main(["status", str(out), "--json"]) == 0
        st = json.loads(capsys.readouterr().out)
        if not st["running"] or time.monotonic() > deadline:
            break
        time.sleep(0.2)
    assert not st["running"] and not st["failed"]  # the interrupted cell is pending, not failed
    assert main(["run", str(cfg), "--out", str(out), "--jobs", "2", "--no-report"]) == 0
    assert f"skipped {len(done)} finished ones" in capsys.readouterr().out
    assert len(R.load_records(out)) == 3


def _gone(pid: int, timeout_s: float = 30.0) -> bool:
    """The process has ended (a zombie its forkserver has not reaped yet counts as ended)."""
    deadline = time.time() + timeout_s
    while time.time() < deadline:
        try:
            if Path(f"/proc/{pid}/stat").read_text().split(") ")[-1].startswith("Z"):
                return True
        except (FileNotFoundError, ProcessLookupError):
            return True
        time.sleep(0.2)
    return False


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="reads process states from /proc")
def test_ctrl_c_while_a_worker_starts_leaves_no_worker_running(tmp_path, capsys, monkeypatch):
    """The signal lands after the worker is forked and before the driver has entered it in its
    running set (where it waits for the forkserver's answer): the worker must still be stopped."""
    from benchmarks.run.launchers import local

    started = []
    real_start = local.LocalLauncher._start

    def start_then_ctrl_c(self, *args, **kwargs):
        proc = real_start(self, *args, **kwargs)
        started.append(proc.pid)
        os.kill(os.getpid(), signal.SIGINT)
        return proc

    monkeypatch.setattr(local.LocalLauncher, "_start", start_then_ctrl_c)
    cfg = _cfg(tmp_path, models="broken", seeds=1, epochs=500, params="model_params: {broken: {kind: slow}}")
    out = tmp_path / "out"
    assert main(["run", str(cfg), "--out", str(out), "--jobs", "1", "--no-report"]) == 130
    assert "attnbench: interrupted" in capsys.readouterr().err
    assert len(started) == 1
    if not _gone(started[0]):
        os.kill(started[0], signal.SIGKILL)  # not left behind by a failing test
        pytest.fail("the worker trains on after the run said interrupted")
    assert not R.load_records(out) and not list(out.rglob("*.claim"))  # pending, claim released


def test_csv_logger_per_cell_and_a_missing_tracker_is_one_line(tmp_path, capsys, monkeypatch):
    from benchmarks.run.cell import LOGGER_ENV

    monkeypatch.delenv(LOGGER_ENV, raising=False)
    out = tmp_path / "out"
    assert main(["run", str(_cfg(tmp_path, seeds=1)), "--out", str(out), "--logger", "csv", "--no-report"]) == 0
    (rec,) = R.load_records(out)
    metrics = list((out / "logs").rglob("metrics.csv"))
    assert len(metrics) == 1 and rec["cell_id"] in str(metrics[0])
    monkeypatch.delenv(LOGGER_ENV, raising=False)
    for name, needle in (("nope", "unknown"), ("wandb", "pip install wandb")):
        import importlib.util

        if name == "wandb" and importlib.util.find_spec("wandb") is not None:
            continue
        assert main(["run", str(_cfg(tmp_path)), "--out", str(tmp_path / "o2"), "--logger", name]) == 2
        assert needle in capsys.readouterr().err
