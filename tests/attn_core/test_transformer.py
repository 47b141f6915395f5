"""Transformer layers and stacks: values and gradients against torch.nn's Transformer layers
with the weights copied across (float64, eval, dropout 0), padding and causality invariances,
truncated and graph patterns against dense masks, and argument errors."""

from __future__ import annotations

import pytest
import torch
import torch.nn as nn

from attn_core.masks import causal_mask, graph_mask, window_mask
from attn_core.transformer import (
    TransformerDecoder,
    TransformerDecoderLayer,
    TransformerEncoder,
    TransformerEncoderLayer,
)
from tests.helpers.attention import randomise as _randomise

DT = torch.float64
E, H, FF = 8, 2, 16


def _copy_mha(ours, theirs: nn.MultiheadAttention) -> None:
    with torch.no_grad():
        theirs.in_proj_weight.copy_(torch.cat([ours.q_proj.weight, ours.k_proj.weight, ours.v_proj.weight]))
        theirs.in_proj_bias.copy_(torch.cat([ours.q_proj.bias, ours.k_proj.bias, ours.v_proj.bias]))
        theirs.out_proj.weight.copy_(ours.out_proj.weight)
        theirs.out_proj.bias.copy_(ours.out_proj.bias)


def _copy_layer(ours: nn.Module, theirs: nn.Module) -> None:
    """Our layer's weights into torch's TransformerEncoderLayer / TransformerDecoderLayer."""
    _copy_mha(ours.self_attn, theirs.self_attn)
    if hasattr(ours, "multihead_attn"):
        _copy_mha(ours.multihead_attn, theirs.multihead_attn)
    with torch.no_grad():
        for name in ("linear1", "linear2", "norm1", "norm2", "norm3"):
            if hasattr(ours, name):
                for pn, p in getattr(ours, name).named_parameters():
                    getattr(getattr(theirs, name), pn).copy_(p)


def _param_grads(ours: nn.Module, theirs: nn.Module) -> list[tuple[torch.Tensor, torch.Tensor]]:
    """Pairs (our grad, torch grad) for every parameter, in_proj split into q/k/v."""
    pairs = []
    for attn in ("self_attn", "multihead_attn"):
        if not hasattr(ours, attn):
            continue
        o, t = getattr(ours, attn), getattr(theirs, attn)
        for i, proj in enumerate((o.q_proj, o.k_proj, o.v_proj)):
            pairs.append((proj.weight.grad, t.in_proj_weight.grad[i * E : (i + 1) * E]))
            pairs.append((proj.bias.grad, t.in_proj_bias.grad[i * E : (i + 1) * E]))
        pairs.append((o.out_proj.weight.grad, t.out_proj.weight.grad))
        pairs.append((o.out_proj.bias.grad, t.out_proj.bias.grad))
    for name in ("linear1", "linear2", "norm1", "norm2", "norm3"):
        if hasattr(ours, name):
            for pn, p in getattr(ours, name).named_parameters():
                pairs.append((p.grad, getattr(getattr(theirs, name), pn).grad))
    return pairs


def _x(*shape, seed=0):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(*shape, generator=g, dtype=DT, requires_grad=True)


def _kpm(b, l, pad):
    """(B, L) bool, True = real; batch row 1 has its last ``pad`` tokens padded."""
    m = torch.ones(b, l, dtype=torch.bool)
    if pad:
        m[1, -pad:] = False
    return m


def _enc_pair(norm_first, activation="gelu", seed=0, **kw):
    ours = TransformerEncoderLayer(E, H, dim_feedforward=FF, dropout=0.0, activation=activation, norm_first=norm_first, **kw).double()
    _randomise(ours, seed)
    theirs = nn.TransformerEncoderLayer(
        E, H, FF, dropout=0.0, activation=activation, batch_first=True, norm_first=norm_first, dtype=DT
    )
    _copy_layer(ours, theirs)
    return ours.eval(), theirs.eval()


