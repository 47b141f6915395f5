"""The points of ``attnbench bench recurrence``: the plan, one training step timed in a worker
(:func:`point_recurrence`), the checks and the sweep."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Callable

from benchmarks.micro.checks import check, format_checks as _format_checks, ratio_check
from benchmarks.micro.common import KEEP_RUN, KEEP_TIMING, mib, set_threads, status_line
from benchmarks.micro.sweep import Sweep
from benchmarks.run import measure

__all__ = ["SCANS", "PEERS", "plan_points", "point_recurrence", "compute_checks", "format_checks", "run_sweep"]

SCANS = ("scan_doubling", "scan_loop")  # the primitive, and the sequential loop it replaces
PEERS = {"torch_gru": "GRU", "torch_lstm": "LSTM"}  # torch.nn class per peer
TARGET = "benchmarks.micro.recurrence.points:point_recurrence"


def plan_points(cfg: dict, device: str) -> list[dict]:
    """One point per (L, method), by increasing L: the scans, the peers, then each recurrence;
    the loop only up to ``loop_max_length``."""
    common = {k: cfg[k] for k in ("batch", "d_model", "dtype", "seed", "warmup", "repeats", "min_repeats", "threads")}
    common.update(device=device, target_s=cfg["target_point_s"])
    methods = [(m, "scan", {}) for m in (SCANS if cfg["scan"] else ())]
    methods += [(m, "peer", {}) for m in (PEERS if cfg["peers"] else ())]
    methods += [(name, "recurrence", ps) for name, ps in cfg["resolved_recurrences"].items()]
    points = []
    for L in sorted(set(cfg["lengths"][device])):
        for method, family, params in methods:
            if method == "scan_loop" and L > cfg["loop_max_length"][device]:
                continue
            points.append({"kind": "recurrence", "method": method, "family": family, "params": params, "L": L,
                           "target": TARGET, "preload": ["torch", "attn_core"],
                           "kwargs": {"method": method, "family": family, "params": params, "L": L, **common}})
    return points


def _loop_scan(a: Any, b: Any) -> Any:
    """``h_t = a_t h_{t-1} + b_t`` one position at a time (what the doubling scan replaces)."""
    import torch

    h, out = torch.zeros_like(b[:, 0]), []
    for t in range(b.shape[1]):
        h = a[:, t] * h + b[:, t]
        out.append(h)
    return torch.stack(out, 1)


def point_recurrence(*, method: str, family: str, params: dict, L: int, batch: int, d_model: int, dtype: str,
                     device: str, seed: int, warmup: int, repeats: int, min_repeats: int, target_s: float | None,
                     threads: int | None = None) -> dict:
    """One training step (forward, then the gradients of every input and parameter) at length
    ``L``: the scan on ``a (B, L, d_model)`` in ``(0.5, 1)`` and ``b`` normal, or a layer on
    ``x (B, L, d_model)``."""
    import torch

    from attn_core.recurrent import build_recurrence, linear_scan
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
        scan = linear_scan if method == "scan_doubling" else _loop_scan
        inputs, fn = [a, x], (lambda: scan(a, x))
    else:
        if family == "peer":
            net = getattr(torch.nn, PEERS[method])(d_model, d_model, batch_first=True)
        else:
            net = build_recurrence(method, d_model, **params)
        net = net.to(device=device, dtype=dt).train()
        inputs = [x, *net.parameters()]
        n_params = sum(p.numel() for p in net.parameters())
        fn = (lambda: net(x)[0]) if family == "peer" else (lambda: net(x))

    def step() -> None:
        out = fn()
        torch.autograd.grad(out.float().square().mean(), inputs, allow_unused=True)

    res = measure.measure_step(step, device=device, warmup=warmup, repeats=repeats, min_repeats=min_repeats,
                               target_s=target_s)
    res.update(threads=nthreads, attn_core_sha1=attn_core_fingerprint(), params=n_params)
    return res


def _ok(r: dict | None) -> bool:
    return r is not None and r["status"] == "ok" and bool(r.get("time_ms"))


def compute_checks(points: list[dict], *, check_length: int, linear_limit: float) -> list[dict]:
    """The doubling scan against the loop, each layer's growth per position, each layer against
    torch_gru (info)."""
    by: dict[str, dict[int, dict]] = {}
    for r in points:
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
        ours = next(iter(rs.values())).get("family") != "peer"  # a peer's growth is information
        name, target = f"{m}: time per position L={hi} / L={lo}", f"<= {linear_limit:g}" if ours else "info"
        if not (_ok(rs[lo]) and _ok(rs[hi])):
            checks.append(check(name, None, target, False if ours else None,
                                note=f"status {rs[lo]['status']} / {rs[hi]['status']}"))
            continue
        v = (rs[hi]["time_ms"] / hi) / (rs[lo]["time_ms"] / lo)
        checks.append(check(name, v, target, (v <= linear_limit) if ours else None))
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


_KEEP = KEEP_TIMING + ("params",) + KEEP_RUN


def _line(k: int, n: int, p: dict, r: dict) -> str:
    return status_line(f"[{k:>{len(str(n))}}/{n}] {p['method']:<14} L={p['L']:<6}", r,
                       lambda r: f"ok    {r['time_ms']:10.2f} ms (min {r['min_ms']:.2f}, n={r['repeats']})  "
                                 f"peak {mib(r.get('peak_mem_bytes'))}")


def run_sweep(cfg: dict, out_dir: str | Path, *, log: Callable[[str], None] = print) -> dict:
    """Run every point of ``cfg``; write and return the results document."""
    from benchmarks.micro.recurrence.plot import plot_results

    sw = Sweep("recurrence", cfg, out_dir, log=log)
    points = plan_points(cfg, sw.device)
    check_length = cfg["check_length"][sw.device]
    doc = sw.new_doc({
        "device": sw.device, "dtype": cfg["dtype"], "batch": cfg["batch"], "d_model": cfg["d_model"],
        "check_length": check_length, "recurrences": cfg["resolved_recurrences"],
        "measured": "one training step at length L: forward, then autograd.grad of mean(out^2) wrt the inputs and "
                    "every parameter; scan_doubling = attn_core.recurrent.linear_scan on (B, L, d_model), scan_loop = "
                    "the same recurrence one position at a time; torch_gru/torch_lstm = torch.nn.GRU/LSTM(d_model, "
                    "d_model); time_ms = median over the timed repeats; peak_mem_bytes = growth during one step",
        **sw.limits(),
    }, tail={"checks": []})
    sw.open(doc, len(points), dtype=cfg["dtype"])
    sw.run(doc, points, keep=_KEEP, line=_line, where=lambda p: f"L={p['L']}")
    sw.warn_code_changed(doc)
    checks = compute_checks(doc["points"], check_length=check_length, linear_limit=cfg["linear_limit"])
    return sw.close(doc, checks, plot_fn=plot_results, format_checks=format_checks)
