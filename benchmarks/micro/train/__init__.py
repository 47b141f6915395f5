"""What the cell machinery costs: ``attnbench bench train``.

For each domain's attention model and its strongest baseline (``models`` in the config), one
cell of a suite (seed 0; ``suite``, synthetic data by default; with ``--data-dir`` the real-data
suites ``real_suites``) trains through the **real cell path**, the runner's Trainer, task module
and callbacks as ``attnbench cell`` runs them (:func:`benchmarks.run.worker.train_cell` with a
:class:`~.probe.StepProbe` attached), and then through a **bare PyTorch loop** (:mod:`.bare`):
the same module (network and loss), optimiser and schedule over the same batches pre-loaded on
the device, no Lightning. Both in one process, ``rounds`` times interleaved (cell, bare, cell,
bare, ...), each after ``warmup`` steps: steps/s (median over rounds) and their ratio (the
median of the per-round ratios, with their min and max), host-device synchronisations per step (:mod:`.syncs`), on CUDA the GPU
busy fraction (profiler), and the training loader's own batches/s (is data loading the limit?).
The cell is not tested after its training (``RunOptions.fit_only``); the first round's
warm-up sets the timed steps of every round (``repeats`` at most, fewer where they would take
longer than ``target_point_s``, ``min_repeats`` at least: a real-data translation step takes
over a second on one CPU thread).

Check: cell steps/s / bare steps/s >= ``min_ratio`` (0.9 on CPU, 0.8 on CUDA) for every row.
Writes ``<out>/bench_train.json`` (after every point, atomically) and ``<out>/bench_train.png``.
"""

from __future__ import annotations

import statistics
import sys
import tempfile
from pathlib import Path
from typing import Any, Callable, Sequence

from benchmarks.config import CONFIG_DIR
from benchmarks.config.schema import ConfigError, Field
from benchmarks.micro.checks import check, format_checks as _format_checks
from benchmarks.micro.common import KEEP_RUN, save_figure_atomic, set_threads, status_line, sweep_fields
from benchmarks.micro.sweep import Sweep, load_config as _load_config

__all__ = ["SCHEMA", "DEFAULT_CONFIG", "load_config", "select_cells", "plan_points", "point_train",
           "compute_checks", "format_checks", "plot_results", "run_sweep", "main"]

DEFAULT_CONFIG = CONFIG_DIR / "bench_train.yaml"
DOMAINS = ("graphs", "pos_tagging", "translation", "speech", "vision")

SCHEMA: dict[str, Any] = {
    **sweep_fields("train", dtypes=("float32",), dtype_doc="informative: each cell's trainer.precision decides",
                   warmup=10, repeats=50, min_repeats=10, target_point_s=30.0, point_timeout_s=900.0,
                   unit="training steps", skip_doc="unused (every point is independent)"),
    "suite": Field("str", "quick", doc="suite config (name or path) whose cells are measured, synthetic data"),
    "real_suites": Field("list[str]", list(DOMAINS), doc="suite configs used instead with --data-dir (real data)"),
    "models": Field("any", {}, doc="{task: [model, ...]}: the cells measured (seed 0, the first such cell)"),
    "suite_set": Field("list[str]", [], doc="overrides (KEY=VALUE, as run --set) applied to the suites before the "
                                            "cells are picked, e.g. [trainer.compile=true]"),
    "sync_steps": Field("int", 5, minimum=1, doc="training steps whose host-device syncs are counted (untimed)"),
    "profile_steps": Field("per_device[int]", {"cpu": 0, "cuda": 10}, minimum=0,
                           doc="profiled steps for the GPU busy fraction (CUDA only; 0: none)"),
    "rounds": Field("int", 5, minimum=1, doc="cell and bare measured alternately, this many times each"),
    "loader_batches": Field("int", 50, minimum=0, doc="batches of the training loader timed alone (0: skip)"),
    "min_ratio": Field("per_device[float]", {"cpu": 0.9, "cuda": 0.8}, minimum=0,
                       doc="the check: cell steps/s over bare steps/s at least this"),
}


def _complete(cfg: dict, src: str) -> None:
    models = cfg["models"]
    if not isinstance(models, dict) or not models or not all(
            isinstance(v, list) and v and all(isinstance(m, str) for m in v) for v in models.values()):
        raise ConfigError(f"{src}: models={models!r} is invalid: expected {{task: [model, ...]}}, e.g. "
                          "{pos_tagging: [transformer, bilstm]}")


