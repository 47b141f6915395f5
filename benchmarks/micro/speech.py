"""Speech scaling micro-benchmark: ``attnbench bench speech``.

Time and peak memory of ONE training step (forward + frame-tagging cross-entropy + backward)
of every registered speech network on one sequence of ``L`` feature frames, as ``L`` grows
(500 .. 4000 frames = 5 .. 40 s of speech): full self-attention grows as ``L^2``, truncated
attention (window ``w``), the LSTM and the CNN as ``L``. The networks are the task's own
(:mod:`tasks.speech.models`, built from the registry with their default parameters plus
``model_params``), so the numbers are those of the models in the benchmark tables.

Every point runs in a fresh process (:func:`benchmarks.run.measure.run_isolated`) with a time limit
and, on CPU, a memory cap; peak memory is the growth over the inputs and parameters during one
more step after the timed ones (activations, attention buffers and gradients). Checks (the
issue's targets, at ``check_length`` frames): the best truncated preset is at least 3x faster
and needs at least 5x less peak memory than full attention.

Full attention runs through the fused SDPA kernel (flash attention on CPU and GPU), which never
stores the ``L x L`` matrix: its memory grows as ``L``, like truncated attention's. With
``materialised_reference: true`` the sweep adds ``transformer[materialised]``: the same network
with the attention probabilities materialised (``need_weights=True``, the textbook maths, as a
framework without a fused kernel runs it), and the checks compare against both, so a reader sees
how much of the memory saving the fused kernel already gives.

Writes ``<out>/bench_speech.json`` (after every point, atomically) and ``<out>/bench_speech.png``.
"""

from __future__ import annotations

import sys
from functools import partial
from pathlib import Path
from typing import Any, Callable

from benchmarks.config import CONFIG_DIR
from benchmarks.config.schema import ConfigError, Field
from benchmarks.micro.checks import check, format_checks as _format_checks
from benchmarks.micro.common import (
    attn_core_fingerprint,
    mib,
    set_threads,
    status_line,
    sweep_fields,
)
from benchmarks.micro.sweep import Sweep, config_loader, entry_point
from benchmarks.run import measure

__all__ = ["SCHEMA", "DEFAULT_CONFIG", "MATERIALISED", "RESULT_NAME", "load_config", "plan_points", "point_model",
           "run_sweep", "compute_checks", "format_checks", "plot_results", "main"]

DEFAULT_CONFIG = CONFIG_DIR / "bench_speech.yaml"
RESULT_NAME = "bench_speech"
DTYPES = ("float32", "bfloat16", "float16", "float64")
#: Targets of the issue at check_length: full time / truncated time, full memory / truncated memory.
SPEEDUP_TARGET = 3.0
MEMORY_TARGET = 5.0

SCHEMA: dict[str, Any] = {
    **sweep_fields("speech", dtypes=DTYPES, warmup=1, repeats=5, min_repeats=2, target_point_s=5.0,
                   point_timeout_s=300.0, unit="steps",
                   skip_doc="after an oom/timeout skip larger L for that model"),
    "batch": Field("int", 1, minimum=1, doc="sequences per step (time and memory are reported per sequence)"),
    "num_features": Field("int", 40, minimum=1, doc="feature frames' width (40 log-mel bands)"),
    "num_classes": Field("int", 11, minimum=2, doc="frame labels (10 digits + silence)"),
    "lengths": Field("per_device[list[int]]", {"cpu": [500, 1000, 2000, 4000], "cuda": [500, 1000, 2000, 4000, 8000]},
                     minimum=1, doc="sequence lengths in frames"),
    "models": Field("list[str]", ["transformer", "transformer_w8", "transformer_w16", "transformer_w32",
                                  "transformer_w64", "lstm", "cnn"], doc="registered speech models"),
    "model_params": Field("any", {}, doc="overrides of every model's defaults (e.g. {d_model: 64})"),
    "check_length": Field("int", 4000, minimum=1, doc="the length the targets are checked at"),
    "materialised_reference": Field("bool", True, doc="also run 'transformer' with the L x L attention "
                                    "probabilities materialised (need_weights=True): the unfused baseline"),
}

#: the method name of the materialised full-attention reference point
MATERIALISED = "transformer[materialised]"


def _complete(cfg: dict, src: str) -> None:
    """Model names are checked against the speech task's registry."""
    from tasks.common.registry import get_task

    task = get_task("speech")
    for m in cfg["models"]:
        if m not in task.models:
            raise ConfigError(f"{src}: models: unknown model {m!r}; valid: {', '.join(task.models.names())}")
    if not isinstance(cfg["model_params"], dict):
        raise ConfigError(f"{src}: model_params={cfg['model_params']!r} is invalid: expected a mapping")


