"""``attnbench profile CONFIG --cell ID|INDEX [--steps N] [--warmup W] [--out DIR]``: where one
cell's training time goes. The cell trains through the real cell path (the worker's
:func:`~benchmarks.run.worker.train_cell`, ``trainer.compile`` included) with a
:class:`benchmarks.micro.train.probe.StepProbe` attached: ``W`` warm-up steps, ``N`` timed
steps (steps/s), ``N`` steps with host-device syncs counted, then ``N`` steps under
``torch.profiler`` (top ops by self time on the CPU and, on CUDA, on the GPU; the GPU busy
fraction; a Chrome trace). Writes ``trace.json``, ``profile.txt`` and ``profile.json`` into
``--out`` (default ``results/profile/<suite>/<cell id>``); the cell's record is not stored."""

from __future__ import annotations

import argparse
from pathlib import Path

from benchmarks.config.schema import CliError
from benchmarks.cli.options import add_data_options, check_data_dir, check_out_dir, load_cells

__all__ = ["add_profile", "cmd_profile", "pick_cell"]


def add_profile(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("profile", help="profile the training steps of one cell of a config",
                       description="Train one cell of a suite config for a few steps through the real cell path "
                       "and show where the time goes: steps/s, syncs per step, the top ops by self time, the GPU "
                       "busy fraction (CUDA), and a Chrome trace.")
    p.add_argument("config", metavar="CONFIG", help="a suite YAML, or the name of a shipped one (e.g. quick)")
    p.add_argument("--cell", required=True, metavar="ID|INDEX",
                   help="the cell: its id or its index (from 0) as `attnbench run CONFIG --dry-run` lists them")
    p.add_argument("--steps", type=int, default=10, metavar="N",
                   help="steps timed, then counted for syncs, then profiled (default 10)")
    p.add_argument("--warmup", type=int, default=5, metavar="W", help="untimed steps first (default 5)")
    p.add_argument("--out", metavar="DIR", help="output folder (default: results/profile/<suite>/<cell id>)")
    p.add_argument("--set", dest="sets", action="append", default=[], metavar="KEY=VALUE",
                   help="override a config key as with attnbench run (e.g. --set trainer.compile=true); repeatable")
    p.add_argument("--rows", type=int, default=15, metavar="K", help="ops shown per table (default 15)")
    add_data_options(p)
    p.set_defaults(handler=cmd_profile)


def pick_cell(cells: list, key: str, source: str):
    """The cell whose id is ``key``, or whose index in ``cells`` it is; else a one-line CliError."""
    for c in cells:
        if c.cell_id == key:
            return c
    if key.lstrip("-").isdigit():
        i = int(key)
        if 0 <= i < len(cells):
            return cells[i]
        raise CliError(f"--cell {key}: no cell at index {i} in {source} (valid indices: 0-{len(cells) - 1}; "
                       f"attnbench run {source} --dry-run lists them)")
    raise CliError(f"--cell {key!r}: no cell with this id in {source} ({len(cells)} cells; give an id or an index "
                   f"0-{len(cells) - 1} as attnbench run {source} --dry-run lists them)")


def cmd_profile(args: argparse.Namespace) -> int:
    """Exit codes: 0 profiled, 1 the cell failed before the profile was complete, 2 usage or config error."""
    for opt, v, least in (("--steps", args.steps, 1), ("--warmup", args.warmup, 0), ("--rows", args.rows, 1)):
        if v < least:
            raise CliError(f"{opt} {v}: expected an integer >= {least}")
    _, cfg, cells = load_cells(args.config, args.sets)
    cell = pick_cell(cells, args.cell, args.config)
    out = check_out_dir(args.out or str(Path("results") / "profile" / cfg["suite"] / cell.cell_id), cfg["suite"])
    data_dir = check_data_dir(args.data_dir)
    return profile_cell(cell, cfg["suite"], out, steps=args.steps, warmup=args.warmup, rows=args.rows,
                        data_dir=data_dir, cache_dir=Path(args.cache_dir).expanduser() if args.cache_dir else None)


def profile_cell(cell, suite: str, out: Path, *, steps: int, warmup: int, rows: int, data_dir: Path | None,
                 cache_dir: Path | None) -> int:
    """Profile ``cell`` into ``out``; print the summary. Returns the exit code."""
    import contextlib

    from benchmarks.micro.train.probe import StepProbe, probed_cell, top_ops
    from benchmarks.run import records as R
    from benchmarks.run.runner import DEFAULT_CACHE, RunOptions

    out.mkdir(parents=True, exist_ok=True)
    print(f"profiling {cell.label} ({cell.cell_id}): {warmup} warm-up + {steps} timed + {steps} sync-counted + "
          f"{steps} profiled training steps -> {out}", flush=True)
    probe = StepProbe(warmup=warmup, steps=steps, sync_steps=steps, profile_steps=steps)
    opts = RunOptions(out=out, data_dir=data_dir, cache_dir=cache_dir or DEFAULT_CACHE, log=print)
    rec = probed_cell(cell, suite, opts, probe)
    with contextlib.suppress(OSError):  # the runner's checkpoint folder, empty again
        (out / ".checkpoints").rmdir()
    s = probe.summary()
    if probe.prof is None or s.get("profile_steps", 0) < steps:
        print(f"attnbench: the cell ended after {probe.i} of {probe.total} training steps"
              + (f" ({rec['reason']})" if rec.get("reason") else "") + "; nothing profiled", flush=True)
        return 1
    trace = out / "trace.json"
    tmp = trace.with_name(f".{trace.name}.tmp")
    probe.prof.export_chrome_trace(str(tmp))
    tmp.replace(trace)  # atomic: a reader never sees half a trace
    tables = top_ops(probe.prof, cuda=probe.cuda, rows=rows)
    busy = s.get("gpu_busy_fraction")
    per_op = ", ".join(f"{k} {v / s['sync_steps']:.2f}" for k, v in sorted(s["syncs_by_op"].items()))
    lines = [f"cell {cell.label} ({cell.cell_id}), device {'cuda' if probe.cuda else 'cpu'}",
             f"steps/s: {s['steps_per_s']:.2f} ({s['steps']} timed steps in {s['time_s']:.3f} s, after {warmup} "
             "warm-up steps; validation and the loading of each run's first batch not included)",
             f"syncs per step: {s['syncs_per_step']:.2f} over {s['sync_steps']} steps"
             + (f" ({per_op})" if per_op else ""),
             "GPU busy fraction: " + (f"{busy:.3f} (kernels and copies over the {s['profile_steps']} profiled "
                                      "steps' wall time)" if busy is not None else "n/a (CPU)"),
             f"top ops by self CPU time over {s['profile_steps']} profiled steps:", tables["cpu"]]
    if "cuda" in tables:
        lines += ["top ops by self CUDA time:", tables["cuda"]]
    lines.append(f"Chrome trace: {trace} (open in chrome://tracing or https://ui.perfetto.dev)")
    text = "\n".join(lines)
    R.write_json_atomic(out / "profile.json", {"cell_id": cell.cell_id, "label": cell.label, "suite": suite,
                                               "warmup": warmup, **s, "cell_status": rec["status"],
                                               "cell_reason": rec.get("reason"), "trace": trace.name,
                                               "env": R.environment("cuda" if probe.cuda else "cpu")})
    tmp = out / ".profile.txt.tmp"
    tmp.write_text(text + "\n", encoding="utf-8")
    tmp.replace(out / "profile.txt")
    print(text)
    return 0
