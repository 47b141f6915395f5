"""The runner: config validation, cell ids, failures recorded, resume, atomic records,
and the best-validation checkpoint (not the last epoch) being tested."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from torch import nn

from benchmarks.run import records as R
from benchmarks.run.runner import RunOptions, run_suite
from benchmarks.config.schema import ConfigError
from benchmarks.config.suite import cell_id, expand, load_suite, validate_suite
from tests.helpers import toy_parts, toy_task
toy_task.register()
CONFIGS = Path(__file__).resolve().parents[3] / "benchmarks" / "configs"


class Flipping(nn.Module):
    """Learns fine, then after 12 training steps flips its predictions: the last epoch is the
    worst, so only testing the best-validation checkpoint gives a high test accuracy."""

    def __init__(self, info) -> None:
        super().__init__()
        self.lin = nn.Linear(info["dim"], 2)
        self.register_buffer("age", torch.zeros((), dtype=torch.long))

    def forward(self, x):
        if self.training:
            self.age += 1
        out = self.lin(x)
        return out if self.age < 12 else -out


if "flipping" not in toy_task.TASKS.get("toy").models:
    toy_task.TASKS.get("toy").models.register(
        "flipping", toy_task.ModelSpec("flipping", "rnn", lambda info: Flipping(info), {})
    )


def _suite(models, **extra):
    cfg = {"suite": "t", "seeds": 2, "trainer": {"max_epochs": 8, "accelerator": "cpu"},
           "cells": [{"task": "toy", "dataset": "points", "models": models}]}
    cfg.update(extra)
    return cfg


def _opts(tmp_path, **kw):
    lines = []
    return RunOptions(out=tmp_path / "out", cache_dir=tmp_path / "cache", log=lines.append, **kw), lines


# ----------------------------------------------------------------------------- validation
@pytest.mark.parametrize(
    "mutate,match",
    [
        (lambda c: c.update(epochs=3), r"unknown key 'epochs'; valid keys: suite, description, seeds, train_fraction, trainer, cells"),
        (lambda c: c["trainer"].update(max_epoch=3), r"unknown key 'trainer.max_epoch'; valid keys of trainer: max_epochs"),
        (lambda c: c["cells"][0].update(task="chess"), r"cells\[0\].task: unknown task 'chess'; valid: .*toy"),
        (lambda c: c["cells"][0].update(dataset="cifar"), r"unknown dataset of task 'toy' 'cifar'; valid: points"),
        (lambda c: c["cells"][0].update(models=["linear", "lstm"]), r"unknown model of task 'toy' 'lstm'; valid: .*linear"),
        (lambda c: c["cells"][0].update(model_params={"linear": {"depth": 2}}), r"'cells\[0\].model_params.linear.depth'; valid model 'linear' parameters: hidden"),
        (lambda c: c["cells"][0].update(model_params={"broken": {}}), r"model_params.broken': not among this cell's models"),
        (lambda c: c["cells"][0].update(module_params={"lr_max": 1}), r"module_params.lr_max'; valid task 'toy' module parameters: lr"),
        (lambda c: c["cells"][0].update(dataset_params={"size": 1}), r"dataset_params.size'; valid dataset 'points' parameters: n"),
        (lambda c: c.update(seeds=0), r"seeds=0 is invalid"),
        (lambda c: c["trainer"].update(precision="fp8"), r"trainer.precision='fp8' is invalid: expected one of"),
        (lambda c: c.update(cells=[]), r"'cells' is empty"),
    ],
)
def test_bad_configs_name_the_key_and_the_choices(mutate, match):
    cfg = _suite(["linear"])
    mutate(cfg)
    with pytest.raises(ConfigError, match=match):
        validate_suite(cfg, source="x.yaml")


@pytest.mark.parametrize("path", sorted(CONFIGS.glob("*.yaml")), ids=lambda p: p.name)
def test_every_shipped_config_validates(path):
    raw = path.read_text()
    if "cells:" not in raw:
        pytest.skip("a micro-benchmark config (validated by its benchmark's tests)")
    cfg = load_suite(path)
    assert expand(cfg)


def test_set_overrides_and_cell_ids(tmp_path):
    p = tmp_path / "s.yaml"
    p.write_text(json.dumps(_suite(["linear", "flipping"])))
    cfg = load_suite(p, ["trainer.max_epochs=3", "seeds=[5, 7]"])
    cells = expand(cfg)
    assert [(c.model, c.seed) for c in cells] == [("linear", 5), ("linear", 7), ("flipping", 5), ("flipping", 7)]
    assert all(c.config["trainer"]["max_epochs"] == 3 for c in cells)
    assert len({c.cell_id for c in cells}) == 4
    # the id is a hash of the resolved config: stable, order-independent, sensitive to values
    c = cells[0].config
    assert cell_id(dict(reversed(list(c.items())))) == cells[0].cell_id
    assert cell_id({**c, "seed": 6}) != cells[0].cell_id
    with pytest.raises(ConfigError, match="--set 'trainer.max_epochs'"):
        load_suite(p, ["trainer.max_epochs"])


def test_cell_trainer_absent_inherits_and_null_switches_off():
    cfg = _suite(["linear"])
    cfg["trainer"].update(early_stopping_patience=5, max_time_s=60)
    cfg["cells"].append({"task": "toy", "dataset": "points", "models": ["flipping"],
                         "trainer": {"early_stopping_patience": None, "max_epochs": 3}})
    cells = expand(validate_suite(cfg, source="x.yaml"))
    inherit = next(c for c in cells if c.model == "linear").config["trainer"]
    off = next(c for c in cells if c.model == "flipping").config["trainer"]
    assert (inherit["early_stopping_patience"], inherit["max_time_s"], inherit["max_epochs"]) == (5, 60, 8)
    assert (off["early_stopping_patience"], off["max_time_s"], off["max_epochs"]) == (None, 60, 3)
    # a key that cannot be off is still checked: null is refused with the key named
    cfg["cells"][1]["trainer"] = {"max_epochs": None}
    with pytest.raises(ConfigError, match=r"cells\[1\]\.trainer\.max_epochs"):
        validate_suite(cfg, source="x.yaml")


# ----------------------------------------------------------------------------- running
def test_failures_are_recorded_and_the_matrix_goes_on(tmp_path):
    cfg = validate_suite(
        {"suite": "t", "seeds": 1, "trainer": {"max_epochs": 5, "accelerator": "cpu"},
         "cells": [
             {"task": "toy", "dataset": "points", "models": ["broken"], "model_params": {"broken": {"kind": "raise"}}},
             {"task": "toy", "dataset": "points", "models": ["broken"], "model_params": {"broken": {"kind": "nan"}}},
             {"task": "toy", "dataset": "points", "models": ["broken"], "model_params": {"broken": {"kind": "oom"}}},
             {"task": "toy", "dataset": "points", "models": ["linear"]},
         ]}
    )
    opts, lines = _opts(tmp_path)
    summary = run_suite(cfg, opts)
    recs = {(r["model"], r["config"]["model_params"].get("kind")): r for r in R.load_records(opts.out)}
    assert summary.ran == 4 and len(summary.failed) == 3
    assert recs[("broken", "raise")]["status"] == "failed" and "deliberately broken" in recs[("broken", "raise")]["reason"]
    assert "non-finite training loss" in recs[("broken", "nan")]["reason"]
    assert recs[("broken", "oom")]["reason"].startswith("out of memory")
    ok = recs[("linear", None)]
    assert ok["status"] == "ok" and ok["test"]["acc"] > 0.8
    assert any("FAILED" in line for line in lines) and any("[4/4]" in line for line in lines)


def test_record_contents_and_best_checkpoint_is_tested(tmp_path):
    cfg = validate_suite(_suite(["flipping"], seeds=1))
    opts, lines = _opts(tmp_path, progress_every_s=0.0)
    run_suite(cfg, opts)
    assert any("epoch 8/8 val/acc=" in line for line in lines)  # progress lines
    (rec,) = R.load_records(opts.out)
    assert rec["status"] == "ok", rec.get("reason")
    curve = [p["val_metric"] for p in rec["curve"]]
    assert max(curve) > 0.8 and curve[-1] < 0.3  # the model got worse after its best epoch
    assert rec["best_val"]["value"] == pytest.approx(max(curve))
    assert rec["best_val"]["epoch"] == curve.index(max(curve))
    assert rec["test"]["acc"] > 0.8  # tested at the best checkpoint, not the last epoch
    for key in ("params", "flops_per_sample", "train_time_s", "train_samples_per_s", "infer_samples_per_s", "peak_mem_bytes"):
        assert rec["cost"][key] is not None and rec["cost"][key] >= 0, key
    assert rec["cost"]["params"] == 4 * 2 + 2
    assert rec["cost"]["optimizer_impl"] == "for-loop"  # CPU: torch's default (fused is for CUDA)
    assert rec["cost"]["train_tokens_per_s"] == pytest.approx(rec["cost"]["train_samples_per_s"] * 4)
    assert rec["env"]["torch"] == torch.__version__ and "git_commit" in rec["env"]
    assert rec["config"]["seed"] == 0 and rec["data"]["checksum"].startswith("sha256:")
    assert not (opts.out / ".checkpoints").exists()


def test_rerun_skips_finished_and_resumes_after_a_kill(tmp_path, monkeypatch):
    cfg = validate_suite(_suite(["linear", "broken"]))
    opts, _ = _opts(tmp_path)
    import benchmarks.run.cell as cell_mod

    real, calls = cell_mod.run_cell, []

    def dies_on_third(cell, suite, o):
        calls.append(cell.label)
        if len(calls) == 3:
            raise KeyboardInterrupt  # the process is stopped mid-matrix
        return real(cell, suite, o)

    monkeypatch.setattr(cell_mod, "run_cell", dies_on_third)
    with pytest.raises(KeyboardInterrupt):
        run_suite(cfg, opts)
    assert len(R.load_records(opts.out)) == 2
    monkeypatch.setattr(cell_mod, "run_cell", real)
    s = run_suite(cfg, opts)
    assert (s.ran, s.skipped) == (2, 2)  # only the unfinished cells ran
    s = run_suite(cfg, opts)
    assert (s.ran, s.skipped) == (0, 4)
    s = run_suite(cfg, RunOptions(out=opts.out, cache_dir=opts.cache_dir, retry_failed=True, log=lambda *_: None))
    assert (s.ran, s.skipped) == (2, 2)  # the two failed 'broken' cells
    s = run_suite(cfg, RunOptions(out=opts.out, cache_dir=opts.cache_dir, force=True, log=lambda *_: None))
    assert s.ran == 4
    assert len(R.load_records(opts.out)) == 4  # reruns replace records, never duplicate them
    manifest = json.loads((opts.out / R.MANIFEST).read_text())
    assert len(manifest["cells"]) == 4


def test_a_slice_writes_the_whole_suites_manifest(tmp_path):
    """``--tasks`` (``only_tasks``) runs a slice, but the manifest lists every cell of the suite:
    a later slice into the same folder does not hide the earlier ones' records as "not in the
    manifest", and the report counts the cells no slice has run yet as missing."""
    from benchmarks.report.analysis import analyse

    cfg = validate_suite(_suite(["linear"]))
    opts, lines = _opts(tmp_path, only_tasks=("another_task",))  # a slice with none of these cells
    s = run_suite(cfg, opts)
    assert (s.ran, s.skipped) == (0, 0) and "2 cells, 0 of tasks another_task" in lines[0]
    manifest = json.loads((opts.out / R.MANIFEST).read_text())
    assert len(manifest["cells"]) == 2 and manifest["config"]["cells"] == cfg["cells"]
    assert len(analyse(opts.out).warnings.get("missing", [])) == 2  # both still to run
    opts, _ = _opts(tmp_path, only_tasks=("toy",))
    assert run_suite(cfg, opts).ran == 2
    an = analyse(opts.out)
    assert not an.warnings.get("missing") and not an.warnings.get("stale")