load_config = config_loader(SCHEMA, DEFAULT_CONFIG, complete=_complete, auto_dtype="float32")


# --------------------------------------------------------------------------- planning
def plan_points(cfg: dict, device: str) -> list[dict]:
    """One point per (length, model), by increasing length."""
    from tasks.common.registry import get_task

    task = get_task("speech")
    common = {"dtype": cfg["dtype"], "device": device, "seed": cfg["seed"], "warmup": cfg["warmup"],
              "repeats": cfg["repeats"], "min_repeats": cfg["min_repeats"], "target_s": cfg["target_point_s"],
              "threads": cfg["threads"], "batch": cfg["batch"], "num_features": cfg["num_features"],
              "num_classes": cfg["num_classes"], "model_params": dict(cfg["model_params"])}
    points = []
    for L in sorted(set(cfg["lengths"][device])):
        for m in cfg["models"]:
            spec = task.models.get(m)
            points.append({
                "kind": "speech", "method": m, "family": spec.family, "pattern": spec.pattern,
                "window": spec.params.get("window"), "L": L,
                "target": "benchmarks.micro.speech:point_model", "preload": ["torch", "attn_core", "tasks.speech"],
                "kwargs": {"model": m, "L": L, **common},
            })
        if cfg["materialised_reference"] and "transformer" in cfg["models"]:
            spec = task.models.get("transformer")
            points.append({
                "kind": "speech", "method": MATERIALISED, "family": spec.family, "pattern": "full",
                "materialised": True, "window": None, "L": L,
                "target": "benchmarks.micro.speech:point_model", "preload": ["torch", "attn_core", "tasks.speech"],
                "kwargs": {"model": "transformer", "L": L, "materialise": True, **common},
            })
    return points


# --------------------------------------------------------------------------- a point (in a worker)
def point_model(*, model: str, L: int, batch: int, num_features: int, num_classes: int, model_params: dict,
                dtype: str, device: str, seed: int, warmup: int, repeats: int, min_repeats: int,
                target_s: float | None, threads: int | None = None, materialise: bool = False) -> dict:
    """One training step (train mode, loss = frame cross-entropy against random labels, backward)
    of ``model`` on ``batch`` random ``(L, num_features)`` sequences. ``materialise``: run the
    Transformer encoder with ``need_weights=True`` (dense ``(B, H, L, L)`` probabilities)."""
    import torch
    import torch.nn.functional as F

    from tasks.common.registry import get_task

    nthreads = set_threads(threads)
    spec = get_task("speech").models.get(model)
    info = {"form": "tag", "num_features": num_features, "num_classes": num_classes, "max_frames": L}
    torch.manual_seed(seed)
    net = spec.build(info, **{**spec.params, **model_params}).to(device=device, dtype=getattr(torch, dtype)).train()
    gen = torch.Generator(device="cpu").manual_seed(seed)
    x = torch.randn(batch, L, num_features, generator=gen).to(device=device, dtype=getattr(torch, dtype))
    y = torch.randint(0, num_classes, (batch, L), generator=gen).to(device)
    mask = torch.ones(batch, L, dtype=torch.bool, device=device)

    if materialise and not hasattr(net.encoder, "encoder"):
        raise ValueError(f"materialise=True needs a Transformer model, not {model!r}")

    def forward() -> Any:
        if materialise:  # the textbook path: (B, H, L, L) probabilities kept for backward
            return net.head(net.encoder(x, mask, need_weights=True)[0])
        return net(x, mask)

    def step() -> None:
        logits = forward()  # (B, L, C)
        F.cross_entropy(logits.flatten(0, 1).float(), y.flatten()).backward()
        del logits
        for p in net.parameters():
            p.grad = None

    res = measure.measure_step(step, device=device, warmup=warmup, repeats=repeats, min_repeats=min_repeats,
                               target_s=target_s)
    res["params"] = sum(p.numel() for p in net.parameters())
    res["threads"] = nthreads
    res["attn_core_sha1"] = attn_core_fingerprint()
    res["time_ms_per_seq"] = res["time_ms"] / batch
    res["peak_mem_bytes_per_seq"] = res["peak_mem_bytes"] / batch
    return res


# --------------------------------------------------------------------------- sweep
_KEEP = ("status", "reason", "time_ms", "min_ms", "max_ms", "iqr_ms", "times_ms", "repeats", "cpu_median_ms",
         "peak_mem_bytes", "mem_method", "time_ms_per_seq", "peak_mem_bytes_per_seq", "params", "threads",
         "attn_core_sha1", "wall_s", "process_wall_s", "load_1m_before", "traceback", "stderr_tail")


