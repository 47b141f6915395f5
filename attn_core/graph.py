"""Graph-masked attention in O(E): scores on edges only, a segment softmax over each
target's in-edges (PyG's ``torch_geometric.utils.softmax``), and a weighted sum of the
source values.

Memory is what sets graph attention apart from the dense alternative. A plain
gather-multiply-scatter keeps ``E x H x D`` copies of gathered queries, keys and values
alive for the backward pass. Two sets of edge kernels avoid that, keeping ``E x H`` (scores
and probabilities) plus the node tensors:

* on the CPU in float32/float64, sparse CSR products (:class:`_CsrEdges`): the scores are a
  sampled dense-dense product (``torch.sparse.sampled_addmm``), the weighted sum and every
  gradient a sparse-dense product (MKL's on x86), each one call for all heads, and the softmax
  a segment reduction over the target-sorted edges. No ``E x H x D`` tensor is ever built, and
  no scatter. Why (issue 44, per-op profile on 2 threads of an AMD EPYC with AVX-512): the
  gather/scatter kernels spent their time in ``E x H x D`` memory passes: 7 gathers
  (``index_select``: they recompute in backward what they do not keep) against PyG's 3 (and 2
  ``gather``), as many products, and 4 scatters each (``index_add_``/``scatter_add_``, which
  radix-sort their index on every call). That is bandwidth-bound work whose balance depends on
  the machine (0.72-0.79x PyG there when quiet, up to 1.5x busy; 1.2-1.4x on a quiet AVX-512
  Xeon, 0.86x on an AVX2 EPYC); the CSR kernels are 0.45-0.52x at N = 2k-5k, quiet;
* elsewhere (CUDA, bf16/fp16), :class:`_EdgeDot` (the sampled dense-dense product) and
  :class:`_EdgeAggregate` (the sparse-dense product), which work through the edges in chunks
  and recompute the gathers in backward, with torch's ``index_select``/``index_add_``.

PyG offers such kernels only through the optional compiled ``pyg-lib``/``torch-sparse``;
these run with torch alone.
"""

from __future__ import annotations

import warnings
from typing import Callable, Iterator, Union

import torch
import torch.nn.functional as F
from torch import Tensor

from attn_core import _validate as V

__all__ = ["graph_attention", "dot_score", "additive_score", "add_self_loops", "GRAPH_SCORES"]

ScoreFn = Callable[[Tensor, Tensor, Tensor], Tensor]

#: Low-precision inputs are accumulated (scores, softmax, sums) in float32 and returned in their dtype.
_ACC = {torch.float16: torch.float32, torch.bfloat16: torch.float32}


def _acc(dtype: torch.dtype) -> torch.dtype:
    """The dtype edge scores and sums are computed in: float32 for bf16/fp16, else ``dtype``."""
    return _ACC.get(dtype, dtype)


#: Edges processed per chunk are chosen so one chunk's gathered block is about this many elements
#: (16 MB in float32): cache-sized for CPU cores.
_CHUNK_ELEMENTS = 1 << 22
#: On CUDA each chunk is a handful of kernel launches, and small chunks leave the GPU waiting on
#: them (E = 2M, H x D = 64 made 31 chunks of ~12 launches, forward and backward): 128 MB blocks.
_CUDA_CHUNK_ELEMENTS = 1 << 25


