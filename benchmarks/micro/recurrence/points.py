"""The points of ``attnbench bench recurrence``: the plan, one training step timed in a worker
(:func:`point_recurrence`), the checks and the sweep."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Callable

from benchmarks.micro.checks import check, format_checks as _format_checks, ratio_check
from benchmarks.micro.common import KEEP_RUN, KEEP_TIMING, mib, set_threads, status_line
from benchmarks.micro.recurrence.config import recurrence_of
from benchmarks.micro.sweep import Sweep
from benchmarks.run import measure

__all__ = ["SCANS", "PEERS", "plan_points", "point_recurrence", "compute_checks", "format_checks", "run_sweep"]

SCANS = ("scan_doubling", "scan_loop")  # the primitive, and the sequential loop it replaces
PEERS = {"torch_gru": "GRU", "torch_lstm": "LSTM"}  # torch.nn class per peer
TARGET = "benchmarks.micro.recurrence.points:point_recurrence"
#: the attention peers run bench attention's own sequence point
ATTENTION_TARGET = "benchmarks.micro.attention:point_sequence"
ATTENTION_SDPA, ATTENTION_TRUNCATED = "sdpa", "truncated"  # method names: sdpa, truncated_w<window>
F32_TARGET = "benchmarks.micro.recurrence.accuracy:point_f32_error"
KIND_TIME, KIND_F32 = "recurrence", "f32_error"


def plan_points(cfg: dict, device: str) -> list[dict]:
    """One timing point per (L, method), by increasing L: the scans, the torch.nn peers, the
    attention peers (:func:`benchmarks.micro.attention.point_sequence`, ``(B, heads, L,
    d_model / heads)``), then each recurrence; the loop only up to ``loop_max_length``. Then
    one float32-error point per scan, peer and recurrence at ``f32_error.length``."""
    common = {k: cfg[k] for k in ("batch", "d_model", "dtype", "seed", "warmup", "repeats", "min_repeats", "threads")}
    common.update(device=device, target_s=cfg["target_point_s"])
    methods = [(m, "scan", {}) for m in (SCANS if cfg["scan"] else ())]
    methods += [(m, "peer", {}) for m in (PEERS if cfg["peers"] else ())]
    att = cfg["attention"]
    attention = ([(ATTENTION_SDPA, None), (f"{ATTENTION_TRUNCATED}_w{att['window']}", att["window"])]
                 if att["enabled"] else [])
    methods += [(m, "attention", {"window": w}) for m, w in attention]
    methods += [(name, "recurrence", ps) for name, ps in cfg["resolved_recurrences"].items()]
    shape = {"batch": cfg["batch"], "heads": att["heads"], "head_dim": cfg["d_model"] // att["heads"],
             "causal": att["causal"]}
    points = []
    for L in sorted(set(cfg["lengths"][device])):
        for method, family, params in methods:
            if method == "scan_loop" and L > cfg["loop_max_length"][device]:
                continue
            p = {"kind": KIND_TIME, "method": method, "family": family, "params": params, "L": L}
            if family == "attention":
                impl = "sdpa" if params["window"] is None else "ours_truncated"
                kwargs = {**{k: v for k, v in common.items() if k != "d_model"}, **shape, "impl": impl,
                          "window": params["window"], "L": L}
                points.append({**p, "target": ATTENTION_TARGET, "preload": ["torch", "attn_core"], "kwargs": kwargs})
            else:
                points.append({**p, "target": TARGET, "preload": ["torch", "attn_core"],
                               "kwargs": {"method": method, "family": family, "params": params, "L": L, **common}})
    err = cfg["f32_error"]
    if err["enabled"]:
        for method, family, params in methods:
            if family == "attention" or params.get("backend", "pure") != "pure":  # the error point runs on the CPU
                continue
            kwargs = {"method": method, "family": family, "params": params, "L": err["length"],
                      "batch": err["batch"], "d_model": cfg["d_model"], "seed": cfg["seed"], "threads": cfg["threads"]}
            points.append({"kind": KIND_F32, "method": method, "family": family, "params": params, "L": err["length"],
                           "target": F32_TARGET, "preload": ["torch", "attn_core"], "kwargs": kwargs})
    return points


def _loop_scan(a: Any, b: Any) -> Any:
    """``h_t = a_t h_{t-1} + b_t`` one position at a time (what the doubling scan replaces)."""
    import torch

    h, out = torch.zeros_like(b[:, 0]), []
    for t in range(b.shape[1]):
        h = a[:, t] * h + b[:, t]
        out.append(h)
    return torch.stack(out, 1)


def scan_fn(method: str) -> Callable:
    """The scan of a ``scan`` row: :func:`attn_core.recurrent.linear_scan` or the loop."""
    from attn_core.recurrent import linear_scan

    return linear_scan if method == "scan_doubling" else _loop_scan


def build_layer(method: str, family: str, params: dict, d_model: int) -> tuple[Any, Callable]:
    """The module of a ``peer`` or ``recurrence`` row and its ``(B, L, d_model) -> (B, L, d_model)`` call."""
    import torch

    from attn_core.recurrent import build_recurrence

    if family == "peer":
        net = getattr(torch.nn, PEERS[method])(d_model, d_model, batch_first=True)
        return net, (lambda x: net(x)[0])
    net = build_recurrence(recurrence_of(method), d_model, **params)
    return net, net


def point_recurrence(*, method: str, family: str, params: dict, L: int, batch: int, d_model: int, dtype: str,
                     device: str, seed: int, warmup: int, repeats: int, min_repeats: int, target_s: float | None,
                     threads: int | None = None) -> dict:
    """One training step (forward, then the gradients of every input and parameter) at length
    ``L``: the scan on ``a (B, L, d_model)`` in ``(0.5, 1)`` and ``b`` normal, or a layer on
    ``x (B, L, d_model)``."""
    import torch

    from benchmarks.config.plugins import load_plugins
    from benchmarks.micro.common import attn_core_fingerprint

    load_plugins()  # a plug-in's recurrence, in this fresh process too
    nthreads = set_threads(threads)
    dt = getattr(torch, dtype)
    torch.manual_seed(seed)
    gen = torch.Generator(device="cpu").manual_seed(seed)
    x = torch.randn(batch, L, d_model, generator=gen).to(device=device, dtype=dt).requires_grad_()  # (B, L, E)
    n_params = 0
    if family == "scan":
        a = (0.5 + 0.5 * torch.rand(batch, L, d_model, generator=gen)).to(device=device, dtype=dt).requires_grad_()
        scan = scan_fn(method)
        inputs, fn = [a, x], (lambda: scan(a, x))
    else:
        net, call = build_layer(method, family, params, d_model)
        net = net.to(device=device, dtype=dt).train()
        inputs = [x, *net.parameters()]
        n_params = sum(p.numel() for p in net.parameters())
        fn = lambda: call(x)  # noqa: E731

    def step() -> None:
        out = fn()
        torch.autograd.grad(out.float().square().mean(), inputs, allow_unused=True)

    res = measure.measure_step(step, device=device, warmup=warmup, repeats=repeats, min_repeats=min_repeats,
                               target_s=target_s)
    res.update(threads=nthreads, attn_core_sha1=attn_core_fingerprint(), n_params=n_params)
    return res


def _ok(r: dict | None) -> bool:
    return r is not None and r["status"] == "ok" and bool(r.get("time_ms"))


def compute_checks(points: list[dict], *, check_length: int, linear_limit: float) -> list[dict]:
    """The doubling scan against the loop, each layer's growth per position (the peers' and the
    attention's for information), each layer against torch_gru (info). Timing points only."""
    by: dict[str, dict[int, dict]] = {}
    for r in points:
        if r.get("kind", KIND_TIME) == KIND_TIME:
            by.setdefault(r["method"], {})[r["L"]] = r
    checks = []
    at = {m: rs.get(check_length) for m, rs in by.items()}
    if "scan_doubling" in by:
        c = ratio_check(f"speedup scan_doubling vs scan_loop @ L={check_length}", at.get("scan_loop"),
                        at.get("scan_doubling"), "> 1", lambda v: v > 1)
        checks.append(c or check(f"speedup scan_doubling vs scan_loop @ L={check_length}", None, "> 1", None,
                                 note="no point of both at this length (check_length, loop_max_length)"))
    for m, rs in by.items():
        lo, hi = min(rs), max(rs)
        if m == "scan_loop" or lo == hi:
            continue
        ours = next(iter(rs.values())).get("family") in ("scan", "recurrence")  # a peer's growth is information
        name, target = f"{m}: time per position L={hi} / L={lo}", f"<= {linear_limit:g}" if ours else "info"
        if not (_ok(rs[lo]) and _ok(rs[hi])):
            checks.append(check(name, None, target, False if ours else None,
                                note=f"status {rs[lo]['status']} / {rs[hi]['status']}"))
            continue
        v = (rs[hi]["time_ms"] / hi) / (rs[lo]["time_ms"] / lo)
        checks.append(check(name, v, target, (v <= linear_limit) if ours else None))
    for m, rs in by.items():  # another scan path (backend) of a recurrence against its pure path
        base = recurrence_of(m)
        if base != m and base in by:
            c = ratio_check(f"speedup {m} vs {base} @ L={check_length}", at.get(base), at.get(m), "info",
                            lambda v: True)
            if c is not None:
                c["pass"] = None
                checks.append(c)
    for m, rs in by.items():
        if rs.get(check_length, {}).get("family") == "recurrence":
            c = ratio_check(f"{m} time / torch_gru @ L={check_length}", rs[check_length], at.get("torch_gru"),
                            "info", lambda v: True)
            if c is not None:
                c["pass"] = None
                checks.append(c)
    return checks