def _check_values_and_grads(ours_out, theirs_out, ours, theirs, inputs):
    """Outputs equal; input and parameter gradients of a random projection equal."""
    torch.testing.assert_close(ours_out, theirs_out)
    g = torch.randn_like(ours_out)
    ga = torch.autograd.grad((ours_out * g).sum(), inputs, retain_graph=True)
    (ours_out * g).sum().backward()
    gb = torch.autograd.grad((theirs_out * g).sum(), inputs, retain_graph=True)
    (theirs_out * g).sum().backward()
    for a, b in zip(ga, gb):
        torch.testing.assert_close(a, b)
    for a, b in _param_grads(ours, theirs):
        torch.testing.assert_close(a, b)


# --------------------------------------------------------------------------- vs torch.nn
@pytest.mark.parametrize("norm_first", [False, True])
@pytest.mark.parametrize("activation", ["gelu", "relu"])
def test_encoder_layer_matches_torch(norm_first, activation):
    ours, theirs = _enc_pair(norm_first, activation, seed=1)
    x = _x(2, 6, E, seed=2)
    kpm = _kpm(2, 6, pad=2)
    _check_values_and_grads(
        ours(x, key_padding_mask=kpm), theirs(x, src_key_padding_mask=~kpm), ours, theirs, (x,)
    )


@pytest.mark.parametrize("norm_first", [False, True])
def test_decoder_layer_matches_torch(norm_first):
    ours = TransformerDecoderLayer(E, H, dim_feedforward=FF, dropout=0.0, norm_first=norm_first).double()
    _randomise(ours, 3)
    theirs = nn.TransformerDecoderLayer(
        E, H, FF, dropout=0.0, activation="gelu", batch_first=True, norm_first=norm_first, dtype=DT
    )
    _copy_layer(ours, theirs)
    ours.eval(), theirs.eval()
    x, mem = _x(2, 5, E, seed=4), _x(2, 7, E, seed=5)
    tkpm, mkpm = _kpm(2, 5, pad=2), _kpm(2, 7, pad=3)
    out = ours(x, mem, tgt_key_padding_mask=tkpm, memory_key_padding_mask=mkpm)
    ref = theirs(
        x, mem, tgt_mask=~causal_mask(5), tgt_is_causal=True,
        tgt_key_padding_mask=~tkpm, memory_key_padding_mask=~mkpm,
    )
    _check_values_and_grads(out, ref, ours, theirs, (x, mem))


@pytest.mark.parametrize("norm_first", [False, True])
def test_encoder_stack_matches_torch(norm_first):
    ours = TransformerEncoder(E, H, 2, dim_feedforward=FF, dropout=0.0, norm_first=norm_first).double()
    _randomise(ours, 6)
    layer = nn.TransformerEncoderLayer(E, H, dim_feedforward=FF, dropout=0.0, activation="gelu", batch_first=True, norm_first=norm_first, dtype=DT)
    theirs = nn.TransformerEncoder(
        layer, 2, norm=nn.LayerNorm(E, dtype=DT) if norm_first else None, enable_nested_tensor=False
    )
    for o, t in zip(ours.layers, theirs.layers):
        _copy_layer(o, t)
    assert (ours.norm is None) == (not norm_first)  # final norm follows norm_first by default
    if norm_first:
        theirs.norm.load_state_dict(ours.norm.state_dict())
    ours.eval(), theirs.eval()
    x, kpm = _x(2, 6, E, seed=7), _kpm(2, 6, pad=1)
    out, ws = ours(x, key_padding_mask=kpm, need_weights=True)
    torch.testing.assert_close(out, theirs(x, src_key_padding_mask=~kpm))
    torch.testing.assert_close(ours(x, key_padding_mask=kpm), out)
    assert len(ws) == 2 and ws[0].shape == (2, H, 6, 6)
    assert torch.all(ws[1][1, :, :, -1] == 0)  # padded key gets zero weight in every layer
    torch.testing.assert_close(ws[1].sum(-1), torch.ones(2, H, 6, dtype=DT))
    g = torch.autograd.grad(out.square().sum(), x)[0]
    g_ref = torch.autograd.grad(theirs(x, src_key_padding_mask=~kpm).square().sum(), x)[0]
    torch.testing.assert_close(g, g_ref)