def test_interrupted_write_leaves_old_record_intact(tmp_path, monkeypatch):
    path = tmp_path / "runs" / "a.json"
    R.write_json_atomic(path, {"v": 1})

    def boom(self, *a, **k):  # the temporary file exists; writing it fails half-way
        self.open("w").write('{"v": ')
        raise OSError("disk full")

    monkeypatch.setattr(Path, "write_text", boom)
    with pytest.raises(OSError, match="disk full"):
        R.write_json_atomic(path, {"v": 2})
    monkeypatch.undo()
    assert json.loads(path.read_text()) == {"v": 1}
    assert [p.name for p in path.parent.iterdir()] == ["a.json"]  # no temp file left behind


def test_corrupt_record_is_skipped_with_a_warning(tmp_path):
    runs = tmp_path / "runs"
    runs.mkdir()
    (runs / "bad.json").write_text('{"schema": 1, "cell_')
    with pytest.warns(UserWarning, match="unreadable"):
        assert R.load_records(tmp_path) == []


# ----------------------------------------------------------------------------- train_fraction
def test_train_fraction_validation_and_cell_ids():
    base = expand(validate_suite(_suite(["linear"])))
    same = expand(validate_suite(_suite(["linear"], train_fraction=1.0)))
    assert [c.cell_id for c in base] == [c.cell_id for c in same]  # 1.0 keeps the ids of old records
    cells = expand(validate_suite(_suite(["linear"], train_fraction=[0.25, 1.0])))
    assert [(c.train_fraction, c.seed) for c in cells] == [(0.25, 0), (0.25, 1), (1.0, 0), (1.0, 1)]
    assert len({c.cell_id for c in cells}) == 4
    assert "train=0.25" in cells[0].label and "train=" not in cells[2].label
    cfg = _suite(["linear"])
    cfg["cells"][0]["train_fraction"] = 0.5  # a cell's value overrides the suite's
    assert {c.train_fraction for c in expand(validate_suite(cfg))} == {0.5}
    for bad in (0, 1.5, [], [0.5, 0.5], "half", True):
        with pytest.raises(ConfigError, match=r"train_fraction"):
            validate_suite(_suite(["linear"], train_fraction=bad))