def format_checks(checks: list[dict]) -> str:
    return _format_checks(checks, empty="checks: none", precision=2)


_KEEP = KEEP_TIMING + ("n_params", "f32_rel_err", "f32_max_abs_err", "f64_max_abs") + KEEP_RUN


def _line(k: int, n: int, p: dict, r: dict) -> str:
    head = f"[{k:>{len(str(n))}}/{n}] {p['method']:<14} L={p['L']:<6}"
    if p["kind"] == KIND_F32:
        return status_line(head, r, lambda r: f"ok    float32 vs float64: max err / max |y| = {r['f32_rel_err']:.2e}")
    return status_line(head, r, lambda r: f"ok    {r['time_ms']:10.2f} ms (min {r['min_ms']:.2f}, n={r['repeats']})  "
                                          f"peak {mib(r.get('peak_mem_bytes'))}")


def run_sweep(cfg: dict, out_dir: str | Path, *, log: Callable[[str], None] = print) -> dict:
    """Run every point of ``cfg``; write and return the results document (with its ``table``)."""
    from benchmarks.micro.recurrence.plot import plot_results
    from benchmarks.micro.recurrence.table import DEPTH_RULE, PATH_RULE, format_table, summary_table

    sw = Sweep("recurrence", cfg, out_dir, log=log)
    points = plan_points(cfg, sw.device)
    check_length = cfg["check_length"][sw.device]
    report_length = cfg["report_length"][sw.device]
    att = cfg["attention"]
    doc = sw.new_doc({
        "device": sw.device, "dtype": cfg["dtype"], "batch": cfg["batch"], "d_model": cfg["d_model"],
        "check_length": check_length, "report_length": report_length, "recurrences": cfg["resolved_recurrences"],
        "attention": {**att, "head_dim": cfg["d_model"] // att["heads"]}, "f32_error": cfg["f32_error"],
        "measured": "one training step at length L: forward, then autograd.grad of mean(out^2) wrt the inputs and "
                    "every parameter; scan_doubling = attn_core.recurrent.linear_scan on (B, L, d_model), scan_loop = "
                    "the same recurrence one position at a time; torch_gru/torch_lstm = torch.nn.GRU/LSTM(d_model, "
                    "d_model); sdpa / truncated_w<w> = bench attention's sequence point (F.scaled_dot_product_attention"
                    " / attn_core.attention(window=w)) on q, k, v (B, heads, L, d_model / heads), out.backward(dout); "
                    "time_ms = median over the timed repeats; peak_mem_bytes = growth during one step",
        "f32_error_measured": "one forward pass at f32_error.length, float32 against float64 (the same inputs and "
                              "parameters): max |y32 - y64| / max |y64|; scans with a = 1 - 0.01 u (long memory), "
                              "layers at their default init",
        "sequential_depth_rule": DEPTH_RULE, "path_length_rule": PATH_RULE,
        **sw.limits(),
    }, tail={"table": [], "checks": []})
    sw.open(doc, len(points), dtype=cfg["dtype"])
    sw.run(doc, points, keep=_KEEP, line=_line, where=lambda p: f"L={p['L']}",
           group=lambda p: f"{p['kind']}/{p['method']}")
    sw.warn_code_changed(doc)
    checks = compute_checks(doc["points"], check_length=check_length, linear_limit=cfg["linear_limit"])
    doc["table"] = summary_table(doc["points"], report_length=report_length)
    return sw.close(doc, checks, plot_fn=plot_results, format_checks=format_checks,
                    summary=(f"per row: one training step at L={report_length}, the exponent k of time ~ L^k "
                             "(± standard error), the crossovers (L from which the row is as fast as the peer, "
                             "log-log interpolated), sequential depth and path length at that L (analytical), "
                             "float32 error:", format_table(doc["table"], report_length)))
