"""Attention masks as named pure functions.

One convention everywhere in attnbench: a mask is a boolean tensor and ``True``
means *may attend* (the convention of ``F.scaled_dot_product_attention``).
Conversion to an additive bias happens in :func:`mask_to_bias` and nowhere else.

These builders return dense masks. The fast paths in :mod:`attn_core.functional`
never build an ``L x L`` mask for truncated attention; the dense builders exist
for the reference maths, for tests and for teaching.
"""

from __future__ import annotations

import torch
from torch import Tensor

from attn_core import _validate as V

__all__ = [
    "causal_mask",
    "window_allows",
    "window_mask",
    "local_global_allows",
    "local_global_mask",
    "padding_mask",
    "graph_mask",
    "grid_window_mask",
    "grid_window_edges",
    "combine_masks",
    "mask_to_bias",
]


def causal_mask(q_len: int, k_len: int | None = None, *, device=None) -> Tensor:
    """Query ``i`` may attend key ``j`` iff ``j <= i`` (top-left aligned, as SDPA's ``is_causal``).

    ``causal_mask(4)``::

        q\\k 0 1 2 3
         0   1 0 0 0
         1   1 1 0 0
         2   1 1 1 0
         3   1 1 1 1

    Returns a ``(q_len, k_len)`` bool tensor.
    """
    k_len = q_len if k_len is None else k_len
    i = torch.arange(q_len, device=device)[:, None]
    j = torch.arange(k_len, device=device)[None, :]
    return j <= i


def window_allows(offset: Tensor, window: int, causal: bool = False) -> Tensor:
    """The truncated pattern's one rule, on ``offset = i - j`` (query minus key position):
    ``|i - j| <= window``, and ``j <= i`` when ``causal``. Element-wise on any shape, so the
    dense :func:`window_mask`, the blocked CPU kernel and the FlexAttention ``mask_mod`` all
    call this one predicate."""
    allowed = offset.abs() <= window
    if causal:
        allowed = allowed & (offset >= 0)
    return allowed


def window_mask(
    q_len: int, k_len: int | None = None, window: int = 1, *, causal: bool = False, device=None
) -> Tensor:
    """Truncated (local) attention: query ``i`` sees key ``j`` iff ``|i - j| <= window``.

    With ``causal=True`` also ``j <= i``. ``window_mask(5, window=1)``::

        q\\k 0 1 2 3 4
         0   1 1 0 0 0
         1   1 1 1 0 0
         2   0 1 1 1 0
         3   0 0 1 1 1
         4   0 0 0 1 1

    Returns a ``(q_len, k_len)`` bool tensor.
    """
    k_len = q_len if k_len is None else k_len
    i = torch.arange(q_len, device=device)[:, None]
    j = torch.arange(k_len, device=device)[None, :]
    return window_allows(i - j, window, causal)


def local_global_allows(i: Tensor, j: Tensor, window: int, global_tokens: int, causal: bool = False) -> Tensor:
    """The ``local_global`` pattern's one rule on query/key positions ``i``, ``j`` (broadcast):
    the window (:func:`window_allows`), or either position among the first ``global_tokens``
    (global rows see everything, global columns are seen by everything); ``j <= i`` when ``causal``."""
    allowed = window_allows(i - j, window, causal) | (i < global_tokens) | (j < global_tokens)
    return allowed & (j <= i) if causal else allowed


def local_global_mask(
    q_len: int, k_len: int | None = None, window: int = 1, global_tokens: int = 1, *, causal: bool = False,
    device=None,
) -> Tensor:
    """Longformer/BigBird-style attention: a sliding window plus ``global_tokens`` global positions.

    ``local_global_mask(6, window=1, global_tokens=1)``::

        q\\k 0 1 2 3 4 5
         0   1 1 1 1 1 1      (global row: sees everything)
         1   1 1 1 0 0 0
         2   1 1 1 1 0 0
         3   1 0 1 1 1 0      (key 0 is a global column: seen by every row)
         4   1 0 0 1 1 1
         5   1 0 0 0 1 1

    Returns a ``(q_len, k_len)`` bool tensor (dense: for tests and need_weights)."""
    k_len = q_len if k_len is None else k_len
    i = torch.arange(q_len, device=device)[:, None]
    j = torch.arange(k_len, device=device)[None, :]
    return local_global_allows(i, j, window, global_tokens, causal)


def padding_mask(key_padding_mask: Tensor, q_len: int) -> Tensor:
    """Broadcast a ``(B, Lk)`` key mask (``True`` = real token) to ``(B, 1, q_len, Lk)``.

    Keys ``2, 3`` of this sequence are padding::

        key_padding_mask = [1 1 0 0]
        q\\k 0 1 2 3
         0   1 1 0 0
         1   1 1 0 0
         ...
    """
    b, lk = key_padding_mask.shape
    return key_padding_mask[:, None, None, :].expand(b, 1, q_len, lk)