@pytest.mark.parametrize("norm_first", [False, True])
def test_decoder_stack_matches_torch_and_returns_cross_weights(norm_first):
    ours = TransformerDecoder(E, H, 2, dim_feedforward=FF, dropout=0.0, norm_first=norm_first).double()
    _randomise(ours, 8)
    layer = nn.TransformerDecoderLayer(E, H, dim_feedforward=FF, dropout=0.0, activation="gelu", batch_first=True, norm_first=norm_first, dtype=DT)
    theirs = nn.TransformerDecoder(layer, 2, norm=nn.LayerNorm(E, dtype=DT) if norm_first else None)
    for o, t in zip(ours.layers, theirs.layers):
        _copy_layer(o, t)
    if norm_first:
        theirs.norm.load_state_dict(ours.norm.state_dict())
    ours.eval(), theirs.eval()
    x, mem = _x(2, 4, E, seed=9), _x(2, 6, E, seed=10)
    mkpm = _kpm(2, 6, pad=2)
    out, ws = ours(x, mem, memory_key_padding_mask=mkpm, need_weights=True)
    ref = theirs(x, mem, tgt_mask=~causal_mask(4), tgt_is_causal=True, memory_key_padding_mask=~mkpm)
    torch.testing.assert_close(out, ref)
    g = torch.autograd.grad(out.square().sum(), (x, mem))
    g_ref = torch.autograd.grad(ref.square().sum(), (x, mem))
    for a, b in zip(g, g_ref):
        torch.testing.assert_close(a, b)
    # Per-layer cross-attention weights equal each layer's own weights on the running input.
    assert len(ws) == 2
    h = x
    for layer, w in zip(ours.layers, ws):
        h, w_layer = layer(h, mem, memory_key_padding_mask=mkpm, need_weights=True)
        torch.testing.assert_close(w, w_layer)
        assert w.shape == (2, H, 4, 6)
        assert torch.all(w[1, :, :, -2:] == 0)
        torch.testing.assert_close(w.sum(-1), torch.ones(2, H, 4, dtype=DT))


# --------------------------------------------------------------------------- invariances
@pytest.mark.parametrize("norm_first", [False, True])
def test_encoder_padding_content_does_not_leak(norm_first):
    ours, _ = _enc_pair(norm_first, seed=11)
    x = _x(2, 6, E, seed=12)
    kpm = _kpm(2, 6, pad=3)
    out = ours(x, key_padding_mask=kpm)
    x2 = x.detach().clone()
    x2[~kpm] = torch.randn(int((~kpm).sum()), E, dtype=DT) * 10
    out2 = ours(x2, key_padding_mask=kpm)
    torch.testing.assert_close(out[kpm], out2[kpm])
    assert torch.isfinite(out).all()
    # And the real outputs get no gradient from padded inputs.
    g = torch.autograd.grad(out[kpm].sum(), x)[0]
    assert torch.all(g[~kpm] == 0) and g[kpm].abs().sum() > 0
    # Without the mask the padded content does leak (the test can fail).
    assert not torch.allclose(ours(x)[1, 0], out[1, 0])


def test_decoder_memory_padding_does_not_leak():
    layer = TransformerDecoderLayer(E, H, dim_feedforward=FF, dropout=0.0).double().eval()
    _randomise(layer, 13)
    x, mem = _x(2, 4, E, seed=14), _x(2, 6, E, seed=15)
    mkpm = _kpm(2, 6, pad=2)
    out = layer(x, mem, memory_key_padding_mask=mkpm)
    mem2 = mem.detach().clone()
    mem2[1, -2:] = 7.0
    torch.testing.assert_close(out, layer(x, mem2, memory_key_padding_mask=mkpm))
    assert not torch.allclose(layer(x, mem2)[1], layer(x, mem)[1])


