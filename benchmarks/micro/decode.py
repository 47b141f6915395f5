"""Decoding micro-benchmark: ``attnbench bench decode``.

The cost of generating ONE more token with a causal Transformer decoder (inference,
:class:`attn_core.TransformerDecoder`, ``step``) after a prefix of ``L`` tokens, for every
registered pattern that can decode one position at a time
(:func:`attn_core.multihead.decoding_patterns`): the key/value-cache patterns (``full``,
``truncated``, ``local_global``, ...) attend over ``L`` cached keys, so a step grows with ``L``;
the recurrent ones (``linear``, ``performer``: running sums, :class:`attn_core.Recurrence`) keep
a state of fixed size, so it should not. The peer a user would otherwise pick is
``torch.nn.TransformerDecoder``, which has no cache: it recomputes the whole prefix for every
new token (``torch_recompute``), same width, heads, layers and feed-forward.

Per point: the median step time (``measure_step``: warm-up, synchronisation, repeats) and the
bytes of the self-attention cache the step reads (every layer; the cross-attention keys and
values, the same for all, are left out). The cache at length ``L`` is built without decoding
``L`` tokens first (that would cost minutes per point on a CPU): a key/value cache gets random
keys and values of ``L - 1`` positions, the shape :meth:`MultiHeadAttention.init_decoding` grows,
then one real step appends the ``L``-th (and a rolling buffer, ``truncated``'s, drops the oldest);
a recurrent state is decoded for ``warm_tokens`` real steps (its size does not depend on
``L``) and its position count set to ``L``. A step's arithmetic depends on those shapes only.

Checks: each recurrent pattern's step time at the longest ``L`` over the shortest is at most
``flat_limit`` and its cache does not grow; full attention's cached step is faster than the
peer's recompute at ``check_length``; and, for information, the crossover: the shortest ``L``
from which each other pattern's step is at least as fast as full attention's.

Writes ``<out>/bench_decode.json`` (after every point, atomically) and ``<out>/bench_decode.png``.
"""

from __future__ import annotations

import math
import sys
from pathlib import Path
from typing import Any, Callable

from benchmarks.config import CONFIG_DIR
from benchmarks.config.schema import ConfigError, Field
from benchmarks.micro.checks import check, format_checks as _format_checks
from benchmarks.micro.common import (KEEP_RUN, KEEP_TIMING, mib, plot_over_length, save_figure_atomic, select_patterns, set_threads,
                                     status_line, sweep_fields)
from benchmarks.micro.crossover import crossover
from benchmarks.micro.sweep import Sweep, config_loader, entry_point
from benchmarks.run import measure

__all__ = ["SCHEMA", "DEFAULT_CONFIG", "PEER", "decode_patterns", "plan_points", "point_decode", "compute_checks",
           "format_checks", "plot_results", "run_sweep", "main"]

DEFAULT_CONFIG = CONFIG_DIR / "bench_decode.yaml"
PEER = "torch_recompute"  # torch.nn.TransformerDecoder over the whole prefix, no cache
#: parameters a pattern needs at this benchmark's lengths (``window`` has no default)
DEFAULT_PARAMS: dict[str, dict[str, Any]] = {"truncated": {"window": 128},
                                             "local_global": {"window": 128, "global_tokens": 16}}

SCHEMA: dict[str, Any] = {
    **sweep_fields("decode", dtypes=("float32", "bfloat16", "float16", "float64"), warmup=3, repeats=30,
                   min_repeats=5, target_point_s=3.0, point_timeout_s=300.0, unit="decoding steps",
                   skip_doc="after an oom/timeout skip larger L for that method"),
    "batch": Field("int", 8, minimum=1, doc="sequences decoded together"),
    "d_model": Field("int", 256, minimum=1),
    "num_heads": Field("int", 4, minimum=1),
    "num_layers": Field("int", 3, minimum=1),
    "dim_feedforward": Field("int", None, minimum=1, nullable=True, doc="null = 4 x d_model"),
    "source_length": Field("int", 32, minimum=1, doc="encoder positions the cross-attention reads"),
    "lengths": Field("per_device[list[int]]", {"cpu": [64, 256, 1024, 4096], "cuda": [256, 1024, 4096, 16384]},
                     minimum=1, doc="prefix lengths L (tokens already decoded)"),
    "patterns": Field("any", "all", doc="'all' (every registered decoding pattern) or a list of names"),
    "params": Field("any", {}, doc="{pattern: {param: value}} over DEFAULT_PARAMS (truncated/local_global window)"),
    "peer": Field("bool", True, doc="also time torch.nn.TransformerDecoder recomputing the prefix (no cache)"),
    "warm_tokens": Field("int", 8, minimum=1, doc="real steps that fill a recurrent state before timing"),
    "flat_limit": Field("float", 1.5, minimum=1.0,
                        doc="most step-time growth, longest over shortest L, of a recurrent pattern"),
    "check_length": Field("per_device[int]", {"cpu": 1024, "cuda": 4096}, minimum=1,
                          doc="the L full attention's cache is checked against the peer at"),
}


