"""The GCN's sync-free normalisation against PyG's gcn_norm (the reference), self-loops included."""

from __future__ import annotations

import torch
from torch_geometric.nn import GCNConv
from torch_geometric.nn.conv.gcn_conv import gcn_norm as pyg_gcn_norm

from tasks.graphs.models import GCN, gcn_norm
from tests.helpers.sync import count_syncs


def _dense(ei: torch.Tensor, w: torch.Tensor, n: int) -> torch.Tensor:
    return torch.zeros(n, n, dtype=w.dtype).index_put_((ei[1], ei[0]), w, accumulate=True)  # (target, source)


def _graph(n: int = 9, e: int = 30, seed: int = 0) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    ei = torch.randint(0, n, (2, e), generator=g)
    return torch.cat([ei, torch.tensor([[2, 5], [2, 5]])], 1)  # existing self-loops too


def test_gcn_norm_is_pygs_operator() -> None:
    for dtype in (torch.float32, torch.float64):
        n, ei = 9, _graph()
        ref_ei, ref_w = pyg_gcn_norm(ei, None, n, add_self_loops=True, dtype=dtype)
        out_ei, out_w = gcn_norm(ei, n, dtype)
        torch.testing.assert_close(_dense(out_ei, out_w, n), _dense(ref_ei, ref_w, n))


def test_gcn_equals_gcnconv_with_its_own_normalisation_values_and_gradients() -> None:
    torch.manual_seed(0)
    n, ei = 9, _graph(seed=1)
    net = GCN(5, 3, hidden=8, dropout=0.0).double()
    ref = [GCNConv(a.in_channels, a.out_channels).double() for a in net.convs]
    for r, c in zip(ref, net.convs):
        r.load_state_dict(c.state_dict())
    x = torch.randn(n, 5, dtype=torch.float64, requires_grad=True)
    out = net(x, ei)
    h = x
    for i, r in enumerate(ref):
        h = r(h, ei)
        h = torch.relu(h) if i < len(ref) - 1 else h
    torch.testing.assert_close(out, h)
    g = torch.randn_like(out)
    ga = torch.autograd.grad((out * g).sum(), [x, *net.parameters()])
    gb = torch.autograd.grad((h * g).sum(), [x, *[p for r in ref for p in r.parameters()]])
    for a, b in zip(ga, gb):
        torch.testing.assert_close(a, b)


def test_gcn_forward_does_not_sync() -> None:
    net, ei = GCN(5, 3, hidden=8), _graph()
    with count_syncs() as c:
        net(torch.randn(9, 5), ei).sum().backward()
    assert not c.syncs, c.summary()