def _line(k: int, n: int, p: dict, r: dict) -> str:
    return status_line(f"[{k:>{len(str(n))}}/{n}] {p['method']:<16} L={p['L']:<6}", r,
                       lambda r: f"ok    {r['time_ms']:10.1f} ms (min {r['min_ms']:.1f}, n={r['repeats']})  "
                                 f"peak +{mib(r.get('peak_mem_bytes'))}")


def run_sweep(cfg: dict, out_dir: str | Path, *, log: Callable[[str], None] = print) -> dict:
    """Run every point of ``cfg``; write and return the results document."""
    sw = Sweep("speech", cfg, out_dir, log=log)
    points = plan_points(cfg, sw.device)
    doc = sw.new_doc({
        "device": sw.device, "dtype": cfg["dtype"], "batch": cfg["batch"], "num_features": cfg["num_features"],
        "check_length": cfg["check_length"],
        "measured": "one training step (train mode, forward + frame cross-entropy + backward) per call; "
                    "time_ms = median over the timed repeats; peak_mem_bytes = peak growth over inputs and "
                    "parameters during one more step (CUDA: max_memory_allocated; CPU: RSS high-water mark)",
        **sw.limits(),
    }, tail={"checks": []})
    sw.open(doc, len(points), dtype=cfg["dtype"])
    sw.run(doc, points, keep=_KEEP, line=_line, where=lambda p: f"L={p['L']}")
    return sw.close(doc, compute_checks(doc["points"], cfg["check_length"]), plot_fn=plot_results,
                    format_checks=format_checks)


# --------------------------------------------------------------------------- checks
_check = partial(check, digits=3)


def compute_checks(points: list[dict], check_length: int) -> list[dict]:
    """At ``check_length``: full / truncated time and peak memory for every truncated preset
    (info), then the targets for the best preset (largest ratio): speedup >= 3 and memory >= 5,
    against fused full attention (the issue's targets) and, when the sweep has it, again against
    the materialised reference. A failed reference point (oom/timeout) counts as a pass for the
    truncated presets that ran."""
    at = {r["method"]: r for r in points if r.get("L") == check_length}
    full = next((r for r in at.values() if r.get("pattern") == "full" and not r.get("materialised")), None)
    dense = next((r for r in at.values() if r.get("materialised")), None)
    trunc = [r for r in at.values() if r.get("pattern") == "truncated"]
    if full is None or not trunc:
        return [_check(f"truncated vs full attention @ L={check_length}", None, "both measured", None,
                       note="no full-attention or no truncated point at this length")]
    ok_trunc = [r for r in trunc if r["status"] == "ok"]
    checks = _versus(full, ok_trunc, check_length)
    if dense is not None:
        checks += _versus(dense, ok_trunc, check_length)
    return checks


def _versus(ref: dict, ok_trunc: list[dict], check_length: int) -> list[dict]:
    """Per-preset ratios ``ref / truncated`` (info) and the best preset's target checks."""
    checks = []
    kinds = (("time_ms", SPEEDUP_TARGET, "speedup"), ("peak_mem_bytes", MEMORY_TARGET, "memory"))
    if ref["status"] != "ok":
        note = f"{ref['method']}: {ref['status']} ({ref.get('reason', '')})"
        for key, target, name in kinds:
            checks.append(_check(f"{name} best truncated vs {ref['method']} @ L={check_length}", None, f">= {target:g}",
                                 bool(ok_trunc), note=note))
        return checks
    for key, target, name in kinds:
        ratios = {r["method"]: ref[key] / r[key] for r in ok_trunc if r.get(key)}
        for m, v in sorted(ratios.items()):
            checks.append(_check(f"{name} {m} vs {ref['method']} @ L={check_length}", v, "info", None))
        if ratios:
            best = max(ratios, key=ratios.get)
            checks.append(_check(f"{name} best truncated ({best}) vs {ref['method']} @ L={check_length}",
                                 ratios[best], f">= {target:g}", ratios[best] >= target, model=best))
        else:
            checks.append(_check(f"{name} best truncated vs {ref['method']} @ L={check_length}", None, f">= {target:g}",
                                 False, note="no truncated point ran"))
    return checks


def format_checks(checks: list[dict]) -> str:
    """The checks as the sweep prints them (:func:`benchmarks.micro.checks.format_checks`)."""
    return _format_checks(checks, empty="checks: none", precision=2)


# --------------------------------------------------------------------------- plot


def plot_results(doc: dict, path: str | Path) -> None:
    """The sweep's plot: :func:`benchmarks.report.domains.speech.plot_bench` (the report draws the
    same figure from the JSON), imported here only when the sweep closes."""
    from benchmarks.report.domains.speech import plot_bench

    plot_bench(doc, path)


# --------------------------------------------------------------------------- entry point
main = entry_point("speech", load_config, run_sweep)

if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
