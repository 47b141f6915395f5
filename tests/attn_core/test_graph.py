"""``graph_attention`` against dense masked attention (values and gradients), on both sets of
kernels: the CPU's sparse CSR ones (float32/float64) and the chunked gather/scatter ones (every
test runs with each, by the ``kernels`` fixture)."""

from __future__ import annotations

import pytest
import torch
from torch_geometric.utils import coalesce

from attn_core import add_self_loops, additive_score, attention, graph_attention, graph_mask, reference_attention
from attn_core import graph as graph_mod


@pytest.fixture(autouse=True, params=["csr", "chunked"])
def kernels(request, monkeypatch):
    """Run the test on the CPU CSR kernels, then on the chunked gather/scatter kernels."""
    monkeypatch.setattr(graph_mod, "CSR_ON_CPU", request.param == "csr")
    return request.param


def _graph(n, e, seed, n_src=None):
    g = torch.Generator().manual_seed(seed)
    n_src = n if n_src is None else n_src
    ei = torch.stack([torch.randint(0, n_src, (e,), generator=g), torch.randint(0, n, (e,), generator=g)])
    return coalesce(ei)  # unique edges: the dense mask cannot count duplicates


def _nodes(n, h, d, seed, dtype=torch.float64):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(n, h, d, generator=g, dtype=torch.float64).to(dtype).requires_grad_()


def _dense(q, k, v, edge_index):
    """Dense attention with the adjacency as mask, heads first: the plain reference."""
    mask = torch.zeros(q.shape[0], k.shape[0], dtype=torch.bool)
    mask[edge_index[1], edge_index[0]] = True
    out = reference_attention(q.transpose(0, 1), k.transpose(0, 1), v.transpose(0, 1), mask)
    return out.transpose(0, 1)


@pytest.mark.parametrize("n,e", [(5, 8), (40, 300), (120, 2000)])
def test_graph_attention_equals_dense_masked_values_and_grads(n, e):
    ei = _graph(n, e, seed=n)
    q, k, v = _nodes(n, 3, 8, 1), _nodes(n, 3, 8, 2), _nodes(n, 3, 5, 3)
    out = graph_attention(q, k, v, ei)
    ref = _dense(q, k, v, ei)
    torch.testing.assert_close(out, ref, atol=1e-12, rtol=0)
    go = torch.randn_like(out)
    for g, w in zip(torch.autograd.grad(out, (q, k, v), go), torch.autograd.grad(ref, (q, k, v), go)):
        torch.testing.assert_close(g, w, atol=1e-12, rtol=0)


def test_bipartite_sources_and_targets():
    ei = _graph(20, 90, seed=4, n_src=35)
    q, k, v = _nodes(20, 2, 4, 1), _nodes(35, 2, 4, 2), _nodes(35, 2, 6, 3)
    torch.testing.assert_close(graph_attention(q, k, v, ei), _dense(q, k, v, ei), atol=1e-12, rtol=0)


def test_kernels_gradcheck(monkeypatch):
    monkeypatch.setattr(graph_mod, "_CHUNK_ELEMENTS", 1)  # chunked kernels: force many chunks (1024 edges each)
    ei = _graph(60, 3000, seed=5)
    q, k, v = _nodes(60, 2, 3, 1), _nodes(60, 2, 3, 2), _nodes(60, 2, 3, 3)
    assert torch.autograd.gradcheck(lambda a, b, c: graph_attention(a, b, c, ei), (q, k, v))
    assert torch.autograd.gradcheck(lambda a, b, c: graph_attention(a, b, c, ei, score="additive"), (q, k, v))


