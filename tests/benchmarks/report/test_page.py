"""The results page is generated, never hand-edited: a fresh build from results/page.yaml and the
committed reference records must equal the committed results/README.md; a spec naming a folder or
group that is not there is one line (exit 2)."""

from __future__ import annotations

import json

import yaml

from benchmarks.report.page import PAGE_SPEC, build_page, patched_readme, stale
from benchmarks.report.page_check import main


def test_committed_page_and_readme_headline_are_current():
    assert stale(PAGE_SPEC) == [], "run attnbench page and commit results/README.md and README.md"


def test_a_folder_analysed_again_is_reused_until_one_of_its_files_changes(tmp_path):
    """The page reuses a folder's analysis within a process (its tests build it dozens of times),
    keyed by the files: an edited record is read again."""
    import json
    import shutil

    from benchmarks.report.page import _analyse

    src = PAGE_SPEC.parent / "reference" / "cpu-2core-intel-xeon-processor-avx512" / "pos_tagging"
    shutil.copytree(src, tmp_path / "pos_tagging")
    spec = {"folder": "pos_tagging"}
    first, _ = _analyse(spec, tmp_path, "test")
    assert _analyse(spec, tmp_path, "test")[0] is first
    rec_path = next((tmp_path / "pos_tagging" / "runs").rglob("seed0-*.json"))
    rec = json.loads(rec_path.read_text(encoding="utf-8"))
    rec["test"] = {k: (v - 0.25 if isinstance(v, float) else v) for k, v in rec["test"].items()}
    rec_path.write_text(json.dumps(rec), encoding="utf-8")
    again, _ = _analyse(spec, tmp_path, "test")
    assert again is not first
    model = rec["model"]

    def mean(an):
        return next(sum(m.values) for g in an.groups for m in g.models if m.model == model)

    assert mean(again) < mean(first)


def test_readme_block_is_replaced_and_required():
    from benchmarks.report.page import README_END, README_START, PageError
    import pytest

    text = f"top\n{README_START}\nold table\n{README_END}\nbottom\n"
    assert patched_readme(text, "NEW") == f"top\n{README_START}\nNEW\n{README_END}\nbottom\n"
    with pytest.raises(PageError, match="no generated headline block"):
        patched_readme("no markers", "NEW")


def test_page_shape():
    text = build_page(PAGE_SPEC)
    assert text.index("## Where attention wins, ties and loses") < text.index("## Graphs: Cora node classification")
    assert "| best modern recurrence |" in text and "| no-context floor |" in text
    assert "Other runs (labelled; never part of the headline)" in text


def test_bad_spec_is_one_line(tmp_path, capsys):
    spec = yaml.safe_load(PAGE_SPEC.read_text(encoding="utf-8"))
    spec["headline"] = [{**spec["headline"][0], "dataset": "citeseer"}]
    bad = tmp_path / "page.yaml"
    bad.write_text(yaml.safe_dump(spec), encoding="utf-8")
    (tmp_path / "reference").symlink_to(PAGE_SPEC.parent / "reference")
    assert main([str(bad)]) == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and err.startswith("attnbench page: error: page.yaml: no graphs/citeseer results in")
    spec["headline"][0]["folder"] = "reference/nowhere"
    bad.write_text(yaml.safe_dump(spec), encoding="utf-8")
    assert main([str(bad)]) == 2
    assert "does not exist" in capsys.readouterr().err


def test_cli_page(capsys):
    from benchmarks.cli import main as cli

    assert cli(["page", "--check"]) == 0
    assert cli(["page", "no/such/page.yaml"]) == 2
    assert capsys.readouterr().err.strip() == "attnbench page: error: no/such/page.yaml: No such file or directory"