def load_config(path: str | Path | None = None, *, overrides: Sequence[str] = (), device: str | None = None,
                dtype: str | None = None) -> dict:
    """Read, override (``key.sub=value``), validate and complete a config."""
    return _load_config(path, schema=SCHEMA, default=DEFAULT_CONFIG, overrides=overrides, device=device,
                        dtype=dtype, complete=_complete, auto_dtype="float32")


# --------------------------------------------------------------------------- planning
def _suite_path(name: str, where: str) -> Path:
    """A suite config: a path, or the name of a shipped one (``quick`` or ``quick.yaml``)."""
    for p in (Path(name), CONFIG_DIR / name, CONFIG_DIR / f"{name}.yaml"):
        if p.is_file():
            return p
    shipped = ", ".join(sorted(q.stem for q in CONFIG_DIR.glob("*.yaml") if not q.stem.startswith("bench_")))
    raise ConfigError(f"{where}: suite config {name!r} not found (a path, or one of: {shipped})")


def select_cells(cfg: dict, *, real: bool, device: str) -> list:
    """The cells measured: for each ``models`` entry, the first cell of that task and model with
    the suite's smallest seed, on ``device``. An absent suite, task or model is a one-line
    ConfigError naming what there is."""
    from benchmarks.config.suite import expand, load_suite

    src = cfg["config_path"]
    accel = "gpu" if device == "cuda" else "cpu"
    names = cfg["real_suites"] if real else [cfg["suite"]]
    cells = []
    for name in names:
        path = _suite_path(name, src)
        try:
            cells += expand(load_suite(path, [f"trainer.accelerator={accel}", *cfg["suite_set"]]))
        except ConfigError as err:
            if not cfg["suite_set"]:
                raise
            raise ConfigError(f"{src}: suite_set={cfg['suite_set']!r} on {name}: {err}") from None
    where = f"suite{'s' if len(names) > 1 else ''} {', '.join(names)}"
    out = []
    for task, models in cfg["models"].items():
        mine = [c for c in cells if c.task == task]
        if not mine:
            raise ConfigError(f"{src}: models.{task}: no cell of task {task!r} in {where}; tasks there: "
                              f"{', '.join(sorted({c.task for c in cells}))}")
        seed = min(c.seed for c in mine)
        have: dict[str, Any] = {}
        for c in mine:
            if c.seed == seed:
                have.setdefault(c.model, c)
        for m in models:
            if m not in have:
                raise ConfigError(f"{src}: models.{task}: model {m!r} has no cell in {where}; valid: "
                                  f"{', '.join(sorted(have))}")
            out.append(have[m])
    return out


def plan_points(cfg: dict, device: str, *, data_dir: str | None = None, cache_dir: str | None = None) -> list[dict]:
    """One point per measured cell (its resolved config travels to the isolated worker)."""
    points = []
    for c in select_cells(cfg, real=data_dir is not None, device=device):
        cell = {k: getattr(c, k) for k in ("cell_id", "task", "dataset", "model", "family", "pattern", "seed",
                                          "config")}
        points.append({"kind": "train", "method": f"{c.task}/{c.model}", "task": c.task, "dataset": c.dataset,
                       "model": c.model, "family": c.family, "cell_id": c.cell_id,
                       "precision": c.config["trainer"]["precision"],
                       "target": "benchmarks.micro.train:point_train", "preload": ["torch", "lightning"],
                       "kwargs": {"cell": cell, "device": device, "data_dir": data_dir, "cache_dir": cache_dir,
                                  "warmup": cfg["warmup"], "steps": cfg["repeats"], "sync_steps": cfg["sync_steps"],
                                  "profile_steps": cfg["profile_steps"][device], "rounds": cfg["rounds"],
                                  "loader_batches": cfg["loader_batches"], "threads": cfg["threads"],
                                  "target_s": cfg["target_point_s"], "min_steps": cfg["min_repeats"]}})
    return points


# --------------------------------------------------------------------------- a point (in a worker)
def _loader_rate(datamodule: Any, n: int) -> float | None:
    """Batches/s of the training loader alone (collation included, no device transfer)."""
    import time

    if not n:
        return None
    k, t0 = 0, time.perf_counter()
    while k < n:
        for _ in datamodule.train_dataloader():
            k += 1
            if k >= n:
                break
    return k / (time.perf_counter() - t0)