def test_train_fraction_runs_on_a_seeded_subset_and_reports_a_sweep(tmp_path):
    from benchmarks.report import write_report

    cfg = validate_suite(_suite(["linear"], train_fraction=[0.25, 1.0], trainer={"max_epochs": 3, "accelerator": "cpu"}))
    opts, _ = _opts(tmp_path)
    run_suite(cfg, opts)
    recs = R.load_records(opts.out)
    assert len(recs) == 4 and all(r["status"] == "ok" for r in recs), [r.get("reason") for r in recs]
    small = sorted((r for r in recs if r["data"].get("train_fraction") == 0.25), key=lambda r: r["seed"])
    assert [r["data"]["train_size"] for r in small] == [40, 40]
    full = [r for r in recs if "train_fraction" not in r["data"]]
    assert [r["data"]["train_size"] for r in full] == [160, 160]
    # the full-data checksum is recorded for every fraction: one dataset, no checksum warning
    assert len({r["data"]["checksum"] for r in recs}) == 1
    written = write_report(opts.out)
    md = (opts.out / "REPORT.md").read_text()
    assert "toy / points [train 25%]" in md and "quality vs training-set size" in md
    assert any(k.endswith("__datasize.png") for k in written)
    assert "different checksums" not in md


def test_train_fraction_needs_limit_train(tmp_path, monkeypatch):
    monkeypatch.delattr(toy_parts.ToyData, "limit_train")
    cfg = validate_suite(_suite(["linear"], seeds=1, train_fraction=0.5))
    opts, _ = _opts(tmp_path)
    run_suite(cfg, opts)
    (rec,) = R.load_records(opts.out)
    assert rec["status"] == "failed" and "has no limit_train" in rec["reason"]