@pytest.mark.parametrize("pattern, window", [("full", None), ("truncated", 2)])
def test_decoder_is_causal(pattern, window):
    layer = TransformerDecoderLayer(E, H, dim_feedforward=FF, dropout=0.0, pattern=pattern, window=window).double().eval()
    _randomise(layer, 16)
    x, mem = _x(2, 7, E, seed=17), _x(2, 5, E, seed=18)
    out = layer(x, mem)
    t = 4
    x2 = x.detach().clone()
    x2[:, t] += 3.0
    out2 = layer(x2, mem)
    torch.testing.assert_close(out[:, :t], out2[:, :t])
    assert not torch.allclose(out[:, t:], out2[:, t:])
    # Jacobian structure: output t depends on inputs <= t only (and within the window).
    g = torch.autograd.grad(out[:, t].sum(), x)[0]  # (B, Lt, E)
    lo = 0 if window is None else t - window
    assert torch.all(g[:, t + 1 :] == 0) and torch.all(g[:, :lo] == 0)
    assert torch.all(g[:, lo : t + 1].abs().sum(-1) > 0)


def test_encoder_causal_flag_reaches_attention():
    ours, theirs = _enc_pair(False, seed=19, causal=True)
    x = _x(2, 5, E, seed=20)
    ref = theirs(x, src_mask=~causal_mask(5), is_causal=True)
    _check_values_and_grads(ours(x), ref, ours, theirs, (x,))


# --------------------------------------------------------------------------- patterns
@pytest.mark.parametrize("layer_cls", [TransformerEncoderLayer, TransformerDecoderLayer])
def test_truncated_with_wide_window_equals_full(layer_cls):
    full = layer_cls(E, H, dim_feedforward=FF, dropout=0.0).double().eval()
    _randomise(full, 21)
    trunc = layer_cls(E, H, dim_feedforward=FF, dropout=0.0, pattern="truncated", window=6).double().eval()
    trunc.load_state_dict(full.state_dict())
    x = _x(2, 6, E, seed=22)
    kpm = _kpm(2, 6, pad=2)
    if layer_cls is TransformerEncoderLayer:
        a, b = full(x, key_padding_mask=kpm), trunc(x, key_padding_mask=kpm)
    else:
        mem = _x(2, 3, E, seed=23)
        a, b = full(x, mem, tgt_key_padding_mask=kpm), trunc(x, mem, tgt_key_padding_mask=kpm)
    torch.testing.assert_close(a, b)
    ga, gb = torch.autograd.grad(a.square().sum(), x)[0], torch.autograd.grad(b.square().sum(), x)[0]
    torch.testing.assert_close(ga, gb)


@pytest.mark.parametrize("norm_first", [False, True])
def test_truncated_window_matches_torch_with_band_mask(norm_first):
    ours, theirs = _enc_pair(norm_first, seed=24, pattern="truncated", window=1)
    x = _x(2, 7, E, seed=25)
    kpm = _kpm(2, 7, pad=1)  # every query keeps a real key inside its window
    ref = theirs(x, src_mask=~window_mask(7, window=1), src_key_padding_mask=~kpm)
    _check_values_and_grads(ours(x, key_padding_mask=kpm), ref, ours, theirs, (x,))


def _edges(n: int, seed: int) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    src = torch.randint(0, n, (3 * n,), generator=g)
    dst = torch.randint(0, n, (3 * n,), generator=g)
    loops = torch.arange(n)  # every node has an in-edge (torch gives NaN for empty rows)
    ei = torch.stack([torch.cat([src, loops]), torch.cat([dst, loops])])
    return torch.unique(ei, dim=1)  # no duplicate edges: a dense mask cannot express them


@pytest.mark.parametrize("norm_first", [False, True])
def test_graph_layer_equals_dense_masked_attention(norm_first):
    ours, theirs = _enc_pair(norm_first, seed=26, pattern="graph")
    n = 7
    ei = _edges(n, seed=27)
    x = _x(n, E, seed=28)
    out = ours(x, edge_index=ei)
    ref = theirs(x[None], src_mask=~graph_mask(ei, n))[0]  # (N, E)
    _check_values_and_grads(out, ref, ours, theirs, (x,))


