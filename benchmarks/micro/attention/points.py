"""The measured points of ``attnbench bench attention`` (each runs in a worker process, or inline,
named by its ``target``): a sequence point, a graph point, the paired timing of a time check
(ours and its peer in interleaved rounds), the matmul peak-rate reference, and the useful-FLOPs
count of attention. ``sequence_step``/``graph_step`` build what a point times."""

from __future__ import annotations

from typing import Any, Callable

from benchmarks.micro.attention.config import GRAPH_METHODS, SEQ_METHODS
from benchmarks.micro.common import attn_core_fingerprint, make_inputs, set_threads
from benchmarks.micro.live_memory import add_live_peak
from benchmarks.micro.paired import time_interleaved
from benchmarks.run import measure

__all__ = ["sequence_step", "graph_step", "point_sequence", "point_graph", "point_pair", "point_matmul",
           "attended_pairs", "attention_flops"]


def sequence_step(
    *, impl: str, L: int, window: int | None, batch: int, heads: int, head_dim: int, causal: bool,
    dtype: str, device: str, seed: int,
) -> tuple[Callable[[], None], dict]:
    """Forward + backward of ``impl`` on random ``(B, H, L, D)`` inputs, as a step to time, and
    what the point records beside its times (``static_bytes``, ``input_bytes``)."""
    import torch
    import torch.nn.functional as F

    import attn_core

    dt = getattr(torch, dtype)
    q, k, v, dout = make_inputs((batch, heads, L, head_dim), 4, dt, device, seed)
    for t in (q, k, v):
        t.requires_grad_()
    static_bytes = 0
    if impl == "sdpa":
        fn = lambda: F.scaled_dot_product_attention(q, k, v, is_causal=causal)  # noqa: E731
    elif impl == "ours_full":
        fn = lambda: attn_core.attention(q, k, v, causal=causal)  # noqa: E731
    elif impl == "ours_truncated":
        fn = lambda: attn_core.attention(q, k, v, causal=causal, window=window)  # noqa: E731
    elif impl == "naive":
        mask = attn_core.causal_mask(L, device=device) if causal else None
        static_bytes = 0 if mask is None else mask.numel() * mask.element_size()
        fn = lambda: attn_core.reference_attention(q, k, v, mask=mask)  # noqa: E731
    elif impl == "sdpa_band_mask":
        mask = attn_core.window_mask(L, L, window, causal=causal, device=device)
        static_bytes = mask.numel() * mask.element_size()
        fn = lambda: F.scaled_dot_product_attention(q, k, v, attn_mask=mask)  # noqa: E731
    else:
        raise ValueError(f"unknown sequence method {impl!r}; valid: {', '.join(SEQ_METHODS)}, sdpa_band_mask")

    def step() -> None:
        out = fn()
        out.backward(dout)
        del out
        q.grad = k.grad = v.grad = None

    return step, {"static_bytes": static_bytes, "input_bytes": 4 * q.numel() * q.element_size()}


def point_sequence(
    *, impl: str, L: int, window: int | None, batch: int, heads: int, head_dim: int, causal: bool,
    dtype: str, device: str, seed: int, warmup: int, repeats: int, min_repeats: int, target_s: float | None,
    threads: int | None = None,
) -> dict:
    """One sequence point: forward + backward of ``impl`` on random ``(B, H, L, D)`` inputs."""
    nthreads = set_threads(threads)
    step, info = sequence_step(impl=impl, L=L, window=window, batch=batch, heads=heads, head_dim=head_dim,
                               causal=causal, dtype=dtype, device=device, seed=seed)
    res = measure.measure_step(
        step, device=device, warmup=warmup, repeats=repeats, min_repeats=min_repeats, target_s=target_s
    )
    res.update(info)
    res["threads"] = nthreads
    res["attn_core_sha1"] = attn_core_fingerprint()
    return res


