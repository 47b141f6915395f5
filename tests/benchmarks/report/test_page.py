"""The results page is generated, never hand-edited: a fresh build from results/page.yaml and the
committed reference records must equal the committed results/README.md; a spec naming a folder or
group that is not there is one line (exit 2)."""

from __future__ import annotations

import yaml

from benchmarks.report.page import PAGE_SPEC, build_page, patched_readme, stale
from benchmarks.report.page_check import main


def test_committed_page_and_readme_headline_are_current():
    assert stale(PAGE_SPEC) == [], "run attnbench page and commit results/README.md and README.md"


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