def decode_patterns(cfg: dict, source: str = "config") -> dict[str, dict[str, Any]]:
    """``{pattern: resolved params}``: the registered decoding patterns (a plug-in's too), or
    the listed ones, each checked (one-line ConfigError naming the valid ones)."""
    from attn_core.multihead import decoding_patterns
    from benchmarks.config.plugins import load_plugins

    load_plugins()
    every = decoding_patterns()

    def can_decode(name: str) -> None:
        if name not in every:
            raise ValueError(f"{name!r} cannot decode one token at a time; valid: {', '.join(every)}")

    return select_patterns(cfg["patterns"], cfg["params"], every=every, defaults=DEFAULT_PARAMS, check=can_decode,
                           where=source)


def _complete(cfg: dict, src: str) -> None:
    cfg["resolved_patterns"] = decode_patterns(cfg, src)
    if cfg["d_model"] % cfg["num_heads"]:
        raise ConfigError(f"{src}: d_model={cfg['d_model']} is not a multiple of num_heads={cfg['num_heads']}")


load_config = config_loader(SCHEMA, DEFAULT_CONFIG, complete=_complete, auto_dtype="float32")


# --------------------------------------------------------------------------- planning
def plan_points(cfg: dict, device: str) -> list[dict]:
    """One point per (L, method), by increasing L: the peer first, then each pattern."""
    import attn_core

    common = {k: cfg[k] for k in ("batch", "d_model", "num_heads", "num_layers", "dim_feedforward", "source_length",
                                  "dtype", "seed", "warmup", "repeats", "min_repeats", "threads", "warm_tokens")}
    common.update(device=device, target_s=cfg["target_point_s"])
    methods = ([(PEER, None, {})] if cfg["peer"] else []) + [(p, p, ps) for p, ps in cfg["resolved_patterns"].items()]
    points = []
    for L in sorted(set(cfg["lengths"][device])):
        for method, pattern, params in methods:
            cache = "none" if pattern is None else "state" if attn_core.get_pattern(pattern).recurrence else "kv"
            points.append({"kind": "decode", "method": method, "pattern": pattern, "pattern_params": params,
                           "cache": cache, "L": L, "target": "benchmarks.micro.decode:point_decode",
                           "preload": ["torch", "attn_core"],
                           "kwargs": {"pattern": pattern, "params": params, "L": L, **common}})
    return points


# --------------------------------------------------------------------------- a point (in a worker)
def _cache_at(decoder: Any, memory: Any, x: Any, L: int, *, recurrent: bool, warm_tokens: int, gen: Any) -> dict:
    """The decoder's cache after ``L`` positions (see the module docstring for how it is built)."""
    import torch

    cache = decoder.init_cache(memory)
    if recurrent:
        for _ in range(min(warm_tokens, L)):
            _, cache = decoder.step(x, cache)
        return {k: (torch.full_like(v, L) if k.endswith(".self_n") else v) for k, v in cache.items()}
    for key in [k for k in cache if k.endswith((".self_k", ".self_v"))]:
        b, h, _, d = cache[key].shape  # (B, H, 0, Dh)
        cache[key] = torch.randn(b, h, L - 1, d, generator=gen).to(cache[key])
    cache = {k: (torch.full_like(v, L - 1) if k.endswith(".self_n") else v) for k, v in cache.items()}
    return decoder.step(x, cache)[1]  # the real append of position L (and a rolling buffer's crop)