def test_complete_graph_equals_full_attention():
    n = 17
    idx = torch.arange(n)
    ei = torch.stack([idx.repeat_interleave(n), idx.repeat(n)])  # every j -> i, self-loops included
    q, k, v = _nodes(n, 2, 8, 1), _nodes(n, 2, 8, 2), _nodes(n, 2, 8, 3)
    full = attention(q.transpose(0, 1)[None], k.transpose(0, 1)[None], v.transpose(0, 1)[None])[0].transpose(0, 1)
    torch.testing.assert_close(graph_attention(q, k, v, ei), full, atol=1e-12, rtol=0)


def test_isolated_nodes_are_zero_and_need_weights_sum_to_one():
    ei = torch.tensor([[0, 1, 2, 1], [1, 2, 1, 0]])  # node 3 has no in-edges
    q, k, v = _nodes(4, 2, 4, 1), _nodes(4, 2, 4, 2), _nodes(4, 2, 4, 3)
    out, w = graph_attention(q, k, v, ei, need_weights=True)
    assert (out[3] == 0).all() and (out[:3].abs() > 0).all()
    sums = torch.zeros(4, 2, dtype=w.dtype).index_add_(0, ei[1], w)
    torch.testing.assert_close(sums[:3], torch.ones(3, 2, dtype=w.dtype))
    gq, gk, gv = torch.autograd.grad(out.sum(), (q, k, v))
    assert torch.isfinite(gq).all() and (gq[3] == 0).all() and (gv[3] == 0).all()  # node 3 is nobody's source


def test_additive_score_is_gat():
    """With q = Wh * a_dst, k = Wh * a_src, the additive score is GAT's LeakyReLU(a^T [Wh_i || Wh_j])."""
    torch.manual_seed(0)
    n, h, d = 6, 2, 3
    wh = torch.randn(n, h, d, dtype=torch.float64)
    a_dst, a_src = torch.randn(h, d, dtype=torch.float64), torch.randn(h, d, dtype=torch.float64)
    ei = torch.tensor([[0, 1, 2, 3, 4, 5, 0], [1, 2, 3, 4, 5, 0, 2]])
    logits = additive_score(wh * a_dst, wh * a_src, ei)
    for e in range(ei.shape[1]):
        j, i = ei[:, e]
        for hh in range(h):
            cat = torch.cat([wh[i, hh], wh[j, hh]])
            want = torch.nn.functional.leaky_relu((torch.cat([a_dst[hh], a_src[hh]]) * cat).sum(), 0.2)
            torch.testing.assert_close(logits[e, hh], want)


def test_custom_score_and_dense_mask_builder_agree():
    ei = _graph(10, 30, seed=8)
    q, k, v = _nodes(10, 1, 4, 1), _nodes(10, 1, 4, 2), _nodes(10, 1, 4, 3)
    custom = graph_attention(q, k, v, ei, score=lambda a, b, e: (a[e[1]] * b[e[0]]).sum(-1), scale=0.5)
    ref = reference_attention(q.transpose(0, 1), k.transpose(0, 1), v.transpose(0, 1), graph_mask(ei, 10), scale=0.5)
    torch.testing.assert_close(custom, ref.transpose(0, 1), atol=1e-12, rtol=0)


def test_add_self_loops_gives_each_node_one_loop():
    ei = torch.tensor([[0, 1, 1], [1, 1, 2]])
    out = add_self_loops(ei, 4)
    loops = out[:, out[0] == out[1]]
    assert sorted(loops[0].tolist()) == [0, 1, 2, 3]
    assert out.shape[1] == 2 + 4  # 0->1, 1->2 kept; old 1->1 replaced


@pytest.mark.parametrize("dtype,tol", [(torch.float32, 1e-5), (torch.bfloat16, 5e-2)])
def test_low_precision(dtype, tol):
    ei = _graph(50, 400, seed=2)
    q, k, v = _nodes(50, 2, 8, 1), _nodes(50, 2, 8, 2), _nodes(50, 2, 8, 3)
    ref = _dense(q, k, v, ei)
    out = graph_attention(q.detach().to(dtype), k.detach().to(dtype), v.detach().to(dtype), ei)
    assert out.dtype == dtype
    torch.testing.assert_close(out.double(), ref.detach(), atol=tol, rtol=tol)