class _EpochEndClassifier(toy_parts.Classifier):
    """Logs val/acc once per epoch in on_validation_epoch_end (as corpus metrics like BLEU do)."""

    def step(self, batch, stage):
        out = super().step(batch, stage)
        if stage == "val":
            self._hits = getattr(self, "_hits", [])
            self._hits.append(out.metrics.pop("acc"))
        return out

    def on_validation_epoch_end(self):
        self.log("val/acc", torch.stack(self._hits).mean())
        self._hits = []


def test_metric_logged_at_epoch_end_reaches_the_curve(tmp_path):
    if "toy_epoch" not in toy_task.TASKS:
        t = toy_task.Task(name="toy_epoch", metric="acc", mode="max",
                          make_module=lambda net, info, **kw: _EpochEndClassifier(net, **kw), module_params={"lr": 0.05})
        t.datasets.register("points", toy_task.TASKS.get("toy").datasets.get("points"))
        t.models.register("linear", toy_task.TASKS.get("toy").models.get("linear"))
        toy_task.register_task(t)
    cfg = _suite(["linear"], seeds=1)
    cfg["cells"][0]["task"] = "toy_epoch"
    opts, _ = _opts(tmp_path)
    run_suite(validate_suite(cfg), opts)
    (rec,) = R.load_records(opts.out)
    assert rec["status"] == "ok", rec.get("reason")
    vals = [p["val_metric"] for p in rec["curve"]]
    assert len(vals) == 8 and all(v is not None for v in vals)
    assert rec["best_val"]["value"] == pytest.approx(max(vals)) and rec["best_val"]["epoch"] == vals.index(max(vals))