def point_decode(*, pattern: str | None, params: dict, L: int, batch: int, d_model: int, num_heads: int,
                 num_layers: int, dim_feedforward: int | None, source_length: int, dtype: str, device: str, seed: int,
                 warmup: int, repeats: int, min_repeats: int, target_s: float | None, warm_tokens: int,
                 threads: int | None = None) -> dict:
    """One decoding step at prefix length ``L``: ``TransformerDecoder.step`` of ``pattern`` from
    a cache of ``L`` positions, or (``pattern=None``) ``torch.nn.TransformerDecoder`` over all
    ``L + 1`` positions with a causal mask, keeping the last (no cache). Eval, inference mode."""
    import torch

    import attn_core
    from benchmarks.config.plugins import load_plugins
    from benchmarks.micro.common import attn_core_fingerprint

    load_plugins()  # a plug-in's pattern, in this fresh process too
    nthreads = set_threads(threads)
    dt = getattr(torch, dtype)
    ff = dim_feedforward or 4 * d_model
    torch.manual_seed(seed)
    gen = torch.Generator(device="cpu").manual_seed(seed)
    memory = torch.randn(batch, source_length, d_model, generator=gen).to(device=device, dtype=dt)  # (B, S, E)
    with torch.inference_mode():
        if pattern is None:
            layer = torch.nn.TransformerDecoderLayer(d_model, num_heads, ff, dropout=0.0, activation="gelu",
                                                     batch_first=True, norm_first=True)
            net = torch.nn.TransformerDecoder(layer, num_layers, norm=torch.nn.LayerNorm(d_model))
            net = net.to(device=device, dtype=dt).eval()
            prefix = torch.randn(batch, L + 1, d_model, generator=gen).to(device=device, dtype=dt)  # (B, L+1, E)
            mask = torch.nn.Transformer.generate_square_subsequent_mask(L + 1, device=device, dtype=dt)

            def step() -> None:
                net(prefix, memory, tgt_mask=mask, tgt_is_causal=True)[:, -1]

            cache_bytes = 0
        else:
            net = attn_core.TransformerDecoder(d_model, num_heads, num_layers, dim_feedforward=ff, dropout=0.0,
                                               pattern=pattern, pattern_params=params, max_len=L + 1)
            net = net.to(device=device, dtype=dt).eval()
            x = torch.randn(batch, 1, d_model, generator=gen).to(device=device, dtype=dt)  # (B, 1, E)
            recurrent = attn_core.get_pattern(pattern).recurrence is not None
            cache = _cache_at(net, memory, x, L, recurrent=recurrent, warm_tokens=warm_tokens, gen=gen)
            if net.cache_length(cache) != L:
                raise RuntimeError(f"built a cache of {net.cache_length(cache)} positions, wanted {L}")

            def step() -> None:
                net.step(x, cache)  # the new cache is dropped: every repeat decodes position L

            cache_bytes = sum(v.numel() * v.element_size() for k, v in cache.items() if ".self_" in k)
        res = measure.measure_step(step, device=device, warmup=warmup, repeats=repeats, min_repeats=min_repeats,
                                   target_s=target_s)
    res.update(cache_bytes=cache_bytes, threads=nthreads, attn_core_sha1=attn_core_fingerprint(),
               params=sum(p.numel() for p in net.parameters()))
    return res


# --------------------------------------------------------------------------- checks
def _ok(r: dict | None) -> bool:
    return r is not None and r["status"] == "ok" and bool(r.get("time_ms"))


def compute_checks(points: list[dict], *, flat_limit: float, check_length: int) -> list[dict]:
    """Flat recurrent steps and caches, the cached full step against the peer's recompute, and
    each pattern's crossover against full attention (info)."""
    by: dict[str, dict[int, dict]] = {}
    for r in points:
        by.setdefault(r["method"], {})[r["L"]] = r
    checks = []
    for m, rs in by.items():
        if next(iter(rs.values())).get("cache") != "state":
            continue
        lo, hi = min(rs), max(rs)
        a, b = rs[lo], rs[hi]
        if not (_ok(a) and _ok(b)):
            checks.append(check(f"{m}: step time L={hi} / L={lo}", None, f"<= {flat_limit:g}", False,
                                note=f"status {a['status']} / {b['status']}"))
            continue
        v = b["time_ms"] / a["time_ms"]
        checks.append(check(f"{m}: step time L={hi} / L={lo}", v, f"<= {flat_limit:g}", v <= flat_limit))
        checks.append(check(f"{m}: cache bytes L={hi} / L={lo}", b["cache_bytes"] / a["cache_bytes"], "== 1",
                            b["cache_bytes"] == a["cache_bytes"]))
    full, peer = by.get("full", {}).get(check_length), by.get(PEER, {}).get(check_length)
    if full is None or peer is None:
        checks.append(check(f"speedup full (kv cache) vs {PEER} @ L={check_length}", None, "> 1", None,
                            note="no full-attention or no peer point at this length (check_length, peer, patterns)"))
    else:
        if _ok(full) and _ok(peer):
            v = peer["time_ms"] / full["time_ms"]
            checks.append(check(f"speedup full (kv cache) vs {PEER} @ L={check_length}", v, "> 1", v > 1))
        else:
            checks.append(check(f"speedup full (kv cache) vs {PEER} @ L={check_length}", None, "> 1",
                                False if not _ok(full) else None, note=f"status {full['status']} / {peer['status']}"))
    for m, rs in by.items():
        if m in ("full", PEER) or "full" not in by:
            continue
        Ls = [L for L in rs if L in by["full"]]
        secs = lambda r: r["time_ms"] if _ok(r) else math.inf  # noqa: E731 - a failed point is the slowest
        cross = crossover({L: secs(rs[L]) for L in Ls}, {L: secs(by["full"][L]) for L in Ls})["from_L"]
        checks.append(check(f"{m}: crossover vs full (shortest L from which it is as fast)", cross, "info", None,
                            note=None if cross is not None else "slower than full at the longest L measured"))
    return checks


