"""Tuning files without training: the grid as cells, the choice on validation, the file a config
names (its values applied per model, its name in the cell config, not in the ids), and every way
a reference can be wrong, each one line."""

from __future__ import annotations

from pathlib import Path

import pytest

from benchmarks.config.schema import ConfigError
from benchmarks.config.suite import cell_id, expand, load_suite, load_suite_with_notices, validate_suite
from benchmarks.config.tuning import grid_points, parse_values, read_tuning_file, setting_of, trial_config
from benchmarks.report.tuning import dump_tuning, tuning_blocks, tuning_entries
from tests.helpers.toy_task import register

SUITE = """
suite: toytune
seeds: 3
{tuning}
trainer: {{max_epochs: 2, accelerator: cpu}}
cells:
  - task: toy
    dataset: points
    models: [{models}]
    module_params: {{lr: 0.05}}
"""
#: validation accuracy per lr and seed: 0.1 best, 1.0 inside its interval, 0.01 far below
SCORES = {0.01: [0.50, 0.55, 0.60], 0.1: [0.90, 0.92, 0.94], 1.0: [0.89, 0.91, 0.93]}


@pytest.fixture(autouse=True)
def _toy():
    register()


def _config(tmp_path: Path, tuning: str = "", models: str = "linear", name: str = "suite.yaml") -> Path:
    p = tmp_path / name
    p.write_text(SUITE.format(tuning=tuning, models=models))
    return p


def _trials(path: Path, lrs=(0.01, 0.1, 1.0)) -> tuple[list, list[dict]]:
    points = grid_points(lrs)
    trial = validate_suite(trial_config(load_suite(path), points), source=str(path))
    return expand(trial), points


def _records(cells: list, scores: dict[float, list[float]] = SCORES, failed: tuple = ()) -> dict[str, dict]:
    """Fake ``ok`` records: seed k of lr v scores ``scores[v][k]``; ``(lr, seed)`` in ``failed`` failed."""
    out = {}
    for c in cells:
        lr = c.config["module_params"]["lr"]
        ok = (lr, c.seed) not in failed
        out[c.cell_id] = {"status": "ok" if ok else "failed", "best_val": {"value": scores[lr][c.seed]} if ok else None}
    return out


def _tuning_file(tmp_path: Path, scores=SCORES) -> Path:
    cells, points = _trials(_config(tmp_path, name="base.yaml"))
    doc = {"schema": 1, "suite": "toytune", "config": {}, "search": {"method": "grid", "keys": ["lr"], "grid": points,
           "seeds": [0, 1, 2]}, "records": "x", "date": None,
           "entries": tuning_entries(cells, _records(cells, scores), points, ["lr"])}
    path = tmp_path / "tuning.yaml"
    path.write_text(dump_tuning(doc))
    return path


def test_grid_values_are_checked_one_line_each():
    assert parse_values("0.01, 0.001,1e-4", "lr", "--grid") == [0.01, 0.001, 0.0001]
    assert grid_points([0.01, 0.001]) == [{"lr": 0.001}, {"lr": 0.01}]
    for bad, said in (("0,0.1", "0 is not a learning rate"), ("-0.1", "-0.1 is not a learning rate"),
                      ("abc", "abc is not a learning rate"), ("0.1,,0.2", "expected values separated by commas"),
                      ("0.1,0.1", "given twice"), (".inf", "not a learning rate")):
        with pytest.raises(ConfigError) as err:
            parse_values(bad, "lr", "--grid")
        assert said in str(err.value) and "\n" not in str(err.value) and "--grid" in str(err.value)


def test_each_grid_value_is_a_module_params_override_in_the_cell_id(tmp_path):
    cells, _ = _trials(_config(tmp_path))
    assert len(cells) == 3 * 3 and len({c.cell_id for c in cells}) == 9
    plain = expand(load_suite(_config(tmp_path, name="plain.yaml")))  # lr 0.05, the entry's own
    assert not {c.cell_id for c in plain} & {c.cell_id for c in cells}
    explicit = _config(tmp_path, name="explicit.yaml")
    explicit.write_text(explicit.read_text().replace("lr: 0.05", "lr: 0.1"))
    want = {c.cell_id for c in expand(load_suite(explicit))}
    assert want == {c.cell_id for c in cells if c.config["module_params"]["lr"] == 0.1}  # the same cells as a run's
    assert {setting_of(c.config, ["lr"])["id"] for c in cells} == {setting_of(plain[0].config, ["lr"])["id"]}


def test_the_choice_is_the_best_mean_on_validation_and_the_window_its_interval(tmp_path):
    cells, points = _trials(_config(tmp_path))
    [e] = tuning_entries(cells, _records(cells), points, ["lr"])
    assert e["chosen"] == {"lr": 0.1} and e["family"] == "other" and e["metric"] == {"name": "acc", "mode": "max"}
    assert e["window"] == [{"lr": 0.1}, {"lr": 1.0}]  # 0.91 lies inside 0.92's interval, 0.55 does not
    by_lr = {t["lr"]: t for t in e["trials"]}
    assert by_lr[0.1]["mean"] == pytest.approx(0.92) and by_lr[0.1]["n"] == 3 and len(by_lr[0.1]["cells"]) == 3
    assert by_lr[0.1]["ci"][0] < 0.91 < by_lr[0.1]["ci"][1]