def test_git_dirty_means_code_not_results(tmp_path):
    """A run into a committed results folder rewrites its manifest and report: that alone does
    not make the run's records dirty; a changed tracked file elsewhere does."""
    import subprocess

    def git(*args):
        subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@t", *args], cwd=tmp_path, check=True,
                       capture_output=True)

    (tmp_path / "results").mkdir()
    (tmp_path / "results" / "REPORT.md").write_text("old")
    (tmp_path / "code.py").write_text("x = 1")
    git("init", "-q")
    git("add", ".")
    git("commit", "-qm", "init")
    commit, dirty = R.git_state(tmp_path)
    assert len(commit) == 40 and dirty is False
    (tmp_path / "results" / "REPORT.md").write_text("rewritten by a run")
    (tmp_path / "new_untracked.py").write_text("")
    assert R.git_state(tmp_path)[1] is False
    (tmp_path / "code.py").write_text("x = 2")
    assert R.git_state(tmp_path)[1] is True
    assert R.git_state(tmp_path / "results")[1] is True  # from a subfolder: the whole checkout's code counts


def test_a_forked_cell_names_the_code_its_pool_imported_not_the_checkout_at_its_start(monkeypatch):
    from benchmarks.run import records

    monkeypatch.setattr(records, "git_state", lambda: ("b" * 40, False))  # the checkout when the cell starts
    monkeypatch.delenv(records.CODE_GIT_ENV, raising=False)
    env = records.environment()
    assert env["git_commit"] == "b" * 40 and env["git_dirty"] is False and "git_checkout_at_start" not in env
    monkeypatch.setenv(records.CODE_GIT_ENV, json.dumps(["a" * 40, True]))  # the forkserver imported a dirty "a"
    env = records.environment()
    assert env["git_commit"] == "a" * 40 and env["git_dirty"] is True and env["git_checkout_at_start"] == "b" * 40
    monkeypatch.setenv(records.CODE_GIT_ENV, json.dumps(["b" * 40, False]))  # nothing moved
    assert "git_checkout_at_start" not in records.environment()
    monkeypatch.setattr(records, "git_state", lambda: ("b" * 40, True))  # edited since, not committed
    assert records.environment()["git_checkout_at_start"] == "b" * 40 + "-dirty"


def test_the_local_pool_passes_the_code_it_imported_to_its_cells():
    from benchmarks.run.launchers import local
    from benchmarks.run.records import CODE_GIT_ENV

    pool = local.LocalLauncher(opts=None)
    pool._context()
    commit, dirty = json.loads(pool.code_git)
    assert commit is None or len(commit) == 40
    assert CODE_GIT_ENV.startswith("ATTNBENCH_")  # the child's env keeps it (it drops other ATTNBENCH_ keys)


# ----------------------------------------------------------------------------- a missing dataset fails fast, once
_ABSENT_BUILDS: list[int] = []


def _absent_build(data_dir, cache_dir, seed, **params):
    from tasks.common.data import DataMissing

    _ABSENT_BUILDS.append(seed)
    where = Path(data_dir or cache_dir) / "absent" / "train.csv"
    raise DataMissing(f"absent: missing {where}; no download source is known (pass --data-dir with the files)")


def test_a_missing_dataset_fails_fast_once_without_records(tmp_path, monkeypatch):
    """Issue 33 item 6: one check per dataset in the driver, before any cell; no failed records
    (so a rerun with --data-dir runs every cell)."""
    from benchmarks.config.schema import CliError

    _ABSENT_BUILDS.clear()
    datasets = toy_task.TASKS.get("toy").datasets  # a real dataset whose files are absent, for this test only
    monkeypatch.setitem(datasets._items, "absent", toy_task.DatasetSpec("absent", _absent_build, {}))
    cfg = validate_suite(_suite(["linear"], seeds=3, cells=[
        {"task": "toy", "dataset": "absent", "models": ["linear", "flipping"]},
        {"task": "toy", "dataset": "points", "models": ["linear"]}]))
    opts, _ = _opts(tmp_path)
    with pytest.raises(CliError) as info:
        run_suite(cfg, opts)
    msg = str(info.value)
    assert "\n" not in msg and _ABSENT_BUILDS == [0]  # one check, not one per cell (6 here)
    assert msg.startswith("dataset toy/absent is missing (no --data-dir ($ATTNBENCH_DATA unset)): absent: missing ")
    assert str(tmp_path / "cache" / "absent" / "train.csv") in msg and "checked before any cell, nothing ran" in msg
    assert not (opts.out / R.RUNS_DIR).exists()


