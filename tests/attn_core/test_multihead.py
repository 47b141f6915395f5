"""``MultiHeadAttention``: equal to ``torch.nn.MultiheadAttention`` with copied weights; the
truncated and graph patterns equal their dense references."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from attn_core import MultiHeadAttention, graph_mask, window_mask


def _copy_into_torch(ours: MultiHeadAttention, theirs: nn.MultiheadAttention) -> None:
    with torch.no_grad():
        if theirs._qkv_same_embed_dim:
            theirs.in_proj_weight.copy_(torch.cat([ours.q_proj.weight, ours.k_proj.weight, ours.v_proj.weight]))
        else:
            theirs.q_proj_weight.copy_(ours.q_proj.weight)
            theirs.k_proj_weight.copy_(ours.k_proj.weight)
            theirs.v_proj_weight.copy_(ours.v_proj.weight)
        theirs.in_proj_bias.copy_(torch.cat([ours.q_proj.bias, ours.k_proj.bias, ours.v_proj.bias]))
        theirs.out_proj.weight.copy_(ours.out_proj.weight)
        theirs.out_proj.bias.copy_(ours.out_proj.bias)


@pytest.mark.parametrize("kdim,vdim", [(None, None), (12, 20)])
@pytest.mark.parametrize("causal", [False, True])
def test_full_equals_torch_multihead_attention(kdim, vdim, causal):
    torch.manual_seed(0)
    e, h = 16, 4
    ours = MultiHeadAttention(e, h, kdim=kdim, vdim=vdim, causal=causal).double().eval()
    for p in ours.parameters():  # non-zero biases too
        nn.init.normal_(p, std=0.3)
    theirs = nn.MultiheadAttention(e, h, batch_first=True, kdim=kdim, vdim=vdim).double().eval()
    _copy_into_torch(ours, theirs)
    x = torch.randn(3, 9, e, dtype=torch.float64, requires_grad=True)
    mem_k = torch.randn(3, 9, kdim or e, dtype=torch.float64)
    mem_v = torch.randn(3, 9, vdim or e, dtype=torch.float64)
    real = torch.ones(3, 9, dtype=torch.bool)
    real[1, 6:] = False
    mask = torch.triu(torch.ones(9, 9, dtype=torch.bool), 1) if causal else None  # torch: True = blocked
    out, w = ours(x, mem_k, mem_v, key_padding_mask=real, need_weights=True)
    ref, ref_w = theirs(x, mem_k, mem_v, key_padding_mask=~real, attn_mask=mask, need_weights=True)
    torch.testing.assert_close(out, ref, atol=1e-12, rtol=0)
    torch.testing.assert_close(w.mean(1), ref_w, atol=1e-12, rtol=0)  # torch averages the heads
    g1 = torch.autograd.grad(out.sum(), x)[0]
    g2 = torch.autograd.grad(ref.sum(), x)[0]
    torch.testing.assert_close(g1, g2, atol=1e-12, rtol=0)
    assert not torch.allclose(g1, torch.zeros_like(g1))


def test_truncated_pattern_equals_dense_window_mask():
    torch.manual_seed(1)
    mha = MultiHeadAttention(8, 2, pattern="truncated", window=3).double()
    x = torch.randn(2, 40, 8, dtype=torch.float64)
    out = mha(x)
    full = MultiHeadAttention(8, 2).double()
    full.load_state_dict(mha.state_dict())
    _, dense_w = full(x, need_weights=True)
    _, w = mha(x, need_weights=True)
    allowed = window_mask(40, 40, 3)
    assert (w[..., ~allowed] == 0).all() and (w[..., allowed] > 0).all()
    assert not torch.allclose(w, dense_w)
    torch.testing.assert_close(out, mha(x, need_weights=True)[0], atol=1e-12, rtol=0)


def test_graph_pattern_equals_masked_full_pattern():
    torch.manual_seed(2)
    n, e = 25, 12
    ei = torch.unique(torch.randint(0, n, (2, 100)), dim=1)
    g = MultiHeadAttention(e, 3, pattern="graph").double()
    dense = MultiHeadAttention(e, 3).double()
    dense.load_state_dict(g.state_dict())
    x = torch.randn(n, e, dtype=torch.float64)
    out = g(x, edge_index=ei)
    # Dense: run the full pattern and mask its weights by the adjacency, via need_weights maths.
    q = dense.q_proj(x).view(n, 3, 4).transpose(0, 1)
    k = dense.k_proj(x).view(n, 3, 4).transpose(0, 1)
    v = dense.v_proj(x).view(n, 3, 4).transpose(0, 1)
    from attn_core import reference_attention

    ref = dense.out_proj(reference_attention(q, k, v, graph_mask(ei, n)).transpose(0, 1).reshape(n, e))
    torch.testing.assert_close(out, ref, atol=1e-12, rtol=0)


def test_attention_dropout_only_in_training():
    torch.manual_seed(3)
    mha = MultiHeadAttention(8, 2, dropout=0.5)
    x = torch.randn(2, 10, 8)
    mha.eval()
    a, b = mha(x), mha(x)
    torch.testing.assert_close(a, b)
    mha.train()
    assert not torch.allclose(mha(x), a)


@pytest.mark.parametrize(
    "kwargs,match",
    [
        (dict(embed_dim=10, num_heads=3), "num_heads=3"),
        (dict(embed_dim=8, num_heads=2, pattern="sparse"), "pattern='sparse'"),
        (dict(embed_dim=8, num_heads=2, pattern="truncated"), "window=None"),
        (dict(embed_dim=8, num_heads=2, pattern="truncated", window=-2), "window=-2"),
        (dict(embed_dim=8, num_heads=2, window=4), "window=4"),
        (dict(embed_dim=8, num_heads=2, pattern="graph", score="cos"), "score='cos'"),
        (dict(embed_dim=8, num_heads=2, dropout=2.0), "dropout=2.0"),
    ],
)
def test_bad_construction_raises(kwargs, match):
    with pytest.raises(ValueError, match=match):
        MultiHeadAttention(**kwargs)


def test_bad_forward_raises():
    seq = MultiHeadAttention(8, 2)
    with pytest.raises(ValueError, match="query has feature size 6"):
        seq(torch.randn(2, 5, 6))
    with pytest.raises(ValueError, match="query has shape"):
        seq(torch.randn(5, 8))
    with pytest.raises(ValueError, match="edge_index"):
        seq(torch.randn(2, 5, 8), edge_index=torch.tensor([[0], [1]]))
    graph = MultiHeadAttention(8, 2, pattern="graph")
    with pytest.raises(ValueError, match="edge_index=None"):
        graph(torch.randn(5, 8))
    with pytest.raises(ValueError, match="edge_index out of range"):
        graph(torch.randn(5, 8), edge_index=torch.tensor([[0], [5]]))
