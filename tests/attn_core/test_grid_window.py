"""Local 2-D attention masks: grid_window_mask against a hand-written case, grid_window_edges
against the mask, and graph attention over those edges against the dense reference."""

from __future__ import annotations

import pytest
import torch

import attn_core
from attn_core import graph_attention, graph_mask, grid_window_edges, grid_window_mask, reference_attention


def test_grid_window_mask_hand_written():
    # 3 x 3 grid, radius 1 (Chebyshev): every patch sees its 8 neighbours and itself.
    #   0 1 2
    #   3 4 5
    #   6 7 8
    neighbours = {
        0: {0, 1, 3, 4}, 1: {0, 1, 2, 3, 4, 5}, 2: {1, 2, 4, 5},
        3: {0, 1, 3, 4, 6, 7}, 4: set(range(9)), 5: {1, 2, 4, 5, 7, 8},
        6: {3, 4, 6, 7}, 7: {3, 4, 5, 6, 7, 8}, 8: {4, 5, 7, 8},
    }
    expected = torch.zeros(9, 9, dtype=torch.bool)
    for i, js in neighbours.items():
        expected[i, list(js)] = True
    m = grid_window_mask(3, 3, 1)
    assert m.dtype == torch.bool and torch.equal(m, expected)


def test_grid_window_mask_rectangular_and_radius():
    # 2 x 4 grid, radius 2: patch 0 (row 0, col 0) sees columns 0..2 of both rows, not column 3.
    m = grid_window_mask(2, 4, 2)
    assert m[0].tolist() == [True, True, True, False, True, True, True, False]
    # radius 0: only itself; a radius covering the grid: everything (full attention)
    assert torch.equal(grid_window_mask(3, 4, 0), torch.eye(12, dtype=torch.bool))
    assert grid_window_mask(3, 4, 3).all()
    assert torch.equal(grid_window_mask(4, 3, 1), grid_window_mask(4, 3, 1).T)  # symmetric


@pytest.mark.parametrize("h,w,r", [(3, 3, 1), (2, 5, 1), (5, 4, 2), (4, 4, 0), (3, 2, 5), (1, 6, 2)])
def test_grid_window_edges_match_mask(h, w, r):
    e = grid_window_edges(h, w, r)
    assert e.shape[0] == 2 and e.dtype == torch.long
    assert torch.equal(graph_mask(e, h * w), grid_window_mask(h, w, r))
    assert e.shape[1] == int(grid_window_mask(h, w, r).sum())  # no duplicate edges
    key = e[1] * h * w + e[0]
    assert torch.equal(key, key.sort().values)  # sorted by target, then source


@pytest.mark.parametrize("bad", [dict(h=0, w=3, radius=1), dict(h=3, w=3, radius=-1), dict(h=2.0, w=3, radius=1)])
def test_grid_window_rejects_bad_sizes(bad):
    name = next(k for k, v in bad.items() if not (isinstance(v, int) and v >= (0 if k == "radius" else 1)))
    for fn in (grid_window_mask, grid_window_edges):
        with pytest.raises(ValueError, match=name):
            fn(**bad)


def test_graph_attention_on_grid_equals_dense_reference():
    torch.manual_seed(0)
    h, w, r, heads, d = 4, 5, 1, 3, 8
    n = h * w
    q, k, v = (torch.randn(n, heads, d) for _ in range(3))
    out = graph_attention(q, k, v, grid_window_edges(h, w, r))  # (N, H, D)
    ref = reference_attention(q.transpose(0, 1), k.transpose(0, 1), v.transpose(0, 1), mask=grid_window_mask(h, w, r))
    torch.testing.assert_close(out, ref.transpose(0, 1), atol=1e-5, rtol=1e-5)
    # and it differs from full attention, so the mask matters
    full = reference_attention(q.transpose(0, 1), k.transpose(0, 1), v.transpose(0, 1))
    assert (full.transpose(0, 1) - out).abs().max() > 1e-2


def test_exported():
    assert attn_core.grid_window_mask is grid_window_mask and "grid_window_edges" in attn_core.__all__
