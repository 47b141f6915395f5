"""Every domain's attention model takes any registered pattern it can use, with its parameters,
from the config; a pattern that cannot do what the model needs is refused in one line listing
those that can; a new parameter left at its default changes no cell id."""

from __future__ import annotations

import copy

import pytest
import torch

import attn_core
from benchmarks.config.schema import ConfigError
from benchmarks.config.suite import expand, validate_suite
from tasks.common.registry import param_bounds

# a small setting of every pattern (linformer needs max_len: the models pass it)
SMALL = {"performer": {"features": 8}, "linformer": {"k_proj": 4}, "nystrom": {"landmarks": 3},
         "local_global": {"window": 2, "global_tokens": 1}, "truncated": {"window": 2}}
SEQUENCE = [n for n in attn_core.list_patterns(kind="sequence") if n in ("full", *SMALL, "linear")]
CAUSAL = [n for n in SEQUENCE if attn_core.get_pattern(n).causal]


def _mask(b: int, length: int) -> torch.Tensor:
    mask = torch.ones(b, length, dtype=torch.bool)
    mask[0, length - 3:] = False  # one padded sentence
    return mask


@pytest.mark.parametrize("pattern", SEQUENCE)
def test_pos_tagging_and_speech_encoders_take_every_padding_pattern(pattern):
    from tasks.pos_tagging.models import TransformerContext
    from tasks.speech.models import TransformerEncoderNet

    torch.manual_seed(0)
    x, mask = torch.randn(2, 9, 6), _mask(2, 9)
    pos = TransformerContext(6, d_model=8, num_heads=2, num_layers=1, dim_feedforward=8, pattern=pattern,
                             pattern_params=SMALL.get(pattern))
    speech = TransformerEncoderNet(6, d_model=8, num_heads=2, num_layers=1, pattern=pattern,
                                   pattern_params=SMALL.get(pattern), pattern_max_len=9)
    for net in (pos.eval(), speech.eval()):
        out = net(x, mask)
        assert out.shape == (2, 9, 8) and torch.isfinite(out).all()
        assert net.encoder.layers[0].self_attn.pattern == pattern
        # padding never leaks: changing a padded position changes no real output
        y = x.clone()
        y[0, -1] += 5
        torch.testing.assert_close(net(y, mask)[0, :6], out[0, :6], atol=1e-5, rtol=1e-5)


def test_speech_presets_keep_their_window_only_for_a_pattern_with_one():
    from tasks.speech.models import TransformerEncoderNet

    net = TransformerEncoderNet(6, d_model=8, num_heads=2, num_layers=1, pattern="local_global", window=3)
    assert net.encoder.layers[0].self_attn.pattern_params == {"window": 3, "global_tokens": 1}
    net = TransformerEncoderNet(6, d_model=8, num_heads=2, num_layers=1, pattern="linear", window=3)
    assert net.encoder.layers[0].self_attn.pattern_params == {}


