"""``attnbench tune CONFIG``: trials as ordinary cells (toy task, inline launcher), a tuning file
that a rerun and ``--check`` reproduce from the records, a run that names it, and bad input as one
line with exit code 2."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from benchmarks.cli import main
from benchmarks.run import records as R
from benchmarks.run.worker import PLUGINS_ENV
from tests.helpers.toy_task import register

SUITE = """
suite: toytune
seeds: 2
{tuning}
trainer: {{max_epochs: {epochs}, accelerator: cpu, deterministic: true}}
cells:
  - task: toy
    dataset: points
    models: [linear]
    module_params: {{lr: 0.05}}
"""
GRID = "0.001,0.1,1"


@pytest.fixture(autouse=True)
def _plugin(monkeypatch):
    register()
    monkeypatch.setenv(PLUGINS_ENV, "tests.helpers.toy_task")


def _config(tmp_path: Path, tuning: str = "", epochs: int = 2, name: str = "toy.yaml") -> Path:
    p = tmp_path / name
    p.write_text(SUITE.format(tuning=tuning, epochs=epochs))
    return p


def _tune(tmp_path: Path, *extra: str, config: Path | None = None) -> int:
    return main(["tune", str(config or _config(tmp_path)), "--grid", GRID, "--out", str(tmp_path / "trials"),
                 "--file", str(tmp_path / "tuning.yaml"), "--launcher", "inline", *extra])


@pytest.fixture(scope="module")
def tuned(tmp_path_factory) -> Path:
    """A toy config tuned once for the module: 3 learning rates x 2 seeds, trials in DIR/trials,
    file DIR/tuning.yaml (tests that change records work on a copy)."""
    tmp = tmp_path_factory.mktemp("tuned")
    with pytest.MonkeyPatch.context() as mp:
        register()
        mp.setenv(PLUGINS_ENV, "tests.helpers.toy_task")
        assert _tune(tmp) == 0
    return tmp


def test_tune_runs_the_grid_as_cells_and_writes_the_choice(tuned, capsys):
    import yaml

    recs = R.load_records(tuned / "trials")
    assert len(recs) == 6 and {r["config"]["module_params"]["lr"] for r in recs} == {0.001, 0.1, 1.0}
    assert all(r["suite"] == "toytune.tuning" and r["status"] == "ok" for r in recs)
    doc = yaml.safe_load((tuned / "tuning.yaml").read_text())
    assert doc["search"]["grid"] == [{"lr": 0.001}, {"lr": 0.1}, {"lr": 1.0}] and doc["search"]["seeds"] == [0, 1]
    [e] = doc["entries"]
    means = {t["lr"]: t["mean"] for t in e["trials"]}
    best = max(means, key=lambda lr: means[lr])  # what the records say, recomputed here
    assert e["chosen"] == {"lr": best} and {"lr": best} in e["window"]
    val = {lr: [r["best_val"]["value"] for r in recs if r["config"]["module_params"]["lr"] == lr] for lr in means}
    assert all(means[lr] == pytest.approx(sum(v) / 2, abs=1e-6) for lr, v in val.items())
    assert sorted(c for t in e["trials"] for c in t["cells"]) == sorted(r["cell_id"] for r in recs)
    assert doc["date"] == max(r["finished"] for r in recs)
    assert "Learning-rate tuning" in (tuned / "trials" / "TUNING.md").read_text()


def test_a_rerun_and_check_reproduce_the_file_from_its_records(tuned, capsys):
    first = (tuned / "tuning.yaml").read_bytes()
    assert _tune(tuned) == 0
    out = capsys.readouterr().out
    assert "ran 0 trials (0 failed), skipped 6 finished ones" in out  # finished trials are skipped
    assert (tuned / "tuning.yaml").read_bytes() == first
    assert main(["tune", str(tuned / "toy.yaml"), "--check", "--file", str(tuned / "tuning.yaml")]) == 0
    assert "matches its 6 trial records" in capsys.readouterr().out


def test_check_names_what_differs_from_the_records(tuned, tmp_path, capsys):
    import shutil

    import yaml

    shutil.copytree(tuned / "trials", tmp_path / "trials")
    doc = yaml.safe_load((tuned / "tuning.yaml").read_text())
    [e] = doc["entries"]
    cid = e["trials"][0]["cells"][0]
    [path] = [p for p in (tmp_path / "trials" / "runs").rglob(f"*-{cid}.json")]
    rec = json.loads(path.read_text())
    rec["best_val"]["value"] = 0.123
    path.write_text(json.dumps(rec))
    assert main(["tune", str(tuned / "toy.yaml"), "--check", "--file", str(tuned / "tuning.yaml"),
                 "--out", str(tmp_path / "trials")]) == 1
    lines = capsys.readouterr().out.splitlines()
    assert any("entries[toy/points/linear].trials[lr=0.001].mean:" in ln and "in the file" in ln for ln in lines), lines


def test_check_refuses_a_config_that_no_longer_makes_the_trials(tuned, capsys):
    changed = _config(tuned, epochs=3, name="toy3.yaml")
    assert main(["tune", str(changed), "--check", "--file", str(tuned / "tuning.yaml")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "does not match" in err[0] and "toy3.yaml" in err[0]


def test_a_run_naming_the_file_trains_the_tuned_lr_and_its_records_and_report_name_the_file(tuned, capsys):
    import yaml

    chosen = yaml.safe_load((tuned / "tuning.yaml").read_text())["entries"][0]["chosen"]["lr"]
    cfg = _config(tuned, "tuning: tuning.yaml", name="tuned.yaml")
    assert main(["run", str(cfg), "--out", str(tuned / "run"), "--launcher", "inline"]) == 0
    recs = R.load_records(tuned / "run")
    trial_ids = {r["cell_id"] for r in R.load_records(tuned / "trials") if r["config"]["module_params"]["lr"] == chosen}
    assert {r["cell_id"] for r in recs} == trial_ids  # the cells the trials ran at the chosen lr
    assert all(r["config"]["module_params"]["lr"] == chosen and r["config"]["tuning"]["file"] == str(tuned / "tuning.yaml")
               and r["config"]["tuning"]["sha256"].startswith("sha256:") for r in recs)
    report = (tuned / "run" / "REPORT.md").read_text()
    assert "## Learning-rate tuning" in report and f"lr={chosen:g}" in report


def test_a_run_with_reuse_copies_the_chosen_trials_instead_of_training_them(tuned, tmp_path, capsys):
    import shutil

    import yaml

    chosen = yaml.safe_load((tuned / "tuning.yaml").read_text())["entries"][0]["chosen"]["lr"]
    cfg = _config(tuned, "tuning: tuning.yaml", name="adopt.yaml")
    shutil.copytree(tuned / "trials", tmp_path / "trials")
    trials = {r["cell_id"]: r for r in R.load_records(tmp_path / "trials") if r["config"]["module_params"]["lr"] == chosen}
    for t in trials.values():  # the sidecars a real cell has (the toy's inline trials write none)
        for suffix in (".items", ".log", ".pt"):
            Path(t["_path"]).with_suffix(suffix).write_text(f"{suffix} of {t['cell_id']}")
    out = tmp_path / "adopted"
    args = ["run", str(cfg), "--out", str(out), "--launcher", "inline", "--reuse", str(tmp_path / "trials")]
    assert main([*args, "--dry-run"]) == 0
    assert "0 cells to run (2 of 2 already finished, 2 of them copied from --reuse: skipped)" in capsys.readouterr().out
    assert not (out / "runs").exists()  # a dry run copies nothing
    assert main([*args[:-1], str(tmp_path), "--dry-run"]) == 0  # a folder of results folders: the same
    assert "2 of them copied from --reuse" in capsys.readouterr().out
    assert main(args) == 0
    said = capsys.readouterr().out
    assert "reused 2 finished cell(s)" in said and "ran 0 cells (0 failed), skipped 2 finished ones" in said
    recs = R.load_records(out)
    assert {r["cell_id"] for r in recs} == set(trials)
    for r in recs:
        t = trials[r["cell_id"]]
        assert r["suite"] == "toytune" and r["reused"]["suite"] == "toytune.tuning"  # the run's suite; where from
        assert (out / r["reused"]["from"]).resolve() == Path(t["_path"]).resolve()
        assert r["config"]["tuning"]["file"] == str(tuned / "tuning.yaml") and "tuning" not in t["config"]
        assert {k: r[k] for k in ("test", "best_val", "curve", "env", "started")} == \
            {k: t[k] for k in ("test", "best_val", "curve", "env", "started")}
        for suffix in (".items", ".log", ".pt"):
            assert Path(r["_path"]).with_suffix(suffix).read_text() == f"{suffix} of {t['cell_id']}"
    assert f"lr={chosen:g}" in (out / "REPORT.md").read_text()
    assert main(args) == 0 and "reused" not in capsys.readouterr().out  # a rerun: finished, nothing to copy


def test_reuse_replaces_a_failed_record_it_would_retry_and_its_stale_sidecars(tuned, tmp_path, capsys):
    import yaml

    chosen = yaml.safe_load((tuned / "tuning.yaml").read_text())["entries"][0]["chosen"]["lr"]
    cfg = _config(tuned, "tuning: tuning.yaml", name="adopt.yaml")
    trial = next(r for r in R.load_records(tuned / "trials") if r["config"]["module_params"]["lr"] == chosen)
    out = tmp_path / "adopted"
    failed = {**{k: v for k, v in trial.items() if k != "_path"}, "status": "failed", "failure": "external",
              "reason": "interrupted"}
    dest = R.write_json_atomic(R.record_path(out, failed), failed)
    dest.with_suffix(".pt").write_text("weights of the failed attempt")
    args = ["run", str(cfg), "--out", str(out), "--launcher", "inline", "--reuse", str(tuned / "trials")]
    assert main(args) == 0 and "reused 2 finished cell(s)" in capsys.readouterr().out
    assert R.on_disk(dest)["status"] == "ok" and not dest.with_suffix(".pt").exists()


@pytest.mark.parametrize("extra, said", [(["--reuse", "nowhere"], "--reuse nowhere: no such directory"),
                                         (["--reuse", "{cfg}"], "is not a folder"),
                                         (["--reuse", "{out}"], "is the run's own --out folder"),
                                         (["--reuse", ".", "--force"], "--reuse and --force contradict")])
def test_bad_reuse_is_one_line_and_exit_code_2(tmp_path, capsys, extra, said):
    cfg, out = _config(tmp_path), tmp_path / "o"
    out.mkdir()  # an existing --out (an earlier run's)
    extra = [x.format(cfg=cfg, out=out) for x in extra]
    assert main(["run", str(cfg), "--out", str(out), "--launcher", "inline", *extra]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and said in err[0], err


def test_dry_run_lists_the_trials_and_runs_nothing(tmp_path, capsys):
    assert _tune(tmp_path, "--dry-run") == 0
    out = capsys.readouterr().out
    assert "6 trial cells = 3 grid points x 2 cells" in out and out.count("toy/points/linear seed=") == 6
    assert not (tmp_path / "trials" / "runs").exists() and not (tmp_path / "tuning.yaml").exists()


@pytest.mark.parametrize("args,said", [
    (["--grid", "0,0.1"], "--grid '0,0.1': 0 is not a learning rate: expected numbers > 0"),
    (["--grid", "-0.01"], "-0.01 is not a learning rate"),
    (["--grid", "fast"], "fast is not a learning rate"),
    (["--also", "lr=0.1"], "--also 'lr=0.1': expected KEY=V1,V2 with a module_params key other than lr"),
    (["--also", "momentum=0.9"], "--also momentum: not a module parameter of task 'toy'; valid: none besides lr"),
    (["--diagnostic", "nope"], "--diagnostic nope: no cell entry of suite 'toytune' is tagged with it; its diagnostics: none"),
    (["--tasks", "vision"], "--tasks vision: not in suite 'toytune'; its tasks: toy"),
])
def test_bad_input_is_one_line_and_exit_code_2(tmp_path, capsys, args, said):
    assert _tune(tmp_path, "--dry-run", *args) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and said in err[0], err


def test_bad_references_are_one_line_and_exit_code_2(tmp_path, capsys):
    assert main(["tune", "no_such_config", "--dry-run"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "config file not found: no_such_config" in err[0] and "quick" in err[0]
    assert main(["tune", str(_config(tmp_path)), "--check", "--file", str(tmp_path / "missing.yaml")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "missing.yaml: no such tuning file" in err[0]
    assert main(["tune", str(_config(tmp_path)), "--check", "--grid", "0.1", "--file", "x.yaml"]) == 2
    assert "--check takes the search from the tuning file" in capsys.readouterr().err
    assert main(["run", str(_config(tmp_path, "tuning: gone.yaml", name="ref.yaml")), "--dry-run"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "tuning='gone.yaml': no such file" in err[0]


def test_a_config_whose_own_tuning_file_is_not_written_yet_can_be_tuned(tmp_path, capsys):
    cfg = _config(tmp_path, "tuning: tuning.yaml", name="ref.yaml")  # names the file this run writes
    assert _tune(tmp_path, "--dry-run", config=cfg) == 0
    assert "6 trial cells" in capsys.readouterr().out


def test_the_points_of_a_sweep_are_tuned_apart_and_named_by_their_value(tmp_path, capsys):
    import yaml

    cfg = tmp_path / "sweep.yaml"
    cfg.write_text(SUITE.format(tuning="", epochs=1).replace("    models: [linear]",
                                                             "    dataset_params: {n: [256, 320]}\n    models: [linear]"))
    assert main(["tune", str(cfg), "--grid", "0.1,1", "--out", str(tmp_path / "trials"), "--file",
                 str(tmp_path / "tuning.yaml"), "--launcher", "inline"]) == 0
    entries = yaml.safe_load((tmp_path / "tuning.yaml").read_text())["entries"]
    assert [e["at"] for e in entries] == [{"n": 256}, {"n": 320}]
    assert len({e["setting"]["id"] for e in entries}) == 2
    table = (tmp_path / "trials" / "TUNING.md").read_text()
    assert "toy / points · n=256" in table and "toy / points · n=320" in table
    assert main(["tune", str(cfg), "--check", "--file", str(tmp_path / "tuning.yaml"), "--out",
                 str(tmp_path / "trials")]) == 0


def test_a_config_with_other_trainer_keys_gets_the_tuned_value_with_a_notice(tuned, tmp_path, capsys):
    """Only the trainer differs (a --set budget, compile): the tuned value applies, and the run says so."""
    cfg = _config(tmp_path, f"tuning: {tuned / 'tuning.yaml'}", epochs=3, name="other_budget.yaml")
    assert main(["run", str(cfg), "--dry-run"]) == 0
    said = capsys.readouterr()
    assert "under other trainer settings; its chosen value is applied" in said.out + said.err, said


_REPO = Path(__file__).resolve().parents[3]
_COMMITTED = sorted((_REPO / "benchmarks" / "configs" / "tuning").glob("*.yaml"))


@pytest.mark.parametrize("file", _COMMITTED, ids=[p.stem for p in _COMMITTED])
def test_every_committed_tuning_file_matches_its_committed_records(file, capsys):
    """What the issue asks of `attnbench tune`: each shipped tuning file is rebuilt from its trials'
    committed records (their grid, seeds and selection rule) with nothing different."""
    import yaml

    meta = yaml.safe_load(file.read_text(encoding="utf-8"))
    assert (_REPO / meta["records"]).is_dir(), f"{file.name}: records {meta['records']} absent"
    assert main(["tune", str(_REPO / meta["config"]["path"]), "--check", "--file", str(file)]) == 0, capsys.readouterr()
    assert "matches its" in capsys.readouterr().out
