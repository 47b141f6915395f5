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

1. **Complexity**: forward + backward time (warm-up, repeats, median; :func:`benchmarks.measure.measure_step`)
   and peak memory growth over a sweep of ``n`` at fixed ``d`` and of ``d`` at fixed ``n``,
   each point in a fresh process (:func:`benchmarks.measure.run_isolated`: an out-of-memory
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
"""

from __future__ import annotations

import contextlib
import math
import sys
import time
from pathlib import Path
from typing import Any, Callable, Iterable, Sequence

import attn_core
import torch
import torch.nn.functional as F
from torch import nn

from benchmarks import measure
from benchmarks.bench_common import (
    run_main,
    sweep_fields,
    finish_sweep,
    save_figure_atomic,
    attn_core_fingerprint,
    busy_warning,
    make_inputs,
    mib,
    point_record,
    resolve_device,
    resolve_mem_cap,
    run_point,
    set_threads,
)
from benchmarks.schema import ConfigError, Field, Section, apply_overrides, load_yaml, validate

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

CONFIG_DIR = Path(__file__).resolve().parent / "configs"
DEFAULT_CONFIG = CONFIG_DIR / "bench_complexity.yaml"
RESULT_NAME = "bench_complexity"

LAYERS = (
    "self_attention", "restricted_attention", "lstm", "gru", "conv", "dilated_conv",
    "self_attention_op", "restricted_attention_op",
)
RNN_LAYERS = ("lstm", "gru")
PROBE_KINDS = (
    "self_attention", "restricted_attention", "lstm", "gru", "conv_causal", "conv_centred", "dilated_conv",
)
DTYPES = ("auto", "float32", "float64", "bfloat16", "float16")

LAYER_DOC = {
    "self_attention": "attn_core.MultiHeadAttention(d, heads, pattern='full'), projections included",
    "restricted_attention": "attn_core.MultiHeadAttention(d, heads, pattern='truncated', window=r), projections included",
    "lstm": "torch.nn.LSTM(d, d, batch_first=True), fused kernel",
    "gru": "torch.nn.GRU(d, d, batch_first=True), fused kernel",
    "conv": "torch.nn.Conv1d(d, d, k), centred zero padding",
    "dilated_conv": "torch.nn.Conv1d(d, d, k, dilation=k), centred zero padding",
    "self_attention_op": "attn_core.attention(x, x, x) on x split into heads: the attention alone, no projections",
    "restricted_attention_op": "attn_core.attention(x, x, x, window=r), no projections",
}

#: Table 1 of Vaswani et al. (2017), "Attention Is All You Need", with the exponents of
#: ``n`` and ``d`` in the per-layer complexity and the growth classes of the other columns.
PAPER: dict[str, dict[str, Any]] = {
    "self_attention": {
        "row": "Self-Attention", "complexity": "O(n^2·d)", "sequential": "O(1)", "path": "O(1)",
        "exp_n": 2.0, "exp_d": 1.0, "sequential_class": "O(1)", "path_class": "O(1)",
    },
    "recurrent": {
        "row": "Recurrent", "complexity": "O(n·d^2)", "sequential": "O(n)", "path": "O(n)",
        "exp_n": 1.0, "exp_d": 2.0, "sequential_class": "O(n)", "path_class": "O(n)",
    },
    "convolutional": {
        "row": "Convolutional", "complexity": "O(k·n·d^2)", "sequential": "O(1)",
        "path": "O(log_k(n)) dilated, O(n/k) contiguous",
        "exp_n": 1.0, "exp_d": 2.0, "sequential_class": "O(1)", "path_class": "O(n/k) | O(log n)",
    },
    "restricted": {
        "row": "Self-Attention (restricted)", "complexity": "O(r·n·d)", "sequential": "O(1)", "path": "O(n/r)",
        "exp_n": 1.0, "exp_d": 1.0, "sequential_class": "O(1)", "path_class": "O(n/r)",
    },
}
LAYER_ROW = {
    "self_attention": "self_attention", "self_attention_op": "self_attention",
    "restricted_attention": "restricted", "restricted_attention_op": "restricted",
    "lstm": "recurrent", "gru": "recurrent", "conv": "convolutional", "dilated_conv": "convolutional",
}
#: Path-length probes that stand for a timed layer (the ``_op`` variants have the same paths).
LAYER_PROBES = {
    "self_attention": ("self_attention",), "self_attention_op": ("self_attention",),
    "restricted_attention": ("restricted_attention",), "restricted_attention_op": ("restricted_attention",),
    "lstm": ("lstm",), "gru": ("gru",), "conv": ("conv_causal", "conv_centred"), "dilated_conv": ("dilated_conv",),
}
#: The paper's path-length class per probe.
PROBE_PAPER_CLASS = {
    "self_attention": "O(1)", "restricted_attention": "O(n/r)", "lstm": "O(n)", "gru": "O(n)",
    "conv_causal": "O(n/k)", "conv_centred": "O(n/k)", "dilated_conv": "O(log n)",
}
PROBE_DOC = {
    "self_attention": "stack of MultiHeadAttention(full) layers",
    "restricted_attention": "stack of MultiHeadAttention(truncated, window r) layers; param = r",
    "lstm": "explicit LSTMCell loop; a hop = a time step (state transition); no param",
    "gru": "explicit GRUCell loop; a hop = a time step (state transition); no param",
    "conv_causal": "stack of causal (left-padded) Conv1d, kernel k, no dilation; param = k",
    "conv_centred": "stack of centred (symmetric padding) Conv1d, kernel k odd, no dilation; param = k",
    "dilated_conv": "stack of causal Conv1d, kernel k, dilation k^i at layer i (WaveNet/ByteNet); param = k",
}

SCHEMA: dict[str, Any] = {
    **sweep_fields("complexity", dtypes=DTYPES, dtype="auto",
                   dtype_doc="auto = float32 (cuDNN RNNs and CPU kernels alike)", warmup=2, repeats=5,
                   min_repeats=3, target_point_s=3.0, point_timeout_s=120.0, threads=1,
                   skip_doc="after an oom/timeout skip the larger sizes of that layer"),
    "layers": Field("list[str]", list(LAYERS), choices=LAYERS, doc="layer types to time"),
    "batch": Field("int", 1, minimum=1),
    "heads": Field("int", 4, minimum=1, doc="attention heads (must divide every d)"),
    "window": Field("int", 32, minimum=1, doc="r of restricted attention: position i sees |i - j| <= r"),
    "kernel": Field("int", 3, minimum=2, doc="k of the convolutions (odd: centred padding keeps the length)"),
    "max_n": Section(
        {layer: Field("per_device[int]", None, minimum=1, nullable=True) for layer in LAYERS},
        doc="largest n timed per layer (null = no cap); larger points are recorded as skipped",
    ),
    "sweep_n": Section({
        "d": Field("int", 128, minimum=1, doc="fixed width of the n sweep"),
        "lengths": Field("per_device[list[int]]", {"cpu": [128, 256, 512, 1024, 2048, 4096, 8192],
                                                   "cuda": [256, 512, 1024, 2048, 4096, 8192, 16384]}, minimum=2),
    }),
    "sweep_d": Section({
        "n": Field("per_device[int]", {"cpu": 1024, "cuda": 4096}, minimum=2, doc="fixed length of the d sweep"),
        "widths": Field("per_device[list[int]]", {"cpu": [64, 128, 256, 512, 1024],
                                                  "cuda": [64, 128, 256, 512, 1024, 2048]}, minimum=1),
    }),
    "path_length": Section({
        "enabled": Field("bool", True),
        "kinds": Field("list[str]", list(PROBE_KINDS), choices=PROBE_KINDS),
        "lengths": Field("list[int]", [8, 16, 32, 64, 128], minimum=2, doc="n of the probes"),
        "width": Field("int", 8, minimum=1),
        "heads": Field("int", 2, minimum=1),
        "windows": Field("list[int]", [2, 4, 8], minimum=1, doc="r of restricted attention"),
        "kernels": Field("list[int]", [3, 5], minimum=2, doc="k of the undilated convolutions (odd)"),
        "dilated_kernels": Field("list[int]", [2, 3], minimum=2, doc="k of the dilated stack"),
    }),
    "sequential_ops": Section({
        "enabled": Field("bool", True),
        "lengths": Field("list[int]", [64, 256, 1024, 4096], minimum=1),
        "width": Field("int", 16, minimum=1),
        "heads": Field("int", 2, minimum=1),
    }),
}


def load_config(
    path: str | Path | None = None,
    *,
    overrides: list[str] | tuple[str, ...] = (),
    device: str | None = None,
    dtype: str | None = None,
) -> dict:
    """Read, override (``key.sub=value``), validate and complete a config."""
    path = Path(path) if path is not None else DEFAULT_CONFIG
    raw = load_yaml(path)
    raw = apply_overrides(raw, list(overrides))
    if device is not None:
        raw["device"] = device
    if dtype is not None:
        raw["dtype"] = dtype
    src = str(path)
    cfg = validate(raw, SCHEMA, source=src)
    if cfg["min_repeats"] > cfg["repeats"]:
        raise ConfigError(f"{src}: min_repeats={cfg['min_repeats']} must be <= repeats={cfg['repeats']}")
    attn = any(layer in cfg["layers"] for layer in ("self_attention", "restricted_attention",
                                                     "self_attention_op", "restricted_attention_op"))
    if attn:
        widths = {cfg["sweep_n"]["d"], *cfg["sweep_d"]["widths"]["cpu"], *cfg["sweep_d"]["widths"]["cuda"]}
        bad = sorted(w for w in widths if w % cfg["heads"])
        if bad:
            raise ConfigError(f"{src}: heads={cfg['heads']} must divide every width d; it does not divide {bad}")
    for sec in ("path_length", "sequential_ops"):
        if cfg[sec]["width"] % cfg[sec]["heads"]:
            raise ConfigError(f"{src}: {sec}.heads={cfg[sec]['heads']} must divide {sec}.width={cfg[sec]['width']}")
    if cfg["kernel"] % 2 == 0 and any(layer in cfg["layers"] for layer in ("conv", "dilated_conv")):
        raise ConfigError(f"{src}: kernel={cfg['kernel']} is invalid: expected an odd kernel (centred padding)")
    even = [k for k in cfg["path_length"]["kernels"] if k % 2 == 0]
    if even and "conv_centred" in cfg["path_length"]["kinds"]:
        raise ConfigError(f"{src}: path_length.kernels={cfg['path_length']['kernels']} is invalid: "
                          f"the centred probe needs odd kernels, got {even}")
    cfg["config_path"] = src
    return cfg


def resolve_dtype(name: str) -> str:
    return "float32" if name == "auto" else name


# ============================================================================ the layers
class SeqConv(nn.Module):
    """``Conv1d(d, d, k, dilation)`` on ``(B, n, d)`` keeping the length: causal = all the
    padding on the left (output ``i`` sees inputs ``i - (k-1)dil .. i``), else centred
    (``floor((k-1)dil / 2)`` on the left, the rest on the right)."""

    def __init__(self, d: int, kernel: int, *, dilation: int = 1, causal: bool = False) -> None:
        super().__init__()
        self.conv = nn.Conv1d(d, d, kernel, dilation=dilation)
        span = (kernel - 1) * dilation
        self.pad = (span, 0) if causal else (span // 2, span - span // 2)
        self.causal = causal

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.conv(F.pad(x.transpose(1, 2), self.pad)).transpose(1, 2)


class AttentionOp(nn.Module):
    """Self-attention without projections: ``attn_core.attention(x, x, x)`` with ``x`` split
    into ``heads`` heads (``window`` = restricted)."""

    def __init__(self, heads: int, window: int | None = None) -> None:
        super().__init__()
        self.heads, self.window = heads, window

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, n, d = x.shape
        h = x.view(b, n, self.heads, d // self.heads).transpose(1, 2)
        out = attn_core.attention(h, h, h, window=self.window)
        return out.transpose(1, 2).reshape(b, n, d)


class FusedRNN(nn.Module):
    """``nn.LSTM`` / ``nn.GRU`` (one layer, ``d -> d``, batch-first), returning the outputs."""

    def __init__(self, kind: str, d: int) -> None:
        super().__init__()
        self.kind = kind
        self.rnn = (nn.LSTM if kind == "lstm" else nn.GRU)(d, d, batch_first=True)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.rnn(x)[0]


class CellLoopRNN(nn.Module):
    """The recurrence of a :class:`FusedRNN` as an explicit loop of ``LSTMCell``/``GRUCell``
    steps with the same (shared) weights: ``n`` dependent cell applications.

    ``horizon`` (for the path-length probe): when set, the carried state is detached before
    step ``n - 1 - horizon``, so only the last ``horizon`` state transitions carry gradient to
    the last output (input position ``j`` reaches output ``n - 1`` iff ``n - 1 - j <= horizon``)."""

    def __init__(self, fused: FusedRNN) -> None:
        super().__init__()
        rnn = fused.rnn
        self.kind = fused.kind
        cls = nn.LSTMCell if self.kind == "lstm" else nn.GRUCell
        self.cell = cls(rnn.input_size, rnn.hidden_size).to(rnn.weight_ih_l0.dtype)
        for name in ("weight_ih", "weight_hh", "bias_ih", "bias_hh"):
            setattr(self.cell, name, getattr(rnn, f"{name}_l0"))  # shared Parameters
        self.hidden = rnn.hidden_size
        self.horizon: int | None = None
        self.steps = 0

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, n, _ = x.shape
        h = x.new_zeros(b, self.hidden)
        c = x.new_zeros(b, self.hidden)
        cut = None if self.horizon is None else n - 1 - self.horizon
        outs = []
        self.steps = 0
        for t in range(n):
            if t == cut:
                h, c = h.detach(), c.detach()
            if self.kind == "lstm":
                h, c = self.cell(x[:, t], (h, c))
            else:
                h = self.cell(x[:, t], h)
            self.steps += 1
            outs.append(h)
        return torch.stack(outs, dim=1)


def build_layer(layer: str, d: int, *, heads: int, window: int, kernel: int):
    """One layer of type ``layer`` (see :data:`LAYERS`), ``(B, n, d) -> (B, n, d)``, float32 on CPU."""
    if layer == "self_attention":
        return attn_core.MultiHeadAttention(d, heads, pattern="full")
    if layer == "restricted_attention":
        return attn_core.MultiHeadAttention(d, heads, pattern="truncated", window=window)
    if layer == "self_attention_op":
        return AttentionOp(heads)
    if layer == "restricted_attention_op":
        return AttentionOp(heads, window)
    if layer in RNN_LAYERS:
        return FusedRNN(layer, d)
    if layer == "conv":
        return SeqConv(d, kernel)
    if layer == "dilated_conv":
        return SeqConv(d, kernel, dilation=kernel)
    raise ValueError(f"unknown layer {layer!r}; valid: {', '.join(LAYERS)}")


# ============================================================================ planning and the timing points
def plan_points(cfg: dict, device: str, dtype: str) -> list[dict]:
    """Every timing point, in run order: the ``n`` sweep (increasing ``n``, every layer at each
    ``n``), then the ``d`` sweep. The point shared by both sweeps runs once (``sweeps`` lists
    both). Points above a layer's ``max_n`` are planned with ``cap`` set (recorded as skipped)."""
    common = {
        "batch": cfg["batch"], "heads": cfg["heads"], "window": cfg["window"], "kernel": cfg["kernel"],
        "dtype": dtype, "device": device, "seed": cfg["seed"], "warmup": cfg["warmup"], "repeats": cfg["repeats"],
        "min_repeats": cfg["min_repeats"], "target_s": cfg["target_point_s"], "threads": cfg["threads"],
    }
    d0 = cfg["sweep_n"]["d"]
    n0 = cfg["sweep_d"]["n"][device]
    sizes: list[tuple[str, int, int]] = [("n", n, d0) for n in sorted(set(cfg["sweep_n"]["lengths"][device]))]
    sizes += [("d", n0, d) for d in sorted(set(cfg["sweep_d"]["widths"][device]))]
    points: list[dict] = []
    seen: dict[tuple[str, int, int], dict] = {}
    for sweep, n, d in sizes:
        for layer in cfg["layers"]:
            key = (layer, n, d)
            if key in seen:
                seen[key]["sweeps"].append(sweep)
                continue
            caps = cfg["max_n"].get(layer)
            cap = caps[device] if caps else None
            p = {
                "kind": "time", "layer": layer, "n": n, "d": d, "sweeps": [sweep],
                "target": "benchmarks.bench_complexity:point_layer", "preload": ["torch", "attn_core"],
                "kwargs": {"layer": layer, "n": n, "d": d, **common},
            }
            if cap is not None and n > cap:
                p["cap"] = cap
            seen[key] = p
            points.append(p)
    return points


def point_layer(
    *, layer: str, n: int, d: int, batch: int, heads: int, window: int, kernel: int, dtype: str, device: str,
    seed: int, warmup: int, repeats: int, min_repeats: int, target_s: float | None, threads: int | None = None,
) -> dict:
    """One timing point: forward + backward (``out.backward(dout)``) of ``layer`` on a random
    ``(batch, n, d)`` input; parameter gradients included and cleared after each call."""
    nthreads = set_threads(threads)
    dt = getattr(torch, dtype)
    torch.manual_seed(seed)
    mod = build_layer(layer, d, heads=heads, window=window, kernel=kernel).to(device=device, dtype=dt)
    x, dout = make_inputs((batch, n, d), 2, dt, device, seed)
    x.requires_grad_()
    params = list(mod.parameters())

    def step() -> None:
        out = mod(x)
        out.backward(dout)
        del out
        x.grad = None
        for p in params:
            p.grad = None

    res = measure.measure_step(step, device=device, warmup=warmup, repeats=repeats, min_repeats=min_repeats,
                               target_s=target_s)
    res["params"] = sum(p.numel() for p in params)
    res["input_bytes"] = 2 * x.numel() * x.element_size()
    res["threads"] = nthreads
    res["attn_core_sha1"] = attn_core_fingerprint()
    return res


# ============================================================================ one thread for the probes
@contextlib.contextmanager
def single_thread():
    """Run tiny tensor work on one CPU thread (restored after): on a shared machine an OpenMP
    pool waiting for busy cores turns a 20 µs op into 20 ms."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(before)


# ============================================================================ fits
def _lstsq_line(xs: Sequence[float], ys: Sequence[float]) -> dict:
    """Least-squares ``y = a x + b``: slope, intercept, slope standard error, R^2, RMSE."""
    m = len(xs)
    mx, my = sum(xs) / m, sum(ys) / m
    sxx = sum((x - mx) ** 2 for x in xs)
    syy = sum((y - my) ** 2 for y in ys)
    if sxx == 0:
        return {"slope": None, "intercept": my, "stderr": None, "r2": None, "rmse": math.sqrt(syy / m)}
    a = sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / sxx
    b = my - a * mx
    ss_res = sum((y - (a * x + b)) ** 2 for x, y in zip(xs, ys))
    se = math.sqrt(ss_res / (m - 2) / sxx) if m > 2 else None
    r2 = None if syy == 0 else 1.0 - ss_res / syy
    return {"slope": a, "intercept": b, "stderr": se, "r2": r2, "rmse": math.sqrt(ss_res / m)}


def fit_power_law(xs: Iterable[float], ys: Iterable[float]) -> dict | None:
    """Exponent of ``y ~ c x^e``: the slope of the least-squares line through ``(log x, log y)``.

    Returns ``exponent``, ``stderr`` (of the slope; ``None`` with two points), ``r2``,
    ``points``, ``local_exponents`` (slopes between neighbouring points, ascending ``x``: their
    range is the spread of the exponent over the sweep), ``tail_exponent`` (the fit over the
    largest three points, where fixed per-call costs matter least) and ``x_range``.
    Non-positive or missing values are left out; ``None`` when fewer than two points remain."""
    pts = sorted((float(x), float(y)) for x, y in zip(xs, ys)
                 if x is not None and y is not None and x > 0 and y > 0 and math.isfinite(y))
    # one value per x (median of duplicates)
    by_x: dict[float, list[float]] = {}
    for x, y in pts:
        by_x.setdefault(x, []).append(y)
    pts = [(x, sorted(v)[len(v) // 2]) for x, v in sorted(by_x.items())]
    if len(pts) < 2:
        return None
    lx = [math.log(x) for x, _ in pts]
    ly = [math.log(y) for _, y in pts]
    line = _lstsq_line(lx, ly)
    local = [(ly[i + 1] - ly[i]) / (lx[i + 1] - lx[i]) for i in range(len(pts) - 1)]
    tail = _lstsq_line(lx[-3:], ly[-3:])["slope"] if len(pts) >= 3 else local[-1]
    return {
        "exponent": line["slope"], "stderr": line["stderr"], "r2": line["r2"], "points": len(pts),
        "local_exponents": local, "local_min": min(local), "local_max": max(local), "tail_exponent": tail,
        "x_range": [pts[0][0], pts[-1][0]],
    }


#: Growth models for path lengths, simplest first (ties in R^2 go to the simpler model).
GROWTH_MODELS = ("O(1)", "O(log n)", "O(n/r)", "O(n)")


def fit_growth(points: Sequence[dict], *, ratio_label: str = "O(n/r)") -> dict:
    """Fit ``y`` (``points``: dicts with ``n``, ``y`` and optionally ``base`` for ``log_base n``
    and ``reach`` for ``n / reach``) against the growth models ``1``, ``log n``, ``n/r`` and
    ``n``, each as ``y = a f + b`` by least squares. Returns ``models`` (per model: ``a``,
    ``b``, ``r2``, ``rmse``) and ``best``: constant data -> ``O(1)``; otherwise the highest R^2
    (within 1e-9, the simpler model). ``O(n/r)`` is fitted only when every point has a
    ``reach``; it is reported under ``ratio_label`` (e.g. ``O(n/k)`` for convolutions)."""
    pts = [p for p in points if p.get("y") is not None]
    if not pts:
        return {"best": None, "models": {}, "points": 0}
    ys = [float(p["y"]) for p in pts]
    feats: dict[str, list[float]] = {
        "O(log n)": [math.log(p["n"]) / math.log(p.get("base") or math.e) for p in pts],
        "O(n)": [float(p["n"]) for p in pts],
    }
    if all(p.get("reach") for p in pts):
        feats["O(n/r)"] = [p["n"] / p["reach"] for p in pts]
    models: dict[str, dict] = {}
    const = _lstsq_line([0.0] * len(ys), ys)
    models["O(1)"] = {"a": 0.0, "b": const["intercept"], "r2": None if const["rmse"] else 1.0, "rmse": const["rmse"]}
    for name, xs in feats.items():
        fit = _lstsq_line(xs, ys)
        models[name] = {"a": fit["slope"], "b": fit["intercept"], "r2": fit["r2"], "rmse": fit["rmse"]}
    if max(ys) == min(ys):
        best = "O(1)"
    else:
        ranked = [(m, models[m]["r2"]) for m in GROWTH_MODELS if m in models and models[m]["r2"] is not None]
        top = max(r for _, r in ranked)
        best = next(m for m, r in ranked if r >= top - 1e-9)
    label = {"O(n/r)": ratio_label}
    return {"best": label.get(best, best), "models": {label.get(k, k): v for k, v in models.items()},
            "points": len(pts)}


def growth_class(exponent: float | None) -> str | None:
    """A power-law exponent in ``n`` as a class: < 0.25 -> ``O(1)``, 0.75-1.25 -> ``O(n)``,
    else ``O(n^e)``."""
    if exponent is None:
        return None
    if exponent < 0.25:
        return "O(1)"
    if 0.75 <= exponent <= 1.25:
        return "O(n)"
    return f"O(n^{exponent:.2f})"


# ============================================================================ sequential operations
def critical_path_ops(output, inp) -> int | None:
    """Longest chain of autograd operations from ``inp`` (a leaf that requires grad) to
    ``output``: the number of dependent operations the forward computation needs. ``None``
    when ``output`` does not depend on ``inp``."""
    root = output.grad_fn
    if root is None:
        return None
    memo: dict[int, int | None] = {}
    keep: list[Any] = []  # hold the nodes: ids must stay unique while the walk runs
    stack: list[tuple[Any, bool]] = [(root, False)]
    while stack:
        node, ready = stack.pop()
        k = id(node)
        if k in memo:
            continue
        children = [f for f, _ in node.next_functions if f is not None]
        if not ready:
            stack.append((node, True))
            stack.extend((c, False) for c in children if id(c) not in memo)
            continue
        keep.append(node)
        if getattr(node, "variable", None) is inp:
            memo[k] = 0
            continue
        depths = [memo[id(c)] for c in children if memo.get(id(c)) is not None]
        memo[k] = 1 + max(depths) if depths else None
    return memo[id(root)]


def _tensors(obj) -> list:
    if isinstance(obj, torch.Tensor):
        return [obj]
    if isinstance(obj, (tuple, list)):
        return [t for o in obj for t in _tensors(o)]
    return []


class _StepCounter:
    """Forward hooks on the step modules: each output is tagged 1 + the largest tag among the
    module's tensor inputs (untagged = 0); ``depth`` is the largest tag seen: the longest chain
    of dependent step applications."""

    ATTR = "_attnbench_step_depth"

    def __init__(self, modules) -> None:
        self.depth = 0
        self.calls = 0
        self.handles = [m.register_forward_hook(self._hook) for m in modules]

    def _hook(self, module, inputs, output) -> None:
        d = 1 + max((getattr(t, self.ATTR, 0) for t in _tensors(inputs)), default=0)
        for t in _tensors(output):
            setattr(t, self.ATTR, d)
        self.depth = max(self.depth, d)
        self.calls += 1

    def remove(self) -> None:
        for h in self.handles:
            h.remove()


def _count_sequential(layer: str, n: int, *, width: int = 16, heads: int = 2, window: int = 32, kernel: int = 3,
                     seed: int = 0) -> dict:
    """Count the sequential operations of one ``layer`` at length ``n`` (float64, CPU, batch 1):
    ``steps`` = longest chain of dependent step applications (the layer itself for parallel
    layers; the ``LSTMCell``/``GRUCell`` of an explicit loop for recurrences) and
    ``critical_path_ops`` (:func:`critical_path_ops`). For the recurrences the fused module's
    output is compared with the loop's (``max_abs_diff_vs_fused``) and its own critical path
    is reported too: ``critical_path_ops_fused_float64`` (torch runs the recurrence as per-step
    ATen ops) and ``critical_path_ops_fused_float32`` (one opaque oneDNN kernel, as timed)."""
    torch.manual_seed(seed)
    mod = build_layer(layer, width, heads=heads, window=window, kernel=kernel).to(torch.float64)
    impl, step_modules, how = mod, [mod], "the layer is one step module"
    if layer in RNN_LAYERS:
        impl = CellLoopRNN(mod)
        step_modules = [impl.cell]
        how = f"explicit {'LSTMCell' if layer == 'lstm' else 'GRUCell'} loop sharing the fused module's weights"
    gen = torch.Generator().manual_seed(seed)
    x = torch.randn(1, n, width, generator=gen, dtype=torch.float64).requires_grad_()
    counter = _StepCounter(step_modules)
    try:
        y = impl(x)
    finally:
        counter.remove()
    res = {"n": n, "steps": counter.depth, "step_calls": counter.calls, "critical_path_ops": critical_path_ops(y, x),
           "counted_on": how}
    if layer in RNN_LAYERS:
        yf = mod(x)
        res["max_abs_diff_vs_fused"] = float((yf - y).detach().abs().max())
        res["loop_iterations"] = impl.steps
        # the fused module's own graph: per-step ATen ops in float64 on the CPU, one opaque
        # kernel (oneDNN) in float32, as timed
        res["critical_path_ops_fused_float64"] = critical_path_ops(yf, x)
        x32 = x.detach().float().requires_grad_()
        res["critical_path_ops_fused_float32"] = critical_path_ops(mod.float()(x32), x32)
    return res


# ============================================================================ path length
def expected_path_length(kind: str, n: int, param: int | None = None) -> int | None:
    """Closed-form maximum path length (hops from input 0 to output ``n - 1``) of a probe kind."""
    if n < 2:
        return 0
    if kind == "self_attention":
        return 1
    if kind == "restricted_attention":
        return math.ceil((n - 1) / param) if param else None
    if kind in RNN_LAYERS:
        return n - 1
    if kind == "conv_causal":
        return math.ceil((n - 1) / (param - 1))
    if kind == "conv_centred":
        return math.ceil((n - 1) / ((param - 1) // 2)) if param >= 3 else None
    if kind == "dilated_conv":
        hops, field = 0, 1
        while field < n:  # receptive field of l causal layers with dilations 1, k, .., k^(l-1): k^l
            hops, field = hops + 1, field * param
        return hops
    raise ValueError(f"unknown probe kind {kind!r}; valid: {', '.join(PROBE_KINDS)}")


def _reach_per_hop(kind: str, param: int | None) -> float | None:
    """Positions one hop advances (for the ``n/r`` model): r, k - 1 (causal), (k - 1)/2 (centred)."""
    if kind == "restricted_attention":
        return float(param)
    if kind == "conv_causal":
        return float(param - 1)
    if kind == "conv_centred":
        return float((param - 1) // 2)
    return None


def hop_model(kind: str, n: int, *, width: int = 8, heads: int = 2, param: int | None = None,
              seed: int = 0) -> Callable:
    """``f(x, hops) -> y`` for the probe ``kind`` (float64): ``hops`` stacked layers (built with
    seed ``seed + i`` for layer ``i``, so the stack of ``h`` layers is a prefix of the stack of
    ``h + 1``), or for ``lstm``/``gru`` the explicit cell loop with ``horizon = hops``."""
    if kind in RNN_LAYERS:
        torch.manual_seed(seed)
        loop = CellLoopRNN(FusedRNN(kind, width).to(torch.float64))

        def run_rnn(x, hops: int):
            loop.horizon = hops
            return loop(x)

        return run_rnn

    def make(i: int):
        if kind == "self_attention":
            return attn_core.MultiHeadAttention(width, heads, pattern="full")
        if kind == "restricted_attention":
            return attn_core.MultiHeadAttention(width, heads, pattern="truncated", window=param)
        if kind == "conv_causal":
            return SeqConv(width, param, causal=True)
        if kind == "conv_centred":
            return SeqConv(width, param, causal=False)
        if kind == "dilated_conv":
            return SeqConv(width, param, dilation=param ** i, causal=True)
        raise ValueError(f"unknown probe kind {kind!r}; valid: {', '.join(PROBE_KINDS)}")

    layers: list = []

    def run_stack(x, hops: int):
        while len(layers) < hops:
            torch.manual_seed(seed + len(layers))
            layers.append(make(len(layers)).to(torch.float64))
        for layer in layers[:hops]:
            x = layer(x)
        return x

    return run_stack


def probe_hops(forward: Callable, n: int, width: int, *, max_hops: int, seed: int = 0) -> dict:
    """The fewest hops ``h`` for which output ``n - 1`` of ``forward(x, h)`` depends on input 0.

    Reach at ``h`` hops: the gradient ``d (u . y[0, n-1]) / d x[0]`` (random ``u``, float64)
    is computed by autograd; ``reach`` = ``n - 1 - j`` for the smallest input position ``j``
    with a nonzero gradient row (``-1`` if none). ``h = 1, 2, 4, ...`` until the reach is
    ``n - 1``, then bisection; the result is the ``h`` with ``reach(h) = n - 1`` and
    ``reach(h - 1) < n - 1`` (``h = 0``, the identity, never reaches for ``n >= 2``).
    Returns ``hops`` (``None`` if not reached within ``max_hops``) and ``probes``
    (``[{"hops", "reach"}]`` in probe order)."""
    gen = torch.Generator().manual_seed(seed)
    x0 = torch.randn(1, n, width, generator=gen, dtype=torch.float64)
    u = torch.randn(width, generator=gen, dtype=torch.float64)
    probes: list[dict] = []
    cache: dict[int, int] = {0: 0 if n == 1 else -1}  # h = 0: identity

    def reach(h: int) -> int:
        if h not in cache:
            x = x0.clone().requires_grad_()
            y = forward(x, h)
            (g,) = torch.autograd.grad((y[0, n - 1] * u).sum(), x, allow_unused=True)
            if g is None:
                cache[h] = -1
            else:
                nz = (g[0] != 0).any(dim=-1).nonzero()
                cache[h] = -1 if nz.numel() == 0 else n - 1 - int(nz.min())
            probes.append({"hops": h, "reach": cache[h]})
        return cache[h]

    if n < 2:
        return {"hops": 0, "probes": probes}
    lo, hi = 0, 1
    while reach(hi) < n - 1:
        lo, hi = hi, hi * 2
        if lo >= max_hops:
            return {"hops": None, "probes": probes, "reason": f"input 0 does not reach output n-1 in {lo} hops"}
        hi = min(hi, max_hops)
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if reach(mid) >= n - 1:
            hi = mid
        else:
            lo = mid
    return {"hops": hi, "probes": probes}


def _probe_path_length(kind: str, n: int, *, param: int | None = None, width: int = 8, heads: int = 2,
                      seed: int = 0, max_hops: int | None = None) -> dict:
    """Measured maximum path length of a probe ``kind`` (:data:`PROBE_KINDS`) at length ``n``:
    :func:`probe_hops` on :func:`hop_model`, next to :func:`expected_path_length`."""
    fwd = hop_model(kind, n, width=width, heads=heads, param=param, seed=seed)
    res = probe_hops(fwd, n, width, max_hops=max_hops or 2 * n + 2, seed=seed)
    res.update(kind=kind, n=n, param=param, expected=expected_path_length(kind, n, param))
    res["matches"] = res["hops"] == res["expected"]
    return res


def count_sequential(layer: str, n: int, **kwargs) -> dict:
    """:func:`_count_sequential` on one CPU thread (see :func:`single_thread`)."""
    with single_thread():
        return _count_sequential(layer, n, **kwargs)


def probe_path_length(kind: str, n: int, **kwargs) -> dict:
    """:func:`_probe_path_length` on one CPU thread (see :func:`single_thread`)."""
    with single_thread():
        return _probe_path_length(kind, n, **kwargs)


def _probe_params(kind: str, pc: dict) -> list[int | None]:
    if kind == "restricted_attention":
        return list(pc["windows"])
    if kind in ("conv_causal", "conv_centred"):
        return list(pc["kernels"])
    if kind == "dilated_conv":
        return list(pc["dilated_kernels"])
    return [None]


def run_path_lengths(pc: dict, seed: int, log: Callable[[str], None] = print) -> dict:
    """Every probe of the ``path_length`` config section, then the growth fits per kind."""
    out: dict[str, Any] = {
        "method": "hops = fewest stacked layers (or, in a recurrence, state transitions) through which input 0 "
                  "reaches output n-1; reachability = nonzero d(u . y[n-1])/dx[0] by autograd in float64 "
                  "(exact zeros where no path exists); doubling then bisection over hops",
        "width": pc["width"], "heads": pc["heads"], "kinds": {},
    }
    for kind in pc["kinds"]:
        t0 = time.perf_counter()
        pts, errors = [], []
        for param in _probe_params(kind, pc):
            for n in sorted(set(pc["lengths"])):
                rec = measure.run_inline(probe_path_length, {"kind": kind, "n": n, "param": param,
                                                             "width": pc["width"], "heads": pc["heads"], "seed": seed})
                if rec["status"] != "ok":
                    errors.append(f"n={n} param={param}: {rec['status']}: {rec.get('reason')}")
                    pts.append({"n": n, "param": param, "hops": None, "expected": expected_path_length(kind, n, param),
                                "matches": False, "status": rec["status"], "reason": rec.get("reason")})
                    continue
                pts.append({k: rec[k] for k in ("n", "param", "hops", "expected", "matches", "probes")})
        growth = fit_growth(
            [{"n": p["n"], "y": p["hops"], "base": p["param"] if kind == "dilated_conv" else None,
              "reach": _reach_per_hop(kind, p["param"])} for p in pts],
            ratio_label="O(n/k)" if kind.startswith("conv") else "O(n/r)",
        )
        out["kinds"][kind] = {
            "doc": PROBE_DOC[kind], "paper": PROBE_PAPER_CLASS[kind], "points": pts, "fit": growth,
            "all_match": all(p["matches"] for p in pts), "errors": errors, "wall_s": time.perf_counter() - t0,
        }
        vals = ", ".join(f"{p['n']}{'' if p['param'] is None else '/' + str(p['param'])}:{p['hops']}" for p in pts)
        log(f"path length {kind:<21} best fit {growth['best']:<8} (paper {PROBE_PAPER_CLASS[kind]}); "
            f"n{'/param' if pts and pts[0]['param'] is not None else ''}:hops {vals}"
            + ("" if out["kinds"][kind]["all_match"] else "  [MISMATCH with the closed form]"))
    return out


def run_sequential(sc: dict, layers: Sequence[str], *, window: int, kernel: int, seed: int,
                   log: Callable[[str], None] = print) -> dict:
    """:func:`count_sequential` for every layer over ``sc["lengths"]``, with growth exponents."""
    out: dict[str, Any] = {
        "method": "steps = longest chain of dependent step-module applications (forward hooks tag each output "
                  "with 1 + the largest tag of its inputs); critical_path_ops = longest chain of autograd ops from "
                  "input to output (float64, batch 1); the fused nn.LSTM/GRU as timed (float32, oneDNN) is one "
                  "opaque autograd op (critical_path_ops_fused_float32), so recurrences are counted on an explicit "
                  "LSTMCell/GRUCell loop sharing its weights (outputs compared: max_abs_diff_vs_fused)",
        "width": sc["width"], "heads": sc["heads"], "window": window, "kernel": kernel, "layers": {},
    }
    for layer in layers:
        pts, errors = [], []
        for n in sorted(set(sc["lengths"])):
            rec = measure.run_inline(count_sequential, {"layer": layer, "n": n, "width": sc["width"],
                                                        "heads": sc["heads"], "window": window, "kernel": kernel,
                                                        "seed": seed})
            if rec["status"] != "ok":
                errors.append(f"n={n}: {rec['status']}: {rec.get('reason')}")
                continue
            rec.pop("status", None)
            rec.pop("wall_s", None)
            pts.append(rec)
        steps_fit = fit_power_law([p["n"] for p in pts], [p["steps"] for p in pts])
        ops_fit = fit_power_law([p["n"] for p in pts], [p["critical_path_ops"] for p in pts])
        entry = {
            "points": pts, "errors": errors, "paper": PAPER[LAYER_ROW[layer]]["sequential_class"],
            "steps_exponent": steps_fit["exponent"] if steps_fit else None,
            "steps_class": growth_class(steps_fit["exponent"]) if steps_fit else None,
            "critical_path_exponent": ops_fit["exponent"] if ops_fit else None,
            "critical_path_class": growth_class(ops_fit["exponent"]) if ops_fit else None,
        }
        out["layers"][layer] = entry
        vals = ", ".join(f"{p['n']}:{p['steps']}/{p['critical_path_ops']}" for p in pts)
        log(f"sequential {layer:<24} steps {entry['steps_class']}, critical path {entry['critical_path_class']} "
            f"(paper {entry['paper']}); n:steps/ops {vals}" + (f"  errors: {errors}" if errors else ""))
    return out


# ============================================================================ the sweep
_KEEP = (
    "status", "reason", "time_ms", "min_ms", "max_ms", "iqr_ms", "mean_ms", "times_ms", "repeats", "warmup_ms",
    "cpu_median_ms", "cpu_times_ms", "peak_mem_bytes", "mem_method", "input_bytes", "params", "threads",
    "attn_core_sha1", "wall_s", "process_wall_s", "address_space_limit_bytes", "load_1m_before", "traceback",
    "stderr_tail",
)


def _line(k: int, total: int, p: dict, r: dict) -> str:
    head = f"[{k:>{len(str(total))}}/{total}] {p['layer']:<24} n={p['n']:<6} d={p['d']:<5}"
    st = r["status"]
    if st == "ok":
        s = f"{head} ok    {r['time_ms']:10.2f} ms (min {r['min_ms']:.2f}, IQR {r['iqr_ms']:.2f}, n={r['repeats']}"
        s += f", cpu {r['cpu_median_ms']:.2f})" if r.get("cpu_median_ms") is not None else ")"
        return s + f"  peak +{mib(r.get('peak_mem_bytes'))}  [{r.get('process_wall_s', r.get('wall_s', 0)):.1f}s]"
    return f"{head} {st.upper():<5} {r.get('reason', '')}"


def compute_fits(points: list[dict]) -> dict:
    """Per layer: power-law fits of time and peak memory in ``n`` (the ``n`` sweep) and in ``d``
    (the ``d`` sweep), over the ``ok`` points."""
    fits: dict[str, dict] = {}
    for layer in dict.fromkeys(p["layer"] for p in points):
        f: dict[str, Any] = {}
        for sweep, var in (("n", "n"), ("d", "d")):
            ok = [p for p in points if p["layer"] == layer and sweep in p["sweeps"] and p["status"] == "ok"]
            for key, name in (("time_ms", "time"), ("peak_mem_bytes", "mem")):
                f[f"{name}_{var}"] = fit_power_law([p[var] for p in ok], [p.get(key) for p in ok])
            f[f"failed_{var}"] = [{"n": p["n"], "d": p["d"], "status": p["status"]}
                                  for p in points if p["layer"] == layer and sweep in p["sweeps"] and p["status"] != "ok"]
        fits[layer] = f
    return fits


def measured_table(doc: dict) -> list[dict]:
    """Rows of the side-by-side table: per timed layer the paper's three columns and the measured
    exponents, sequential-operation classes and best path-length fits."""
    rows = []
    seq = (doc.get("sequential_ops") or {}).get("layers") or {}
    paths = (doc.get("path_length") or {}).get("kinds") or {}
    for layer, f in (doc.get("fits") or {}).items():
        paper = PAPER[LAYER_ROW[layer]]
        s = seq.get(layer) or {}
        sp = s.get("points") or []
        row = {
            "layer": layer, "paper_row": paper["row"], "doc": LAYER_DOC.get(layer),
            "paper_complexity": paper["complexity"], "paper_exp_n": paper["exp_n"], "paper_exp_d": paper["exp_d"],
            "paper_sequential": paper["sequential"], "paper_path": paper["path"],
            "time_exp_n": f.get("time_n"), "time_exp_d": f.get("time_d"),
            "mem_exp_n": f.get("mem_n"), "mem_exp_d": f.get("mem_d"),
            "sequential_steps": {str(p["n"]): p["steps"] for p in sp},
            "sequential_class": s.get("steps_class"), "critical_path_class": s.get("critical_path_class"),
            "critical_path_ops": {str(p["n"]): p["critical_path_ops"] for p in sp},
            "path": [],
        }
        for kind in LAYER_PROBES.get(layer, ()):
            k = paths.get(kind)
            if not k:
                continue
            row["path"].append({"probe": kind, "best": k["fit"]["best"], "paper": k["paper"],
                                "all_match": k["all_match"],
                                "hops": [{"n": p["n"], "param": p["param"], "hops": p["hops"]} for p in k["points"]]})
        rows.append(row)
    return rows


def _check(name: str, value: Any, target: str, ok: bool | None, **extra: Any) -> dict:
    if isinstance(value, float):
        value = round(value, 4)
    return {"name": name, "value": value, "target": target, "pass": ok, **extra}


def compute_checks(doc: dict) -> list[dict]:
    """Structural checks (pass/fail): path-length probes equal their closed forms and their best
    fit is the paper's class; sequential steps grow as the paper says; the explicit loops equal
    the fused RNNs. Exponents next to the paper's are ``info`` (timings on a shared CPU
    include fixed per-call costs; see the table)."""
    checks: list[dict] = []
    for kind, k in ((doc.get("path_length") or {}).get("kinds") or {}).items():
        bad = [f"n={p['n']}{'' if p['param'] is None else ' param=' + str(p['param'])}: {p['hops']} != {p['expected']}"
               for p in k["points"] if not p["matches"]]
        checks.append(_check(f"path length {kind}: probe == closed form", f"{len(k['points']) - len(bad)}/{len(k['points'])}",
                             "all", not bad, note="; ".join(bad[:4]) or None))
        best, paper = k["fit"]["best"], k["paper"]
        checks.append(_check(f"path length {kind}: best fit", best, paper, best == paper))
    for layer, s in ((doc.get("sequential_ops") or {}).get("layers") or {}).items():
        if s.get("steps_class") is not None:
            checks.append(_check(f"sequential steps {layer}: growth in n", s["steps_class"], s["paper"],
                                 s["steps_class"] == s["paper"]))
        diffs = [p["max_abs_diff_vs_fused"] for p in s.get("points") or [] if "max_abs_diff_vs_fused" in p]
        if diffs:
            checks.append(_check(f"explicit {layer} loop == fused {layer} (float64)", max(diffs), "<= 1e-9",
                                 max(diffs) <= 1e-9))
    for layer, f in (doc.get("fits") or {}).items():
        paper = PAPER[LAYER_ROW[layer]]
        for var in ("n", "d"):
            fit = f.get(f"time_{var}")
            if fit is None:
                continue
            checks.append(_check(f"time exponent in {var}: {layer}", fit["exponent"], f"{paper['exp_' + var]:g} (paper)",
                                 None, tail=round(fit["tail_exponent"], 3) if fit["tail_exponent"] is not None else None))
    return checks


def format_checks(checks: list[dict]) -> str:
    if not checks:
        return "checks: none applicable"
    lines = ["checks:"]
    w = max(len(c["name"]) for c in checks)
    for c in checks:
        verdict = {True: "PASS", False: "FAIL", None: "info"}[c["pass"]]
        v = c["value"]
        vs = f"{v:.3f}" if isinstance(v, float) else str(v)
        note = f"  ({c['note']})" if c.get("note") else ""
        if c.get("tail") is not None:
            note += f"  [largest 3 points: {c['tail']:.3f}]"
        lines.append(f"  {verdict:<4}  {c['name']:<{w}}  {vs:>9}  target {c['target']}{note}")
    return "\n".join(lines)


def _fmt_exp(fit: dict | None) -> str:
    if not fit or fit.get("exponent") is None:
        return "–"
    s = f"{fit['exponent']:.2f}"
    if fit.get("stderr") is not None:
        s += f"±{fit['stderr']:.2f}"
    if fit.get("tail_exponent") is not None:
        s += f" (top {fit['tail_exponent']:.2f})"
    return s


def format_table(rows: list[dict]) -> str:
    """The measured table next to the paper's, as plain text."""
    head = ("layer", "paper", "t~n^ (paper)", "t~d^ (paper)", "mem~n^", "seq ops (paper)", "path (paper)")
    lines = []
    body = []
    for r in rows:
        path = "; ".join(f"{p['probe']} {p['best']}" for p in r["path"]) or "–"
        body.append((
            r["layer"], r["paper_row"], f"{_fmt_exp(r['time_exp_n'])} ({r['paper_exp_n']:g})",
            f"{_fmt_exp(r['time_exp_d'])} ({r['paper_exp_d']:g})", _fmt_exp(r["mem_exp_n"]),
            f"{r['sequential_class'] or '–'} ({r['paper_sequential']})", f"{path} ({r['paper_path']})",
        ))
    widths = [max(len(str(x)) for x in col) for col in zip(head, *body)]
    for row in (head, *body):
        lines.append("  ".join(str(x).ljust(w) for x, w in zip(row, widths)).rstrip())
    return "\n".join(lines)