def test_graph_on_complete_graph_with_self_loops_equals_full():
    graph = TransformerEncoderLayer(E, H, dim_feedforward=FF, dropout=0.0, pattern="graph").double().eval()
    _randomise(graph, 29)
    full = TransformerEncoderLayer(E, H, dim_feedforward=FF, dropout=0.0).double().eval()
    full.load_state_dict(graph.state_dict())
    n = 5
    j, i = torch.meshgrid(torch.arange(n), torch.arange(n), indexing="ij")
    ei = torch.stack([j.flatten(), i.flatten()])
    x = _x(n, E, seed=30)
    a, b = graph(x, edge_index=ei), full(x[None])[0]
    torch.testing.assert_close(a, b)
    torch.testing.assert_close(torch.autograd.grad(a.sum(), x)[0], torch.autograd.grad(b.sum(), x)[0])
    enc = TransformerEncoder(E, H, 2, dim_feedforward=FF, dropout=0.0, pattern="graph").double()
    out, ws = enc(x, edge_index=ei, need_weights=True)
    assert out.shape == (n, E) and len(ws) == 2 and ws[0].shape == (ei.shape[1], H)


# --------------------------------------------------------------------------- dropout, errors
def test_dropout_only_in_training():
    layer = TransformerEncoderLayer(E, H, dim_feedforward=FF, dropout=0.3).double()
    ref = TransformerEncoderLayer(E, H, dim_feedforward=FF, dropout=0.0).double()
    ref.load_state_dict(layer.state_dict())
    x = _x(2, 5, E, seed=31).detach()
    layer.eval(), ref.eval()
    torch.testing.assert_close(layer(x), ref(x))
    layer.train()
    assert not torch.allclose(layer(x), ref(x))
    assert layer.self_attn.dropout == 0.3
    assert TransformerEncoderLayer(E, H, dropout=0.3, attn_dropout=0.0).self_attn.dropout == 0.0
    assert TransformerEncoderLayer(E, H).linear1.out_features == 4 * E


@pytest.mark.parametrize("build, match", [
    (lambda: TransformerEncoderLayer(E, H, activation="swish"), "activation"),
    (lambda: TransformerEncoderLayer(E, 3), "num_heads"),
    (lambda: TransformerEncoderLayer(0, H), "d_model"),
    (lambda: TransformerEncoderLayer(E, H, dim_feedforward=0), "dim_feedforward"),
    (lambda: TransformerEncoderLayer(E, H, dropout=1.5), "dropout"),
    (lambda: TransformerEncoderLayer(E, H, attn_dropout=-0.1), "attn_dropout"),
    (lambda: TransformerEncoderLayer(E, H, pattern="sparse"), "pattern"),
    (lambda: TransformerEncoderLayer(E, H, pattern="truncated"), "window"),
    (lambda: TransformerEncoderLayer(E, H, layer_norm_eps=0.0), "layer_norm_eps"),
    (lambda: TransformerDecoderLayer(E, H, pattern="graph"), "pattern"),
    (lambda: TransformerDecoderLayer(E, H, activation="tanh"), "activation"),
    (lambda: TransformerEncoder(E, H, 0), "num_layers"),
    (lambda: TransformerDecoder(E, H, 1.5), "num_layers"),
])
def test_bad_arguments_raise(build, match):
    with pytest.raises(ValueError, match=match):
        build()


def test_bad_forward_inputs_raise():
    enc = TransformerEncoderLayer(E, H)
    with pytest.raises(ValueError, match="key_padding_mask"):
        enc(torch.randn(2, 5, E), key_padding_mask=torch.ones(2, 5))
    with pytest.raises(ValueError, match="edge_index"):
        TransformerEncoderLayer(E, H, pattern="graph")(torch.randn(5, E))
    dec = TransformerDecoderLayer(E, H)
    with pytest.raises(ValueError, match="key_padding_mask"):
        dec(torch.randn(2, 4, E), torch.randn(2, 6, E), memory_key_padding_mask=torch.ones(2, 4, dtype=torch.bool))
