"""Attention scaling micro-benchmark: ``attnbench bench attention``.

Forward + backward time and peak memory of

* sequence attention over growing length ``L`` (batch ``B``, ``H`` heads of width ``D``):
  ``ours_full`` (:func:`attn_core.attention`, full), ``sdpa`` (raw
  ``F.scaled_dot_product_attention``), ``naive`` (:func:`attn_core.reference_attention`,
  dense maths), ``ours_truncated_w{w}`` (:func:`attn_core.attention` with ``window=w``), and
  for the FlexAttention comparison (by default on CUDA only) ``sdpa_band_mask_w{w}``: SDPA
  with a dense boolean band mask of the same window;
* every registered sequence pattern next to full SDPA, when the ``variants`` section is enabled
  (:mod:`benchmarks.micro.attention.variants`: memory growth and speed crossover checks; off by default,
  ``bench_attention_variants.yaml`` turns it on);
* graph attention on a random graph (``N`` nodes, ``E`` uniform random edges, features
  ``(N, 64)``): ``ours_graph`` (:class:`attn_core.MultiHeadAttention`, pattern ``"graph"``),
  ``pyg_transformerconv`` (``torch_geometric.nn.TransformerConv(64, 16, heads=4)``) and
  ``dense_masked`` (the same projections with dense attention over all nodes, masked by
  :func:`attn_core.graph_mask`: O(N^2), expected to run out of memory on big graphs).

Each time check of ours against its peer (``ours_full / sdpa`` at ``L >= 1024``, ``ours_graph /
pyg_transformerconv`` at the largest graph, ``ours_encoder / torch_encoder``) has its own paired
point: both built in one process and timed in interleaved rounds, the check passing, failing or
inconclusive by the confidence interval of the ratio (:mod:`benchmarks.micro.attention.pairs`).

With ``isolate: true`` (the full sweep) every point runs in a fresh process
(:func:`benchmarks.run.measure.run_isolated`) with a time limit and, on CPU, a memory cap, so
out-of-memory points become ``status: "oom"`` records; with ``isolate: false`` (the quick
sweep, whose sizes fit anywhere) they run in this process, without the ~2-5 s of imports each
fresh process costs.
Peak memory is the growth over the inputs during one more forward + backward call after
the timed ones (gradients included; prebuilt masks are reported separately as
``static_bytes``). The 1-minute load average before each point is recorded: other
processes on the machine slow CPU points a lot (OpenMP threads oversubscribed).

Writes ``<out>/bench_attention.json`` (after every point, atomically) and
``<out>/bench_attention.png``, prints one line per point and a table of checks.

The benchmark declares its parts in this package (config, points, checks, plot, the variants
section, planning and the sweep); the flow it shares with the other micro-benchmarks is
:mod:`benchmarks.micro.sweep`.
"""

from __future__ import annotations

from benchmarks.config import CONFIG_DIR
from benchmarks.micro.attention.checks import compute_checks, format_checks
from benchmarks.micro.attention.config import (
    DEFAULT_CONFIG,
    DTYPES,
    FULL_CONFIG,
    GRAPH_METHODS,
    SCHEMA,
    SEQ_METHODS,
    load_config,
    resolve_dtype,
)
from benchmarks.micro.attention.encoder import point_encoder
from benchmarks.micro.attention.plot import plot_results
from benchmarks.micro.attention.points import (
    attended_pairs,
    attention_flops,
    point_graph,
    point_matmul,
    point_pair,
    point_sequence,
)
from benchmarks.micro.attention.sweep import plan_points, run_sweep
from benchmarks.micro.attention.variants import point_variant
from benchmarks.micro.sweep import entry_point

__all__ = [
    "SCHEMA",
    "DEFAULT_CONFIG",
    "FULL_CONFIG",
    "load_config",
    "plan_points",
    "run_sweep",
    "compute_checks",
    "plot_results",
    "main",
    "attention_flops",
]

main = entry_point("attention", load_config, run_sweep)