def point_train(*, cell: dict, device: str, data_dir: str | None, cache_dir: str | None, warmup: int, steps: int,
                sync_steps: int, profile_steps: int, rounds: int, loader_batches: int,
                threads: int | None = None, target_s: float | None = None, min_steps: int = 1) -> dict:
    """``rounds`` x (the cell path, then the bare loop) on one cell; medians and spread. With
    ``target_s``, the first round's warm-up decides the timed steps of every round and side
    (fewer than ``steps`` where they would take longer than ``target_s``, at least ``min_steps``)."""
    from benchmarks.config.suite import Cell
    from benchmarks.micro.common import attn_core_fingerprint
    from benchmarks.micro.train.bare import bare_loop
    from benchmarks.micro.train.probe import StepProbe, probed_cell
    from benchmarks.run.callbacks import compile_mode
    from benchmarks.run.runner import DEFAULT_CACHE, RunOptions

    nthreads = set_threads(threads)
    c = Cell(**cell)
    t = c.config["trainer"]
    # a compiled network runs no graph under a TorchDispatchMode (the sync counter), so a compiled
    # cell's syncs are not counted (None) on either side; the bare loop runs the same compiled network
    compiled = compile_mode(t.get("compile")) is not None
    cells, bares, statuses = [], [], []
    loader = None
    with tempfile.TemporaryDirectory(prefix="attnbench-train-") as tmp:
        opts = RunOptions(out=Path(tmp), data_dir=Path(data_dir) if data_dir else None,
                          cache_dir=Path(cache_dir) if cache_dir else DEFAULT_CACHE, log=lambda s: None)
        for k in range(rounds):
            probe = StepProbe(warmup=warmup, steps=steps, sync_steps=0 if compiled else sync_steps,
                              profile_steps=profile_steps,
                              target_s=target_s if k == 0 else None, min_steps=min_steps)
            rec = probed_cell(c, "bench_train", opts, probe)
            if probe.module is None or not probe.segments:
                raise RuntimeError(f"the cell did not train: {rec.get('reason')}")
            steps = probe.steps  # fitted in the first round, kept after
            statuses.append(rec["status"] if rec["status"] == "ok" else f"failed: {rec.get('reason')}")
            cells.append(probe.summary())
            if loader is None:
                loader = _loader_rate(probe.datamodule, loader_batches)
            bares.append(bare_loop(probe.module, probe.batches, device=device, precision=t["precision"],
                                   clip=t.get("gradient_clip_val"), warmup=warmup, steps=steps,
                                   sync_steps=0 if compiled else sync_steps, profile_steps=profile_steps,
                                   compiled=compiled))
            del probe
    ratios = [a["steps_per_s"] / b["steps_per_s"] for a, b in zip(cells, bares)]
    med = lambda rs, k: statistics.median(r[k] for r in rs) if all(r.get(k) is not None for r in rs) else None
    cell_sps, bare_sps = med(cells, "steps_per_s"), med(bares, "steps_per_s")
    return {
        # the median of the per-round ratios: each round's two sides ran back to back, so a
        # drift of the machine's speed between rounds cancels in its ratio (not in the medians')
        "cell_steps_per_s": cell_sps, "bare_steps_per_s": bare_sps, "ratio": statistics.median(ratios),
        "ratio_min": min(ratios), "ratio_max": max(ratios), "ratios": ratios,
        "cell_syncs_per_step": cells[-1]["syncs_per_step"], "bare_syncs_per_step": bares[-1]["syncs_per_step"],
        "cell_syncs_by_op": cells[-1]["syncs_by_op"], "bare_syncs_by_op": bares[-1]["syncs_by_op"],
        "cell_ops_per_step": cells[-1].get("ops_per_step"), "bare_ops_per_step": bares[-1].get("ops_per_step"),
        "cell_gpu_busy": med(cells, "gpu_busy_fraction"), "bare_gpu_busy": med(bares, "gpu_busy_fraction"),
        "loader_batches_per_s": loader, "cell_rounds": cells, "bare_rounds": bares, "cell_status": statuses,
        "timed_steps": steps, "compile": compile_mode(t.get("compile")),
        "threads": nthreads, "attn_core_sha1": attn_core_fingerprint(),
    }


