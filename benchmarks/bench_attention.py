"""Attention scaling micro-benchmark: ``attnbench bench attention``.

Forward + backward time and peak memory of

* sequence attention over growing length ``L`` (batch ``B``, ``H`` heads of width ``D``):
  ``ours_full`` (:func:`attn_core.attention`, full), ``sdpa`` (raw
  ``F.scaled_dot_product_attention``), ``naive`` (:func:`attn_core.reference_attention`,
  dense maths), ``ours_truncated_w{w}`` (:func:`attn_core.attention` with ``window=w``), and
  for the FlexAttention comparison (by default on CUDA only) ``sdpa_band_mask_w{w}``: SDPA
  with a dense boolean band mask of the same window;
* every registered sequence pattern next to full SDPA, when the ``variants`` section is enabled
  (:mod:`benchmarks.bench_variants`: memory growth and speed crossover checks; off by default,
  ``bench_attention_variants.yaml`` turns it on);
* graph attention on a random graph (``N`` nodes, ``E`` uniform random edges, features
  ``(N, 64)``): ``ours_graph`` (:class:`attn_core.MultiHeadAttention`, pattern ``"graph"``),
  ``pyg_transformerconv`` (``torch_geometric.nn.TransformerConv(64, 16, heads=4)``) and
  ``dense_masked`` (the same projections with dense attention over all nodes, masked by
  :func:`attn_core.graph_mask`: O(N^2), expected to run out of memory on big graphs).

Every point runs in a fresh process (:func:`benchmarks.measure.run_isolated`) with a time
limit and, on CPU, a memory cap, so out-of-memory points become ``status: "oom"`` records.
Peak memory is the growth over the inputs during one more forward + backward call after
the timed ones (gradients included; prebuilt masks are reported separately as
``static_bytes``). The 1-minute load average before each point is recorded: other
processes on the machine slow CPU points a lot (OpenMP threads oversubscribed).

Writes ``<out>/bench_attention.json`` (after every point, atomically) and
``<out>/bench_attention.png``, prints one line per point and a table of checks.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import Any, Callable

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
from benchmarks.bench_variants import KIND as VARIANT, SECTION as VARIANTS_SECTION
from benchmarks.bench_variants import plan_variant_points, variant_checks, variant_patterns
from benchmarks.schema import ConfigError, Field, Section, apply_overrides, load_yaml, validate

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

CONFIG_DIR = Path(__file__).resolve().parent / "configs"
DEFAULT_CONFIG = CONFIG_DIR / "bench_attention.yaml"
FULL_CONFIG = CONFIG_DIR / "bench_attention_full.yaml"
RESULT_NAME = "bench_attention"

SEQ_METHODS = ("ours_full", "sdpa", "naive", "ours_truncated")
GRAPH_METHODS = ("ours_graph", "pyg_transformerconv", "dense_masked")
DTYPES = ("auto", "float32", "bfloat16", "float16", "float64")

SCHEMA: dict[str, Any] = {
    **sweep_fields("attention", dtypes=DTYPES, dtype="auto", dtype_doc="auto = float32 on CPU, bfloat16 on CUDA",
                   warmup=1, repeats=5, min_repeats=2, target_point_s=10.0, point_timeout_s=300.0,
                   skip_doc="sequences: after an oom/timeout skip larger L; graphs: after a timeout"),
    "sequence": Section({
        "batch": Field("int", 1, minimum=1),
        "heads": Field("int", 4, minimum=1),
        "head_dim": Field("int", 64, minimum=1),
        "causal": Field("bool", False),
        "lengths": Field("per_device[list[int]]", [256, 512, 1024, 2048, 4096], minimum=1),
        "methods": Field("list[str]", list(SEQ_METHODS), choices=SEQ_METHODS),
        "windows": Field("list[int]", [32, 128, 512], minimum=0, doc="windows of ours_truncated"),
    }),
    "band_compare": Section({
        "devices": Field("list[str]", ["cuda"], choices=("cpu", "cuda"), doc="where to run it"),
        "lengths": Field("list[int]", [16384], minimum=1),
        "windows": Field("list[int]", [256], minimum=0),
    }, doc="ours_truncated vs SDPA with a dense band mask (the FlexAttention comparison)"),
    "graph": Section({
        "embed_dim": Field("int", 64, minimum=1),
        "heads": Field("int", 4, minimum=1),
        "sizes": Field("list[any]", [{"nodes": 2000, "edges": 20000}], doc="list of {nodes, edges}"),
        "methods": Field("list[str]", list(GRAPH_METHODS), choices=GRAPH_METHODS),
    }),
    "variants": VARIANTS_SECTION,
    "matmul": Section({
        "enabled": Field("bool", True, doc="measure a large matmul as the peak rate for TFLOP/s"),
        "size": Field("per_device[int]", {"cpu": 2048, "cuda": 8192}, minimum=16),
        "dtype": Field("str", "auto", choices=DTYPES, doc="auto = bfloat16 on CUDA, the bench dtype on CPU"),
        "repeats": Field("int", 10, minimum=1),
    }),
}

_SIZE_KEYS = ("nodes", "edges")


def _check_sizes(sizes: list, source: str) -> list[dict]:
    out = []
    for i, s in enumerate(sizes):
        where = f"graph.sizes[{i}]"
        if not isinstance(s, dict):
            raise ConfigError(f"{source}: {where}={s!r} is invalid: expected a mapping {{nodes: N, edges: E}}")
        unknown = [k for k in s if k not in _SIZE_KEYS]
        if unknown:
            raise ConfigError(f"{source}: unknown key '{where}.{unknown[0]}'; valid keys: {', '.join(_SIZE_KEYS)}")
        for k in _SIZE_KEYS:
            v = s.get(k)
            if isinstance(v, bool) or not isinstance(v, int) or v < 1:
                raise ConfigError(f"{source}: {where}.{k}={v!r} is invalid: expected a positive integer")
        out.append({"nodes": s["nodes"], "edges": s["edges"]})
    return out


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
    cfg = validate(raw, SCHEMA, source=str(path))
    cfg["graph"]["sizes"] = _check_sizes(cfg["graph"]["sizes"], str(path))
    if cfg["graph"]["embed_dim"] % cfg["graph"]["heads"]:
        raise ConfigError(f"{path}: graph.heads={cfg['graph']['heads']} must divide graph.embed_dim={cfg['graph']['embed_dim']}")
    cfg["config_path"] = str(path)
    if cfg["variants"]["enabled"]:  # unknown patterns or parameters fail before anything runs
        variant_patterns(cfg["variants"], causal=cfg["sequence"]["causal"], source=str(path))
    return cfg


# --------------------------------------------------------------------------- resolving
def resolve_dtype(name: str, device: str) -> str:
    if name == "auto":
        return "bfloat16" if device == "cuda" else "float32"
    return name


# --------------------------------------------------------------------------- planning
def plan_points(cfg: dict, device: str, dtype: str) -> list[dict]:
    """Every measurement point, in run order: the matmul reference, sequence points by
    increasing ``L``, the band-mask comparison, graph points by increasing size."""
    common = {
        "dtype": dtype, "device": device, "seed": cfg["seed"], "warmup": cfg["warmup"],
        "repeats": cfg["repeats"], "min_repeats": cfg["min_repeats"], "target_s": cfg["target_point_s"],
        "threads": cfg["threads"],
    }
    points: list[dict] = []
    mm = cfg["matmul"]
    if mm["enabled"]:
        mdtype = mm["dtype"] if mm["dtype"] != "auto" else ("bfloat16" if device == "cuda" else dtype)
        n = mm["size"][device]
        points.append({
            "kind": "matmul", "method": "matmul", "n": n, "matmul_dtype": mdtype,
            "target": "benchmarks.bench_attention:point_matmul", "preload": ["torch"],
            "kwargs": {"size": n, "dtype": mdtype, "device": device, "seed": cfg["seed"],
                       "warmup": max(2, cfg["warmup"]), "repeats": mm["repeats"], "threads": cfg["threads"]},
        })
    seq = cfg["sequence"]
    shape = {"batch": seq["batch"], "heads": seq["heads"], "head_dim": seq["head_dim"], "causal": seq["causal"]}

    def seq_point(impl: str, L: int, window: int | None, tag: str = "sequence") -> dict:
        label = impl if window is None else f"{impl}_w{window}"
        return {
            "kind": tag, "method": label, "impl": impl, "L": L, "window": window,
            "target": "benchmarks.bench_attention:point_sequence", "preload": ["torch", "attn_core"],
            "kwargs": {"impl": impl, "L": L, "window": window, **shape, **common},
        }

    planned: set[tuple[str, int]] = set()
    for L in sorted(set(seq["lengths"][device])):
        for impl in seq["methods"]:
            windows = seq["windows"] if impl == "ours_truncated" else [None]
            for w in windows:
                p = seq_point(impl, L, w)
                planned.add((p["method"], L))
                points.append(p)
    points += plan_variant_points(cfg, device, common)
    band = cfg["band_compare"]
    if device in band["devices"]:
        for L in sorted(set(band["lengths"])):
            for w in band["windows"]:
                for impl in ("ours_truncated", "sdpa_band_mask"):
                    p = seq_point(impl, L, w, tag="sequence")
                    if (p["method"], L) not in planned:
                        planned.add((p["method"], L))
                        p["band_compare"] = True
                        points.append(p)
    g = cfg["graph"]
    for size in sorted(g["sizes"], key=lambda s: (s["nodes"], s["edges"])):
        for impl in g["methods"]:
            points.append({
                "kind": "graph", "method": impl, "impl": impl, "N": size["nodes"], "E": size["edges"],
                "target": "benchmarks.bench_attention:point_graph",
                "preload": ["torch", "attn_core", "torch_geometric.nn"],
                "kwargs": {"impl": impl, "nodes": size["nodes"], "edges": size["edges"],
                           "embed_dim": g["embed_dim"], "heads": g["heads"], **common},
            })
    return points


# --------------------------------------------------------------------------- the points (run in workers)
def point_sequence(
    *, impl: str, L: int, window: int | None, batch: int, heads: int, head_dim: int, causal: bool,
    dtype: str, device: str, seed: int, warmup: int, repeats: int, min_repeats: int, target_s: float | None,
    threads: int | None = None,
) -> dict:
    """One sequence point: forward + backward of ``impl`` on random ``(B, H, L, D)`` inputs."""
    import torch
    import torch.nn.functional as F

    import attn_core

    nthreads = set_threads(threads)
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

    res = measure.measure_step(
        step, device=device, warmup=warmup, repeats=repeats, min_repeats=min_repeats, target_s=target_s
    )
    res["static_bytes"] = static_bytes
    res["input_bytes"] = 4 * q.numel() * q.element_size()
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


def point_graph(
    *, impl: str, nodes: int, edges: int, embed_dim: int, heads: int, dtype: str, device: str, seed: int,
    warmup: int, repeats: int, min_repeats: int, target_s: float | None, threads: int | None = None,
) -> dict:
    """One graph point: forward + backward (loss = output.sum()) on a random graph."""
    import torch

    import attn_core

    nthreads = set_threads(threads)
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

    res = measure.measure_step(
        step, device=device, warmup=warmup, repeats=repeats, min_repeats=min_repeats, target_s=target_s
    )
    res["static_bytes"] = static_bytes
    res["input_bytes"] = x.numel() * x.element_size() + edge_index.numel() * edge_index.element_size()
    res["params"] = sum(p.numel() for p in params)
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


# --------------------------------------------------------------------------- sweep
_KEEP = (
    "status", "reason", "time_ms", "min_ms", "max_ms", "iqr_ms", "mean_ms", "times_ms", "repeats", "warmup_ms",
    "cpu_median_ms", "cpu_times_ms",
    "peak_mem_bytes", "mem_method", "static_bytes", "input_bytes", "params", "flops", "tflops", "tflops_best",
    "threads", "attn_core_sha1", "wall_s", "process_wall_s", "address_space_limit_bytes", "load_1m_before", "traceback", "stderr_tail",
)


def _describe(p: dict) -> str:
    if p["kind"] == "matmul":
        return f"matmul n={p['n']} {p['matmul_dtype']}"
    if p["kind"] == "graph":
        return f"graph {p['method']:<22} N={p['N']} E={p['E']}"
    return f"{'var' if p['kind'] == VARIANT else 'seq':<5} {p['method']:<22} L={p['L']}"


def _line(k: int, n: int, p: dict, r: dict) -> str:
    head = f"[{k:>{len(str(n))}}/{n}] {_describe(p):<48}"
    st = r["status"]
    if st == "ok":
        s = f"{head} ok    {r['time_ms']:10.2f} ms (min {r['min_ms']:.2f}, IQR {r['iqr_ms']:.2f}, n={r['repeats']}"
        s += f", cpu {r['cpu_median_ms']:.2f})" if r.get("cpu_median_ms") is not None else ")"
        if p["kind"] == "matmul":
            return s + f"  {r['tflops']:.3f} TFLOP/s"
        return s + f"  peak +{mib(r.get('peak_mem_bytes'))}  [{r.get('process_wall_s', r.get('wall_s', 0)):.1f}s]"
    return f"{head} {st.upper():<5} {r.get('reason', '')}"


def run_sweep(
    cfg: dict,
    out_dir: str | Path,
    *,
    log: Callable[[str], None] = print,
) -> dict:
    """Run every point of ``cfg``; write and return the results document."""
    t_start = time.perf_counter()
    device = resolve_device(cfg["device"])
    dtype = resolve_dtype(cfg["dtype"], device)
    cap = resolve_mem_cap(cfg, device)
    timeout = cfg["point_timeout_s"][device]
    out_dir = Path(out_dir)
    json_path = out_dir / f"{RESULT_NAME}.json"
    png_path = out_dir / f"{RESULT_NAME}.png"
    points = plan_points(cfg, device, dtype)
    seq = cfg["sequence"]
    doc: dict[str, Any] = {
        "benchmark": "attention",
        "schema_version": 1,
        "config": cfg,
        "setup": {
            "device": device, "dtype": dtype,
            "sequence": {"batch": seq["batch"], "heads": seq["heads"], "head_dim": seq["head_dim"],
                         "causal": seq["causal"], "embed_dim": seq["heads"] * seq["head_dim"]},
            "graph": {"embed_dim": cfg["graph"]["embed_dim"], "heads": cfg["graph"]["heads"],
                      "head_dim": cfg["graph"]["embed_dim"] // cfg["graph"]["heads"],
                      "graph": "N nodes, E edges drawn uniformly at random (seeded), loss = output.sum()"},
            "measured": "forward + backward per call; time_ms = median over the timed repeats (after "
                        "warm-up); peak_mem_bytes = peak growth over the inputs during one more call "
                        "(gradients included; CUDA: max_memory_allocated; CPU: process RSS high-water "
                        "mark after malloc_trim); static_bytes = prebuilt dense masks, not in the peak",
            "flops": "useful FLOPs 12*B*H*P*D (P attended pairs), fwd + bwd",
            "mem_cap_bytes": cap, "point_timeout_s": timeout, "isolate": cfg["isolate"],
        },
        "environment": {**measure.collect_environment(device), "attn_core_sha1": attn_core_fingerprint()},
        "points": [],
        "matmul": None,
        "checks": [],
        "status": "running",
    }
    log(f"attnbench bench attention: {len(points)} points on {doc['environment']['device_name']}, "
        f"{dtype}; sequences B={seq['batch']} H={seq['heads']} D={seq['head_dim']}; "
        f"per-point limit {timeout:g} s" + (f", memory cap {cap / (1 << 30):.1f} GiB" if cap else ""))
    log(f"results -> {json_path}")
    busy = busy_warning(doc["environment"], device)
    if busy:
        doc["warnings"] = [busy]
        log(f"warning: the {busy}: CPU timings will be noisy; prefer a quiet machine, or --set threads=1 to "
            f"avoid oversubscribed thread pools")
    measure.atomic_write_json(json_path, doc)

    failed: dict[str, tuple[str, str]] = {}  # method -> (status, where)
    for k, p in enumerate(points, 1):
        where = f"L={p['L']}" if "L" in p else (f"N={p['N']}" if "N" in p else "")
        skip_on = ("oom", "timeout") if p["kind"] in ("sequence", VARIANT) else ("timeout",)
        rec = run_point(p, group=p["method"], where=where, failed=failed, skip_on=skip_on,
                        skip_after_failure=cfg["skip_larger_after_failure"], isolate=cfg["isolate"],
                        timeout_s=timeout, mem_cap_bytes=cap)
        record = point_record(p, rec, _KEEP)
        if p["kind"] == "sequence" and record["status"] == "ok":
            kw = p["kwargs"]
            record["flops"] = attention_flops(kw["batch"], kw["heads"], p["L"], kw["head_dim"], p["window"], kw["causal"])
            record["tflops"] = record["flops"] / (record["time_ms"] * 1e-3) / 1e12
        if p["kind"] == "matmul":
            doc["matmul"] = record
        doc["points"].append(record)
        log(_line(k, len(points), p, record))
        measure.atomic_write_json(json_path, doc)

    mm = doc["matmul"]
    if mm and mm["status"] == "ok":
        for r in doc["points"]:
            if r["kind"] == "sequence" and r.get("tflops") is not None:
                r["matmul_fraction"] = r["tflops"] / mm["tflops"]
    shas = sorted({r["attn_core_sha1"] for r in doc["points"] if r.get("attn_core_sha1")})
    if len(shas) > 1:
        doc.setdefault("warnings", []).append(
            f"attn_core changed during the sweep: points measured {len(shas)} versions ({', '.join(shas)})")
        log(f"warning: {doc['warnings'][-1]}")
    checks = compute_checks(doc["points"], growth_limit=cfg["variants"]["growth_limit"])
    finish_sweep(doc, checks=checks, t_start=t_start, plot=cfg["plot"], plot_fn=plot_results,
                 json_path=json_path, png_path=png_path, log=log)
    log(format_checks(doc["checks"]))
    log(f"done in {doc['wall_time_s']:.1f} s: {json_path}" + (f", {png_path}" if "plot" in doc else ""))
    return doc


# --------------------------------------------------------------------------- checks
def _index(points: list[dict]) -> dict:
    idx = {}
    for r in points:
        if r["kind"] == "sequence":
            idx[("seq", r["method"], r["L"])] = r
        elif r["kind"] == "graph":
            idx[("graph", r["method"], r["N"], r["E"])] = r
    return idx


def _check(name: str, value: Any, target: str, ok: bool | None, **extra: Any) -> dict:
    if isinstance(value, float):
        value = round(value, 4)
    return {"name": name, "value": value, "target": target, "pass": ok, **extra}


def _ratio_check(name, ours, base, target, cmp, key="time_ms") -> dict | None:
    """``ours[key] / base[key]`` against ``target`` (``cmp(value) -> bool``). A failed point of ours
    fails the check; a failed baseline (ours ok) leaves it undecided (``pass: None``)."""
    if ours is None or base is None:
        return None
    if ours["status"] != "ok":
        return _check(name, None, target, False, note=f"ours: {ours['status']} ({ours.get('reason', '')})")
    if base["status"] != "ok":
        return _check(name, None, target, None, note=f"baseline {base['method']}: {base['status']}")
    a, b = ours.get(key), base.get(key)
    if not a or not b:
        return _check(name, None, target, None, note=f"{key} is zero or missing")
    value = a / b
    extra = {}
    if key == "time_ms" and ours.get("cpu_median_ms") and base.get("cpu_median_ms"):
        extra["value_cpu_time"] = round(ours["cpu_median_ms"] / base["cpu_median_ms"], 4)  # for busy machines
    return _check(name, value, target, bool(cmp(value)), ours=a, baseline=b, **extra)


def compute_checks(points: list[dict], growth_limit: float = 2.3) -> list[dict]:
    """Targets evaluated from the measured points; checks whose points are absent are omitted
    (the variants' ones: :func:`benchmarks.bench_variants.variant_checks`)."""
    idx = _index(points)
    checks: list[dict] = []
    seq_L = sorted({r["L"] for r in points if r["kind"] == "sequence"})

    for L in seq_L:  # 1. ours_full is SDPA plus (almost) nothing
        if L >= 1024:
            c = _ratio_check(f"time ours_full / sdpa @ L={L}", idx.get(("seq", "ours_full", L)),
                             idx.get(("seq", "sdpa", L)), "<= 1.10", lambda v: v <= 1.10)
            if c:
                checks.append(c)
    # 2. truncated is faster than full at long L
    full, trunc = idx.get(("seq", "ours_full", 8192)), idx.get(("seq", "ours_truncated_w128", 8192))
    if full is not None and trunc is not None:
        if trunc["status"] != "ok":
            checks.append(_check("speedup ours_truncated_w128 vs ours_full @ L=8192", None, ">= 5", False,
                                 note=f"ours_truncated_w128: {trunc['status']}"))
        elif full["status"] != "ok":
            checks.append(_check("speedup ours_truncated_w128 vs ours_full @ L=8192", None, ">= 5", None,
                                 note=f"ours_full: {full['status']} (truncated ran)"))
        else:
            s = full["time_ms"] / trunc["time_ms"]
            extra = {}
            if full.get("cpu_median_ms") and trunc.get("cpu_median_ms"):
                extra["value_cpu_time"] = round(full["cpu_median_ms"] / trunc["cpu_median_ms"], 4)
            checks.append(_check("speedup ours_truncated_w128 vs ours_full @ L=8192", s, ">= 5", s >= 5,
                                 ours=trunc["time_ms"], baseline=full["time_ms"], **extra))
    # 3. memory grows linearly for truncated (ratio ~2 per doubling), info for full
    for method, target in (("ours_truncated_w128", "<= 2.3"), ("ours_full", None)):
        for L in seq_L:
            if L < 2048 or ("seq", method, 2 * L) not in idx or ("seq", method, L) not in idx:
                continue
            a, b = idx[("seq", method, 2 * L)], idx[("seq", method, L)]
            name = f"peak mem {method} L={2 * L} / L={L}"
            if a["status"] != "ok" or b["status"] != "ok":
                checks.append(_check(name, None, target or "info", False if target else None,
                                     note=f"status {b['status']} / {a['status']}"))
                continue
            if not b.get("peak_mem_bytes"):
                checks.append(_check(name, None, target or "info", None, note="zero peak at the smaller L"))
                continue
            v = a["peak_mem_bytes"] / b["peak_mem_bytes"]
            checks.append(_check(name, v, target or "info", (v <= 2.3) if target else None,
                                 ours=a["peak_mem_bytes"], baseline=b["peak_mem_bytes"]))
    # 4. graph at the largest size
    sizes = sorted({(r["N"], r["E"]) for r in points if r["kind"] == "graph"})
    if sizes:
        N, E = sizes[-1]
        ours, pyg = idx.get(("graph", "ours_graph", N, E)), idx.get(("graph", "pyg_transformerconv", N, E))
        c = _ratio_check(f"time ours_graph / pyg_transformerconv @ N={N} E={E}", ours, pyg, "<= 1.0",
                         lambda v: v <= 1.0)
        if c:
            checks.append(c)
        c = _ratio_check(f"peak mem ours_graph / pyg_transformerconv @ N={N} E={E}", ours, pyg, "<= 0.6",
                         lambda v: v <= 0.6, key="peak_mem_bytes")
        if c:
            checks.append(c)
        dense = idx.get(("graph", "dense_masked", N, E))
        if dense is not None:
            st = dense["status"]
            oom = st == "oom" or (st == "skipped" and dense.get("skipped_because") == "oom")
            if oom:
                checks.append(_check(f"dense_masked status @ N={N} E={E}", st, "oom (expected)", True))
            elif st == "ok":
                checks.append(_check(f"dense_masked status @ N={N} E={E}", st, "oom (expected)", None,
                                     note="dense attention fit in memory at this size; the OOM is expected "
                                          "for large graphs (full sweep: N=200k)"))
            else:
                checks.append(_check(f"dense_masked status @ N={N} E={E}", st, "oom (expected)", False,
                                     note=dense.get("reason")))
    return checks + variant_checks(points, growth_limit)


def format_checks(checks: list[dict]) -> str:
    if not checks:
        return "checks: none applicable to this sweep"
    lines = ["checks:"]
    w = max(len(c["name"]) for c in checks)
    for c in checks:
        verdict = {True: "PASS", False: "FAIL", None: "info"}[c["pass"]]
        v = c["value"]
        vs = f"{v:.3f}" if isinstance(v, float) else str(v)
        note = f"  ({c['note']})" if c.get("note") else ""
        if c.get("value_cpu_time") is not None:
            note += f"  [cpu-time ratio {c['value_cpu_time']:.3f}]"
        lines.append(f"  {verdict:<4}  {c['name']:<{w}}  {vs:>8}  target {c['target']}{note}")
    return "\n".join(lines)


# --------------------------------------------------------------------------- plot
def plot_results(doc: dict, path: str | Path) -> None:
    """Log-log time and peak memory vs L per method (failures marked with x at the top),
    and bar charts of the graph comparison."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    pts = doc["points"]
    seq = [r for r in pts if r["kind"] in ("sequence", VARIANT)]
    graph = [r for r in pts if r["kind"] == "graph"]
    fig, axes = plt.subplots(2, 2, figsize=(14, 10))
    (ax_t, ax_m), (ax_gt, ax_gm) = axes
    methods = list(dict.fromkeys(r["method"] for r in seq))
    colors = {m: plt.cm.tab10(i % 10) for i, m in enumerate(methods)}
    all_L = sorted({r["L"] for r in seq})
    for ax, key, scale, ylabel in (
        (ax_t, "time_ms", 1.0, "forward + backward time (ms)"),
        (ax_m, "peak_mem_bytes", 1 / (1 << 20), "peak memory growth (MiB)"),
    ):
        for j, m in enumerate(methods):
            rs = sorted((r for r in seq if r["method"] == m), key=lambda r: r["L"])
            ok = [(r["L"], r[key] * scale) for r in rs if r["status"] == "ok" and r.get(key)]
            style = "--" if m.startswith("ours_truncated") else (":" if m.startswith("sdpa_band") else
                                                                 "-." if m.startswith("variant_") else "-")
            if ok:
                ax.plot(*zip(*ok), style, marker="o", ms=4, color=colors[m], label=m)
            for r in rs:
                if r["status"] in ("oom", "timeout", "error"):
                    y = 0.97 - 0.035 * j
                    ax.plot([r["L"]], [y], marker="x", ms=9, mew=2, color=colors[m],
                            transform=ax.get_xaxis_transform(), clip_on=False)
                    ax.annotate(r["status"].upper(), (r["L"], y), xycoords=ax.get_xaxis_transform(),
                                xytext=(5, -3), textcoords="offset points", fontsize=7, color=colors[m])
        if all_L:
            ax.set_xscale("log", base=2)
            ax.set_yscale("log")
            if any(r["status"] in ("oom", "timeout", "error") for r in seq):
                lo, hi = ax.get_ylim()
                ax.set_ylim(lo, hi * 6)  # headroom for the failure marks at the top
            ax.set_xticks(all_L)
            ax.set_xticklabels([str(L) for L in all_L], rotation=45)
            ax.minorticks_off()
            ax.set_xlim(all_L[0] / 1.3, all_L[-1] * 1.3)
        ax.set_xlabel("sequence length L")
        ax.set_ylabel(ylabel)
        ax.grid(True, which="major", alpha=0.3)
        if methods:
            ax.legend(fontsize=8, loc="lower right")
    ax_t.set_title("time vs L (x at the top = OOM/timeout)")
    ax_m.set_title("peak memory vs L")

    sizes = sorted({(r["N"], r["E"]) for r in graph})
    gmethods = list(dict.fromkeys(r["method"] for r in graph))
    width = 0.8 / max(1, len(gmethods))
    for ax, key, scale, ylabel in (
        (ax_gt, "time_ms", 1.0, "forward + backward time (ms)"),
        (ax_gm, "peak_mem_bytes", 1 / (1 << 20), "peak memory growth (MiB)"),
    ):
        for j, m in enumerate(gmethods):
            for i, (N, E) in enumerate(sizes):
                r = next((r for r in graph if r["method"] == m and (r["N"], r["E"]) == (N, E)), None)
                if r is None:
                    continue
                x = i + (j - (len(gmethods) - 1) / 2) * width
                if r["status"] == "ok" and r.get(key):
                    ax.bar(x, r[key] * scale, width, color=plt.cm.Set2(j), label=m if i == 0 else None)
                else:
                    ax.bar(x, 0, width, color=plt.cm.Set2(j), label=m if i == 0 else None)
                    ax.text(x, 0.02, r["status"].upper(), transform=ax.get_xaxis_transform(), ha="center",
                            va="bottom", rotation=90, fontsize=8, color="crimson")
        ax.set_xticks(range(len(sizes)))
        ax.set_xticklabels([f"N={N:,}\nE={E:,}" for N, E in sizes])
        ax.set_yscale("log")
        ax.set_ylabel(ylabel)
        ax.grid(True, axis="y", alpha=0.3)
        if gmethods:
            ax.legend(fontsize=8)
    ax_gt.set_title("graph attention: time")
    ax_gm.set_title("graph attention: peak memory")
    setup = doc["setup"]
    s = setup["sequence"]
    fig.suptitle(
        f"attention scaling, fwd+bwd: {doc['environment'].get('device_name')}, {setup['dtype']}; "
        f"sequences B={s['batch']} H={s['heads']} D={s['head_dim']}; graphs E={setup['graph']['embed_dim']} "
        f"H={setup['graph']['heads']}",
        fontsize=10,
    )
    fig.tight_layout()
    save_figure_atomic(fig, path, dpi=110)


# --------------------------------------------------------------------------- entry point
def main(*, config: str | Path | None = None, out: str | Path | None = None, device: str | None = None,
         dtype: str | None = None, sets: list[str] | tuple[str, ...] = (),
         log: Callable[[str], None] | None = None) -> int:
    """``attnbench bench attention``: returns the exit code (0 when the sweep ran; failed points
    and failed checks are results, not errors)."""
    return run_main("attention", load_config, run_sweep, config=config, out=out, device=device, dtype=dtype,
                    sets=sets, log=log)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