def graph_mask(edge_index: Tensor, num_nodes: int) -> Tensor:
    """Dense ``(N, N)`` adjacency mask from a PyG ``edge_index`` (row 0 = source j, row 1 = target i).

    Node ``i`` attends to its in-neighbours: ``mask[i, j] = True`` iff edge ``j -> i``.
    Edges ``0->1, 1->2, 2->1``::

        i\\j 0 1 2
         0   0 0 0      (no in-edges: attends to nothing, output is zero)
         1   1 0 1
         2   0 1 0

    O(N^2): for tests and small graphs only; :func:`attn_core.graph_attention` is O(E).
    """
    m = torch.zeros(num_nodes, num_nodes, dtype=torch.bool, device=edge_index.device)
    m[edge_index[1], edge_index[0]] = True
    return m


def _check_grid(h: object, w: object, radius: object) -> None:
    for name, val, low in (("h", h, 1), ("w", w, 1), ("radius", radius, 0)):
        if not V.is_int(val, low):
            raise ValueError(f"{name}={val!r}: expected an int >= {low}")


def grid_window_mask(h: int, w: int, radius: int, *, device=None) -> Tensor:
    """Local 2-D attention over an ``h x w`` grid of patches in raster order (``p = row * w + col``):
    patch ``i`` may attend patch ``j`` iff their Chebyshev distance
    ``max(|row_i - row_j|, |col_i - col_j|) <= radius`` (a ``(2 radius + 1)^2`` square, as a
    convolution kernel; every patch sees itself).

    The neighbourhood of patch 4 (the centre) and patch 0 (a corner) in a 3 x 3 grid, ``radius=1``::

        grid       patch 4 sees      patch 0 sees
        0 1 2      1 1 1             1 1 0
        3 4 5      1 1 1             1 1 0
        6 7 8      1 1 1             0 0 0

    ``grid_window_mask(2, 3, radius=1)`` (grid ``0 1 2 / 3 4 5``)::

        i\\j 0 1 2 3 4 5
         0   1 1 0 1 1 0
         1   1 1 1 1 1 1
         2   0 1 1 0 1 1
         3   1 1 0 1 1 0
         4   1 1 1 1 1 1
         5   0 1 1 0 1 1

    Returns an ``(h*w, h*w)`` bool tensor. Dense, O(P^2): for tests and small grids;
    :func:`grid_window_edges` gives the same neighbourhood in O(P radius^2).
    """
    _check_grid(h, w, radius)
    idx = torch.arange(h * w, device=device)
    row, col = idx // w, idx % w
    return torch.maximum((row[:, None] - row[None, :]).abs(), (col[:, None] - col[None, :]).abs()) <= radius


def grid_window_edges(h: int, w: int, radius: int, *, device=None) -> Tensor:
    """The neighbourhood of :func:`grid_window_mask` as a PyG ``edge_index`` ``(2, E)``: row 0 =
    source ``j``, row 1 = target ``i``, one edge ``j -> i`` per allowed pair (self-loops included),
    sorted by target then source. Built from the ``(2 radius + 1)^2`` offsets, never a ``P x P``
    tensor, so ``graph_mask(grid_window_edges(h, w, r), h * w) == grid_window_mask(h, w, r)``."""
    _check_grid(h, w, radius)
    row = torch.arange(h, device=device).repeat_interleave(w)  # (P,)
    col = torch.arange(w, device=device).repeat(h)  # (P,)
    d = torch.arange(-radius, radius + 1, device=device)
    dr, dc = d.repeat_interleave(d.numel()), d.repeat(d.numel())  # (K,) offsets, K = (2r+1)^2
    r2, c2 = row[:, None] + dr[None, :], col[:, None] + dc[None, :]  # (P, K) neighbour coords
    ok = (r2 >= 0) & (r2 < h) & (c2 >= 0) & (c2 < w)
    dst = torch.arange(h * w, device=device)[:, None].expand_as(r2)[ok]  # target i
    src = (r2 * w + c2)[ok]  # source j; offsets are in raster order, so sources ascend per target
    return torch.stack([src, dst])


def combine_masks(*masks: Tensor | None) -> Tensor | None:
    """Logical AND of the given masks (``None`` entries are ignored; all ``None`` gives ``None``)."""
    out: Tensor | None = None
    for m in masks:
        if m is None:
            continue
        out = m if out is None else out & m
    return out


def mask_to_bias(mask: Tensor, dtype: torch.dtype) -> Tensor:
    """The one place a boolean mask becomes an additive bias: ``0`` where allowed, the
    most negative finite value of ``dtype`` where not (finite, so fully masked rows give
    a uniform softmax instead of NaN; callers zero those rows)."""
    bias = torch.zeros(mask.shape, dtype=dtype, device=mask.device)
    return bias.masked_fill_(~mask, torch.finfo(dtype).min)