# ----------------------------------------------------------------------------- failures from outside a cell
def test_failure_kinds():
    import errno
    import signal

    from tasks.common.data import DataMissing

    assert R.failure_kind(DataMissing("cora: missing /d/x")) == "external"
    assert R.failure_kind(OSError(errno.ENOSPC, "No space left on device")) == "external"
    try:  # the cause chain counts: a loader wrapping the missing file
        try:
            raise DataMissing("x")
        except DataMissing as inner:
            raise RuntimeError("could not load") from inner
    except RuntimeError as outer:
        assert R.failure_kind(outer) == "external"
    for own in (ValueError("bad shape"), RuntimeError("CUDA out of memory"), FileExistsError("x")):
        assert R.failure_kind(own) == "cell"
    assert R.exit_failure_kind(-signal.SIGKILL) == "external" and R.exit_failure_kind(137) == "external"
    assert R.exit_failure_kind(-signal.SIGTERM) == "external" and R.exit_failure_kind(130) == "external"
    assert R.exit_failure_kind(-signal.SIGSEGV) == "cell" and R.exit_failure_kind(2) == "cell"
    assert R.exit_failure_kind(None) == "cell"  # its own time limit
    assert R.retried_by_default({"status": "failed", "failure": "external"})
    assert not R.retried_by_default({"status": "failed", "failure": "cell"})
    assert R.retried_by_default({"status": "failed", "reason": "DataMissing: cora: missing x"})  # older records
    assert not R.retried_by_default({"status": "failed", "reason": "ValueError: x"})


def test_a_failure_from_outside_the_cell_is_retried_without_asking(tmp_path, monkeypatch):
    """Data missing (or a full disk, a kill) is not the cell's fault: the next run retries the
    cell by itself. A failure of the cell's own code stands until --retry-failed."""
    from tasks.common.data import DataMissing
    from tasks.common.registry import get_task

    cfg = validate_suite(_suite(["linear", "broken"], seeds=1, cells=[
        {"task": "toy", "dataset": "points", "models": ["linear", "broken"],
         "model_params": {"broken": {"kind": "raise"}}}]))
    opts, lines = _opts(tmp_path)
    datasets = get_task("toy").datasets
    real_get = datasets.get

    def missing(*a, **k):
        raise DataMissing("points: missing /nowhere/points.bin")

    import dataclasses

    monkeypatch.setattr(datasets, "get", lambda name: dataclasses.replace(real_get(name), build=missing))
    s = run_suite(cfg, opts)
    assert s.ran == 2 and len(s.failed) == 2
    assert {r["failure"] for r in R.load_records(opts.out)} == {"external"}
    monkeypatch.setattr(datasets, "get", real_get)  # the data is back
    s = run_suite(cfg, opts)  # no --retry-failed: both retried
    assert s.ran == 2 and len(s.failed) == 1 and s.standing_failed == 0
    assert any("2 cells failed for a cause outside them" in ln for ln in lines)
    recs = {r["model"]: r for r in R.load_records(opts.out)}
    assert recs["linear"]["status"] == "ok" and recs["linear"]["failure"] is None
    assert recs["broken"]["failure"] == "cell" and "deliberately broken" in recs["broken"]["reason"]
    s = run_suite(cfg, opts)  # the cell's own failure stands
    assert s.ran == 0 and s.standing_failed == 1


def test_a_model_slice_runs_only_its_cells_with_the_suites_ids(tmp_path):
    """``--models`` (``only_models``) runs the named models' cells, with the ids the whole suite gives
    them; the others stay to run."""
    from benchmarks.config.suite import expand

    cfg = validate_suite(_suite(["linear", "broken"]))
    opts, lines = _opts(tmp_path, only_models=("linear",))
    s = run_suite(cfg, opts)
    assert (s.ran, s.failed) == (2, []) and "4 cells, 2 of models linear" in lines[0]
    ran = {json.loads(p.read_text())["cell_id"] for p in (opts.out / "runs").rglob("*.json")}
    assert ran == {c.cell_id for c in expand(cfg) if c.model == "linear"}