def format_checks(checks: list[dict]) -> str:
    return _format_checks(checks, empty="checks: none", precision=2)


# --------------------------------------------------------------------------- plot
def plot_results(doc: dict, path: str | Path) -> None:
    """Log-log step time and self-attention cache size vs prefix length, one line per method:
    the peer black, key/value caches solid, recurrent states dashed; an x marks a failed point."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    pts = [r for r in doc["points"] if r.get("kind") == "decode"]
    methods = list(dict.fromkeys(r["method"] for r in pts))
    colours = {m: ("black" if m == PEER else plt.cm.tab10(i % 10)) for i, m in enumerate(methods)}
    fig, axes = plt.subplots(1, 2, figsize=(13, 5))
    for ax, key, scale, ylabel in ((axes[0], "time_ms", 1.0, "one decoding step (ms, median)"),
                                   (axes[1], "cache_bytes", 1 / (1 << 20), "self-attention cache (MiB)")):
        shown = [m for m in methods if not (key == "cache_bytes" and m == PEER)]  # the peer keeps no cache
        plot_over_length(ax, pts, shown, key, scale, colours,
                         style=lambda m, r: "--" if r.get("cache") == "state" else ":" if m == PEER else "-",
                         label=lambda m, r: f"{m} ({r.get('cache')})",
                         xlabel="prefix length L (tokens already decoded)", ylabel=ylabel)
    s = doc["setup"]
    fig.suptitle(f"decoding one token: {doc['environment'].get('device_name')}, {s['dtype']}, batch {s['batch']}, "
                 f"d_model {s['d_model']}, {s['num_layers']} layers", fontsize=10)
    fig.tight_layout()
    save_figure_atomic(fig, path, dpi=110)


# --------------------------------------------------------------------------- sweep
_KEEP = KEEP_TIMING + ("cache_bytes", "params") + KEEP_RUN


def _line(k: int, n: int, p: dict, r: dict) -> str:
    return status_line(f"[{k:>{len(str(n))}}/{n}] {p['method']:<16} L={p['L']:<6}", r,
                       lambda r: f"ok    {r['time_ms']:10.2f} ms (min {r['min_ms']:.2f}, n={r['repeats']})  "
                                 f"cache {mib(r.get('cache_bytes'))}")


def run_sweep(cfg: dict, out_dir: str | Path, *, log: Callable[[str], None] = print) -> dict:
    """Run every point of ``cfg``; write and return the results document."""
    sw = Sweep("decode", cfg, out_dir, log=log)
    points = plan_points(cfg, sw.device)
    check_length = cfg["check_length"][sw.device]
    doc = sw.new_doc({
        "device": sw.device, "dtype": cfg["dtype"], "batch": cfg["batch"], "d_model": cfg["d_model"],
        "num_heads": cfg["num_heads"], "num_layers": cfg["num_layers"], "source_length": cfg["source_length"],
        "check_length": check_length, "patterns": cfg["resolved_patterns"],
        "measured": "one decoding step (inference mode) at prefix length L: attn_core TransformerDecoder.step from a "
                    f"cache of L positions, or {PEER} (torch.nn.TransformerDecoder over all L + 1 positions, causal "
                    "mask, no cache); time_ms = median over the timed repeats; cache_bytes = every layer's "
                    "self-attention cache (keys/values or recurrent state)",
        **sw.limits(),
    }, tail={"checks": []})
    sw.open(doc, len(points), dtype=cfg["dtype"])
    sw.run(doc, points, keep=_KEEP, line=_line, where=lambda p: f"L={p['L']}")
    sw.warn_code_changed(doc)
    return sw.close(doc, compute_checks(doc["points"], flat_limit=cfg["flat_limit"], check_length=check_length),
                    plot_fn=plot_results, format_checks=format_checks)


main = entry_point("decode", load_config, run_sweep)

if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