def _dense_masked_module(embed_dim: int, heads: int):
    """The ``dense_masked`` baseline: the projections of ``MultiHeadAttention(embed_dim, heads)``
    with dense attention over all nodes, masked by the ``(N, N)`` graph mask."""
    import torch
    from torch import nn

    import attn_core

    class DenseMaskedGraphAttention(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.h, self.d = heads, embed_dim // heads
            self.q_proj, self.k_proj = nn.Linear(embed_dim, embed_dim), nn.Linear(embed_dim, embed_dim)
            self.v_proj, self.out_proj = nn.Linear(embed_dim, embed_dim), nn.Linear(embed_dim, embed_dim)

        def forward(self, x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
            n = x.shape[0]

            def split(t: torch.Tensor) -> torch.Tensor:  # (N, E) -> (1, H, N, D)
                return t.view(n, self.h, self.d).transpose(0, 1).unsqueeze(0)

            q, k, v = split(self.q_proj(x)), split(self.k_proj(x)), split(self.v_proj(x))
            out = attn_core.reference_attention(q, k, v, mask=mask)  # (1, H, N, D)
            return self.out_proj(out[0].transpose(0, 1).reshape(n, -1))

    return DenseMaskedGraphAttention()


def graph_step(
    *, impl: str, nodes: int, edges: int, embed_dim: int, heads: int, dtype: str, device: str, seed: int,
) -> tuple[Callable[[], None], dict]:
    """Forward + backward (loss = output.sum()) of ``impl`` on a random graph, as a step to time,
    and what the point records beside its times (``static_bytes``, ``input_bytes``, ``params``)."""
    import torch

    import attn_core

    dt = getattr(torch, dtype)
    gen = torch.Generator(device="cpu").manual_seed(seed)
    x = torch.randn(nodes, embed_dim, generator=gen).to(device=device, dtype=dt).requires_grad_()
    edge_index = torch.randint(0, nodes, (2, edges), generator=gen).to(device)
    torch.manual_seed(seed)
    static_bytes = 0
    if impl == "ours_graph":
        mod = attn_core.MultiHeadAttention(embed_dim, heads, pattern="graph")
        fn = lambda: mod(x, edge_index=edge_index)  # noqa: E731
    elif impl == "pyg_transformerconv":
        from torch_geometric.nn import TransformerConv

        mod = TransformerConv(embed_dim, embed_dim // heads, heads=heads)
        fn = lambda: mod(x, edge_index)  # noqa: E731
    elif impl == "dense_masked":
        mod = _dense_masked_module(embed_dim, heads)
        mask = attn_core.graph_mask(edge_index, nodes)  # (N, N): O(N^2) bytes
        static_bytes = mask.numel() * mask.element_size()
        fn = lambda: mod(x, mask)  # noqa: E731
    else:
        raise ValueError(f"unknown graph method {impl!r}; valid: {', '.join(GRAPH_METHODS)}")
    mod.to(device=device, dtype=dt)
    params = list(mod.parameters())

    def step() -> None:
        out = fn()
        if isinstance(out, tuple):
            out = out[0]
        out.sum().backward()
        del out
        x.grad = None
        for p in params:
            p.grad = None

    return step, {"static_bytes": static_bytes, "params": sum(p.numel() for p in params),
                  "input_bytes": x.numel() * x.element_size() + edge_index.numel() * edge_index.element_size()}


def point_graph(
    *, impl: str, nodes: int, edges: int, embed_dim: int, heads: int, dtype: str, device: str, seed: int,
    warmup: int, repeats: int, min_repeats: int, target_s: float | None, threads: int | None = None,
) -> dict:
    """One graph point: forward + backward (loss = output.sum()) on a random graph."""
    nthreads = set_threads(threads)
    step, info = graph_step(impl=impl, nodes=nodes, edges=edges, embed_dim=embed_dim, heads=heads, dtype=dtype,
                            device=device, seed=seed)
    res = measure.measure_step(
        step, device=device, warmup=warmup, repeats=repeats, min_repeats=min_repeats, target_s=target_s
    )
    add_live_peak(res, step, device)  # CPU: live tensor bytes, not RSS (small graphs are RSS noise)
    res.update(info)
    res["threads"] = nthreads
    res["attn_core_sha1"] = attn_core_fingerprint()
    return res


def point_pair(
    *, build: str, ours: str, peer: str, shape: dict[str, Any], dtype: str, device: str, seed: int, warmup: int,
    repeats: int, min_repeats: int, target_s: float | None, threads: int | None = None,
) -> dict:
    """One paired timing for a time check: the steps of ``ours`` and ``peer`` (implementations
    of the ``build`` kind: ``sequence``, ``graph`` or ``encoder``, with the keyword arguments
    ``shape``) built in this process on the same inputs, then timed in interleaved rounds
    (:func:`benchmarks.micro.paired.time_interleaved`): ``ours_ms`` and ``peer_ms``."""
    from benchmarks.micro.attention.encoder import encoder_step

    builders = {"sequence": sequence_step, "graph": graph_step, "encoder": encoder_step}
    if build not in builders:
        raise ValueError(f"unknown pair kind {build!r}; valid: {', '.join(builders)}")
    nthreads = set_threads(threads)
    steps = [builders[build](impl=impl, **shape, dtype=dtype, device=device, seed=seed)[0] for impl in (ours, peer)]
    res = time_interleaved(*steps, warmup=warmup, repeats=repeats, min_repeats=min_repeats, target_s=target_s,
                           sync=measure.device_sync(device))
    res["threads"] = nthreads
    res["attn_core_sha1"] = attn_core_fingerprint()
    return res


def point_matmul(
    *, size: int, dtype: str, device: str, seed: int, warmup: int, repeats: int, threads: int | None = None
) -> dict:
    """The peak-rate reference: ``(n, n) @ (n, n)`` in ``dtype``; TFLOP/s = 2 n^3 / time."""
    import torch

    nthreads = set_threads(threads)
    dt = getattr(torch, dtype)
    a, b = make_inputs((size, size), 2, dt, device, seed)
    res = measure.time_callable(lambda: a @ b, warmup=warmup, repeats=repeats, sync=measure.device_sync(device))
    flops = 2.0 * size**3
    res["flops"] = flops
    res["tflops"] = flops / (res["median_ms"] * 1e-3) / 1e12
    res["tflops_best"] = flops / (res["min_ms"] * 1e-3) / 1e12
    res["time_ms"] = res["median_ms"]
    res["threads"] = nthreads
    return res


# --------------------------------------------------------------------------- FLOPs
def attended_pairs(L: int, window: int | None, causal: bool) -> int:
    """Number of (query, key) pairs that attend: ``L^2`` for full attention, ``~L (2w + 1)``
    for a window ``w`` (exact, edges included); about half of that when causal."""
    if window is None or window >= L - 1:
        return L * (L + 1) // 2 if causal else L * L
    w = window
    if causal:  # row i sees max(0, i - w) .. i
        return L * (w + 1) - w * (w + 1) // 2
    return L * (2 * w + 1) - w * (w + 1)


def attention_flops(batch: int, heads: int, L: int, head_dim: int, window: int | None, causal: bool) -> float:
    """Useful FLOPs of forward + backward attention: forward ``4 B H P D`` (``Q K^T`` and ``P V``,
    ``P`` attended pairs), backward twice that (``dV``, ``dP``, ``dQ``, ``dK``): ``12 B H P D``.
    Masked-out pairs a kernel computes anyway (a dense band mask) are not counted."""
    return 12.0 * batch * heads * attended_pairs(L, window, causal) * head_dim

