"""Planning and running ``attnbench bench attention``: every point in run order (matmul
reference, sequences by increasing ``L``, the variants, the band-mask comparison, graphs by
increasing size, the paired timings of the time checks), then the shared sweep (:class:`benchmarks.micro.sweep.Sweep`) with the
attention-specific parts: TFLOP/s of sequence points and their fraction of the matmul rate."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Callable

from benchmarks.micro.attention.checks import compute_checks, format_checks
from benchmarks.micro.attention.config import resolve_dtype
from benchmarks.micro.attention.plot import plot_results
from benchmarks.micro.attention.encoder import plan_encoder_points
from benchmarks.micro.attention.pairs import KIND as PAIR, plan_pair_points
from benchmarks.micro.attention.points import attention_flops
from benchmarks.micro.attention.variants import KIND as VARIANT, plan_variant_points
from benchmarks.micro.common import KEEP_RUN, KEEP_TIMING, mib, status_line, timing_text
from benchmarks.micro.sweep import Sweep

__all__ = ["plan_points", "run_sweep"]

#: where the points run: :mod:`benchmarks.micro.attention` re-exports them (tests patch them there)
TARGET = "benchmarks.micro.attention"


def plan_points(cfg: dict, device: str, dtype: str) -> list[dict]:
    """Every measurement point, in run order: the matmul reference, sequence points by
    increasing ``L``, the variants, the encoder layers, the band-mask comparison, graph points
    by increasing size, then one paired point per time check (:mod:`~benchmarks.micro.attention.pairs`)."""
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
            "target": f"{TARGET}:point_matmul", "preload": ["torch"],
            "kwargs": {"size": n, "dtype": mdtype, "device": device, "seed": cfg["seed"],
                       "warmup": max(2, cfg["warmup"]), "repeats": mm["repeats"], "threads": cfg["threads"]},
        })
    seq = cfg["sequence"]
    shape = {"batch": seq["batch"], "heads": seq["heads"], "head_dim": seq["head_dim"], "causal": seq["causal"]}

    def seq_point(impl: str, L: int, window: int | None, tag: str = "sequence") -> dict:
        label = impl if window is None else f"{impl}_w{window}"
        return {
            "kind": tag, "method": label, "impl": impl, "L": L, "window": window,
            "target": f"{TARGET}:point_sequence", "preload": ["torch", "attn_core"],
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
    points += plan_encoder_points(cfg, device, common)
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
                "target": f"{TARGET}:point_graph",
                "preload": ["torch", "attn_core", "torch_geometric.nn"],
                "kwargs": {"impl": impl, "nodes": size["nodes"], "edges": size["edges"],
                           "embed_dim": g["embed_dim"], "heads": g["heads"], **common},
            })
    return points + plan_pair_points(cfg, device, common)



_KEEP = (KEEP_TIMING + ("static_bytes", "input_bytes", "params", "flops", "tflops", "tflops_best", "ours_ms", "peer_ms")
         + KEEP_RUN)


def _describe(p: dict) -> str:
    if p["kind"] == "matmul":
        return f"matmul n={p['n']} {p['matmul_dtype']}"
    if p["kind"] == "graph":
        return f"graph {p['method']:<22} N={p['N']} E={p['E']}"
    if p["kind"] == PAIR:
        size = f"N={p['N']} E={p['E']}" if "N" in p else f"L={p['L']}"
        return f"pair  {p['method']:<22} {size}"
    tag = {VARIANT: "var", "encoder": "enc"}.get(p["kind"], "seq")
    return f"{tag:<5} {p['method']:<22} L={p['L']}"



def _ok_text(p: dict, r: dict) -> str:
    if p["kind"] == PAIR:
        med = lambda xs: sorted(xs)[len(xs) // 2]  # noqa: E731
        return (f"ok    {med(r['ours_ms']):10.2f} ms vs {med(r['peer_ms']):.2f} ms (medians of {r['repeats']} "
                f"interleaved rounds)  [{r.get('process_wall_s', r.get('wall_s', 0)):.1f}s]")
    if p["kind"] == "matmul":
        return timing_text(r) + f"  {r['tflops']:.3f} TFLOP/s"
    return timing_text(r) + f"  peak +{mib(r.get('peak_mem_bytes'))}  [{r.get('process_wall_s', r.get('wall_s', 0)):.1f}s]"


def _line(k: int, n: int, p: dict, r: dict) -> str:
    return status_line(f"[{k:>{len(str(n))}}/{n}] {_describe(p):<48}", r, lambda r: _ok_text(p, r))


def _where(p: dict) -> str:
    return f"L={p['L']}" if "L" in p else (f"N={p['N']}" if "N" in p else "")


def run_sweep(cfg: dict, out_dir: str | Path, *, log: Callable[[str], None] = print) -> dict:
    """Run every point of ``cfg``; write and return the results document."""
    sw = Sweep("attention", cfg, out_dir, log=log)
    dtype = resolve_dtype(cfg["dtype"], sw.device)
    points = plan_points(cfg, sw.device, dtype)
    seq = cfg["sequence"]
    setup: dict[str, Any] = {
        "device": sw.device, "dtype": dtype,
        "sequence": {"batch": seq["batch"], "heads": seq["heads"], "head_dim": seq["head_dim"],
                     "causal": seq["causal"], "embed_dim": seq["heads"] * seq["head_dim"]},
        "graph": {"embed_dim": cfg["graph"]["embed_dim"], "heads": cfg["graph"]["heads"],
                  "head_dim": cfg["graph"]["embed_dim"] // cfg["graph"]["heads"],
                  "graph": "N nodes, E edges drawn uniformly at random (seeded), loss = output.sum()"},
        "measured": "forward + backward per call; time_ms = median over the timed repeats (after "
                    "warm-up); peak_mem_bytes = peak growth over the inputs during one more call "
                    "(gradients included; CUDA: max_memory_allocated; CPU: process RSS high-water "
                    "mark after malloc_trim; variant points on CPU: in a second worker, see "
                    "variants.CPU_MEMORY_NOTE); static_bytes = prebuilt dense masks, not in the peak",
        "time_checks": "ours / peer from a paired point: both built in one process, timed in alternating "
                       "rounds (ours_ms, peer_ms); the check's value is the geometric mean of the per-round "
                       "ratios, ci_low/ci_high the Student-t interval of the mean log ratio, exponentiated; "
                       "PASS when the whole interval is within the target, FAIL when all of it is beyond, "
                       "else INCONCLUSIVE",
        "flops": "useful FLOPs 12*B*H*P*D (P attended pairs), fwd + bwd",
        **sw.limits(),
    }
    doc = sw.new_doc(setup, tail={"matmul": None, "checks": []})
    sw.open(doc, len(points), dtype=dtype, detail=f"sequences B={seq['batch']} H={seq['heads']} D={seq['head_dim']}",
            busy_hint="; prefer a quiet machine, or --set threads=1 to avoid oversubscribed thread pools")

    def post(p: dict, record: dict) -> None:
        if p["kind"] == "sequence" and record["status"] == "ok":
            kw = p["kwargs"]
            record["flops"] = attention_flops(kw["batch"], kw["heads"], p["L"], kw["head_dim"], p["window"], kw["causal"])
            record["tflops"] = record["flops"] / (record["time_ms"] * 1e-3) / 1e12
        if p["kind"] == "matmul":
            doc["matmul"] = record

    sw.run(doc, points, keep=_KEEP, line=_line, where=_where, post=post,
           skip_on=lambda p: ("oom", "timeout") if p["kind"] in ("sequence", VARIANT) else ("timeout",))
    mm = doc["matmul"]
    if mm and mm["status"] == "ok":
        for r in doc["points"]:
            if r["kind"] == "sequence" and r.get("tflops") is not None:
                r["matmul_fraction"] = r["tflops"] / mm["tflops"]
    sw.warn_code_changed(doc)
    return sw.close(doc, compute_checks(doc["points"], growth_limit=cfg["variants"]["growth_limit"]),
                    plot_fn=plot_results, format_checks=format_checks)
