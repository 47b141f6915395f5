"""AdditiveAttention (Bahdanau) and LuongAttention: values and gradients against the core
attention function and against hand-computed maths, masking, and argument errors."""

from __future__ import annotations

import math

import pytest
import torch

from attn_core.functional import attention
from attn_core.rnn_attention import AdditiveAttention, LuongAttention

DT = torch.float64


def _inputs(b=3, l=5, dq=4, dk=4, dv=6, seed=0, grad=True):
    g = torch.Generator().manual_seed(seed)
    q = torch.randn(b, dq, generator=g, dtype=DT, requires_grad=grad)
    k = torch.randn(b, l, dk, generator=g, dtype=DT, requires_grad=grad)
    v = torch.randn(b, l, dv, generator=g, dtype=DT, requires_grad=grad)
    # Row 0 all real, row 1 last two padded, row 2 only the first token real.
    kpm = torch.ones(b, l, dtype=torch.bool)
    kpm[1, -2:] = False
    kpm[2, 1:] = False
    return q, k, v, kpm


#: One builder per score (Bahdanau, Luong dot/general/concat) for the tests every score must pass.
ALL_SCORES = [
    lambda: AdditiveAttention(4, 4),
    lambda: LuongAttention(4, 4, score="dot"),
    lambda: LuongAttention(4, 4, score="general"),
    lambda: LuongAttention(4, 4, score="concat"),
]
ALL_SCORE_IDS = ["additive", "dot", "general", "concat"]


def _grads(loss, tensors):
    return torch.autograd.grad(loss, tensors)


def test_luong_dot_equals_core_attention_values_and_grads():
    q, k, v, kpm = _inputs(seed=1)
    att = LuongAttention(4, 4, score="dot")
    ctx, w = att(q, k, v, kpm)
    ref_out, ref_w = attention(q[:, None, None, :], k[:, None], v[:, None], key_padding_mask=kpm, scale=1.0, need_weights=True)
    torch.testing.assert_close(ctx, ref_out[:, 0, 0])
    torch.testing.assert_close(w, ref_w[:, 0, 0])
    # Also the plain maths: softmax(q . k) over real keys, unscaled.
    scores = torch.einsum("bd,bld->bl", q, k).masked_fill(~kpm, -math.inf)
    torch.testing.assert_close(w, torch.softmax(scores, -1))
    # Gradients of the fast (need_weights=False) core path equal ours.
    g_out = torch.randn_like(ctx)
    ours = _grads((ctx * g_out).sum(), (q, k, v))
    fast = attention(q[:, None, None, :], k[:, None], v[:, None], key_padding_mask=kpm, scale=1.0)
    theirs = _grads((fast[:, 0, 0] * g_out).sum(), (q, k, v))
    for a, b in zip(ours, theirs):
        torch.testing.assert_close(a, b)


def test_luong_general_equals_dot_after_projecting_query():
    q, k, v, kpm = _inputs(dq=3, dk=5, seed=2)
    torch.manual_seed(0)
    gen = LuongAttention(3, 5, score="general").double()
    dot = LuongAttention(5, 5, score="dot")
    ctx, w = gen(q, k, v, kpm)
    qp = q @ gen.query_proj.weight.T  # (B, Dk): W^T q with W (Dq, Dk) = weight.T
    ctx2, w2 = dot(qp, k, v, kpm)
    torch.testing.assert_close(ctx, ctx2)
    torch.testing.assert_close(w, w2)
    # score = q^T W k by hand
    W = gen.query_proj.weight.T  # (Dq, Dk)
    scores = torch.einsum("bi,ij,blj->bl", q, W, k).masked_fill(~kpm, -math.inf)
    torch.testing.assert_close(w, torch.softmax(scores, -1))
    g1 = _grads(ctx.sum(), (q, k, v, gen.query_proj.weight))
    ctx_h = torch.einsum("bl,blv->bv", torch.softmax(scores, -1), v)
    g2 = _grads(ctx_h.sum(), (q, k, v, gen.query_proj.weight))
    for a, b in zip(g1, g2):
        torch.testing.assert_close(a, b)


def _mlp_reference(q, k, v, kpm, wq, wk, bk, vv):
    """v^T tanh(W_q q + W_k k + b), softmax over real keys, context = sum a_j v_j."""
    h = torch.tanh(torch.einsum("hq,bq->bh", wq, q)[:, None] + torch.einsum("hk,blk->blh", wk, k) + bk)
    scores = torch.einsum("blh,h->bl", h, vv).masked_fill(~kpm, -math.inf)
    a = torch.softmax(scores, -1)
    return torch.einsum("bl,blv->bv", a, v), a


