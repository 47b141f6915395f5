"""Maximum path length, measured (``attnbench bench complexity``): the fewest hops (stacked layers,
or state transitions of a recurrence) through which input 0 reaches output ``n - 1``, by
autograd in float64, next to the closed forms, fitted against the growth models."""

from __future__ import annotations

import math
import time
from typing import Any, Callable

import attn_core
import torch

from benchmarks.micro.complexity.fits import fit_growth
from benchmarks.micro.complexity.layers import CellLoopRNN, FusedRNN, SeqConv
from benchmarks.micro.complexity.paper import PROBE_DOC, PROBE_KINDS, PROBE_PAPER_CLASS, RNN_LAYERS
from benchmarks.micro.complexity.sequential import single_thread
from benchmarks.run import measure

__all__ = ["expected_path_length", "hop_model", "probe_hops", "probe_path_length", "run_path_lengths"]


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
