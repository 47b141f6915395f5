"""Pieces shared by the micro-benchmarks (``attnbench bench attention``, ``... complexity``):
device and memory-cap resolution, the per-point helpers that run inside the isolated worker
(thread count, seeded inputs, which attn_core version was measured), the step that runs one
point or skips it after a smaller size already failed, the config fields every benchmark has
and the printed point lines. The flow around them is :mod:`benchmarks.micro.sweep`; the checks
:mod:`benchmarks.micro.checks`.

Torch is imported lazily: this module is safe to import anywhere (no CUDA call unless a
config asks for ``cuda``).
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path
from typing import Any, Callable, Iterable, Sequence

from benchmarks.config.schema import ConfigError
from benchmarks.run import measure
from tasks.common.io import write_atomic

__all__ = [
    "resolve_device",
    "resolve_mem_cap",
    "set_threads",
    "make_inputs",
    "attn_core_fingerprint",
    "busy_warning",
    "runnable_others",
    "run_point",
    "point_record",
    "mib",
    "save_figure_atomic",
    "sweep_fields",
    "select_patterns",
    "KEEP_TIMING",
    "KEEP_RUN",
    "timing_text",
    "status_line",
]


# --------------------------------------------------------------------------- resolving
def resolve_device(name: str) -> str:
    """``auto`` -> ``cuda`` when available, else ``cpu``; ``cuda`` without a GPU is a config error."""
    import torch

    if name == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    if name == "cuda" and not torch.cuda.is_available():
        raise ConfigError("device 'cuda' was asked for but torch.cuda.is_available() is False; use --device cpu")
    return name


def resolve_mem_cap(cfg: dict, device: str) -> int | None:
    """Bytes a CPU point may grow by (None on CUDA: device OOM errors are clean there), from the
    config keys ``isolate``, ``mem_cap_gb`` and ``mem_cap_fraction``."""
    if device != "cpu" or not cfg["isolate"]:
        return None
    if cfg["mem_cap_gb"] is not None:
        return int(cfg["mem_cap_gb"] * (1 << 30))
    avail = measure.available_memory_bytes()
    return int(avail * cfg["mem_cap_fraction"]) if avail else None


# --------------------------------------------------------------------------- inside a point
def set_threads(threads: int | None) -> int:
    """Set torch's CPU thread count (``None``: leave torch's default); return the count in use."""
    import torch

    if threads:
        torch.set_num_threads(threads)
    return torch.get_num_threads()


def make_inputs(shape, n: int, dtype, device, seed: int) -> list:
    """``n`` standard-normal tensors of ``shape``, drawn on the CPU from one seeded generator
    (the same values on every device), then moved to ``device``/``dtype``."""
    import torch

    gen = torch.Generator(device="cpu").manual_seed(seed)
    return [torch.randn(shape, generator=gen).to(device=device, dtype=dtype) for _ in range(n)]


def attn_core_fingerprint() -> str | None:
    """SHA-1 of the attn_core sources: which version of the code a point measured (it can
    change during a long sweep while attn_core is being worked on)."""
    try:
        import attn_core
    except ImportError:
        return None
    h = hashlib.sha1()
    for path in sorted(Path(attn_core.__file__).parent.rglob("*.py")):
        h.update(path.name.encode())
        h.update(path.read_bytes())
    return h.hexdigest()[:12]


# --------------------------------------------------------------------------- the sweep
def runnable_others(samples: int = 10, interval_s: float = 0.05) -> float | None:
    """How many tasks other than this one are runnable now: the mean over ``samples`` readings
    of the running count in ``/proc/loadavg`` (which counts the reading thread itself, hence
    minus one); None where there is no ``/proc/loadavg``. Unlike the 1-minute load average, it
    does not remember the workers of a run that just finished (their load decays over minutes)."""
    import time

    counts = []
    for k in range(samples):
        try:
            with open("/proc/loadavg", encoding="ascii") as f:
                running = int(f.read().split()[3].split("/")[0])
        except (OSError, ValueError, IndexError):
            return None
        counts.append(max(running - 1, 0))
        if k + 1 < samples:
            time.sleep(interval_s)
    return sum(counts) / len(counts)


def busy_warning(env: dict, device: str, now: Callable[[], float | None] = runnable_others) -> str | None:
    """A warning when a CPU run starts on a busy machine: the 1-minute load is at least half the
    cores *and* other tasks are runnable now (``now()``, at least half the cores too; recorded
    as ``env["runnable_others"]``). The second test keeps the warning from firing on the load of
    the run's own workers, which have finished when its micro-benchmarks start but still weigh
    on the 1-minute average. Where ``now()`` cannot tell (None), the load average decides."""
    load = env.get("load_average")
    cores = env.get("cpu_affinity") or env.get("cpu_count") or 1
    if device != "cpu" or not load or load[0] < 0.5 * cores:
        return None
    others = now()
    env["runnable_others"] = others
    if others is not None and others < 0.5 * cores:
        return None
    return (f"machine busy at start: load average {load[0]:.2f} on {cores} cores"
            + (f", {others:.1f} other tasks runnable" if others is not None else ""))


def run_point(
    point: dict,
    *,
    group: str,
    where: str,
    failed: dict[str, tuple[str, str]],
    skip_on: Iterable[str],
    skip_after_failure: bool,
    isolate: bool,
    timeout_s: float | None,
    mem_cap_bytes: int | None,
) -> dict:
    """Run ``point`` (``target``, ``kwargs``, ``preload``) through :func:`measure.execute`, or
    skip it when an earlier (smaller) point of the same ``group`` ended in a status in
    ``skip_on``. ``failed`` maps group -> (status, where) of the first such failure and is
    updated here (oom/timeout only). The record gets the 1-minute load average before the run.

    ``point["memory_run"]`` (``{"kwargs": overrides, "env": variables, "note": text}``, isolated
    runs only): peak memory comes from a second fresh worker with those kwargs and environment
    (e.g. an allocator setting that would distort the times), the times from the first."""
    prior = failed.get(group) if skip_after_failure else None
    if prior is not None and prior[0] in tuple(skip_on):
        return {"status": "skipped", "skipped_because": prior[0],
                "reason": f"not run: {prior[0]} already at {prior[1]} (a larger size needs at least as much)"}
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else None
    rec = measure.execute(point["target"], point["kwargs"], isolate=isolate, timeout_s=timeout_s,
                          mem_cap_bytes=mem_cap_bytes, preload=point.get("preload", ()))
    second = point.get("memory_run") if isolate else None
    if second and rec["status"] == "ok":
        mem = measure.execute(point["target"], {**point["kwargs"], **second.get("kwargs", {})}, isolate=True,
                              timeout_s=timeout_s, mem_cap_bytes=mem_cap_bytes, preload=point.get("preload", ()),
                              env=second.get("env"))
        if mem["status"] != "ok":
            mem["reason"] = f"memory worker: {mem.get('reason', mem['status'])}"
            rec = {**rec, **{k: v for k, v in mem.items() if k in ("status", "reason", "stderr_tail", "traceback")}}
        else:
            rec["peak_mem_bytes"] = mem.get("peak_mem_bytes")
            rec["mem_method"] = f"{mem.get('mem_method')}, {second.get('note', 'separate worker')}"
    rec["load_1m_before"] = load
    if rec["status"] in ("oom", "timeout"):
        failed.setdefault(group, (rec["status"], where))
    return rec


def point_record(point: dict, rec: dict, keep: Iterable[str]) -> dict:
    """The stored record of a point: its plan (without ``target``/``kwargs``/``preload``) and the
    ``keep`` fields of its result (plus ``skipped_because`` for skipped points)."""
    record = {k: v for k, v in point.items() if k not in ("target", "kwargs", "preload")}
    record.update({k: rec[k] for k in keep if k in rec})
    if "skipped_because" in rec:
        record["skipped_because"] = rec["skipped_because"]
    return record


#: Result fields of :func:`measure.measure_step` a point record keeps (then the benchmark's own) ...
KEEP_TIMING = (
    "status", "reason", "time_ms", "min_ms", "max_ms", "iqr_ms", "mean_ms", "times_ms", "repeats", "warmup_ms",
    "cpu_median_ms", "cpu_times_ms", "peak_mem_bytes", "mem_method", "peak_rss_bytes", "rss_mem_method",
)
#: ... and the fields on how and where it ran, last.
KEEP_RUN = (
    "threads", "attn_core_sha1", "wall_s", "process_wall_s", "address_space_limit_bytes", "load_1m_before",
    "traceback", "stderr_tail",
)


def timing_text(r: dict) -> str:
    """``ok   <median> ms (min, IQR, n, cpu)`` of a measured point, as the sweeps print it."""
    s = f"ok    {r['time_ms']:10.2f} ms (min {r['min_ms']:.2f}, IQR {r['iqr_ms']:.2f}, n={r['repeats']}"
    return s + (f", cpu {r['cpu_median_ms']:.2f})" if r.get("cpu_median_ms") is not None else ")")


def status_line(head: str, r: dict, ok: Callable[[dict], str]) -> str:
    """One printed line per point: ``head``, then ``ok(r)`` or the failure status and reason."""
    if r["status"] == "ok":
        return f"{head} {ok(r)}"
    return f"{head} {r['status'].upper():<5} {r.get('reason', '')}"


def mib(b: Any) -> str:
    """Bytes as ``x.y MiB`` (``-`` for ``None``)."""
    return "-" if b is None else f"{b / (1 << 20):.1f} MiB"


def plot_over_length(ax, pts: Sequence[dict], methods: Sequence[str], key: str, scale: float,
                     colours: dict, *, style: Callable[[str, dict], str], label: Callable[[str, dict], str],
                     xlabel: str, ylabel: str) -> None:
    """One log-log panel of a sweep over L: per method, its ``ok`` points' ``key * scale`` as a
    line (``style(method, first point)``, ``label(...)``) and an x at the top for each point that
    did not run. Shared by the micro-benchmarks that plot time and memory against L."""
    for j, m in enumerate(methods):
        rs = sorted((r for r in pts if r["method"] == m), key=lambda r: r["L"])
        ok = [(r["L"], r[key] * scale) for r in rs if r["status"] == "ok" and r.get(key)]
        if ok:
            ax.plot(*zip(*ok), style(m, rs[0]), marker="o", ms=4, color=colours[m], label=label(m, rs[0]))
        for r in rs:
            if r["status"] != "ok":
                ax.plot([r["L"]], [0.97 - 0.035 * j], marker="x", ms=9, mew=2, color=colours[m],
                        transform=ax.get_xaxis_transform(), clip_on=False)
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=8)


def save_figure_atomic(fig, path: str | Path, dpi: int = 110) -> None:
    """Save a matplotlib figure so a reader never sees half a PNG, then close it."""
    import matplotlib.pyplot as plt

    try:
        write_atomic(path, lambda tmp: fig.savefig(tmp, dpi=dpi))
    finally:
        plt.close(fig)


def sweep_fields(
    name: str,
    *,
    dtypes: tuple[str, ...],
    dtype: str = "float32",
    dtype_doc: str = "",
    warmup: int,
    repeats: int,
    min_repeats: int,
    target_point_s: float,
    point_timeout_s: float,
    threads: int | None = None,
    unit: str = "calls",
    skip_doc: str = "after an oom/timeout skip the larger sizes",
) -> dict:
    """The config fields every micro-benchmark shares (device, dtype, repeats, caps, isolation,
    threads, plot), in one order, with the benchmark's own defaults."""
    from benchmarks.config.schema import Field

    return {
        "benchmark": Field("str", name, choices=(name,), doc="which micro-benchmark this config is for"),
        "device": Field("str", "auto", choices=("auto", "cpu", "cuda"), doc="auto = cuda when available"),
        "dtype": Field("str", dtype, choices=dtypes, doc=dtype_doc),
        "seed": Field("int", 0),
        "warmup": Field("int", warmup, minimum=0, doc=f"untimed {unit} before timing"),
        "repeats": Field("int", repeats, minimum=1, doc=f"timed {unit} per point (at most)"),
        "min_repeats": Field("int", min_repeats, minimum=1, doc=f"timed {unit} per point (at least)"),
        "target_point_s": Field("float", target_point_s, minimum=0, nullable=True,
                                doc="fewer repeats (not below min_repeats) when they would take longer than this"),
        "point_timeout_s": Field("per_device[float]", point_timeout_s, minimum=1, doc="per-point wall-clock limit"),
        "mem_cap_gb": Field("float", None, minimum=0, nullable=True,
                            doc="CPU memory cap per point (GiB); null = mem_cap_fraction of the available RAM"),
        "mem_cap_fraction": Field("float", 0.6, minimum=0.05),
        "isolate": Field("bool", True, doc="one fresh process per point (needed for the caps)"),
        "threads": Field("int", threads, minimum=1, nullable=True, doc="torch CPU threads per point; null = torch's default"),
        "skip_larger_after_failure": Field("bool", True, doc=skip_doc),
        "plot": Field("bool", True),
    }