def run_sweep(cfg: dict, out_dir: str | Path, *, log: Callable[[str], None] = print) -> dict:
    """Run the timing sweep, the sequential-operation counts and the path-length probes of
    ``cfg``; write and return the results document."""
    t_start = time.perf_counter()
    device = resolve_device(cfg["device"])
    dtype = resolve_dtype(cfg["dtype"])
    cap = resolve_mem_cap(cfg, device)
    timeout = cfg["point_timeout_s"][device]
    out_dir = Path(out_dir)
    json_path = out_dir / f"{RESULT_NAME}.json"
    png_path = out_dir / f"{RESULT_NAME}.png"
    points = plan_points(cfg, device, dtype)
    doc: dict[str, Any] = {
        "benchmark": "complexity",
        "schema_version": 1,
        "config": cfg,
        "setup": {
            "device": device, "dtype": dtype, "batch": cfg["batch"], "heads": cfg["heads"], "window": cfg["window"],
            "kernel": cfg["kernel"], "sweep_n": {"d": cfg["sweep_n"]["d"], "lengths": cfg["sweep_n"]["lengths"][device]},
            "sweep_d": {"n": cfg["sweep_d"]["n"][device], "widths": cfg["sweep_d"]["widths"][device]},
            "layers": {layer: LAYER_DOC[layer] for layer in cfg["layers"]},
            "measured": "forward + backward per call (out.backward(dout), parameter gradients included); time_ms = "
                        "median over the timed repeats after warm-up; peak_mem_bytes = peak growth over the inputs "
                        "during one more call (CUDA: max_memory_allocated; CPU: process RSS high-water mark after "
                        "malloc_trim); exponents = slope of the log-log least-squares fit ± its standard error, "
                        "'top' = the fit over the largest three points",
            "probes": "path length and sequential operations on the CPU in float64, whatever the timing device",
            "mem_cap_bytes": cap, "point_timeout_s": timeout, "isolate": cfg["isolate"], "threads": cfg["threads"],
        },
        "paper": {"source": "Vaswani et al. (2017), Attention Is All You Need, Table 1",
                  "rows": {k: {kk: v[kk] for kk in ("row", "complexity", "sequential", "path", "exp_n", "exp_d")}
                           for k, v in PAPER.items()}},
        "environment": {**measure.collect_environment(device), "attn_core_sha1": attn_core_fingerprint()},
        "points": [],
        "status": "running",
    }
    log(f"attnbench bench complexity: {len(points)} timing points on {doc['environment']['device_name']}, {dtype}; "
        f"B={cfg['batch']} heads={cfg['heads']} r={cfg['window']} k={cfg['kernel']}; per-point limit {timeout:g} s"
        + (f", memory cap {cap / (1 << 30):.1f} GiB" if cap else ""))
    log(f"results -> {json_path}")
    busy = busy_warning(doc["environment"], device)
    if busy:
        doc["warnings"] = [busy]
        log(f"warning: the {busy}: CPU timings will be noisy")
    measure.atomic_write_json(json_path, doc)

    # 1. structure first (seconds): sequential operations and path lengths
    if cfg["sequential_ops"]["enabled"]:
        doc["sequential_ops"] = run_sequential(cfg["sequential_ops"], cfg["layers"], window=cfg["window"],
                                               kernel=cfg["kernel"], seed=cfg["seed"], log=log)
        measure.atomic_write_json(json_path, doc)
    if cfg["path_length"]["enabled"]:
        doc["path_length"] = run_path_lengths(cfg["path_length"], cfg["seed"], log=log)
        measure.atomic_write_json(json_path, doc)

    # 2. timing and memory, one process per point
    failed: dict[str, tuple[str, str]] = {}
    for k, p in enumerate(points, 1):
        if "cap" in p:
            rec = {"status": "skipped", "reason": f"n={p['n']} above max_n={p['cap']} for {p['layer']} (config)"}
        else:
            # a sweep grows one size: after an oom/timeout its larger points are skipped (the
            # point shared by both sweeps belongs to the n sweep, which runs first)
            rec = run_point(p, group=f"{p['layer']}/{p['sweeps'][0]}", where=f"n={p['n']} d={p['d']}",
                            failed=failed, skip_on=("oom", "timeout"),
                            skip_after_failure=cfg["skip_larger_after_failure"], isolate=cfg["isolate"],
                            timeout_s=timeout, mem_cap_bytes=cap)
        record = point_record(p, rec, _KEEP)
        record.pop("cap", None)
        doc["points"].append(record)
        log(_line(k, len(points), p, record))
        measure.atomic_write_json(json_path, doc)

    shas = sorted({r["attn_core_sha1"] for r in doc["points"] if r.get("attn_core_sha1")})
    if len(shas) > 1:
        doc.setdefault("warnings", []).append(
            f"attn_core changed during the sweep: points measured {len(shas)} versions ({', '.join(shas)})")
    doc["fits"] = compute_fits(doc["points"])
    doc["table"] = measured_table(doc)
    finish_sweep(doc, checks=compute_checks(doc), t_start=t_start, plot=cfg["plot"], plot_fn=plot_results,
                 json_path=json_path, png_path=png_path, log=log)
    log("Table 1, measured (exponent ± standard error (slope over the largest 3 points); paper in brackets):")
    log(format_table(doc["table"]))
    log(format_checks(doc["checks"]))
    log(f"done in {doc['wall_time_s']:.1f} s: {json_path}" + (f", {png_path}" if "plot" in doc else ""))
    return doc