def _edge_chunks(num_edges: int, width: int, device: torch.device | None = None) -> Iterator[slice]:
    """Consecutive slices of ``range(num_edges)``, each small enough that gathering ``width``
    features per edge stays near :data:`_CHUNK_ELEMENTS` elements (:data:`_CUDA_CHUNK_ELEMENTS`
    on CUDA; at least 1024 edges)."""
    cap = _CUDA_CHUNK_ELEMENTS if device is not None and device.type == "cuda" else _CHUNK_ELEMENTS
    step = max(1024, cap // max(width, 1))
    for s in range(0, num_edges, step):
        yield slice(s, s + step)


class _EdgeDot(torch.autograd.Function):
    """``out[e, h] = <q[dst[e], h], k[src[e], h]>`` without keeping ``E x H x D`` tensors."""

    @staticmethod
    def forward(ctx, q: Tensor, k: Tensor, src: Tensor, dst: Tensor) -> Tensor:
        n_e, (_, h, d), acc = src.numel(), q.shape, _acc(q.dtype)
        out = q.new_empty(n_e, h, dtype=acc)  # (E, H), float32 for low-precision inputs
        for e in _edge_chunks(n_e, h * d, q.device):
            out[e] = _rowdot(q.index_select(0, dst[e]).to(acc), k.index_select(0, src[e]).to(acc))
        ctx.save_for_backward(q, k, src, dst)
        return out

    @staticmethod
    def backward(ctx, grad: Tensor):  # grad: (E, H)
        q, k, src, dst = ctx.saved_tensors
        acc = _acc(q.dtype)
        grad = grad.to(acc)
        gq = torch.zeros_like(q, dtype=acc) if ctx.needs_input_grad[0] else None
        gk = torch.zeros_like(k, dtype=acc) if ctx.needs_input_grad[1] else None
        for e in _edge_chunks(src.numel(), q.shape[1] * q.shape[2], q.device):
            g = grad[e].unsqueeze(-1)  # (e, H, 1)
            if gq is not None:
                gq.index_add_(0, dst[e], g * k.index_select(0, src[e]).to(acc))
            if gk is not None:
                gk.index_add_(0, src[e], g * q.index_select(0, dst[e]).to(acc))
        return _cast(gq, q.dtype), _cast(gk, k.dtype), None, None


class _EdgeAggregate(torch.autograd.Function):
    """``out[i, h] = sum over edges e = (j -> i) of p[e, h] * v[j, h]`` (a sparse-dense product)."""

    @staticmethod
    def forward(ctx, p: Tensor, v: Tensor, src: Tensor, dst: Tensor, num_nodes: int) -> Tensor:
        _, h, dv = v.shape
        acc = _acc(v.dtype)
        p = p.to(acc)  # (E, H)
        out = v.new_zeros(num_nodes, h, dv, dtype=acc)  # (N, H, Dv), summed in float32 for bf16/fp16
        for e in _edge_chunks(src.numel(), h * dv, v.device):
            out.index_add_(0, dst[e], p[e].unsqueeze(-1) * v.index_select(0, src[e]).to(acc))
        ctx.save_for_backward(p, v, src, dst)
        return out.to(v.dtype)

    @staticmethod
    def backward(ctx, grad: Tensor):  # grad: (N, H, Dv)
        p, v, src, dst = ctx.saved_tensors
        acc = p.dtype
        grad = grad.to(acc)
        gp = torch.empty_like(p) if ctx.needs_input_grad[0] else None
        gv = torch.zeros_like(v, dtype=acc) if ctx.needs_input_grad[1] else None
        for e in _edge_chunks(src.numel(), v.shape[1] * v.shape[2], v.device):
            g_dst = grad.index_select(0, dst[e])  # (e, H, Dv)
            if gp is not None:
                gp[e] = _rowdot(g_dst, v.index_select(0, src[e]).to(acc))
            if gv is not None:
                gv.index_add_(0, src[e], p[e].unsqueeze(-1) * g_dst)
        return gp, _cast(gv, v.dtype), None, None, None


# --------------------------------------------------------------------------- CPU: sparse CSR kernels
#: CPU float32/float64 inputs take the sparse CSR kernels; False forces the chunked gather/scatter
#: kernels everywhere (the tests run both)
CSR_ON_CPU = True
warnings.filterwarnings("ignore", message="Sparse CSR tensor support is in beta", category=UserWarning)


def _csr_path(t: Tensor) -> bool:
    """Whether ``t``'s graph attention runs on the CSR kernels (CPU, float32 or float64)."""
    return CSR_ON_CPU and t.device.type == "cpu" and t.dtype in (torch.float32, torch.float64)


def _heads_first(t: Tensor) -> Tensor:
    """``(N, H, D)`` -> contiguous ``(H, N, D)``: head ``h``'s rows are block ``h`` of ``(H N, D)``."""
    return t.transpose(0, 1).contiguous()


class _CsrEdges:
    """The edges of one call as block-diagonal sparse matrices over the heads: head ``h``'s
    ``(N, Ns)`` attention matrix is diagonal block ``h`` of an ``(H N, H Ns)`` CSR matrix, so one
    sparse product serves every head. ``src``/``dst`` are sorted by target (CSR order); the
    transpose (sorted by source, ``perm_t``: its edge order) serves the gradients of the sources;
    ``offsets`` delimits each target's in-edges for the softmax. Built from sorted indices with
    ``searchsorted``: no value-dependent output size, no host sync."""

    def __init__(self, src: Tensor, dst: Tensor, n: int, ns: int, heads: int, dtype: torch.dtype) -> None:
        e = src.numel()
        self.n, self.ns, self.h, self.e, self.dst = n, ns, heads, e, dst
        big = max(heads * e, heads * max(n, ns)) >= 2**31
        self.itype = torch.int64 if big else torch.int32  # MKL takes int32 indices without a copy
        shift = torch.arange(heads, device=src.device).unsqueeze(1)  # (H, 1)
        self.offsets = torch.searchsorted(dst, torch.arange(n + 1, device=dst.device))  # (N + 1,)
        self.perm_t = torch.argsort(src, stable=True)  # target order -> source order
        src_sorted = src.index_select(0, self.perm_t)
        offsets_t = torch.searchsorted(src_sorted, torch.arange(ns + 1, device=src.device))
        self.crow, self.col = self._blocks(self.offsets, src, shift, ns)
        self.crow_t, self.col_t = self._blocks(offsets_t, dst.index_select(0, self.perm_t), shift, n)
        self.zeros = torch.zeros(heads * e, dtype=dtype, device=src.device)  # the pattern of sampled()

    def _blocks(self, offsets: Tensor, col: Tensor, shift: Tensor, width: int) -> tuple[Tensor, Tensor]:
        """Row offsets and columns of the block-diagonal matrix whose blocks share one pattern."""
        crow = torch.cat([(offsets[:-1] + shift * self.e).flatten(), offsets.new_full((1,), self.h * self.e)])
        return crow.to(self.itype), (col + shift * width).flatten().to(self.itype)

    def matrix(self, values: Tensor, transposed: bool = False) -> Tensor:
        """The ``(H N, H Ns)`` CSR matrix (``(H Ns, H N)`` when ``transposed``) whose block ``h``
        holds ``values[h]`` (``(H, E)``, target order) on the edges."""
        if transposed:
            vals = values.index_select(1, self.perm_t).reshape(-1)
            return torch.sparse_csr_tensor(self.crow_t, self.col_t, vals, (self.h * self.ns, self.h * self.n),
                                           check_invariants=False)
        return torch.sparse_csr_tensor(self.crow, self.col, values.reshape(-1), (self.h * self.n, self.h * self.ns),
                                       check_invariants=False)

    def mm(self, values: Tensor, dense: Tensor, transposed: bool = False) -> Tensor:
        """``matrix(values) @ dense`` per head: ``dense`` ``(H, Ns, D)`` (``(H, N, D)`` when
        ``transposed``) -> ``(N, H, D)`` (``(Ns, H, D)``)."""
        out = self.matrix(values, transposed) @ dense.reshape(-1, dense.shape[-1])
        return out.view(self.h, -1, dense.shape[-1]).transpose(0, 1)

    def sampled(self, a: Tensor, b: Tensor) -> Tensor:
        """``<a[h, dst_e], b[h, src_e]>`` for every edge and head: ``a`` ``(H, N, D)``, ``b``
        ``(H, Ns, D)`` -> ``(E, H)`` (a sampled dense-dense product)."""
        pattern = torch.sparse_csr_tensor(self.crow, self.col, self.zeros,
                                          (self.h * self.n, self.h * self.ns), check_invariants=False)
        d = a.shape[-1]
        out = torch.sparse.sampled_addmm(pattern, a.reshape(-1, d), b.reshape(-1, d).t(), beta=0.0)
        return out.values().view(self.h, self.e).t()

    def segment(self, x: Tensor, reduce: str) -> Tensor:
        """``reduce`` (``"max"``, ``"sum"``) of ``x`` ``(E, H)`` over each target's in-edges,
        gathered back to the edges: ``(E, H)``."""
        return torch.segment_reduce(x, reduce, offsets=self.offsets, axis=0).index_select(0, self.dst)


class _CsrDot(torch.autograd.Function):
    """``out[e, h] = <q[dst[e], h], k[src[e], h]>`` on the CSR kernels."""

    @staticmethod
    def forward(ctx, q: Tensor, k: Tensor, edges: _CsrEdges) -> Tensor:
        qh, kh = _heads_first(q), _heads_first(k)  # (H, N, D), (H, Ns, D)
        ctx.edges = edges
        ctx.save_for_backward(qh, kh)
        return edges.sampled(qh, kh)  # (E, H)

    @staticmethod
    def backward(ctx, grad: Tensor):  # grad: (E, H)
        qh, kh = ctx.saved_tensors
        edges, g = ctx.edges, grad.t().contiguous()  # (H, E)
        gq = edges.mm(g, kh) if ctx.needs_input_grad[0] else None
        gk = edges.mm(g, qh, transposed=True) if ctx.needs_input_grad[1] else None
        return gq, gk, None


class _CsrAggregate(torch.autograd.Function):
    """``out[i, h] = sum over edges e = (j -> i) of p[e, h] * v[j, h]`` on the CSR kernels."""

    @staticmethod
    def forward(ctx, p: Tensor, v: Tensor, edges: _CsrEdges) -> Tensor:
        pt, vh = p.to(v.dtype).t().contiguous(), _heads_first(v)  # (H, E), (H, Ns, Dv)
        ctx.edges = edges
        ctx.save_for_backward(pt, vh)
        return edges.mm(pt, vh)  # (N, H, Dv)

    @staticmethod
    def backward(ctx, grad: Tensor):  # grad: (N, H, Dv)
        pt, vh = ctx.saved_tensors
        edges, g = ctx.edges, _heads_first(grad)
        gp = edges.sampled(g, vh) if ctx.needs_input_grad[0] else None
        gv = edges.mm(pt, g, transposed=True) if ctx.needs_input_grad[1] else None
        return gp, gv, None


class _CsrSoftmax(torch.autograd.Function):
    """Softmax of ``(E, H)`` logits over each target's in-edges (target-sorted segments)."""

    @staticmethod
    def forward(ctx, logits: Tensor, edges: _CsrEdges) -> Tensor:
        e = (logits - edges.segment(logits, "max")).exp_()
        p = e.div_(edges.segment(e, "sum"))
        ctx.edges = edges
        ctx.save_for_backward(p)
        return p

    @staticmethod
    def backward(ctx, grad: Tensor):
        (p,) = ctx.saved_tensors
        gp = grad * p
        return gp - p * ctx.edges.segment(gp, "sum"), None


def _rowdot(a: Tensor, b: Tensor) -> Tensor:
    """``(a * b).sum(-1)`` for ``(e, H, D)`` blocks: on CPU without the ``(e, H, D)`` product (a
    batched matmul); on CUDA as the product and a reduction, since a batched matmul of ``e x H``
    ``1 x D`` by ``D x 1`` products is cuBLAS's slowest shape."""
    if a.device.type == "cuda":
        return (a * b).sum(-1)  # (e, H)
    return torch.einsum("ehd,ehd->eh", a, b)  # (e, H)


def _sort_by_target(edge_index: Tensor) -> tuple[Tensor, Tensor]:
    """``edge_index`` ordered by target (CSR order) and the permutation used (new -> old).
    Sorted targets make every scatter onto targets (``index_add_``, the segment softmax) walk
    memory in order: about twice as fast on CPU as random targets. Always sorted (no host
    check whether it already is: that would be a device sync)."""
    dst, perm = edge_index[1].sort(stable=True)
    return torch.stack([edge_index[0].index_select(0, perm), dst]), perm


def _cast(t: Tensor | None, dtype: torch.dtype) -> Tensor | None:
    return None if t is None else t.to(dtype)


def dot_score(q: Tensor, k: Tensor, edge_index: Tensor) -> Tensor:
    """Dot-product edge logits ``<q_i, k_j>`` for each edge ``j -> i``: ``(E, H)`` (unscaled)."""
    return _EdgeDot.apply(q, k, edge_index[0], edge_index[1])


def additive_score(q: Tensor, k: Tensor, edge_index: Tensor, negative_slope: float = 0.2) -> Tensor:
    """GAT-style logits ``LeakyReLU(sum(q_i) + sum(k_j))``: ``(E, H)``.

    With ``q = (W h) * a_dst`` and ``k = (W h) * a_src`` (per head) this is exactly GAT's
    ``LeakyReLU(a^T [W h_i || W h_j])``; only ``E x H`` values are ever built."""
    s_dst, s_src = q.sum(-1, dtype=_acc(q.dtype)), k.sum(-1, dtype=_acc(k.dtype))  # (N, H) each
    return F.leaky_relu(s_dst.index_select(0, edge_index[1]) + s_src.index_select(0, edge_index[0]), negative_slope)


GRAPH_SCORES: dict[str, ScoreFn] = {"dot": dot_score, "additive": additive_score}


def graph_attention(
    q: Tensor,
    k: Tensor,
    v: Tensor,
    edge_index: Tensor,
    *,
    num_nodes: int | None = None,
    score: Union[str, ScoreFn] = "dot",
    dropout_p: float = 0.0,
    scale: float | None = None,
    need_weights: bool = False,
) -> Tensor | tuple[Tensor, Tensor]:
    """Attention restricted to the edges of a graph, O(E) time and memory.

    Args:
        q: ``(N, H, D)`` target-node queries; k: ``(Ns, H, D)`` and v: ``(Ns, H, Dv)`` source
            nodes (``Ns == N`` for self-attention on one graph).
        edge_index: ``(2, E)``, row 0 = source ``j``, row 1 = target ``i``: node ``i``
            attends to its in-neighbours. Add self-loops (:func:`add_self_loops`) for a node
            to see itself.
        num_nodes: number of target nodes (defaults to ``q.shape[0]``).
        score: ``"dot"`` (scaled dot product), ``"additive"`` (GAT) or a callable
            ``(q, k, edge_index) -> (E, H)`` logits; masking and softmax are shared.
        dropout_p: dropout on the edge probabilities (applied whenever > 0).
        scale: multiplies the logits; default ``1/sqrt(D)`` for ``"dot"``, 1 otherwise.
        need_weights: also return the ``(E, H)`` edge probabilities (before dropout).

    Returns ``out (N, H, Dv)`` (nodes without in-edges get zeros) or ``(out, weights)``.
    """
    from torch_geometric.utils import softmax as segment_softmax

    V.check_tensor("q", q, 3, "(N, H, D)")
    V.check_tensor("k", k, 3, "(N, H, D)")
    V.check_tensor("v", v, 3, "(N, H, Dv)")
    V.check_same("graph_attention", {"q": q, "k": k, "v": v}, "dtype")
    V.check_same("graph_attention", {"q": q, "k": k, "v": v}, "device")
    if k.shape[:2] != v.shape[:2] or q.shape[1] != k.shape[1]:
        raise ValueError(
            f"q, k, v disagree on heads or source nodes: q {tuple(q.shape)}, k {tuple(k.shape)}, v {tuple(v.shape)}"
        )
    if q.shape[-1] != k.shape[-1]:
        raise ValueError(f"q has head dim {q.shape[-1]} but k has {k.shape[-1]}: they must match")
    n = q.shape[0] if num_nodes is None else num_nodes
    if not isinstance(n, int) or n != q.shape[0]:
        V.fail("num_nodes", num_nodes, f"expected None or q.shape[0] = {q.shape[0]}")
    V.check_edge_index(edge_index, k.shape[0], n)
    V.check_dropout(dropout_p)
    V.check_scale(scale)
    if isinstance(score, str):
        V.check_choice("score", score, GRAPH_SCORES)
        if scale is None and score == "dot":
            scale = q.shape[-1] ** -0.5
        score_fn = GRAPH_SCORES[score]
    elif callable(score):
        score_fn = score
    else:
        V.fail("score", score, "expected 'dot', 'additive' or a callable (q, k, edge_index) -> (E, H)")

    edge_index, perm = _sort_by_target(edge_index.long())  # (2, E) in target order; perm: new -> old
    csr = _CsrEdges(edge_index[0], edge_index[1], n, k.shape[0], q.shape[1], q.dtype) if _csr_path(q) else None
    # Autocast off: the kernels choose their own precision (float32 sums for bf16/fp16 inputs,
    # results in the input dtype) instead of autocast mixing dtypes inside index_add_.
    with torch.autocast(q.device.type, enabled=False):
        if csr is not None and score_fn is dot_score:
            logits = _CsrDot.apply(q, k, csr)
        else:
            logits = score_fn(q, k, edge_index).to(_acc(q.dtype))  # (E, H)
        if logits.shape != (edge_index.shape[1], q.shape[1]):
            raise ValueError(
                f"score returned shape {tuple(logits.shape)}: expected (E, H) = {(edge_index.shape[1], q.shape[1])}"
            )
        if scale is not None:
            logits = logits * scale
        if csr is not None:
            probs = _CsrSoftmax.apply(logits, csr)  # (E, H), sums to 1 per target
        else:
            probs = segment_softmax(logits, edge_index[1], num_nodes=n)
        dropped = F.dropout(probs, dropout_p) if dropout_p > 0 else probs
        if csr is not None:
            out = _CsrAggregate.apply(dropped, v, csr)  # (N, H, Dv)
        else:
            out = _EdgeAggregate.apply(dropped, v, edge_index[0], edge_index[1], n)
    if not need_weights:
        return out
    inverse = torch.empty_like(perm).index_copy_(0, perm, torch.arange(perm.numel(), device=perm.device))
    probs = probs.index_select(0, inverse)  # (E, H) back in the caller's edge order
    return out, probs.to(q.dtype)


def add_self_loops(edge_index: Tensor, num_nodes: int) -> Tensor:
    """``edge_index`` with every self-loop removed and one ``i -> i`` added per node, so each
    node attends to itself exactly once (and no node is left with nothing to attend)."""
    from torch_geometric.utils import add_self_loops as _add, remove_self_loops as _remove

    V.check_edge_index(edge_index, num_nodes, num_nodes)
    return _add(_remove(edge_index)[0], num_nodes=num_nodes)[0]