def select_patterns(names: Any, params: Any, *, every: Sequence[str], defaults: dict[str, dict[str, Any]],
                    check: Callable[[str], Any], where: str, key: str = "") -> dict[str, dict[str, Any]]:
    """``{pattern: resolved params}`` a benchmark measures: ``names`` (``"all"``: ``every``) and
    those ``params`` (``{pattern: {param: value}}``, over ``defaults``) names, each passed to
    ``check`` (raises ValueError) and :func:`attn_core.resolve_params`. Errors are one-line
    ConfigErrors starting ``where: <key>``."""
    import attn_core

    names = list(every) if names == "all" else names
    if not isinstance(names, list) or not all(isinstance(n, str) for n in names):
        raise ConfigError(f"{where}: {key}patterns={names!r} is invalid: expected 'all' or a list of names")
    params = params or {}
    if not isinstance(params, dict) or not all(isinstance(v, dict) for v in params.values()):
        raise ConfigError(f"{where}: {key}params={params!r} is invalid: expected {{pattern: {{param: value}}}}")
    out = {}
    for name in names + [n for n in params if n not in names]:
        try:
            check(name)
            out[name] = attn_core.resolve_params(name, {**defaults.get(name, {}), **params.get(name, {})})
        except ValueError as err:
            raise ConfigError(f"{where}: {key.rstrip('.') or 'patterns'}: {' '.join(str(err).split())}") from None
    return out