BAD = [
    (dict(edge_index=torch.tensor([[0, 1], [1, 9]])), "edge_index out of range"),
    (dict(edge_index=torch.tensor([[0, -1], [1, 2]])), "edge_index out of range"),
    (dict(edge_index=torch.tensor([[0, 1, 2]])), "edge_index has shape"),
    (dict(edge_index=torch.tensor([[0.0, 1.0], [1.0, 2.0]])), "edge_index has dtype"),
    (dict(q=torch.randn(5, 4)), "q has shape"),
    (dict(k=torch.randn(5, 3, 4)), "heads"),
    (dict(k=torch.randn(5, 2, 3), v=torch.randn(5, 2, 3)), "head dim"),
    (dict(score="cosine"), "score='cosine'"),
    (dict(num_nodes=7), "num_nodes=7"),
]


@pytest.mark.parametrize("override,match", BAD)
def test_bad_input_raises_clear_value_error(override, match):
    args = dict(q=torch.randn(5, 2, 4), k=torch.randn(5, 2, 4), v=torch.randn(5, 2, 4), edge_index=torch.tensor([[0, 1], [1, 2]]))
    override = dict(override)  # the case is shared by both kernel runs
    kwargs = {k: override.pop(k) for k in list(override) if k not in args}
    args.update(override)
    with pytest.raises(ValueError, match=match):
        graph_attention(args["q"], args["k"], args["v"], args["edge_index"], **kwargs)


def _rel_err(got, want):
    """Largest absolute error over ``1 + max |want|`` (the CUDA tests' bf16 measure)."""
    return ((got.double() - want).abs().max() / (1 + want.abs().max())).item()


@pytest.mark.parametrize("score", ["dot", "additive"])
@pytest.mark.parametrize("autocast", [False, True])
def test_bf16_values_and_grads_within_tolerance(score, autocast):
    """bf16 inputs (plain, or under CPU autocast) accumulate in float32 and come back in bf16:
    values and gradients within 1e-2 of the float64 run on the same (bf16-rounded) inputs. The
    kernel's own error is measured: rounding the inputs alone moves additive gradients by 0.04
    (the CUDA run saw 0.16 against unrounded inputs; float32 sums here give 0.004)."""
    g = torch.Generator().manual_seed(5)
    n, h, d = 200, 4, 16
    q, k, v = (torch.randn(n, h, d, generator=g).bfloat16().double().requires_grad_() for _ in range(3))
    ei = torch.unique(add_self_loops(torch.randint(0, n, (2, 1500), generator=g), n), dim=1)
    ref = graph_attention(q, k, v, ei, score=score)
    go = torch.randn_like(ref)
    want = torch.autograd.grad(ref, (q, k, v), go)
    bq, bk, bv = (t.detach().bfloat16().requires_grad_() for t in (q, k, v))
    with torch.autocast("cpu", dtype=torch.bfloat16, enabled=autocast):
        out = graph_attention(bq, bk, bv, ei, score=score)
    assert out.dtype == torch.bfloat16
    assert _rel_err(out, ref) < 1e-2
    for got, w in zip(torch.autograd.grad(out, (bq, bk, bv), go.bfloat16()), want):
        assert got.dtype == torch.bfloat16 and _rel_err(got, w) < 1e-2


