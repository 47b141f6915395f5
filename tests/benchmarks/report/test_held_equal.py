"""``held_equal``: what one table's models had in common as a budget, read from their records."""

from __future__ import annotations

from types import SimpleNamespace

from benchmarks.report.budget import held_equal


def _model(name: str, n: int = 3, stop: str | None = None, **trainer) -> SimpleNamespace:
    t = {"max_epochs": 10, "max_steps": -1, "max_time_s": None, "early_stopping_patience": None, **trainer}
    recs = [{"model": name, "config": {"trainer": dict(t)}} for _ in range(n)]
    if stop:
        for r in recs:
            r["stop"] = {"reason": stop, "epochs": 2, "max_epochs": t["max_epochs"], "time_cap_s": t["max_time_s"]}
    return SimpleNamespace(model=name, ok=recs)


def test_equal_epochs_without_a_cap_is_machine_independent():
    short, text = held_equal([_model("transformer", max_epochs=2), _model("rnn", max_epochs=2)])
    assert short == "2 epochs"
    assert "do not depend on the machine's speed" in text and "No early stopping" in text


def test_equal_steps_are_named_as_steps():
    short, _ = held_equal([_model("a", max_steps=500), _model("b", max_steps=500)])
    assert short == "500 optimiser steps"


def test_a_shared_wall_clock_cap_says_it_is_machine_dependent_and_what_it_ended():
    short, text = held_equal([_model("a", stop="time_cap", max_time_s=140), _model("b", stop="max_epochs", max_time_s=140)])
    assert short == "140 s wall-clock"
    assert "machine-dependent" in text and "ended a's training" in text


def test_a_calibrated_cap_is_not_called_machine_dependent():
    cap = {"seconds": 20, "reference": "cpu-2core-amd-epyc-avx2"}
    short, text = held_equal([_model("a", max_time_s=cap), _model("b", max_time_s=cap)])
    assert "calibrated" in short and "machine-dependent" not in text


def test_different_caps_hold_nothing_equal_and_group_the_models():
    short, text = held_equal([_model("a", max_time_s=225), _model("b", max_time_s=225), _model("mlp", max_time_s=60)])
    assert short == "nothing (own caps)"
    assert "a, b: 10 epochs, 225 s" in text and "mlp: 10 epochs, 60 s" in text


def test_own_epoch_ceilings_with_early_stopping_hold_the_stopping_rule():
    short, text = held_equal([_model("gcn", max_epochs=500, early_stopping_patience=50),
                              _model("mlp", max_epochs=300, early_stopping_patience=25)])
    assert short == "early stopping"
    assert "patience 25/50" in text and "machine-independent" in text


def test_no_trainer_in_the_records_says_so():
    assert held_equal([SimpleNamespace(model="a", ok=[{"model": "a"}])])[0] == "–"


def test_a_broken_trainer_in_a_record_is_shown_not_raised():
    short, text = held_equal([_model("a", max_epochs=[2], max_time_s="soon", early_stopping_patience="x"),
                              _model("b", max_epochs=2)])
    assert short == "nothing (own caps)" and "'soon' s" in text
