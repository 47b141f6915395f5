"""The CLI as a careless or hostile user meets it: every bad input is one clear line with the
right exit code and no traceback, runtime faults cost only their cell and show in the exit
code, two runs on one output folder never destroy each other's results, and Ctrl-C is
reported as an interruption (exit 130)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from benchmarks.run import claims as C
from benchmarks.run import records as R
from benchmarks.report import stats
from benchmarks.cli import main
from tests.helpers.procs import communicate_all, reaped
from tests.helpers.toy_task import register

REPO = Path(__file__).resolve().parents[3]

TOY = """
suite: toy
seeds: {seeds}
trainer: {{max_epochs: {epochs}, accelerator: cpu}}
cells:
  - task: toy
    dataset: points
    models: [{model}]
    {params}
"""


@pytest.fixture(autouse=True)
def _toy_plugin(monkeypatch):
    """Worker processes of the local pool import the toy task too."""
    from benchmarks.run.worker import PLUGINS_ENV

    monkeypatch.setenv(PLUGINS_ENV, "tests.helpers.toy_task")


def _toy(tmp_path: Path, model: str = "linear", seeds: int = 1, epochs: int = 2, params: str = "") -> Path:
    register()
    cfg = tmp_path / f"toy-{model}.yaml"
    cfg.write_text(TOY.format(seeds=seeds, epochs=epochs, model=model, params=params))
    return cfg


def _run_cli(argv, capsys) -> tuple[int, str, str]:
    code = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return code, out, err


def _no_traceback(*texts: str) -> None:
    for t in texts:
        assert "Traceback" not in t, t


# --------------------------------------------------------------------------- bad input -> exit 2
def _bad_inputs(tmp: Path) -> list[tuple[str, list, str]]:
    """(case, argv, text the one-line error must contain)."""
    good = _toy(tmp)
    (tmp / "latin1.yaml").write_bytes("suite: caf\xe9\n".encode("latin-1"))
    (tmp / "broken.yaml").write_text("suite: [unclosed\n")
    (tmp / "list.yaml").write_text("- a\n- b\n")
    (tmp / "empty.yaml").write_text("")
    (tmp / "a_file").write_text("x")
    (tmp / "folder.yaml").mkdir(exist_ok=True)
    nan_lr = tmp / "nan_lr.yaml"
    nan_lr.write_text(TOY.format(seeds=1, epochs=2, model="linear", params="module_params: {lr: .nan}"))
    (tmp / "twice.yaml").write_text(good.read_text() + "seeds: 3\n")
    return [
        ("YAML .nan learning rate, --dry-run", ["run", nan_lr, "--dry-run"], "module_params.lr=nan is invalid"),
        ("YAML .inf from --set, --dry-run", ["run", good, "--dry-run", "--set", "trainer.gradient_clip_val=.inf"],
         "trainer.gradient_clip_val=inf is invalid: expected a finite value"),
        ("missing config", ["run", tmp / "nope.yaml"], "config file not found"),
        ("config is a folder", ["run", tmp / "folder.yaml"], "is a folder"),
        ("non-UTF-8 config", ["run", tmp / "latin1.yaml"], "not UTF-8"),
        ("invalid YAML", ["run", tmp / "broken.yaml"], "not valid YAML"),
        ("YAML list, not a mapping", ["run", tmp / "list.yaml"], "mapping"),
        ("empty config", ["run", tmp / "empty.yaml"],
         "empty config: expected a mapping with at least `suite` and `cells`"),
        ("a key given twice", ["run", tmp / "twice.yaml", "--dry-run"], "key 'seeds' is given twice"),
        ("--out is a file", ["run", good, "--out", tmp / "a_file"], "--out"),
        ("--out below a file", ["run", good, "--out", tmp / "a_file" / "sub"], "--out"),
        ("--data-dir missing", ["run", good, "--data-dir", tmp / "no_data"], "--data-dir"),
        ("--data-dir is a file", ["run", good, "--data-dir", tmp / "a_file"], "--data-dir"),
        ("--dry-run refuses a bad --data-dir", ["run", good, "--dry-run", "--data-dir", tmp / "no_data"], "--data-dir"),
        ("--devices not a number", ["run", good, "--devices", "abc"], "--devices"),
        ("--devices 0", ["run", good, "--devices", "0"], "--devices"),
        ("--devices 0 in --dry-run", ["run", good, "--dry-run", "--devices", "x,1"], "--devices"),
        ("--set without =", ["run", good, "--set", "seeds"], "KEY=VALUE"),
        ("--set bad YAML value", ["run", good, "--set", "seeds=[1,"], "not valid YAML"),
        ("--set unknown key", ["run", good, "--set", "trainer.max_epoch=3", "--dry-run"], "max_epoch"),
        ("report of a missing folder", ["report", tmp / "no_results"], "not found"),
        ("report of an empty folder", ["report", tmp / "folder.yaml"], "no attnbench result records"),
        ("report of two folders without --out", ["report", tmp, tmp / "folder.yaml"], "--out"),
        ("unknown micro-benchmark", ["bench", "nope"], "unknown micro-benchmark"),
        ("data with a missing config", ["data", tmp / "nope.yaml"], "config file not found"),
        ("data with a missing --data-dir", ["data", "--data-dir", tmp / "no_data"], "--data-dir"),
    ]


@pytest.mark.parametrize("index", range(26))
def test_bad_input_is_one_line_exit_2(index, tmp_path, capsys):
    case, argv, needle = _bad_inputs(tmp_path)[index]
    code, out, err = _run_cli(argv, capsys)
    assert code == 2, (case, out, err)
    _no_traceback(out, err)
    lines = [ln for ln in err.splitlines() if ln.startswith("attnbench: error:")]
    assert len(lines) == 1, (case, err)
    assert needle in err, (case, err)
    assert not (tmp_path / "results").exists()


def test_the_case_list_is_complete(tmp_path):
    assert len(_bad_inputs(tmp_path)) == 26


def test_unknown_subcommand_and_option_are_usage_errors(capsys):
    assert main(["frobnicate"]) == 2
    assert main(["run", "quick", "--no-such-option"]) == 2
    _no_traceback(*capsys.readouterr())


def test_report_without_argument_and_no_results_is_an_error(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    code, _, err = _run_cli(["report"], capsys)
    assert code == 2 and "no suite folders under results/" in err


def test_unexpected_error_is_one_line_exit_1(tmp_path, monkeypatch, capsys):
    import benchmarks.run.runner as runner

    def boom(*a, **k):
        raise RuntimeError("disk on fire\nsecond line")

    monkeypatch.setattr(runner, "run_suite", boom)
    code, out, err = _run_cli(["run", _toy(tmp_path), "--out", tmp_path / "o"], capsys)
    assert code == 1 and "attnbench: error: RuntimeError: disk on fire" in err
    assert "second line" not in err
    _no_traceback(out, err)


def test_print_config_is_yaml_that_validates_again(tmp_path, capsys):
    import yaml

    from benchmarks.config.suite import validate_suite

    code, out, _ = _run_cli(["run", _toy(tmp_path), "--print-config", "--set", "trainer.max_epochs=3"], capsys)
    assert code == 0
    cfg = yaml.safe_load(out[out.index("suite:"):])
    assert cfg["trainer"]["max_epochs"] == 3
    validate_suite(cfg)


# --------------------------------------------------------------------------- runtime faults
# the pool (the default launcher) once; the other failures in this process: the exit code is the
# runner's, whichever launcher ran the cell, and each pool start costs a fresh interpreter
@pytest.mark.parametrize("kind,reason,launcher", [("raise", "deliberately broken", "local"),
                                                  ("nan", "non-finite", "inline"), ("oom", "out of memory", "inline")])
def test_a_failed_cell_makes_the_exit_code_1_unless_allowed(kind, reason, launcher, tmp_path, capsys):
    cfg = _toy(tmp_path, "broken", params=f"model_params: {{broken: {{kind: {kind}}}}}")
    out = tmp_path / "out"
    code, stdout, err = _run_cli(["run", cfg, "--out", out, "--no-report", "--launcher", launcher], capsys)
    assert code == 1 and "1 failed in this run" in err
    _no_traceback(stdout, err)
    (rec,) = R.load_records(out)
    assert rec["status"] == "failed" and reason in rec["reason"]
    # the same failure, explicitly allowed (exploratory use): exit 0
    code, _, _ = _run_cli(["run", cfg, "--out", out, "--no-report", "--retry-failed", "--allow-failures",
                           "--launcher", launcher], capsys)
    assert code == 0
    # nothing ran this time, but the failed record stands: not a success (issue 34 item 4)
    code, stdout, err = _run_cli(["run", cfg, "--out", out, "--no-report"], capsys)
    assert code == 1, (stdout, err)
    assert "ran 0 cells (0 failed), skipped 1 finished ones (1 of them failed)" in stdout
    assert ("attnbench: 1 failed records from earlier runs stand (exit code 1; --retry-failed reruns them, "
            "--allow-failures makes it 0)") in err
    assert "failed in this run" not in err
    code, _, _ = _run_cli(["run", cfg, "--out", out, "--no-report", "--allow-failures"], capsys)
    assert code == 0


def test_checkpoints_are_per_process_and_cleaned_up(tmp_path, capsys):
    out = tmp_path / "out"
    code, _, _ = _run_cli(["run", _toy(tmp_path, seeds=2), "--out", out, "--no-report"], capsys)
    assert code == 0
    assert not (out / ".checkpoints").exists()
    assert not list(out.rglob("*.claim"))


# --------------------------------------------------------------------------- claims
def test_claim_is_exclusive_and_released(tmp_path):
    p = tmp_path / "runs" / "x.claim"
    first = C.claim(p)
    assert first is not None and p.exists()
    assert C.claim(p) is None  # this live process holds it
    first.release()
    assert not p.exists()
    again = C.claim(p)
    assert again is not None
    again.release()


def test_claim_of_a_dead_process_is_taken_over(tmp_path):
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    pid = int(dead.stdout)
    p = tmp_path / "c.claim"
    import socket

    p.write_text(json.dumps({"pid": pid, "host": socket.gethostname(), "token": "old"}))
    held = C.claim(p)
    assert held is not None and json.loads(p.read_text())["pid"] == os.getpid()
    held.release()


def test_claim_with_an_old_heartbeat_is_taken_over_and_a_fresh_one_is_not(tmp_path):
    p = tmp_path / "c.claim"
    p.write_text(json.dumps({"pid": 1, "host": "another-node", "token": "old"}))
    assert C.claim(p, stale_after_s=60) is None  # fresh, on another host: assume alive
    old = time.time() - 120
    os.utime(p, (old, old))
    held = C.claim(p, stale_after_s=60)
    assert held is not None
    held.release()


def test_a_failed_record_never_replaces_an_ok_one(tmp_path):
    from benchmarks.run.records import store
    from benchmarks.run.runner import RunOptions

    path = tmp_path / "r.json"
    ok = {"status": "ok", "started": "2026-01-01T00:00:00+00:00", "finished": "2026-01-01T00:00:10+00:00"}
    R.write_json_atomic(path, ok)
    failed = {"status": "failed", "reason": "boom"}
    logs: list[str] = []
    # written by another run after this one started (this run saw no record): kept, even under --force
    assert store(path, failed, RunOptions(out=tmp_path, force=True), None, logs.append) is None
    # the ok record this run saw at its start, without --force: kept too
    assert store(path, failed, RunOptions(out=tmp_path), dict(ok), logs.append) is None
    assert json.loads(path.read_text())["status"] == "ok" and len(logs) == 2
    # --force on the ok record this run saw: the user asked to rerun, the failure is the truth now
    assert store(path, failed, RunOptions(out=tmp_path, force=True), dict(ok), logs.append)
    assert json.loads(path.read_text())["status"] == "failed"


# --------------------------------------------------------------------------- processes
DRIVER = (
    "import sys; sys.path.insert(0, {repo!r});"
    "from tests.helpers.toy_task import register; register();"
    "from benchmarks.cli import main; sys.exit(main(sys.argv[1:]))"
)


def _spawn(argv: list, env: dict | None = None, **kw) -> subprocess.Popen:
    env = {**os.environ, "PYTHONUNBUFFERED": "1", **(env or {})}
    return subprocess.Popen([sys.executable, "-c", DRIVER.format(repo=str(REPO)), *map(str, argv)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env, cwd=REPO, **kw)


@pytest.mark.slow
@pytest.mark.parametrize("launcher", ["inline"])  # local: test_local_pool's two drivers of two workers each
def test_two_runs_on_one_folder_train_each_cell_once(launcher, tmp_path):
    cfg = _toy(tmp_path, "broken", seeds=4, epochs=3, params="model_params: {broken: {kind: slow}}")
    out, starts = tmp_path / "out", tmp_path / "starts.txt"
    procs = [_spawn(["run", cfg, "--out", out, "--no-report", "--launcher", launcher],
                    {"ATTNBENCH_TOY_STARTS": str(starts)}) for _ in range(2)]
    results = communicate_all(procs)  # a time-out kills them: no driver trains on after the test
    for p, (so, se) in zip(procs, results):
        assert p.returncode == 0, se[-2000:]
        _no_traceback(so, se)
    assert len(starts.read_text().split()) == 4  # one training start per cell over both runs
    recs = R.load_records(out)
    assert len(recs) == 4 and all(r["status"] == "ok" for r in recs)
    assert len({r["cell_id"] for r in recs}) == 4
    assert not list(out.rglob("*.claim")) and not (out / ".checkpoints").exists()


@pytest.mark.slow
# SIGINT (130, "interrupted"): test_local_pool's killed driver, which also resumes the run
@pytest.mark.parametrize("sig,code,word", [(signal.SIGTERM, 143, "terminated")])
def test_a_signal_mid_cell_is_reported_with_its_exit_code(sig, code, word, tmp_path):
    cfg = _toy(tmp_path, "broken", seeds=1, epochs=500, params="model_params: {broken: {kind: slow}}")
    out, stepped = tmp_path / "out", tmp_path / "stepped"
    p = _spawn(["run", cfg, "--out", out, "--no-report"], {"ATTNBENCH_TOY_STEPPED": str(stepped)})
    with reaped(p):  # a failing check never leaves the driver training
        # inside fit: the cell is claimed and a training step ran (polled, not slept: a starved CPU only waits longer)
        deadline = time.monotonic() + 240
        while time.monotonic() < deadline and p.poll() is None and not stepped.exists():
            time.sleep(0.1)
        assert stepped.exists(), f"no training step within 240 s (exit {p.poll()})"
        claims = list(out.rglob("*.claim"))
        p.send_signal(sig)
        so, se = communicate_all([p])[0]
        assert p.returncode == code, (so, se[-2000:])
        assert f"attnbench: {word}" in se
        _no_traceback(so, se)
        assert claims and not any(c.exists() for c in claims)  # released on the way out
        assert not R.load_records(out)  # an interrupted cell is not a failed one


# --------------------------------------------------------------------------- reports
def test_confidence_intervals_of_bounded_metrics_are_clipped():
    s = stats.summarize([1.0, 0.99, 1.0], bounds=(0.0, 1.0))
    assert s.ci_high == 1.0 and s.ci_low < 0.99
    assert stats.summarize([1.0, 0.99, 1.0]).ci_high > 1.0  # unbounded without bounds


def _fake_suite(root: Path, suite: str, acc: float) -> None:
    rec = {"schema": R.SCHEMA_VERSION, "suite": suite, "cell_id": f"{suite}-{acc}", "task": "toy", "dataset": "points",
           "model": "linear", "family": "other", "pattern": None, "seed": 0, "status": "ok",
           "metric": {"name": "acc", "mode": "max"}, "test": {"acc": acc}, "cost": {}, "curve": [], "env": {},
           "config": {}, "finished": "2026-01-01T00:00:00+00:00"}
    R.write_json_atomic(R.record_path(root, rec), rec)


def test_report_never_pools_reference_results_into_fresh_ones(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    _fake_suite(tmp_path / "results" / "toy", "toy", 0.5)
    _fake_suite(tmp_path / "results" / "reference" / "cpu" / "toy", "toy", 0.25)
    _fake_suite(tmp_path / "results" / "other", "other", 0.75)
    code, out, _ = _run_cli(["report"], capsys)
    assert code == 0
    csv_toy = (tmp_path / "results" / "toy" / "summary.csv").read_text()
    assert "0.5" in csv_toy and "0.25" not in csv_toy and "0.75" not in csv_toy
    assert (tmp_path / "results" / "other" / "summary.csv").exists()
    assert not (tmp_path / "results" / "summary.csv").exists()
    # naming several folders makes one combined report where --out says
    code, _, _ = _run_cli(["report", "results/toy", "results/other", "--out", "combined"], capsys)
    csv_all = (tmp_path / "combined" / "summary.csv").read_text()
    assert code == 0 and "0.5" in csv_all and "0.75" in csv_all
    # a reference folder named explicitly is reported on its own
    code, _, _ = _run_cli(["report", "results/reference/cpu/toy"], capsys)
    assert code == 0 and "0.25" in (tmp_path / "results/reference/cpu/toy/summary.csv").read_text()


# --------------------------------------------------------------------------- what makes a cell distinct
def test_the_device_and_tf32_are_part_of_a_gpu_cell_id_but_cpu_ids_stay(tmp_path, capsys):
    from benchmarks.config.suite import expand, load_suite

    cfg_path = _toy(tmp_path)
    cpu = expand(load_suite(cfg_path))[0]
    assert "device" not in cpu.config and "tf32" not in cpu.config["trainer"]
    gpu = expand(load_suite(cfg_path, ["trainer.accelerator=gpu"]))[0]
    assert gpu.config["device"] == "cuda" and gpu.cell_id != cpu.cell_id
    tf32 = expand(load_suite(cfg_path, ["trainer.tf32=true"]))[0]
    assert tf32.config["trainer"]["tf32"] is True and tf32.cell_id != cpu.cell_id
    # --accelerator on the command line is an override like --set: the dry run lists the GPU ids
    import torch

    with pytest.MonkeyPatch.context() as mp:  # as on a machine with CUDA
        mp.setattr(torch.cuda, "is_available", lambda: True)
        code, out, _ = _run_cli(["run", cfg_path, "--dry-run", "--accelerator", "gpu"], capsys)
    assert code == 0 and gpu.cell_id in out and cpu.cell_id not in out


@pytest.mark.parametrize("extra", [["--dry-run"], []], ids=["dry-run", "run"])
def test_gpu_cells_without_cuda_are_refused_before_any_cell(extra, tmp_path, monkeypatch, capsys):
    """Issue 33 item 6: not 'valid; N cells' and then exit 1 with no message."""
    import torch

    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    out = tmp_path / "out"
    code, stdout, err = _run_cli(["run", _toy(tmp_path), "--accelerator", "gpu", "--out", out, *extra], capsys)
    assert code == 2, (stdout, err)
    _no_traceback(stdout, err)
    assert err.count("attnbench: error:") == 1
    assert "trainer.accelerator='gpu': CUDA is not available on this machine" in err
    assert "1 cells (e.g. toy/points/linear seed=0)" in err and "--accelerator cpu or auto" in err
    assert "valid;" not in stdout and not (out / "runs").exists()


# --------------------------------------------------------------------------- attnbench data
def test_data_says_corrupt_for_a_present_but_unreadable_file(tmp_path, capsys):
    raw = tmp_path / "data" / "MNIST" / "raw"
    raw.mkdir(parents=True)
    for name in ("train-images-idx3-ubyte", "train-labels-idx1-ubyte", "t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte"):
        (raw / f"{name}.gz").write_bytes(b"not gzip at all")
    cfg = tmp_path / "v.yaml"
    cfg.write_text("suite: v\ncells:\n  - {task: vision, dataset: mnist, models: [cnn]}\n")
    code, out, err = _run_cli(["data", cfg, "--data-dir", tmp_path / "data", "--cache-dir", tmp_path / "cache"], capsys)
    assert code == 1
    (line,) = [ln for ln in out.splitlines() if ln.strip()]
    assert line.startswith("CORRUPT") and str(raw / "train-images-idx3-ubyte.gz") in line
    _no_traceback(out, err)


def test_report_flags_records_measured_on_a_shared_device(tmp_path):
    from benchmarks.report import analyse

    _fake_suite(tmp_path / "s", "s", 0.5)
    (path,) = list((tmp_path / "s").rglob("*.json"))
    rec = json.loads(path.read_text())
    assert "shared" not in analyse(tmp_path / "s").warnings
    rec["resources"] = {"cells_sharing_device": 4}
    R.write_json_atomic(path, rec)
    assert "device shared between cells" in analyse(tmp_path / "s").warnings["shared"][0]


@pytest.mark.parametrize("argv", [["--devices", "2"], ["--set", "trainer.devices=2"]])
def test_a_cell_on_several_cpu_processes_is_valid(argv, tmp_path, capsys):
    code, out, err = _run_cli(["run", _toy(tmp_path), "--dry-run", *argv], capsys)
    assert code == 0 and "valid; 1 cells" in out, err


def test_device_indices_on_cpu_are_one_line_with_the_choices(tmp_path, capsys):
    code, _, err = _run_cli(["run", _toy(tmp_path), "--dry-run", "--devices", "0,1"], capsys)
    assert code == 2 and "trainer.devices=[0, 1] is invalid with accelerator='cpu'" in err and "integer >= 1" in err
    _no_traceback(err)


@pytest.mark.parametrize("argv,message", [
    (["--slurm-partition", "debug"], "--slurm-partition is an option of the slurm launcher (--launcher slurm); "
                                     "with --launcher local it would be ignored"),
    (["--no-wait", "--launcher", "inline"], "--no-wait is an option of the slurm launcher"),
    (["--ray-address", "auto", "--launcher", "slurm"], "--ray-address is an option of the ray launcher"),
    (["--jobs", "2", "--launcher", "ray"], "--jobs/--gpus/--cells-per-gpu are options of the local launcher"),
])
def test_another_launchers_options_are_refused_not_ignored(capsys, argv, message):
    """Checked by --dry-run too: an option the chosen launcher would ignore is a usage error."""
    from benchmarks.cli import main

    assert main(["run", "quick", "--dry-run", *argv]) == 2
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err


# --------------------------------------------------------------------------- a reader that stops reading
class _ClosedPipe:
    """stdout whose reader went away (``attnbench list | head``): every write raises."""

    def write(self, text: str) -> int:
        raise BrokenPipeError(32, "Broken pipe")

    def flush(self) -> None:
        raise BrokenPipeError(32, "Broken pipe")


@pytest.mark.parametrize("argv", [["list"], ["env"]])
def test_a_closed_pipe_ends_quietly(argv, monkeypatch, capsys):
    monkeypatch.setattr(sys, "stdout", _ClosedPipe())
    code = main(argv)
    err = capsys.readouterr().err
    assert code == 141, err
    assert err == "", err


def test_a_closed_pipe_ends_quietly_end_to_end():
    """The real thing: the reader has closed the pipe before the first line; no error, exit 141."""
    proc = subprocess.Popen([sys.executable, "-m", "benchmarks", "list"], cwd=REPO, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE)
    proc.stdout.close()
    err = proc.stderr.read().decode()
    assert proc.wait(timeout=120) == 141, err
    assert err == "", err


# --------------------------------------------------------------------------- a full disk
def test_a_full_disk_is_one_line_naming_the_file_and_keeps_what_was_written(tmp_path, monkeypatch, capsys):
    """ENOSPC at the second record (simulated: the atomic writer's write raises it): one line
    with the record's path and "No space left on device", exit 1, the first record intact."""
    import errno

    real, written = R.write_atomic, []

    def fills_up(path, write, **kw):
        if f"{os.sep}{R.RUNS_DIR}{os.sep}" in str(path):
            if written:
                def enospc(tmp):
                    raise OSError(errno.ENOSPC, "No space left on device", str(tmp))
                return real(path, enospc, **kw)
            written.append(path)
        return real(path, write, **kw)

    monkeypatch.setattr(R, "write_atomic", fills_up)
    out = tmp_path / "out"
    code, stdout, err = _run_cli(["run", _toy(tmp_path, seeds=3), "--out", out, "--launcher", "inline",
                                  "--no-report"], capsys)
    assert code == 1, (stdout, err)
    _no_traceback(stdout, err)
    (line,) = err.splitlines()
    assert line.startswith(f"attnbench: error: {out}{os.sep}runs{os.sep}") and ".json: No space left on device" in line
    assert ".tmp" not in line and "records already written are kept" in line
    (rec,) = R.load_records(out)  # the one written before the disk filled up
    assert rec["status"] == "ok" and Path(rec["_path"]) == written[0]
    assert not [p for p in out.rglob("*") if ".tmp" in p.name]