# --------------------------------------------------------------------------- checks
def compute_checks(points: list[dict], *, min_ratio: float) -> list[dict]:
    """Per row: cell steps/s over bare steps/s at least ``min_ratio`` (a failed point fails);
    and, for information, whether the loader alone is slower than the cell path's steps."""
    checks = []
    for r in points:
        name = f"{r['method']}: cell / bare steps/s"
        if r["status"] != "ok":
            checks.append(check(name, None, f">= {min_ratio:g}", False, note=f"{r['status']}: {r.get('reason', '')}"))
            continue
        checks.append(check(name, r["ratio"], f">= {min_ratio:g}", r["ratio"] >= min_ratio,
                            note=f"per-round {r['ratio_min']:.3f}..{r['ratio_max']:.3f}", ours=r["cell_steps_per_s"],
                            baseline=r["bare_steps_per_s"]))
        lb = r.get("loader_batches_per_s")
        if lb is not None and r.get("bare_steps_per_s"):
            checks.append(check(f"{r['method']}: loader batches/s over bare steps/s", lb / r["bare_steps_per_s"],
                                "info (< 1: data loading alone is slower than the bare steps)", None))
    return checks


def format_checks(checks: list[dict]) -> str:
    return _format_checks(checks, empty="checks: none", precision=3)