def test_a_point_with_a_failed_seed_is_never_chosen_and_ties_go_to_the_smaller_lr(tmp_path):
    cells, points = _trials(_config(tmp_path))
    [e] = tuning_entries(cells, _records(cells, failed=((0.1, 2),)), points, ["lr"])
    assert e["chosen"] == {"lr": 1.0} and {"lr": 0.1} not in e["window"]
    assert next(t for t in e["trials"] if t["lr"] == 0.1)["failed"] == 1
    tied = {0.01: [0.5, 0.5, 0.5], 0.1: [0.9, 0.9, 0.9], 1.0: [0.9, 0.9, 0.9]}
    [e] = tuning_entries(cells, _records(cells, tied), points, ["lr"])
    assert e["chosen"] == {"lr": 0.1} and e["window"] == [{"lr": 0.1}, {"lr": 1.0}]
    [e] = tuning_entries(cells, _records(cells, failed=tuple((v, s) for v in SCORES for s in range(3))), points, ["lr"])
    assert e["chosen"] is None and e["window"] == []


def test_a_config_naming_the_file_runs_the_tuned_lr_with_the_ids_an_explicit_lr_has(tmp_path):
    _tuning_file(tmp_path)
    cfg, notices = load_suite_with_notices(_config(tmp_path, "tuning: tuning.yaml"))
    cells = expand(cfg)
    assert [c.config["module_params"]["lr"] for c in cells] == [0.1, 0.1, 0.1]  # the tuned value wins over 0.05
    doc, sha = read_tuning_file(tmp_path / "tuning.yaml")
    assert all(c.config["tuning"] == {"file": str(tmp_path / "tuning.yaml"), "sha256": sha, "values": {"lr": 0.1}}
               for c in cells)
    explicit = _config(tmp_path, name="explicit.yaml")
    explicit.write_text(explicit.read_text().replace("lr: 0.05", "lr: 0.1"))
    assert [c.cell_id for c in cells] == [c.cell_id for c in expand(load_suite(explicit))]
    assert all(cell_id(c.config) == c.cell_id for c in cells)  # the file is not part of the id
    assert any("cells[0] (toy/points) sets module_params.lr=0.05 itself; the tuned per-model value replaces it" in n
               for n in notices)
    off, _ = load_suite_with_notices(_config(tmp_path, "tuning: tuning.yaml"), ["tuning=null"])
    assert [c.config["module_params"]["lr"] for c in expand(off)] == [0.05] * 3 and "tuning" not in expand(off)[0].config


def test_cells_the_file_does_not_cover_keep_their_lr_with_a_notice(tmp_path):
    _tuning_file(tmp_path)
    cfg, notices = load_suite_with_notices(_config(tmp_path, "tuning: tuning.yaml", models="linear, broken"))
    lrs = {(c.model, c.config["module_params"]["lr"]) for c in expand(cfg)}
    assert lrs == {("linear", 0.1), ("broken", 0.05)}
    assert any("3 cell(s) that" in n and "do" in n and "keep their own lr" in n for n in notices)


@pytest.mark.parametrize("tuning,sets,said", [
    ("tuning: nope.yaml", [], "tuning='nope.yaml': no such file"),
    ("tuning: tuning.yaml", ["cells.0.model_params={linear: {hidden: 2}}"], "differs in model_params"),
    ("tuning: tuning.yaml", ["cells.0.models=[broken]"], "covers none of this config's cells (it tuned toy/points/linear)"),
])
def test_a_missing_or_mismatched_tuning_file_is_one_line(tmp_path, tuning, sets, said):
    _tuning_file(tmp_path)
    with pytest.raises(ConfigError) as err:
        load_suite(_config(tmp_path, tuning), sets)
    msg = str(err.value)
    assert said in msg and "\n" not in msg, msg
    if "no such file" in msg:  # the valid choices: the tuning files there are, not every YAML file
        listed = msg.split("tuning files: ")[1]
        assert "tuning.yaml" in listed and "suite.yaml" not in listed and "base.yaml" not in listed


def test_a_trainer_only_difference_keeps_the_tuned_value_with_a_notice(tmp_path):
    """A --set budget (trainer keys) is not a different model setting: the tuned lr applies and a notice says so."""
    _tuning_file(tmp_path)
    cfg, notices = load_suite_with_notices(_config(tmp_path, "tuning: tuning.yaml"), ["trainer.max_epochs=3"])
    lrs = {(c.model, c.config["module_params"]["lr"]) for c in expand(cfg)}
    assert ("linear", 0.1) in lrs
    assert any("trainer" in n for n in notices), notices


