"""The recurrence registry (what each layer records, plug-ins, clear errors), building layers by
name, and the optimiser groups built from per-parameter hints."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from attn_core.recurrent import (LRU, S4D, Bidirectional, Mamba2, MinRNN, RecurrentLayer, build_recurrence,
                                 get_recurrence, list_recurrences, param_groups, register_recurrence,
                                 unregister_recurrence)


def test_builtins_record_what_they_support():
    assert list_recurrences() == ("min_rnn", "s4d", "mamba2", "lru")
    assert list_recurrences(step=True) == list_recurrences()
    expected = {"min_rnn": (MinRNN, False, "L", False), "s4d": (S4D, True, "L log L", True),
                "mamba2": (Mamba2, False, "L*Q", False), "lru": (LRU, True, "L", False)}
    for name, (cls, complex_state, cost, time_invariant) in expected.items():
        spec = get_recurrence(name)
        assert (spec.cls, spec.complex_state, spec.cost, spec.time_invariant) == (cls, complex_state, cost,
                                                                                   time_invariant)
        assert spec.causal and spec.bidirectional and spec.step
    # the optional fused GPU kernels (backend="fla"): two recurrences have one, the others are pure only
    assert {n: bool(get_recurrence(n).gpu_kernel) for n in expected} == {
        "min_rnn": True, "s4d": False, "mamba2": True, "lru": False}


def test_a_plugin_registers_and_unregisters():
    @register_recurrence("identity_rnn", complex_state=False, step=False, cost="L", bidirectional=False)
    class Identity(RecurrentLayer):
        def __init__(self, d_model: int) -> None:
            super().__init__()
            self.d_model = d_model

        def _forward(self, x, mask, return_state):
            return x, None

    try:
        assert "identity_rnn" in list_recurrences() and "identity_rnn" not in list_recurrences(step=True)
        layer = build_recurrence("identity_rnn", 4)
        x = torch.randn(2, 3, 4)
        y = layer(x, lengths=torch.tensor([3, 1]))
        assert torch.equal(y[0], x[0]) and not y[1, 1:].any()
        with pytest.raises(ValueError, match="already registered"):
            register_recurrence("identity_rnn", complex_state=False, step=False, cost="L")(Identity)
        with pytest.raises(ValueError, match="recurrence 'identity_rnn' cannot be bidirectional; those that can: "
                                             "'min_rnn', 's4d', 'mamba2', 'lru'"):
            build_recurrence("identity_rnn", 4, bidirectional=True)
        with pytest.raises(NotImplementedError, match="Identity has no step"):
            layer.step(x[:, 0])
        with pytest.raises(NotImplementedError, match="Identity cannot return its state"):
            layer(x, return_state=True)
    finally:
        unregister_recurrence("identity_rnn")
    assert "identity_rnn" not in list_recurrences()


def test_build_by_name_and_bad_names_or_params():
    assert isinstance(build_recurrence("lru", 8, hidden_size=4), LRU)
    bi = build_recurrence("min_rnn", 8, bidirectional=True, kind="lstm")
    assert isinstance(bi, Bidirectional) and bi.forward_layer.kind == "lstm"
    with pytest.raises(ValueError, match=r"recurrence='gru' is invalid: expected one of 'min_rnn', 's4d', "):
        build_recurrence("gru", 8)
    with pytest.raises(ValueError, match=r"unknown key\(s\) 'hidden' for recurrence='min_rnn'; valid keys: "
                                         r"'hidden_size', 'kind', 'bias', 'dropout'"):
        build_recurrence("min_rnn", 8, hidden=4)
    with pytest.raises(ValueError, match=r"kind='rnn' is invalid: expected one of 'gru', 'lstm'"):
        MinRNN(8, kind="rnn")
    with pytest.raises(ValueError, match=r"d_state=7 is invalid: expected an even int >= 2"):
        S4D(8, d_state=7)
    with pytest.raises(ValueError, match=r"headdim=5 is invalid: expected a divisor of expand \* d_model = 16"):
        Mamba2(8, headdim=5)
    with pytest.raises(ValueError, match=r"x has shape \(2, 3, 5\): expected \(B, L, d_model\) with d_model=8"):
        LRU(8)(torch.zeros(2, 3, 5))


def test_initialisations_follow_the_papers():
    torch.manual_seed(0)
    s4d = S4D(16, d_state=8, dt_min=1e-3, dt_max=0.1)
    dt = torch.exp(s4d.log_dt)
    assert dt.min() >= 1e-3 and dt.max() <= 0.1
    torch.testing.assert_close(torch.exp(s4d.log_A_real), torch.full((16, 4), 0.5))
    torch.testing.assert_close(s4d.A_imag[3], torch.pi * torch.arange(4.0))
    mamba = Mamba2(32, headdim=8)
    a = torch.exp(mamba.A_log)
    assert a.min() >= 1 and a.max() <= 16
    dt = torch.nn.functional.softplus(mamba.dt_bias)
    assert dt.min() >= 1e-3 - 1e-7 and dt.max() <= 0.1 + 1e-7
    lru = LRU(8, hidden_size=512, r_min=0.4, r_max=0.9, max_phase=0.5)
    lam = lru.eigenvalues()
    assert lam.abs().min() >= 0.4 - 1e-6 and lam.abs().max() <= 0.9 + 1e-6
    assert lam.angle().min() >= 0 and lam.angle().max() <= 0.5 + 1e-6
    torch.testing.assert_close(torch.exp(lru.gamma_log), torch.sqrt(1 - lam.abs() ** 2))


def test_param_groups_follow_the_hints():
    model = nn.Sequential(S4D(8, lr=1e-3), LRU(8, lr=5e-4), Mamba2(16, headdim=8), nn.Linear(8, 8))
    model[3].bias.requires_grad_(False)
    groups = param_groups(model, 0.01, 0.1)
    named = {id(p): n for n, p in model.named_parameters()}
    by_name = {named[id(p)]: (g["lr"], g["weight_decay"]) for g in groups for p in g["params"]}
    assert by_name["0.log_dt"] == by_name["0.A_imag"] == by_name["0.log_A_real"] == (1e-3, 0.0)
    assert by_name["1.nu_log"] == by_name["1.theta_log"] == by_name["1.gamma_log"] == (5e-4, 0.0)
    assert by_name["2.A_log"] == by_name["2.dt_bias"] == by_name["2.D"] == (0.01, 0.0)
    assert by_name["0.C"] == by_name["1.B"] == by_name["3.weight"] == (0.01, 0.1)
    assert "3.bias" not in by_name and len(by_name) == sum(p.requires_grad for p in model.parameters())
    torch.optim.AdamW(groups)  # accepted as is
    with pytest.raises(ValueError, match=r"base_lr=0 is invalid: expected a positive float"):
        param_groups(model, 0, 0.1)
