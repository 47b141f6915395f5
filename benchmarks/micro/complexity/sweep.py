"""Planning and running ``attnbench bench complexity``: the timing points (the ``n`` sweep, then
the ``d`` sweep; a point shared by both runs once), the point itself (run in a worker), and the
sweep: structure probes first (seconds), then the timings through the shared
:class:`benchmarks.micro.sweep.Sweep`, then fits, table and checks."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Callable

import torch

from benchmarks.micro.common import (
    KEEP_RUN,
    KEEP_TIMING,
    attn_core_fingerprint,
    make_inputs,
    mib,
    set_threads,
    status_line,
    timing_text,
)
from benchmarks.micro.complexity.config import resolve_dtype
from benchmarks.micro.complexity.layers import build_layer
from benchmarks.micro.complexity.paper import LAYER_DOC, PAPER
from benchmarks.micro.complexity.paths import run_path_lengths
from benchmarks.micro.complexity.plot import plot_results
from benchmarks.micro.complexity.sequential import run_sequential
from benchmarks.micro.complexity.tables import compute_checks, compute_fits, format_checks, format_table, measured_table
from benchmarks.micro.sweep import Sweep
from benchmarks.run import measure

__all__ = ["plan_points", "point_layer", "run_sweep"]

#: where the points run: :mod:`benchmarks.micro.complexity` re-exports them (tests patch them there)
TARGET = "benchmarks.micro.complexity"


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
                "target": f"{TARGET}:point_layer", "preload": ["torch", "attn_core"],
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


_KEEP = KEEP_TIMING + ("input_bytes", "params") + KEEP_RUN


def _line(k: int, total: int, p: dict, r: dict) -> str:
    head = f"[{k:>{len(str(total))}}/{total}] {p['layer']:<24} n={p['n']:<6} d={p['d']:<5}"
    return status_line(head, r, lambda r: timing_text(r) + f"  peak +{mib(r.get('peak_mem_bytes'))}  "
                                          f"[{r.get('process_wall_s', r.get('wall_s', 0)):.1f}s]")


def _over_cap(p: dict) -> dict | None:
    if "cap" in p:
        return {"status": "skipped", "reason": f"n={p['n']} above max_n={p['cap']} for {p['layer']} (config)"}
    return None


def run_sweep(cfg: dict, out_dir: str | Path, *, log: Callable[[str], None] = print) -> dict:
    """Run the timing sweep, the sequential-operation counts and the path-length probes of
    ``cfg``; write and return the results document."""
    sw = Sweep("complexity", cfg, out_dir, log=log)
    device = sw.device
    dtype = resolve_dtype(cfg["dtype"])
    points = plan_points(cfg, device, dtype)
    setup: dict[str, Any] = {
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
        **sw.limits(), "threads": cfg["threads"],
    }
    paper = {"source": "Vaswani et al. (2017), Attention Is All You Need, Table 1",
             "rows": {k: {kk: v[kk] for kk in ("row", "complexity", "sequential", "path", "exp_n", "exp_d")}
                      for k, v in PAPER.items()}}
    doc = sw.new_doc(setup, head={"paper": paper})
    sw.open(doc, len(points), dtype=dtype, noun="timing points",
            detail=f"B={cfg['batch']} heads={cfg['heads']} r={cfg['window']} k={cfg['kernel']}")

    # 1. structure first (seconds): sequential operations and path lengths
    if cfg["sequential_ops"]["enabled"]:
        doc["sequential_ops"] = run_sequential(cfg["sequential_ops"], cfg["layers"], window=cfg["window"],
                                               kernel=cfg["kernel"], seed=cfg["seed"], log=log)
        sw.write(doc)
    if cfg["path_length"]["enabled"]:
        doc["path_length"] = run_path_lengths(cfg["path_length"], cfg["seed"], log=log)
        sw.write(doc)

    # 2. timing and memory, one process per point; a sweep grows one size: after an oom/timeout
    # its larger points are skipped (the point shared by both sweeps belongs to the n sweep, which runs first)
    sw.run(doc, points, keep=_KEEP, line=_line, pre=_over_cap, post=lambda p, record: record.pop("cap", None),
           group=lambda p: f"{p['layer']}/{p['sweeps'][0]}", where=lambda p: f"n={p['n']} d={p['d']}")
    sw.warn_code_changed(doc, log=False)
    doc["fits"] = compute_fits(doc["points"])
    doc["table"] = measured_table(doc)
    return sw.close(doc, compute_checks(doc), plot_fn=plot_results, format_checks=format_checks,
                    summary=("Table 1, measured (exponent ± standard error (slope over the largest 3 points); "
                             "paper in brackets):", format_table(doc["table"])))