# --------------------------------------------------------------------------- plot
def plot_results(doc: dict, path: str | Path) -> None:
    """Steps/s of the cell path and of the bare loop per row (log scale), the ratio above."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    pts = [r for r in doc["points"] if r["status"] == "ok"]
    fig, ax = plt.subplots(figsize=(max(6, 1.1 * len(pts) + 2), 4.5))
    xs = range(len(pts))
    ax.bar([x - 0.2 for x in xs], [r["cell_steps_per_s"] for r in pts], 0.4, label="cell path (Lightning)")
    ax.bar([x + 0.2 for x in xs], [r["bare_steps_per_s"] for r in pts], 0.4, label="bare PyTorch loop")
    for x, r in zip(xs, pts):
        ax.annotate(f"{r['ratio']:.2f}", (x, max(r["cell_steps_per_s"], r["bare_steps_per_s"])), ha="center",
                    va="bottom", fontsize=8)
    ax.set_xticks(list(xs), [r["method"] for r in pts], rotation=30, ha="right", fontsize=8)
    ax.set_yscale("log")
    ax.set_ylabel("training steps/s (median over rounds)")
    ax.legend(fontsize=8)
    ax.grid(True, axis="y", alpha=0.3)
    ax.set_title(f"cell path vs bare loop (ratio above): {doc['environment'].get('device_name')}", fontsize=10)
    fig.tight_layout()
    save_figure_atomic(fig, path, dpi=110)


# --------------------------------------------------------------------------- sweep
_KEEP = ("status", "reason", "cell_steps_per_s", "bare_steps_per_s", "ratio", "ratio_min", "ratio_max", "ratios",
         "cell_syncs_per_step", "bare_syncs_per_step", "cell_syncs_by_op", "bare_syncs_by_op", "cell_ops_per_step",
         "bare_ops_per_step", "cell_gpu_busy", "bare_gpu_busy", "loader_batches_per_s", "cell_status", "cell_rounds",
         "bare_rounds", "timed_steps", "compile") + KEEP_RUN


def _fmt(v: Any, spec: str = ".1f") -> str:
    return "-" if v is None else format(v, spec)


def _line(k: int, n: int, p: dict, r: dict) -> str:
    return status_line(f"[{k:>{len(str(n))}}/{n}] {p['method']:<28}", r, lambda r: (
        f"cell {_fmt(r['cell_steps_per_s'])} /s, bare {_fmt(r['bare_steps_per_s'])} /s, ratio {r['ratio']:.3f} "
        f"({r['ratio_min']:.3f}..{r['ratio_max']:.3f}); syncs/step {_fmt(r['cell_syncs_per_step'], '.1f')} vs "
        f"{_fmt(r['bare_syncs_per_step'], '.1f')}{' (compiled: not counted)' if r.get('compile') else ''}; "
        f"aten ops/step {_fmt(r.get('cell_ops_per_step'), '.0f')} vs "
        f"{_fmt(r.get('bare_ops_per_step'), '.0f')}; loader {_fmt(r['loader_batches_per_s'])} batches/s"
        + (f"; GPU busy {_fmt(r['cell_gpu_busy'], '.2f')} vs {_fmt(r['bare_gpu_busy'], '.2f')}"
           if r.get("cell_gpu_busy") is not None else "")))


def table(points: list[dict]) -> str:
    """The measured rows as a Markdown table."""
    rows = ["| task/model | cell steps/s | bare steps/s | cell/bare (per-round range) | syncs/step cell / bare "
            "| aten ops/step cell / bare | loader batches/s |", "|---|---|---|---|---|---|---|"]
    for r in points:
        if r["status"] != "ok":
            rows.append(f"| {r['method']} | {r['status']}: {r.get('reason', '')} | | | | | |")
            continue
        compiled = f" (compile: {r['compile']})" if r.get("compile") else ""
        rows.append(f"| {r['method']}{compiled} | {r['cell_steps_per_s']:.1f} | {r['bare_steps_per_s']:.1f} "
                    f"| {r['ratio']:.3f} "
                    f"({r['ratio_min']:.3f}..{r['ratio_max']:.3f}) | {_fmt(r['cell_syncs_per_step'])} / "
                    f"{_fmt(r['bare_syncs_per_step'])} | {_fmt(r.get('cell_ops_per_step'), '.0f')} / "
                    f"{_fmt(r.get('bare_ops_per_step'), '.0f')} | {_fmt(r['loader_batches_per_s'])} |")
    return "\n".join(rows)


def run_sweep(cfg: dict, out_dir: str | Path, *, log: Callable[[str], None] = print, data_dir: str | None = None,
              cache_dir: str | None = None) -> dict:
    """Measure every cell of ``cfg``; write and return the results document."""
    sw = Sweep("train", cfg, out_dir, log=log)
    points = plan_points(cfg, sw.device, data_dir=data_dir, cache_dir=cache_dir)
    min_ratio = cfg["min_ratio"][sw.device]
    doc = sw.new_doc({
        "device": sw.device, "data": "real (--data-dir)" if data_dir else "synthetic",
        "suites": cfg["real_suites"] if data_dir else [cfg["suite"]], "warmup": cfg["warmup"],
        "steps": cfg["repeats"], "target_point_s": cfg["target_point_s"], "min_steps": cfg["min_repeats"],
        "sync_steps": cfg["sync_steps"], "rounds": cfg["rounds"], "min_ratio": min_ratio,
        "measured": "steps/s of one cell's training through the real cell path (runner Trainer + task module + "
                    "callbacks, benchmarks.run.worker.train_cell) and through a bare PyTorch loop (same module, loss, "
                    "optimiser and schedule, batches pre-loaded on the device), interleaved in one process after "
                    "warm-up; medians over rounds; syncs/step and aten ops/step (every op dispatched: "
                    "a kernel launch each on a GPU, views aside) counted in separate untimed steps",
        **sw.limits(),
    }, tail={"checks": []})
    sw.open(doc, len(points), dtype="each cell's trainer.precision", noun="cells",
            detail=f"{cfg['rounds']} rounds of {cfg['warmup']} + {cfg['repeats']} steps"
            + (f" (fewer where they take over {cfg['target_point_s']:g} s, at least {cfg['min_repeats']})"
               if cfg["target_point_s"] is not None else ""))
    sw.run(doc, points, keep=_KEEP, line=_line, where=lambda p: p["method"], group=lambda p: p["method"],
           skip_on=lambda p: ())
    sw.warn_code_changed(doc)
    return sw.close(doc, compute_checks(doc["points"], min_ratio=min_ratio), plot_fn=plot_results,
                    format_checks=format_checks, summary=[table(doc["points"])])


def main(*, config: str | Path | None = None, out: str | Path | None = None, device: str | None = None,
         dtype: str | None = None, sets: Sequence[str] = (), log: Callable[[str], None] | None = None,
         data_dir: str | Path | None = None, cache_dir: str | Path | None = None) -> int:
    """``attnbench bench train``: 0 when the sweep ran (failed points and checks are results)."""
    log = log or (lambda s: print(s, flush=True))
    cfg = load_config(config, overrides=sets, device=device, dtype=dtype)
    run_sweep(cfg, Path(out) if out is not None else Path("results") / "bench" / "train", log=log,
              data_dir=str(data_dir) if data_dir else None, cache_dir=str(cache_dir) if cache_dir else None)
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