def test_aggregate_takes_float32_weights_with_bf16_values():
    """CUDA autocast runs the segment softmax in float32 while the values stay bf16: the CUDA
    failure ``index_add_(): self (BFloat16) and source (Float)``, reproduced on CPU."""
    ei = _graph(30, 200, seed=3)
    p = torch.rand(ei.shape[1], 2, dtype=torch.float32, requires_grad=True)
    v = torch.randn(30, 2, 8, dtype=torch.bfloat16, requires_grad=True)
    out = graph_mod._EdgeAggregate.apply(p, v, ei[0], ei[1], 30)
    assert out.dtype == torch.bfloat16
    want = torch.zeros(30, 2, 8, dtype=torch.float64).index_add_(0, ei[1], p.detach().double()[..., None] * v.detach().double()[ei[0]])
    torch.testing.assert_close(out.double(), want, atol=3e-2, rtol=3e-2)
    gp, gv = torch.autograd.grad(out.float().sum(), (p, v))
    assert gp.dtype == torch.float32 and gv.dtype == torch.bfloat16


def test_need_weights_in_callers_edge_order_values_and_grads():
    """The kernel sorts edges by target internally; the returned weights (and their gradients)
    must follow the caller's edge order: checked against the dense softmax on shuffled edges."""
    n = 30
    ei = _graph(n, 200, seed=7)
    ei = ei[:, torch.randperm(ei.shape[1], generator=torch.Generator().manual_seed(8))]  # unsorted targets
    q, k, v = _nodes(n, 2, 4, 1), _nodes(n, 2, 4, 2), _nodes(n, 2, 4, 3)
    out, w = graph_attention(q, k, v, ei, need_weights=True)  # w: (E, H)
    mask = torch.zeros(n, n, dtype=torch.bool)
    mask[ei[1], ei[0]] = True
    logits = torch.einsum("ihd,jhd->hij", q, k) / 2.0  # (H, N, N), scale 1/sqrt(4)
    dense_w = torch.softmax(logits.masked_fill(~mask, float("-inf")), -1).nan_to_num(0.0)
    ref_w = dense_w[:, ei[1], ei[0]].T  # (E, H) in the caller's order
    torch.testing.assert_close(w, ref_w, atol=1e-12, rtol=0)
    torch.testing.assert_close(out, _dense(q, k, v, ei), atol=1e-12, rtol=0)
    gw = torch.randn_like(w)
    for g, r in zip(torch.autograd.grad(w, (q, k), gw), torch.autograd.grad(ref_w, (q, k), gw)):
        torch.testing.assert_close(g, r, atol=1e-12, rtol=0)


def test_the_cpu_path_follows_dtype_and_switch(kernels):
    q = torch.zeros(3, 2, 4)
    assert graph_mod._csr_path(q) == (kernels == "csr") and graph_mod._csr_path(q.double()) == (kernels == "csr")
    assert not graph_mod._csr_path(q.bfloat16()) and not graph_mod._csr_path(q.half())


def test_both_kernels_agree_with_duplicate_edges_and_no_edges(monkeypatch):
    """Multi-edges count once each (a dense mask cannot say so; the two kernel sets check each
    other, values and gradients), and a graph without edges gives zeros."""
    g = torch.Generator().manual_seed(11)
    n, ns = 25, 31
    ei = torch.stack([torch.randint(0, ns, (300,), generator=g), torch.randint(0, n, (300,), generator=g)])
    ei = torch.cat([ei, ei[:, :40]], 1)  # 40 duplicated edges
    q, k, v = _nodes(n, 3, 4, 1), _nodes(ns, 3, 4, 2), _nodes(ns, 3, 6, 3)
    runs = []
    for csr in (True, False):
        monkeypatch.setattr(graph_mod, "CSR_ON_CPU", csr)
        out, w = graph_attention(q, k, v, ei, need_weights=True)
        runs.append((out, w, *torch.autograd.grad((out * out).sum() + (w * w).sum(), (q, k, v))))
    for a, b in zip(*runs):
        torch.testing.assert_close(a, b, atol=1e-12, rtol=0)
    empty = torch.zeros(2, 0, dtype=torch.long)
    out = graph_attention(q, k, v, empty)
    assert out.shape == (n, 3, 6) and (out == 0).all()
    assert all((gr == 0).all() for gr in torch.autograd.grad(out.sum(), (q, k, v)))
