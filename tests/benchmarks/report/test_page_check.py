"""``attnbench page --check``: the committed page passes; a prose number that drifts from the
records (in the generated page, in a README block, or typed literally in results/page.yaml) is
one line naming the file, the sentence and what the records say; bad placeholders are one line."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import yaml

from benchmarks.report.page import PAGE_SPEC, write_page
from benchmarks.report.page_check import check, main

ROOT = PAGE_SPEC.parent.parent


@pytest.fixture
def copy(tmp_path: Path) -> Path:
    """A copy of the page, its spec and the README (the records linked, not copied); its spec."""
    res = tmp_path / "results"
    res.mkdir()
    for name in ("page.yaml", "README.md"):
        shutil.copy(PAGE_SPEC.parent / name, res / name)
    (res / "reference").symlink_to(PAGE_SPEC.parent / "reference")
    shutil.copy(ROOT / "README.md", tmp_path / "README.md")
    return res / "page.yaml"


def _edit(path: Path, old: str, new: str) -> None:
    text = path.read_text(encoding="utf-8")
    assert text.count(old) >= 1, f"{old!r} not in {path}"
    path.write_text(text.replace(old, new, 1), encoding="utf-8")


def _edit_spec(spec: Path, old: str, new: str) -> None:
    """Replace ``old`` (whitespace as the folded YAML reads) in the first prose string holding it."""
    data = yaml.safe_load(spec.read_text(encoding="utf-8"))
    done = []

    def walk(x: object) -> object:
        if isinstance(x, str) and old in x and not done:
            done.append(1)
            return x.replace(old, new, 1)
        if isinstance(x, dict):
            return {k: walk(v) for k, v in x.items()}
        if isinstance(x, list):
            return [walk(v) for v in x]
        return x

    data = walk(data)
    assert done, f"{old!r} not in {spec}"
    spec.write_text(yaml.safe_dump(data, allow_unicode=True, sort_keys=False, width=10000), encoding="utf-8")


def _drifts(spec: Path, capsys: pytest.CaptureFixture[str]) -> list[str]:
    assert main([str(spec), "--check"]) == 1
    out = capsys.readouterr()
    assert out.err == ""
    return out.out.strip().splitlines()


def test_committed_page_passes_check(capsys):
    assert check(PAGE_SPEC) == []
    assert main(["--check"]) == 0
    assert "current" in capsys.readouterr().out


def test_a_copy_passes_and_a_hand_edited_number_is_one_line(copy, capsys):
    assert check(copy) == []
    _edit(copy.parent / "README.md", "(140 train / 500 validation / 1000 test nodes), 10 seeds,",
          "(140 train / 500 validation / 1000 test nodes), 9 seeds,")
    lines = _drifts(copy, capsys)
    assert len(lines) == 1, lines
    line = lines[0]
    assert "results/README.md:" in line and "Cora, Planetoid public split" in line
    assert 'says "9" where a fresh build from the records says "10"' in line


def test_readme_block_edit_names_readme_and_line(copy, capsys):
    readme = copy.parent.parent / "README.md"
    _edit(readme, "main job 4.23 min with its 114 cells", "main job 4.23 min with its 69 cells")
    lines = _drifts(copy, capsys)
    assert len(lines) == 1, lines
    lineno = next(i for i, t in enumerate(readme.read_text(encoding="utf-8").splitlines(), 1) if "69 cells" in t)
    assert f"README.md:{lineno}:" in lines[0] and 'says "69" where a fresh build from the records says "114"' in lines[0]


LITERALS = [  # (old, new, what the line quotes, what it says the records give)
    # the kind of claim the page once made: Multi30k trained "one to two epochs" (its records said 2-3)
    ("{epochs} epochs of training for every model", "one to two epochs of training for every model",
     '"one to two epochs"', "the records give 2 epochs"),
    ("best-on-dev checkpoint tested; each model's Adam learning rate chosen on dev BLEU",
     "best-on-dev checkpoint tested (ConvS2S 3 epochs); each model's Adam learning rate chosen on dev BLEU",
     '"ConvS2S 3 epochs"', "the records give convs2s: 2 epochs"),
    ("Multi30k task 1 de->en, {train_size} training pairs, test2016, one joint",
     "Multi30k task 1 de->en, {train_size} training pairs, test2016, 5 seeds, one joint", '"5 seeds"',
     "the records give 3 seeds per model"),
    ("every model ({cap}), the", "every model (150 s), the", '"150 s"',
     "no time cap, mean train time or logged time of the records is that"),
    ("Xeon with AVX-512 and AMX, {date}: {cells} cells", "Xeon with AVX-512 and AMX, {date}: 69 cells", '"69 cells"',
     "the records give 114 cells"),
]


def test_literal_prose_number_is_checked_against_the_records(copy, capsys):
    """Each literal claim drifts on its own line (all edited in one copy: a page build costs
    ~10 s of CPU)."""
    for old, new, _, _ in LITERALS:
        _edit_spec(copy, old, new)
    write_page(copy)  # the generated files follow the spec: only the claims themselves drift
    capsys.readouterr()
    lines = _drifts(copy, capsys)
    assert len(lines) == len(LITERALS), lines
    for _, _, said, records in LITERALS:
        (line,) = [t for t in lines if said in t]
        assert line.startswith(f"{copy}: ") and records in line, line


def test_literal_that_matches_the_records_passes(copy):
    _edit_spec(copy, "{epochs} epochs of training for every model ({cap})",
               "2 epochs of training for every model (no time cap; ConvS2S 2 epochs")
    write_page(copy)
    assert check(copy) == []


def test_published_figure_runs_are_checked(copy, capsys):
    # the claim the page made before: GCN's 81.5% a "single run"; Kipf & Welling report a mean of 100
    _edit_spec(copy, "2 layers, 16 hidden units,", "a single run; 2 layers, 16 hidden units,")
    write_page(copy)
    capsys.readouterr()
    lines = _drifts(copy, capsys)
    assert len(lines) == 1 and "published GCN theirs" in lines[0] and '"a single run"' in lines[0]
    assert "runs: 100" in lines[0]


@pytest.mark.parametrize("old, new, message", [
    ("{seeds} seeds, early stopping", "{sedes} seeds, early stopping", "unknown placeholder {sedes}"),
    ("every model ({cap}), the", "every model ({cap}; ConvS2S {epochs:convs3s}), the",
     "{epochs:convs3s}: no records of model convs3s in"),
    ("{config:dataset_params.vocab_size}", "{config:dataset_params.vocab}", "no record in reference/"),
    ("statistic: mean\n", "statistic: single run\n", "statistic 'single run' with runs: 100"),
    ("runs: 100\n        statistic: mean\n", "statistic: mean\n", "missing runs"),
])
def test_bad_spec_is_one_line(copy, capsys, old, new, message):
    if "\n" in old:
        _edit(copy, old, new)
    else:
        _edit_spec(copy, old, new)
    assert main([str(copy), "--check"]) == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and err.startswith("attnbench page: error: ") and message in err, err


def test_missing_run_log_is_one_line(copy, tmp_path, capsys):
    quick = tmp_path / "quick"
    shutil.copytree(PAGE_SPEC.parent / "reference/cpu-2core-amd-epyc-avx512/quick", quick,
                    ignore=shutil.ignore_patterns("run.log", "plots", "report.html", "bench"))
    _edit(copy, "main_job:\n  folder: reference/cpu-2core-intel-xeon-processor-avx512/quick", f"main_job:\n  folder: {quick}")
    assert main([str(copy), "--check"]) == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and "main_job text: {wall}: no run.log in" in err


def test_missing_readme_block_is_one_line(copy, capsys):
    _edit(copy.parent.parent / "README.md", "<!-- /main-job -->", "")
    assert main([str(copy), "--check"]) == 2
    assert "no generated main-job block" in capsys.readouterr().err


def test_missing_page_is_one_line(copy, capsys):
    (copy.parent / "README.md").unlink()
    assert _drifts(copy, capsys) == [f"{copy.parent / 'README.md'}: missing (run attnbench page)"]