def test_a_broken_tuning_file_is_one_line_naming_it(tmp_path):
    path = _tuning_file(tmp_path)
    path.write_text(path.read_text().replace("chosen: {lr: 0.1}", "chosen: {lr: -1}"))
    with pytest.raises(ConfigError) as err:
        load_suite(_config(tmp_path, "tuning: tuning.yaml"))
    assert "tuning file" in str(err.value) and "entries[0].chosen.lr=-1: expected a number > 0" in str(err.value)
    path.write_text("schema: 7\n")
    with pytest.raises(ConfigError, match=r"schema=7: expected 1"):
        load_suite(_config(tmp_path, "tuning: tuning.yaml"))


def test_the_report_section_shows_each_models_window_from_the_file_the_records_name(tmp_path):
    path = _tuning_file(tmp_path)
    _, sha = read_tuning_file(path)
    warns: list[tuple[str, str]] = []
    rec = {"config": {"tuning": {"file": str(path), "sha256": sha, "values": {"lr": 0.1}}}}
    from benchmarks.report.document import render_markdown

    text = render_markdown(tuning_blocks([rec, rec], lambda k, m: warns.append((k, m))))
    assert "Learning-rate tuning" in text and "| toy / points | linear | other | lr=0.1 | 0.1 – 1 (2 of 3) |" in text
    assert "**0.92 [" in text and not warns
    assert tuning_blocks([{"config": {}}], lambda k, m: warns.append((k, m))) == [] and not warns
    rec["config"]["tuning"]["sha256"] = "sha256:old"
    assert tuning_blocks([rec], lambda k, m: warns.append((k, m))) and "differs from the one the records" in warns[-1][1]
    path.unlink()
    assert tuning_blocks([rec], lambda k, m: warns.append((k, m))) == [] and "cannot read it" in warns[-1][1]


def test_a_choice_at_the_grids_edge_is_flagged(tmp_path):
    import yaml

    from benchmarks.report.document import render_markdown
    from benchmarks.report.tuning import grid_edge, summary_lines, tuning_doc_blocks

    inside = yaml.safe_load(_tuning_file(tmp_path).read_text())  # 0.1 chosen: inside the grid
    assert "grid's edge" not in render_markdown(tuning_doc_blocks(inside, "t.yaml"))
    assert not any("beyond" in line for line in summary_lines(inside))
    for scores, side, lr in [({0.01: [0.5, 0.55, 0.6], 0.1: [0.6, 0.62, 0.64], 1.0: [0.9, 0.92, 0.94]}, "largest", "1"),
                             ({0.01: [0.9, 0.92, 0.94], 0.1: [0.6, 0.62, 0.64], 1.0: [0.5, 0.55, 0.6]}, "smallest", "0.01")]:
        doc = yaml.safe_load(_tuning_file(tmp_path, scores).read_text())
        assert grid_edge(doc, doc["entries"][0]["chosen"]) == side
        assert f"Chosen at the grid's edge: linear (lr={lr}, the grid's {side})" in render_markdown(tuning_doc_blocks(doc, "t.yaml"))
        assert f"(the grid's {side} lr: the best may lie beyond it)" in summary_lines(doc)[0]
    assert grid_edge({"search": {"grid": [{"lr": 0.1}]}}, {"lr": 0.1}) is None  # one point has no edge


def test_the_section_draws_the_lr_windows_when_given_a_plots_folder(tmp_path):
    import yaml

    from benchmarks.report.document import render_markdown
    from benchmarks.report.tuning import plot_lr_windows, tuning_doc_blocks

    doc = yaml.safe_load(_tuning_file(tmp_path).read_text())
    written: dict[str, Path] = {}
    text = render_markdown(tuning_doc_blocks(doc, "t.yaml", plots=(tmp_path / "plots", tmp_path), written=written))
    png = tmp_path / "plots" / "tuning__t__lr_windows.png"
    assert "](plots/tuning__t__lr_windows.png)" in text and "star: the chosen value" in text
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and written == {"plots/tuning__t__lr_windows.png": png}
    assert "lr_windows" not in render_markdown(tuning_doc_blocks(doc, "t.yaml"))  # no plots folder: the table alone
    for e in doc["entries"]:
        for t in e["trials"]:
            t["mean"] = t["ci"] = None
    assert plot_lr_windows(doc, tmp_path / "none.png", "t") is None and not (tmp_path / "none.png").exists()


def test_a_missing_tuning_file_lists_each_folder_it_looked_in_once(tmp_path, monkeypatch):
    """A shipped config lives in benchmarks/configs, one of the folders searched: named once, not twice."""
    import benchmarks.config.tuning as T

    monkeypatch.setattr(T, "CONFIG_DIR", tmp_path)
    cfg = tmp_path / "suite.yaml"
    cfg.write_text("x: 1\n", encoding="utf-8")
    with pytest.raises(ConfigError) as err:
        T.resolve_tuning_path("nope.yaml", str(cfg))
    looked = str(err.value).split("(looked in ")[1].split(")")[0].split(", ")
    assert len(looked) == len(set(looked)) == 2, looked  # the config's folder (= CONFIG_DIR) and the current one
