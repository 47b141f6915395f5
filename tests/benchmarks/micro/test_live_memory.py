"""The CPU memory figure of ``bench attention``'s graph points: live tensor bytes, deterministic,
and able to fail the graph memory check when a kernel keeps too much alive."""

from __future__ import annotations

import torch

from benchmarks.micro.attention.checks import compute_checks
from benchmarks.micro.attention.points import point_graph
from benchmarks.micro.live_memory import LIVE_METHOD, peak_live_bytes

_MIB = 1 << 20


def test_peak_live_bytes_counts_the_worst_moment_not_the_sum():
    def two_in_turn():
        a = torch.ones(4 * _MIB // 4)  # 4 MiB
        del a
        b = torch.ones(2 * _MIB // 4)  # 2 MiB, after a is freed
        c = torch.ones(2 * _MIB // 4)  # 2 MiB with b: 4 MiB again
        return float(b[0] + c[0])

    peak = peak_live_bytes(two_in_turn)
    assert 4 * _MIB <= peak < 4 * _MIB + 64 * 1024
    assert peak_live_bytes(lambda: None) == 0
    assert peak_live_bytes(two_in_turn) == peak  # deterministic


def _graph_points(**kw) -> list[dict]:
    common = dict(nodes=2000, edges=20000, embed_dim=64, heads=4, dtype="float32", device="cpu", seed=0,
                  warmup=1, repeats=1, min_repeats=1, target_s=None, threads=None)
    pts = []
    for impl in ("ours_graph", "pyg_transformerconv"):
        res = point_graph(impl=impl, **common)
        assert res["mem_method"] == LIVE_METHOD and "peak_rss_bytes" in res
        pts.append({"kind": "graph", "method": impl, "N": 2000, "E": 20000, "status": "ok", **res})
    return pts


def _mem_check(points: list[dict]) -> dict:
    return next(c for c in compute_checks(points) if c["name"].startswith("peak mem ours_graph"))


def test_graph_memory_check_passes_for_the_kernel_and_fails_for_a_memory_hungry_one(monkeypatch):
    check = _mem_check(_graph_points())
    assert check["pass"] is True, check

    import torch_geometric.utils

    real_softmax = torch_geometric.utils.softmax

    def fake(src, index, num_nodes=None, **kw):  # a kernel that builds a dense (N, N) block
        fake.kept = torch.ones(num_nodes, num_nodes, dtype=src.dtype)  # alive past the call's peak
        return real_softmax(src, index, num_nodes=num_nodes, **kw)

    monkeypatch.setattr(torch_geometric.utils, "softmax", fake)
    import attn_core.graph

    monkeypatch.setattr(attn_core.graph, "CSR_ON_CPU", False)  # the gather/scatter kernels, which call it
    check = _mem_check(_graph_points())
    assert check["pass"] is False and check["value"] > 0.6, check