@pytest.mark.parametrize("cls", ["additive", "concat"])
def test_mlp_scores_match_formula_values_and_grads(cls):
    q, k, v, kpm = _inputs(dq=3, dk=4, seed=3)
    torch.manual_seed(1)
    if cls == "additive":
        att = AdditiveAttention(3, 4, hidden_dim=7).double()
    else:
        att = LuongAttention(3, 4, score="concat", hidden_dim=7).double()
    m = att.mlp
    params = (m.query_proj.weight, m.key_proj.weight, m.key_proj.bias, m.v.weight)
    ctx, w = att(q, k, v, kpm)
    ctx_r, w_r = _mlp_reference(q, k, v, kpm, m.query_proj.weight, m.key_proj.weight, m.key_proj.bias, m.v.weight[0])
    torch.testing.assert_close(ctx, ctx_r)
    torch.testing.assert_close(w, w_r)
    g_out = torch.randn_like(ctx)
    for a, b in zip(_grads((ctx * g_out).sum(), (q, k, v, *params)), _grads((ctx_r * g_out).sum(), (q, k, v, *params))):
        torch.testing.assert_close(a, b)


def test_bahdanau_hand_computed_case():
    # Dq = Dk = 1, hidden 1: W_q = 1, W_k = 2, b = 0, v = 3 -> e_j = 3 tanh(q + 2 k_j).
    att = AdditiveAttention(1, 1, hidden_dim=1).double()
    with torch.no_grad():
        att.mlp.query_proj.weight.fill_(1.0)
        att.mlp.key_proj.weight.fill_(2.0)
        att.mlp.key_proj.bias.fill_(0.0)
        att.mlp.v.weight.fill_(3.0)
    q = torch.tensor([[0.5]], dtype=DT)
    k = torch.tensor([[[0.0], [0.25], [-1.0]]], dtype=DT)
    vals = torch.tensor([[[1.0, 0.0], [0.0, 1.0], [2.0, 2.0]]], dtype=DT)
    e = [3 * math.tanh(0.5 + 2 * kj) for kj in (0.0, 0.25, -1.0)]
    z = sum(math.exp(x) for x in e)
    a = [math.exp(x) / z for x in e]
    ctx, w = att(q, k, vals)
    torch.testing.assert_close(w, torch.tensor([a], dtype=DT))
    torch.testing.assert_close(ctx, torch.tensor([[a[0] + 2 * a[2], a[1] + 2 * a[2]]], dtype=DT))
    # With the last key padded, its weight is 0 and the rest renormalise.
    ctx, w = att(q, k, vals, torch.tensor([[True, True, False]]))
    a2 = [math.exp(e[0]) / (math.exp(e[0]) + math.exp(e[1])), math.exp(e[1]) / (math.exp(e[0]) + math.exp(e[1]))]
    torch.testing.assert_close(w, torch.tensor([[a2[0], a2[1], 0.0]], dtype=DT))
    torch.testing.assert_close(ctx, torch.tensor([[a2[0], a2[1]]], dtype=DT))


@pytest.mark.parametrize("make", ALL_SCORES, ids=ALL_SCORE_IDS)
def test_padding_gets_exact_zero_and_weights_sum_to_one(make):
    q, k, v, kpm = _inputs(seed=4, grad=False)
    att = make().double()
    ctx, w = att(q, k, v, kpm)
    assert torch.all(w[~kpm] == 0)
    torch.testing.assert_close(w.sum(-1), torch.ones(3, dtype=DT))
    assert torch.all(w[kpm] > 0)
    # Changing padded keys/values changes nothing.
    k2, v2 = k.clone(), v.clone()
    k2[~kpm] = 100.0
    v2[~kpm] = -50.0
    ctx2, w2 = att(q, k2, v2, kpm)
    torch.testing.assert_close(ctx, ctx2)
    torch.testing.assert_close(w, w2)
    # Row 2 has a single real token: weight 1 on it, context = that value.
    torch.testing.assert_close(ctx[2], v[2, 0])


@pytest.mark.parametrize("make", ALL_SCORES, ids=ALL_SCORE_IDS)
def test_all_padding_row_gives_zeros_and_finite_grads(make):
    q, k, v, kpm = _inputs(seed=5)
    kpm[1] = False
    att = make().double()
    ctx, w = att(q, k, v, kpm)
    assert torch.all(ctx[1] == 0) and torch.all(w[1] == 0)
    assert torch.isfinite(ctx).all() and torch.isfinite(w).all()
    assert ctx[0].abs().sum() > 0
    (ctx.sum() + (w * torch.arange(5, dtype=DT)).sum()).backward()
    for t in (q, k, v, *att.parameters()):
        assert torch.isfinite(t.grad).all()
    # The dead row receives no gradient; a live row does.
    assert torch.all(q.grad[1] == 0) and torch.all(k.grad[1] == 0) and torch.all(v.grad[1] == 0)
    assert v.grad[0].abs().sum() > 0


