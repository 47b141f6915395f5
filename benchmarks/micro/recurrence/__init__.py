"""Recurrence micro-benchmark: ``attnbench bench recurrence``.

Training cost (forward + backward, median time and peak memory) over the length ``L`` of

* the scan primitive ``h_t = a_t * h_{t-1} + b_t`` on ``(B, L, d_model)``:
  :func:`attn_core.recurrent.linear_scan` (odd/even doubling, ``scan_doubling``) against the
  sequential loop a user writes otherwise (``scan_loop``, one step per position);
* every registered recurrent layer (:func:`attn_core.recurrent.list_recurrences`: ``min_rnn``,
  ``s4d``, ``mamba2``, ``lru``, a plug-in's too) at width ``d_model``, against the peers a user
  would pick instead, ``torch.nn.GRU`` and ``torch.nn.LSTM`` (fused cuDNN/oneDNN kernels,
  ``torch_gru``, ``torch_lstm``), and the attention a user would pick instead of a recurrence on
  the same ``(B, L, d_model)`` split into ``heads``: full SDPA (``sdpa``) and attnbench's
  truncated attention (``truncated_w<w>``), both timed by bench attention's own point
  (:func:`benchmarks.micro.attention.point_sequence`).

Summary table (:mod:`.table`): per row the time and peak memory at ``report_length``, the
exponent of time ~ L^k (:func:`benchmarks.micro.complexity.fits.fit_power_law`), the crossover
``L`` against ``torch_lstm`` and ``sdpa`` (:func:`benchmarks.micro.crossover.crossover`, log-log
interpolated), the sequential depth and path length (analytical: ``DEPTH_RULE``, ``PATH_RULE``)
and the float32 error at ``f32_error.length`` (:mod:`.accuracy`, one forward pass against float64).

Checks: the doubling scan is faster than the loop at ``check_length``; each layer's time per
position at the longest ``L`` over the shortest is at most ``linear_limit`` (linear cost, or
``L log L``: a quadratic layer would grow by ``L_max / L_min``); for information, each layer's
time over ``torch_gru``'s at ``check_length``.

Writes ``<out>/bench_recurrence.json`` (after every point, atomically) and
``<out>/bench_recurrence.png``. Parts: :mod:`.config` (schema, loader), :mod:`.points` (the
plan, one point in a worker, the checks), :mod:`.accuracy`, :mod:`.table`, :mod:`.plot`; the flow
is :mod:`benchmarks.micro.sweep`.
"""

from __future__ import annotations

from benchmarks.micro.recurrence.config import DEFAULT_CONFIG, SCHEMA, load_config
from benchmarks.micro.recurrence.plot import plot_results
from benchmarks.micro.recurrence.accuracy import point_f32_error
from benchmarks.micro.recurrence.points import (PEERS, SCANS, compute_checks, format_checks, plan_points,
                                                point_recurrence, run_sweep)
from benchmarks.micro.recurrence.table import format_table, path_length, sequential_depth, summary_table
from benchmarks.micro.sweep import entry_point

__all__ = ["SCHEMA", "DEFAULT_CONFIG", "PEERS", "SCANS", "load_config", "plan_points", "point_recurrence",
           "compute_checks", "format_checks", "plot_results", "run_sweep", "main", "point_f32_error", "summary_table",
           "format_table", "sequential_depth", "path_length"]

main = entry_point("recurrence", load_config, run_sweep)
