"""Issue 32.4: the Transformer layers and stacks share one frozen :class:`attn_core.LayerConfig`
instead of a long signature passed on by position: the keyword form and the config form build the
same module, a stack hands its one config to every layer, and bad options raise one line."""

from __future__ import annotations

import ast
import dataclasses
from pathlib import Path

import pytest
import torch

import attn_core
from attn_core import (
    LayerConfig,
    TransformerDecoder,
    TransformerDecoderLayer,
    TransformerEncoder,
    TransformerEncoderLayer,
)

E, H = 8, 2
KW = {"dim_feedforward": 16, "dropout": 0.0, "pattern": "truncated", "window": 2, "norm_first": False}
BUILDERS = {"MultiHeadAttention", "LayerConfig", "TransformerEncoderLayer", "TransformerDecoderLayer",
            "TransformerEncoder", "TransformerDecoder"}


def _positional_calls(tree: ast.AST) -> list[int]:
    """Lines calling a layer/stack/attention builder with more than two positional arguments."""
    return [node.lineno for node in ast.walk(tree)
            if isinstance(node, ast.Call) and getattr(node.func, "id", getattr(node.func, "attr", None)) in BUILDERS
            and len(node.args) > 2]


def test_attn_core_passes_layer_arguments_by_keyword():
    found = {p.name: lines for p in sorted(Path(attn_core.__file__).parent.rglob("*.py"))
             if (lines := _positional_calls(ast.parse(p.read_text())))}
    assert not found, f"builders called with positional arguments beyond (d_model, num_heads): {found}"
    assert _positional_calls(ast.parse("TransformerEncoderLayer(d, h, ff, dropout)")) == [1]


@pytest.mark.parametrize("stack_cls", [TransformerEncoder, TransformerDecoder])
def test_keyword_and_config_forms_build_the_same_stack(stack_cls):
    torch.manual_seed(0)
    by_keyword = stack_cls(E, H, 2, **KW).double().eval()
    torch.manual_seed(0)
    by_config = stack_cls(LayerConfig(E, H, **KW), num_layers=2).double().eval()
    assert by_keyword.config == by_config.config == LayerConfig(E, H, **KW)
    assert all(layer.config is by_config.config for layer in by_config.layers)  # one config, shared
    a, b = by_keyword.state_dict(), by_config.state_dict()
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)
    x = torch.randn(2, 7, E, dtype=torch.float64)
    args = (x,) if stack_cls is TransformerEncoder else (x, torch.randn(2, 5, E, dtype=torch.float64))
    assert torch.equal(by_keyword(*args), by_config(*args))


def test_causal_defaults_to_the_layers_own_and_options_override_a_config():
    cfg = LayerConfig(E, H, dropout=0.0)
    assert cfg.causal is None and cfg.feedforward == 4 * E and cfg.attention_dropout == 0.0
    assert not TransformerEncoderLayer(cfg).self_attn.causal and TransformerDecoderLayer(cfg).self_attn.causal
    assert not TransformerDecoderLayer(cfg, causal=False).self_attn.causal
    layer = TransformerEncoderLayer(cfg, attn_dropout=0.2, dim_feedforward=12)
    assert layer.self_attn.dropout == 0.2 and layer.linear1.out_features == 12 and cfg.attn_dropout is None
    assert TransformerDecoder(cfg, num_layers=1, memory_dim=6).layers[0].multihead_attn.kdim == 6
    with pytest.raises(dataclasses.FrozenInstanceError):
        cfg.dropout = 0.5  # type: ignore[misc]


@pytest.mark.parametrize("build, message", [
    (lambda: TransformerEncoder(E, H, 2, dropot=0.1),
     "dropot=0.1 is invalid: unknown layer option; valid: d_model, num_heads, dim_feedforward, dropout, "
     "activation, norm_first, pattern, window, causal, attn_dropout, layer_norm_eps, score, pattern_params, "
     "max_len, memory_dim"),
    (lambda: TransformerEncoderLayer(LayerConfig(E, H), 4),
     "num_heads=4 is invalid: the LayerConfig gives it: pass any other argument by keyword"),
    (lambda: TransformerEncoderLayer(E, H, memory_dim=4),
     "memory_dim=4 is invalid: only decoders take memory_dim (the width of their memory)"),
    (lambda: TransformerDecoder(E, H, 1, memory_dim=0), "memory_dim=0 is invalid: expected a positive int"),
    (lambda: LayerConfig(E, H, dim_feedforward=0), "dim_feedforward=0 is invalid: expected a positive int"),
    (lambda: TransformerEncoder(LayerConfig(E, H)), "num_layers=None is invalid: expected a positive int"),
])
def test_bad_options_raise_one_line(build, message):
    with pytest.raises(ValueError) as err:
        build()
    assert str(err.value) == message


def test_layers_take_dim_feedforward_third_as_torch_nn_does() -> None:
    """``TransformerEncoderLayer(d_model, nhead, dim_feedforward)`` is torch.nn's positional order."""
    from attn_core import TransformerDecoderLayer, TransformerEncoderLayer

    for cls in (TransformerEncoderLayer, TransformerDecoderLayer):
        assert cls(16, 4, 40).config == cls(16, 4, dim_feedforward=40).config
        assert cls(16, 4, 40).linear1.out_features == 40