def test_values_default_to_keys_and_precompute_keys_matches():
    q, k, _, kpm = _inputs(seed=6)
    att = AdditiveAttention(4, 4, hidden_dim=3).double()
    ctx, w = att(q, k, None, kpm)
    ctx2, w2 = att(q, k, k, kpm)
    torch.testing.assert_close(ctx, ctx2)
    torch.testing.assert_close(w, w2)
    pk = att.precompute_keys(k)
    ctx3, w3 = att(q, k, k, kpm, projected_keys=pk)
    torch.testing.assert_close(ctx3, ctx)
    torch.testing.assert_close(w3, w)
    ga = _grads(ctx.sum(), (q, k))
    gb = _grads(ctx3.sum(), (q, k))
    for a, b in zip(ga, gb):
        torch.testing.assert_close(a, b)
    lu = LuongAttention(4, 4)
    torch.testing.assert_close(lu(q, k, None, kpm)[0], lu(q, k, k, kpm)[0])


def test_unmasked_luong_dot_is_plain_softmax():
    q, k, v, _ = _inputs(seed=7)
    ctx, w = LuongAttention(4, 4)(q, k, v)
    a = torch.softmax(torch.einsum("bd,bld->bl", q, k), -1)
    torch.testing.assert_close(w, a)
    torch.testing.assert_close(ctx, torch.einsum("bl,blv->bv", a, v))


# --------------------------------------------------------------------------- bad input
@pytest.mark.parametrize("build, match", [
    (lambda: LuongAttention(4, 4, score="bilinear"), "score"),
    (lambda: LuongAttention(4, 5, score="dot"), "key_dim"),
    (lambda: LuongAttention(0, 4, score="general"), "query_dim"),
    (lambda: LuongAttention(4, 4, score="concat", hidden_dim=-1), "hidden_dim"),
    (lambda: AdditiveAttention(4, 4, hidden_dim=0), "hidden_dim"),
    (lambda: AdditiveAttention(4, 2.5), "key_dim"),
    (lambda: AdditiveAttention(4, 4, value_dim=0), "value_dim"),
])
def test_bad_construction_raises(build, match):
    with pytest.raises(ValueError, match=match):
        build()


def test_unknown_score_message_lists_choices():
    with pytest.raises(ValueError, match=r"score='bilinear'.*'dot', 'general', 'concat'"):
        LuongAttention(4, 4, score="bilinear")


@pytest.mark.parametrize("cls", [AdditiveAttention, LuongAttention])
@pytest.mark.parametrize("mutate, match", [
    (lambda q, k, v, m: (q[:, :3], k, v, m), "query"),
    (lambda q, k, v, m: (q[0], k, v, m), "query"),
    (lambda q, k, v, m: (q, k[..., :3], v, m), "keys"),
    (lambda q, k, v, m: (q, k[0], v, m), "keys"),
    (lambda q, k, v, m: (q[:2], k, v, m), "batch"),
    (lambda q, k, v, m: (q, k, v[:, :4], m), "values"),
    (lambda q, k, v, m: (q, k, v[0], m), "values"),
    (lambda q, k, v, m: (q, k, v, m.long()), "key_padding_mask"),
    (lambda q, k, v, m: (q, k, v, m[:, :4]), "key_padding_mask"),
    (lambda q, k, v, m: (q, k, v.float(), m), "dtype"),
])
def test_bad_forward_input_raises(cls, mutate, match):
    q, k, v, kpm = _inputs(grad=False)
    att = cls(4, 4).double()
    with pytest.raises(ValueError, match=match):
        att(*mutate(q, k, v, kpm))


def test_value_dim_and_projected_keys_checked():
    q, k, v, kpm = _inputs(grad=False)
    att = AdditiveAttention(4, 4, hidden_dim=3, value_dim=5).double()
    with pytest.raises(ValueError, match="value_dim"):
        att(q, k, v, kpm)  # values have Dv = 6
    att = AdditiveAttention(4, 4, hidden_dim=3).double()
    with pytest.raises(ValueError, match="projected_keys"):
        att(q, k, v, kpm, projected_keys=torch.zeros(3, 5, 4, dtype=DT))
    with pytest.raises(ValueError, match="keys"):
        att.precompute_keys(k[..., :2])