# ============================================================================ plot
def plot_results(doc: dict, path: str | Path) -> None:
    """3 x 2 log-log panels: time and peak memory vs ``n`` and vs ``d`` per layer (failed
    points marked x at the top, dotted guides of slope 1 and 2), path length vs ``n`` per probe,
    and the critical path (autograd ops) vs ``n`` per layer."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    pts = doc["points"]
    layers = list(dict.fromkeys(p["layer"] for p in pts)) or list((doc.get("sequential_ops") or {}).get("layers") or [])
    colors = {m: plt.cm.tab10(i % 10) for i, m in enumerate(LAYERS)}
    fig, axes = plt.subplots(3, 2, figsize=(14, 15))
    for ax, sweep, key, scale, ylabel in (
        (axes[0][0], "n", "time_ms", 1.0, "forward + backward time (ms)"),
        (axes[0][1], "d", "time_ms", 1.0, "forward + backward time (ms)"),
        (axes[1][0], "n", "peak_mem_bytes", 1 / (1 << 20), "peak memory growth (MiB)"),
        (axes[1][1], "d", "peak_mem_bytes", 1 / (1 << 20), "peak memory growth (MiB)"),
    ):
        xs_all = sorted({p[sweep] for p in pts if sweep in p["sweeps"]})
        any_fail = False
        for j, layer in enumerate(layers):
            rs = sorted((p for p in pts if p["layer"] == layer and sweep in p["sweeps"]), key=lambda p: p[sweep])
            ok = [(p[sweep], p[key] * scale) for p in rs if p["status"] == "ok" and p.get(key)]
            style = "--" if layer.endswith("_op") else "-"
            if ok:
                ax.plot(*zip(*ok), style, marker="o", ms=4, color=colors[layer], label=layer)
            for p in rs:
                if p["status"] in ("oom", "timeout", "error"):
                    any_fail = True
                    y = 0.97 - 0.03 * j
                    ax.plot([p[sweep]], [y], marker="x", ms=9, mew=2, color=colors[layer],
                            transform=ax.get_xaxis_transform(), clip_on=False)
                    ax.annotate(p["status"].upper(), (p[sweep], y), xycoords=ax.get_xaxis_transform(),
                                xytext=(5, -3), textcoords="offset points", fontsize=7, color=colors[layer])
        if xs_all:
            ax.set_xscale("log", base=2)
            ax.set_yscale("log")
            ys = [p[key] * scale for p in pts if sweep in p["sweeps"] and p["status"] == "ok" and p.get(key)]
            if ys and len(xs_all) > 1:  # guides of slope 1 and 2 through the geometric middle
                x0, x1 = xs_all[0], xs_all[-1]
                ym = math.exp(sum(math.log(y) for y in ys) / len(ys))
                xm = math.sqrt(x0 * x1)
                for slope in (1, 2):
                    ax.plot([x0, x1], [ym * (x0 / xm) ** slope, ym * (x1 / xm) ** slope], ":", color="grey", lw=1)
                    ax.annotate(f"slope {slope}", (x1, ym * (x1 / xm) ** slope), fontsize=7, color="grey")
            if any_fail:
                lo, hi = ax.get_ylim()
                ax.set_ylim(lo, hi * 6)
            ax.set_xticks(xs_all)
            ax.set_xticklabels([str(x) for x in xs_all], rotation=45)
            ax.minorticks_off()
        fixed = doc["setup"]["sweep_n"]["d"] if sweep == "n" else doc["setup"]["sweep_d"]["n"]
        ax.set_xlabel(f"sequence length n (d={fixed})" if sweep == "n" else f"width d (n={fixed})")
        ax.set_ylabel(ylabel)
        ax.grid(True, which="major", alpha=0.3)
        if layers:
            ax.legend(fontsize=7, loc="upper left")
        ax.set_title(f"{'time' if key == 'time_ms' else 'peak memory'} vs {sweep}")

    ax = axes[2][0]
    kinds = (doc.get("path_length") or {}).get("kinds") or {}
    markers = ("o", "s", "^", "v", "D", "P", "X")
    for i, (kind, k) in enumerate(kinds.items()):
        params = list(dict.fromkeys(p["param"] for p in k["points"]))
        for j, param in enumerate(params):
            ps = sorted((p for p in k["points"] if p["param"] == param and p["hops"]), key=lambda p: p["n"])
            if ps:  # marker and size per kind: identical curves (lstm, gru: n-1) stay visible
                ax.plot([p["n"] for p in ps], [p["hops"] for p in ps], ["-", "--", ":", "-."][j % 4],
                        marker=markers[i % len(markers)], ms=9 - i, lw=2.5 - 0.25 * i, mfc="none",
                        color=plt.cm.Dark2(i % 8),
                        label=f"{kind}{'' if param is None else (' r=' if 'attention' in kind else ' k=') + str(param)}"
                              f" [{k['fit']['best']}]")
    ax.set_xscale("log", base=2)
    ax.set_yscale("log", base=2)
    ax.set_xlabel("sequence length n")
    ax.set_ylabel("maximum path length (hops, measured)")
    ax.set_title("maximum path length: input 0 -> output n-1 [best fit]")
    ax.grid(True, alpha=0.3)
    if kinds:
        ax.legend(fontsize=6, ncol=2)

    ax = axes[2][1]
    seq = (doc.get("sequential_ops") or {}).get("layers") or {}
    for layer, s in seq.items():
        ps = [p for p in s["points"] if p.get("critical_path_ops")]
        if ps:
            ax.plot([p["n"] for p in ps], [p["critical_path_ops"] for p in ps], "--" if layer.endswith("_op") else "-",
                    marker="o", ms=4, color=colors.get(layer, "k"),
                    label=f"{layer} [steps {s.get('steps_class')}]")
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xlabel("sequence length n")
    ax.set_ylabel("critical path (autograd ops, input -> output)")
    ax.set_title("sequential operations [dependent steps: growth class]")
    ax.grid(True, alpha=0.3)
    if seq:
        ax.legend(fontsize=7)
    setup = doc["setup"]
    fig.suptitle(
        f"Why self-attention (Vaswani et al. 2017, Table 1) measured: {doc['environment'].get('device_name')}, "
        f"{setup['dtype']}, B={setup['batch']}, heads={setup['heads']}, r={setup['window']}, k={setup['kernel']}",
        fontsize=10,
    )
    fig.tight_layout()
    save_figure_atomic(fig, path, dpi=100)


# ============================================================================ entry point
def main(*, config: str | Path | None = None, out: str | Path | None = None, device: str | None = None,
         dtype: str | None = None, sets: list[str] | tuple[str, ...] = (),
         log: Callable[[str], None] | None = None) -> int:
    """``attnbench bench complexity``: returns the exit code (0 when the sweep ran; failed points
    and failed checks are results, not errors)."""
    return run_main("complexity", load_config, run_sweep, config=config, out=out, device=device, dtype=dtype,
                    sets=sets, log=log)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
