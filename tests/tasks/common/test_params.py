"""Renamed model parameters in the registry (tasks.common.params): a registration declares
``renamed={old: new}``; the builder's signature has the new names only, ``build`` also takes the
old ones (a caller's old name wins over a preset's default), a preset given an old name warns, and
the mapping is checked when registered."""

from __future__ import annotations

import pickle

import pytest

from tasks.common.params import check_renamed, current_names, recorded_names
from tasks.common.registry import ModelSpec, builder_of, model_spec, register_model, register_preset

RENAMED = {"heads": "num_heads", "ff": "dim_feedforward"}


@register_model(family="attention", pattern="full", renamed=RENAMED)
def toy_renamed(data_info: dict, *, num_heads: int = 4, dim_feedforward: int = 16, width: int = 8) -> dict:
    """A toy whose parameters were renamed."""
    return {"num_heads": num_heads, "dim_feedforward": dim_feedforward, "width": width}


TOY_2 = register_preset("toy_renamed_2", toy_renamed, {"num_heads": 2}, description="two heads")


def test_current_and_recorded_names():
    assert current_names({"heads": 2, "width": 3}, RENAMED) == ({"num_heads": 2, "width": 3}, ["heads"])
    assert current_names({"num_heads": 2}, RENAMED) == ({"num_heads": 2}, [])
    assert list(current_names({"width": 1, "ff": 2, "heads": 3}, RENAMED)[0]) == ["width", "dim_feedforward",
                                                                                 "num_heads"]  # order kept
    with pytest.raises(ValueError, match="model 'm': 'heads' and 'num_heads' name the same parameter"):
        current_names({"heads": 2, "num_heads": 2}, RENAMED, what="model 'm'")
    assert recorded_names({"num_heads": 2, "width": 3}, RENAMED) == {"heads": 2, "width": 3}
    assert recorded_names({"heads": 2}, RENAMED) == {"heads": 2}  # old names pass unchanged
    assert recorded_names({"num_heads": 2}, {}) == {"num_heads": 2}


def test_the_signature_has_the_new_names_and_build_takes_both():
    spec = model_spec(toy_renamed)
    assert spec.params == {"num_heads": 4, "dim_feedforward": 16, "width": 8} and spec.renamed == RENAMED
    assert spec.build({}, heads=3, ff=5) == {"num_heads": 3, "dim_feedforward": 5, "width": 8}
    assert spec.build({}, num_heads=3) == spec.build({}, heads=3)
    with pytest.raises(ValueError, match="'heads' and 'num_heads'"):
        spec.build({}, heads=3, num_heads=3)
    with pytest.raises(ValueError, match=r"unknown parameter\(s\) depth; valid: dim_feedforward, num_heads, width"):
        spec.build({}, depth=3)


def test_a_preset_inherits_the_renames_and_a_callers_old_name_beats_its_default():
    assert TOY_2.renamed == RENAMED and builder_of(TOY_2) is toy_renamed
    assert TOY_2.build({})["num_heads"] == 2
    assert TOY_2.build({}, heads=6)["num_heads"] == 6  # the caller's value, not the preset's 2
    back = pickle.loads(pickle.dumps(TOY_2))
    assert back.build({}, heads=6) == TOY_2.build({}, heads=6) and back.renamed == RENAMED


def test_a_preset_given_an_old_name_takes_it_with_a_warning():
    with pytest.warns(FutureWarning, match="'ff' is deprecated, use 'dim_feedforward'"):
        spec = register_preset("toy_renamed_ff", toy_renamed, {"ff": 64}, description="wide")
    assert spec.params["dim_feedforward"] == 64 and "ff" not in spec.params
    assert spec.build({})["dim_feedforward"] == 64


@pytest.mark.parametrize("renamed,match", [
    ({"heads": "n_heads"}, "'heads' -> 'n_heads'"),  # the new name is not a parameter
    ({"width": "num_heads"}, "'width' -> 'num_heads'"),  # the old name still is one
])
def test_a_bad_rename_is_refused_when_registered(renamed, match):
    with pytest.raises(ValueError, match=match):
        check_renamed("m", {"num_heads": 1, "width": 2}, renamed)
    with pytest.raises(ValueError, match=match):
        ModelSpec("m", "other", lambda info, **kw: None, {"num_heads": 1, "width": 2}, renamed=renamed)
