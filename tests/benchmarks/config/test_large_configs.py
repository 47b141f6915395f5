"""Large valid configs (issue 50 item 2): a generated sweep without aliases is never refused for
its size, while aliases that add more than the limit still get one line; libyaml and the pure
Python loader refuse the same documents with the same messages; a validated config is expanded
once."""

from __future__ import annotations

import pytest
import yaml

from benchmarks.cli.options import micro_benchmark_of
from benchmarks.config import strict_yaml as Y
from benchmarks.config.suite import _VALIDATED, expand, validate_suite

_LAUGHS = "a: &a [1, 1, 1, 1, 1, 1, 1, 1, 1, 1]\n" + "".join(
    f"{n}: &{n} [{', '.join([f'*{p}'] * 10)}]\n" for p, n in zip("abcdefgh", "bcdefghi"))


def _cells(n: int) -> str:
    """A generated sweep: ``n`` cell entries, one model each, no anchors or aliases."""
    rows = [f"  - {{task: pos_tagging, dataset: synthetic_far, models: [cnn], module_params: {{lr: {1e-5 * (i + 1):.7f}}}}}"
            for i in range(n)]
    return "suite: big\nseeds: 1\ntrainer: {max_epochs: 2, accelerator: cpu}\ncells:\n" + "\n".join(rows) + "\n"


@pytest.fixture(params=["libyaml", "python"])
def loader(request, monkeypatch):
    if request.param == "libyaml":
        if Y._CLoader is None:
            pytest.skip("PyYAML without libyaml")
    else:
        monkeypatch.setattr(Y, "_CLoader", None)
    return request.param


def test_a_large_config_without_aliases_is_not_refused(loader, monkeypatch):
    # libyaml: 280k nodes, past the old rule's refusal at 200k. The pure-Python loader (about 10x
    # slower) checks with the same rule at a tenth of the scale: 21k nodes past a limit of 20k
    if loader == "python":
        monkeypatch.setattr(Y, "MAX_YAML_ALIAS_NODES", Y.MAX_YAML_ALIAS_NODES // 10)
    n = 40_000 if loader == "libyaml" else 3_000
    data = Y.parse_yaml(_cells(n))
    assert len(data["cells"]) == n and data["cells"][-1]["module_params"]["lr"] == pytest.approx(n * 1e-5)


@pytest.mark.parametrize("text,needle", [
    (_LAUGHS, "line 6: aliases add more than 200000 values to the 23 written in the file"),
    ("a: &a [" + ", ".join(["x"] * 1000) + "]\n" + "".join(f"k{i}: *a\n" for i in range(300)),
     "line 1: aliases add more than 200000 values to the 1303 written"),
    ("suite: " + "[" * 100_000 + "]" * 100_000 + "\n", "line 1: nested deeper than 64 levels"),
    ("".join("  " * i + f"k{i}:\n" for i in range(300)), "line 64: nested deeper than 64 levels"),
    ("a: 1\nb: 2\na: 3\n", "key 'a' is given twice in one mapping (lines 1 and 3)"),
], ids=["billion-laughs", "wide-aliases", "deep-flow", "deep-block", "duplicate"])
def test_both_loaders_refuse_the_same_documents_in_one_line(loader, text, needle):
    with pytest.raises(Y.Refused) as info:
        Y.parse_yaml(text)
    assert str(info.value).startswith(needle) and "\n" not in str(info.value), str(info.value)


def test_aliases_within_the_limit_load_and_merge_keys_work(loader):
    text = ("base: &b {lr: 0.1, warmup_steps: 0}\n" + "".join(f"c{i}: {{<<: *b, lr: {i + 1}}}\n" for i in range(500)))
    data = Y.parse_yaml(text)
    assert data["c499"] == {"lr": 500, "warmup_steps": 0} and data["base"] == {"lr": 0.1, "warmup_steps": 0}


def test_malformed_yaml_is_still_a_yaml_error(loader):
    with pytest.raises(yaml.YAMLError):
        Y.parse_yaml("a: [1,\n")


def test_a_validated_config_is_expanded_once_and_a_changed_one_again():
    cfg = validate_suite(Y.parse_yaml(_cells(20)), source="big.yaml")
    cached = _VALIDATED[0][2]
    cells = expand(cfg)
    assert cells is cached and not _VALIDATED  # taken once
    fresh = expand(cfg)
    assert fresh is not cells and [c.cell_id for c in fresh] == [c.cell_id for c in cells]
    cfg2 = validate_suite(Y.parse_yaml(_cells(20)), source="big.yaml")
    cfg2["cells"][0]["module_params"]["lr"] = 0.5  # changed after validation: expanded anew
    assert expand(cfg2)[0].config["module_params"]["lr"] == 0.5


def test_a_micro_benchmark_config_is_still_recognised(tmp_path):
    path = tmp_path / "m.yaml"
    assert micro_benchmark_of(path, "benchmark: attention\nsizes: [1]\n") == "attention"
    assert micro_benchmark_of(path, "{benchmark: attention}\n") == "attention"
    assert micro_benchmark_of(path, _cells(3)) is None


def test_exponent_floats_as_python_prints_them_are_numbers(loader):
    """``f"{lr}"`` writes 1e-05: YAML 1.1 (PyYAML) read it as text and the sweep was refused."""
    data = Y.parse_yaml("a: 1e-05\nb: -2.5E+3\nc: '1e-05'\nd: 1e5x\ne: 7\n")
    assert data == {"a": 1e-05, "b": -2500.0, "c": "1e-05", "d": "1e5x", "e": 7}
    cfg = validate_suite(Y.parse_yaml(_cells(1).replace("lr: 0.0000100", "lr: 1e-05")), source="x.yaml")
    assert expand(cfg)[0].config["module_params"]["lr"] == 1e-05
