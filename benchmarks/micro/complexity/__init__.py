"""'Why Self-Attention', measured: ``attnbench bench complexity``.

Table 1 of *Attention Is All You Need* (Vaswani et al., 2017) compares layer types by
complexity per layer, sequential operations and maximum path length. This benchmark builds
one layer of each type from the same width ``d`` and measures the three columns:

==========================  ============  ===========  =========================================
layer type (paper's row)    per layer     sequential   maximum path length
==========================  ============  ===========  =========================================
Self-Attention              O(n^2 d)      O(1)         O(1)
Recurrent                   O(n d^2)      O(n)         O(n)
Convolutional               O(k n d^2)    O(1)         O(log_k n) dilated, O(n/k) contiguous
Self-Attention (restricted) O(r n d)      O(1)         O(n/r)
==========================  ============  ===========  =========================================

Layers (:data:`LAYERS`, all ``(B, n, d) -> (B, n, d)``, built by :func:`build_layer`):

* ``self_attention``: :class:`attn_core.MultiHeadAttention` ``(d, heads, pattern="full")``
  (Q/K/V/output projections included, O(n d^2) of them);
* ``restricted_attention``: the same with ``pattern="truncated", window=r``;
* ``self_attention_op`` / ``restricted_attention_op``: :func:`attn_core.attention` alone on
  the input split into heads (no projections): the part of the layer Table 1 counts;
* ``lstm`` / ``gru``: ``torch.nn.LSTM`` / ``GRU(d, d, batch_first=True)`` (fused kernels);
* ``conv``: ``torch.nn.Conv1d(d, d, k)``, centred (symmetric zero padding keeps the length);
* ``dilated_conv``: the same with dilation ``k`` (one layer of a ``log_k n`` stack).

What is measured:

1. **Complexity**: forward + backward time (warm-up, repeats, median; :func:`benchmarks.run.measure.measure_step`)
   and peak memory growth over a sweep of ``n`` at fixed ``d`` and of ``d`` at fixed ``n``,
   each point in a fresh process (:func:`benchmarks.run.measure.run_isolated`: an out-of-memory
   point or a timeout is a record, the sweep goes on). :func:`fit_power_law` gives the
   exponent (slope of the log-log least-squares fit) with its standard error, the local
   slopes between neighbouring points and the slope over the largest three points.
2. **Sequential operations** (:func:`count_sequential`): the layer runs once at length ``n``
   (float64, CPU) and two things are counted from its implementation: ``steps``, the longest
   chain of dependent step-module applications (forward hooks tag each output with
   1 + the largest tag among its inputs: a parallel layer is one application; a recurrence is
   one ``LSTMCell``/``GRUCell`` application per position); and ``critical_path_ops``, the
   longest chain of autograd operations from the input to the output. Torch's fused
   ``nn.LSTM``/``GRU`` is one opaque autograd op in float32 on the CPU (oneDNN) and on CUDA
   (cuDNN): its loop is invisible, so the recurrences are counted on an explicit cell loop that
   shares the fused module's weights; the two outputs are compared (float64).
3. **Maximum path length** (:func:`probe_path_length`): the fewest hops through which input
   position 0 reaches output position ``n - 1``. A hop is a layer application (stacks of
   1, 2, ... seeded layers) or, inside a recurrent layer, a time step (the explicit loop with
   the carried state detached ``h`` steps before the end, so only ``h`` state transitions
   carry gradient). Reachability is measured: ``d (u . y[n-1]) / d x[0]`` by autograd in
   float64, with a random ``u``; masked or absent paths give exact zeros. The number of hops
   is searched by doubling, then bisection (the boundary ``h - 1`` / ``h`` is always probed).
   Path lengths over ``n`` (and ``r``, ``k``) are fitted against ``1``, ``n``, ``log n``
   (``log_k n`` for the dilated stack) and ``n/r`` (``n/k``) by least squares; the best R^2 wins.

Writes ``<out>/bench_complexity.json`` (after every point, atomically) and
``<out>/bench_complexity.png`` (log-log plots), prints one line per point, the measured
table next to the paper's and a list of checks. On CUDA (``device: auto`` with a GPU) the
timings run on the GPU; the probes always run on the CPU in float64 (they measure structure,
not speed).

The benchmark declares its parts in this package (:mod:`.paper` the paper's table, :mod:`.config`,
:mod:`.layers`, :mod:`.fits`, :mod:`.sequential` and :mod:`.paths` the two probes, :mod:`.tables`
fits, table and checks, :mod:`.sweep`, :mod:`.plot`); the flow it shares with the other
micro-benchmarks is :mod:`benchmarks.micro.sweep`.
"""

from __future__ import annotations

from benchmarks.micro.complexity.config import DEFAULT_CONFIG, SCHEMA, load_config, resolve_dtype
from benchmarks.micro.complexity.fits import GROWTH_MODELS, fit_growth, fit_power_law, growth_class
from benchmarks.micro.complexity.layers import AttentionOp, CellLoopRNN, FusedRNN, SeqConv, build_layer
from benchmarks.micro.complexity.paper import (
    DTYPES,
    LAYER_DOC,
    LAYER_PROBES,
    LAYER_ROW,
    LAYERS,
    PAPER,
    PROBE_DOC,
    PROBE_KINDS,
    PROBE_PAPER_CLASS,
    RNN_LAYERS,
)
from benchmarks.micro.complexity.paths import (
    expected_path_length,
    hop_model,
    probe_hops,
    probe_path_length,
    run_path_lengths,
)
from benchmarks.micro.complexity.plot import plot_results
from benchmarks.micro.complexity.sequential import critical_path_ops, count_sequential, run_sequential, single_thread
from benchmarks.micro.complexity.sweep import plan_points, point_layer, run_sweep
from benchmarks.micro.complexity.tables import (
    compute_checks,
    compute_fits,
    format_checks,
    format_table,
    measured_table,
)
from benchmarks.micro.sweep import entry_point

__all__ = [
    "SCHEMA",
    "DEFAULT_CONFIG",
    "LAYERS",
    "PROBE_KINDS",
    "PAPER",
    "load_config",
    "build_layer",
    "SeqConv",
    "AttentionOp",
    "FusedRNN",
    "CellLoopRNN",
    "plan_points",
    "point_layer",
    "fit_power_law",
    "fit_growth",
    "growth_class",
    "critical_path_ops",
    "count_sequential",
    "hop_model",
    "probe_hops",
    "probe_path_length",
    "expected_path_length",
    "run_sweep",
    "measured_table",
    "compute_checks",
    "plot_results",
    "main",
]

main = entry_point("complexity", load_config, run_sweep)