@pytest.mark.parametrize("pattern", CAUSAL)
def test_translation_takes_causal_padding_patterns_and_decodes_step_by_step(pattern):
    from tasks.translation.models import TransformerSeq2Seq

    torch.manual_seed(0)
    net = TransformerSeq2Seq(12, d_model=8, num_heads=2, enc_layers=1, dec_layers=1, dim_feedforward=8, dropout=0.0,
                             attn_dropout=0.0, pattern=pattern, pattern_params=SMALL.get(pattern)).eval()
    assert net.kv_cache == attn_core.get_pattern(pattern).incremental  # every built-in causal pattern is
    src, src_mask = torch.randint(4, 12, (2, 7)), _mask(2, 7)
    tgt = torch.randint(4, 12, (2, 5))
    logits = net(src, src_mask, tgt)
    state = net.encode(src, src_mask)
    for t in range(tgt.shape[1]):  # step by step equals teacher forcing (causality)
        step, state = net.decode_step(state, tgt[:, : t + 1])
        torch.testing.assert_close(step, logits[:, t], atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("pattern", ["linformer", "nystrom", "graph"])
def test_translation_refuses_a_pattern_that_cannot_be_causal_in_one_line(pattern):
    from tasks.translation.models import TransformerSeq2Seq

    with pytest.raises(ValueError) as err:
        TransformerSeq2Seq(12, d_model=8, num_heads=2, pattern=pattern)
    msg = str(err.value)
    assert "\n" not in msg and f"pattern={pattern!r} is invalid" in msg
    assert "'performer'" in msg and "'linformer'" not in msg.split(":")[-1]


@pytest.mark.parametrize("pattern", SEQUENCE)
def test_vit_takes_every_sequence_pattern(pattern):
    from tasks.vision.models import ViT

    torch.manual_seed(0)
    net = ViT(1, 8, 8, 3, patch_size=2, d_model=8, num_heads=2, num_layers=1, pattern=pattern,
              pattern_params=SMALL.get(pattern)).eval()
    out = net(torch.randn(2, 1, 8, 8))
    assert out.shape == (2, 3) and torch.isfinite(out).all()
    assert net.encoder.layers[0].self_attn.pattern == pattern


def test_vit_refuses_graph_and_pattern_params_with_local():
    from tasks.vision.models import ViT

    with pytest.raises(ValueError, match="'local'.*'performer'"):
        ViT(1, 8, 8, 3, pattern="graph")
    with pytest.raises(ValueError, match="radius"):
        ViT(1, 8, 8, 3, pattern="local", pattern_params={"window": 2})


@pytest.mark.parametrize("pattern", ["full", "linear", "performer", "nystrom", "graph"])
def test_graph_attention_net_takes_order_free_patterns(pattern):
    from tasks.graphs.models import AttentionNet

    torch.manual_seed(0)
    n = 11
    x, ei = torch.randn(n, 5), torch.randint(0, n, (2, 30))
    net = AttentionNet(5, 3, hidden=4, num_heads=2, pattern=pattern, score="dot", pattern_params=SMALL.get(pattern),
                       num_nodes=n, residual=pattern != "graph").eval()
    out = net(x, ei)
    assert out.shape == (n, 3) and torch.isfinite(out).all()
    if pattern != "graph":  # over all nodes: the edges do not matter
        torch.testing.assert_close(net(x, ei[:, :3]), out)


def test_performer_over_nodes_is_permutation_equivariant():
    from tasks.graphs.models import AttentionNet

    torch.manual_seed(0)
    net = AttentionNet(5, 3, hidden=4, num_heads=2, pattern="performer", score="dot", pattern_params={"features": 8},
                       residual=True).eval()
    x, perm = torch.randn(9, 5), torch.randperm(9)
    torch.testing.assert_close(net(x[perm], None), net(x, None)[perm], atol=1e-5, rtol=1e-5)
    assert "pattern_state.projection" in dict(net.out.named_buffers())


@pytest.mark.parametrize("pattern", ["truncated", "local_global", "linformer"])
def test_graph_attention_net_refuses_patterns_that_read_node_order(pattern):
    from tasks.graphs.models import AttentionNet

    with pytest.raises(ValueError, match="node order means nothing; valid: 'full'"):
        AttentionNet(5, 3, pattern=pattern, score="dot", pattern_params=SMALL.get(pattern))


def test_graph_sequence_pattern_needs_dot_score():
    from tasks.graphs.models import AttentionNet

    with pytest.raises(ValueError, match="score='dot' only"):
        AttentionNet(5, 3, pattern="performer", score="additive")


# --------------------------------------------------------------------------- configs and cell ids
def _suite(task: str, dataset: str, model: str, params: dict | None = None) -> dict:
    cell = {"task": task, "dataset": dataset, "models": [model]}
    if params is not None:
        cell["model_params"] = {model: params}
    return {"suite": "t", "seeds": 1, "trainer": {"accelerator": "cpu"}, "cells": [cell]}


ATTENTION_MODELS = [("pos_tagging", "synthetic", "transformer"), ("speech", "synthetic", "transformer"),
                    ("translation", "synthetic", "transformer"), ("vision", "synthetic", "vit"),
                    ("graphs", "sbm", "full_attention")]


@pytest.mark.parametrize("task,dataset,model", ATTENTION_MODELS)
def test_default_pattern_params_leave_the_cell_id_alone(task, dataset, model):
    base = expand(validate_suite(_suite(task, dataset, model)))[0]
    assert "pattern_params" not in base.config["model_params"]
    for same in ({"pattern_params": None}, {"pattern_params": {}}):
        assert expand(validate_suite(_suite(task, dataset, model, same)))[0].cell_id == base.cell_id
    cell = expand(validate_suite(_suite(task, dataset, model, {"pattern": "performer", "pattern_params": {"features": 8}})))[0]
    assert cell.cell_id != base.cell_id and cell.pattern == "performer"
    assert cell.config["model_params"]["pattern_params"] == {"features": 8}


def test_translation_pattern_full_is_its_old_default():
    base = expand(validate_suite(_suite("translation", "synthetic", "transformer")))[0]
    assert "pattern" not in base.config["model_params"]
    same = expand(validate_suite(_suite("translation", "synthetic", "transformer", {"pattern": "full"})))[0]
    assert same.cell_id == base.cell_id and same.pattern == "full"


def test_quick_cell_ids_of_attention_models_are_unchanged():
    """Pinned ids of ``quick.yaml`` from before patterns came to the task models (its frozen copy,
    ``tests/helpers/configs/quick_v1.yaml``: the shipped one is now the diagnostics)."""
    from benchmarks.config.suite import load_suite
    from tests.helpers.suites import QUICK_V1

    ids = {c.label: c.cell_id for c in expand(load_suite(QUICK_V1))}
    assert {ids[k] for k in ("graphs/sbm/graph_attention seed=0", "graphs/sbm/full_attention seed=0",
                             "pos_tagging/synthetic/transformer_truncated seed=0",
                             "translation/synthetic/transformer seed=0", "speech/synthetic/transformer_w8 seed=0",
                             "vision/synthetic/vit seed=0", "vision/synthetic/vit_local seed=0")} == {
        "950b060b60bd", "15b020ff6446", "e893e03e9a40", "b14192686571", "51a11cbe67f0", "75d9f5b50288",
        "7c593e817e4b"}


@pytest.mark.parametrize("task,dataset,model,params,match", [
    ("translation", "synthetic", "transformer", {"pattern": "nystrom"},
     r"cells\[0\]\.model_params\.transformer: pattern='nystrom' is invalid: it does not support causal.*'performer'"),
    ("pos_tagging", "synthetic", "transformer", {"pattern": "performer", "pattern_params": {"featurez": 3}},
     r"unknown key\(s\) 'featurez' for pattern='performer'; valid keys: 'features', 'redraw'"),
    ("vision", "synthetic", "vit", {"pattern": "graph"}, r"expected 'local' or a sequence pattern"),
    ("graphs", "sbm", "full_attention", {"pattern": "truncated"}, r"node order means nothing"),
    ("pos_tagging", "synthetic", "transformer", {"pattern": "nope"}, r"pattern='nope' is invalid: expected one of"),
])
def test_config_refuses_a_pattern_the_model_cannot_use_in_one_line(task, dataset, model, params, match):
    with pytest.raises(ConfigError, match=match) as err:
        validate_suite(_suite(task, dataset, model, params), source="x.yaml")
    assert len(err.value.problems) == 1


def test_pattern_choices_follow_the_registry():
    assert "later_pattern" not in param_bounds("pattern", "full").choices
    attn_core.register_pattern("later_pattern", causal=False, padding=True, cross=True, complexity="L^2")(
        attn_core.get_pattern("full").fn)
    try:
        assert "later_pattern" in param_bounds("pattern", "full").choices
        cfg = expand(validate_suite(_suite("pos_tagging", "synthetic", "transformer", {"pattern": "later_pattern"})))
        assert cfg[0].pattern == "later_pattern"
    finally:
        attn_core.unregister_pattern("later_pattern")


def test_spec_check_runs_on_the_resolved_params():
    from tasks.common.registry import get_task

    spec = get_task("translation").models.get("transformer")
    params = copy.deepcopy(spec.params)
    spec.check(params)  # the defaults pass
    params["pattern"] = "linformer"
    with pytest.raises(ValueError, match="causal"):
        spec.check(params)


@pytest.mark.parametrize("task,base,names", [
    ("pos_tagging", "transformer", ["linear", "performer", "linformer", "nystrom", "local_global"]),
    ("speech", "transformer", ["linear", "performer", "linformer", "nystrom", "local_global"]),
    ("translation", "transformer", ["linear", "performer", "local_global"]),
    ("vision", "vit", ["linear", "performer", "linformer", "nystrom", "local_global"]),
    ("graphs", "full_attention", ["linear", "performer", "nystrom"]),
])
def test_variant_presets_are_named_but_not_in_all(task, base, names):
    from tasks.common.registry import get_task

    t = get_task(task)
    presets = [n for n, s in t.models.items() if not s.in_all and s.family == "attention"]
    assert presets == [f"{base}_{p}" for p in names]  # (modern_rnn is named explicitly too: not a variant)
    for p in names:
        spec = t.models.get(f"{base}_{p}")
        assert spec.family == "attention" and spec.pattern == p and spec.pattern_for(spec.params) == p
        assert spec.problem(spec.params) is None
    cells = expand(validate_suite({"suite": "t", "seeds": 1, "cells": [{"task": task, "dataset": "synthetic" if task != "graphs" else "sbm"}]}))
    assert not {c.model for c in cells} & set(presets)


def test_the_variants_config_runs_every_preset_next_to_an_rnn_and_a_cnn():
    from benchmarks.config import CONFIG_DIR
    from benchmarks.config.suite import load_suite
    from tasks.common.registry import get_task

    cells = expand(load_suite(CONFIG_DIR / "variants.yaml"))
    for task in ("graphs", "pos_tagging", "speech", "translation", "vision"):
        t = get_task(task)
        ran = {c.model for c in cells if c.task == task}
        assert {n for n, s in t.models.items() if not s.in_all and s.family == "attention"} <= ran
        assert {"rnn", "cnn"} <= {t.models.get(m).family for m in ran}
        assert {c.seed for c in cells if c.task == task} == {0, 1, 2}