def test_learning_rates_are_read_from_each_runs_manifest(tmp_path):
    from benchmarks.report.page_facts import learning_rates

    edge = tmp_path / "edge.yaml"  # a grid of three rates; mlp at its top, gcn inside it
    edge.write_text(json.dumps({"search": {"grid": [{"lr": 0.001}, {"lr": 0.01}, {"lr": 0.1}]},
                                "entries": [{"model": "mlp", "chosen": {"lr": 0.1}},
                                            {"model": "gcn", "chosen": {"lr": 0.01}}]}), encoding="utf-8")
    inside = tmp_path / "inside.yaml"
    inside.write_text(json.dumps({"search": {"grid": [{"lr": 0.001}, {"lr": 0.01}, {"lr": 0.1}]},
                                  "entries": [{"model": "gcn", "chosen": {"lr": 0.01}}]}), encoding="utf-8")
    for name, config, want in [("tuned", {"tuning": str(inside)}, "tuned"),
                               ("edge", {"tuning": str(edge)}, "tuned (mlp at the grid's edge)"),
                               ("moved", {"tuning": "/x/no/such/tuning.yaml"}, "tuned"),
                               ("hand", {"tuning": None}, "hand-set"), ("old", {}, "hand-set")]:
        (tmp_path / name).mkdir()
        (tmp_path / name / "suite.json").write_text(json.dumps({"suite": "s", "config": config}), encoding="utf-8")
        assert learning_rates(tmp_path / name) == want
    assert learning_rates(tmp_path / "absent") == "–" and learning_rates(None) == "–"
    # one tuning file, two datasets of a run (speech's two task forms): a headline row names only its own
    two = tmp_path / "two.yaml"
    two.write_text(json.dumps({"search": {"grid": [{"lr": 0.001}, {"lr": 0.01}, {"lr": 0.1}]}, "entries": [
        {"task": "t", "dataset": "a", "model": "cnn", "chosen": {"lr": 0.1}},
        {"task": "t", "dataset": "b", "model": "lstm", "chosen": {"lr": 0.001}},
        {"task": "t", "dataset": "b", "model": "cnn", "chosen": {"lr": 0.01}}]}), encoding="utf-8")
    (tmp_path / "two").mkdir()
    (tmp_path / "two" / "suite.json").write_text(json.dumps({"config": {"tuning": str(two)}}), encoding="utf-8")
    assert learning_rates(tmp_path / "two") == "tuned (cnn, lstm at the grid's edge)"
    assert learning_rates(tmp_path / "two", "t", "a") == "tuned (cnn at the grid's edge)"
    assert learning_rates(tmp_path / "two", "t", "b") == "tuned (lstm at the grid's edge)"
    assert learning_rates(tmp_path / "two", "u", "b") == "tuned"
    (tmp_path / "bad").mkdir()
    (tmp_path / "bad" / "suite.json").write_text("{", encoding="utf-8")
    assert learning_rates(tmp_path / "bad") == "–"
    # the committed headline: the rows whose configs name a tuning file say so, the others do not
    rows: dict[str, str] = {}
    for line in build_page(PAGE_SPEC).splitlines():  # the summary table comes first
        if line.startswith("| ") and "[full report]" in line:
            rows.setdefault(line.split(" | ")[0].lstrip("| "), line)
    assert " | tuned" in rows["Graphs: Cora node classification"]
    assert " | tuned | " in rows["Translation: Multi30k German to English"]
    assert " | tuned (cnn, patch_bag, resnet at the grid's edge) | " in rows["Vision: MNIST"]
    # its ViT ran on the AVX2 VM, its ResNet on the AVX-512 one: no time ratio; translation's pair shares a machine
    assert " | train time – (two machines), params 0.2x | " in rows["Vision: MNIST"]
    assert " | train time 0.77x, params 0.56x | " in rows["Translation: Multi30k German to English"]
    # speech's two forms share one tuning file; each row names only its own form's edge models
    assert " | tuned (cnn, frame_mlp at the grid's edge) | " in rows["Speech: spoken digits (FSDD), utterance classification"]
    assert " | tuned (frame_mlp, lstm, transformer, transformer_w32 at the grid's edge) | train time – (two machines)" \
        in rows["Speech: spoken digits (FSDD), frame tagging of long concatenations"]
