"""Do calibrated time budgets give the same training on a slower or faster machine?

Runs one short cell (a ViT on synthetic vision data, inline; ``--cell``) with 1 and with 2 torch threads,
each under a raw wall-clock budget (``max_time_s: S``) and under a calibrated one
(``max_time_s: {seconds: S, reference: ...}``), and compares the epochs reached (optimiser
steps / steps per epoch, so a cut-short epoch counts in part). A calibrated budget should keep
the two thread counts within +-20% of each other; a raw one should not, where the thread
counts differ in speed. A benchmark, not a test: its numbers depend on the machine and its load.

    python -m benchmarks.micro.budgets [--seconds 20] [--threads 1,2] [--cell compute|small] [--out DIR]
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path
from typing import Any

from benchmarks.run import budget as B
from benchmarks.run import fingerprint as F
from benchmarks.run import records as R
REFERENCE = "cpu-2core-amd-epyc-avx2"
TOLERANCE = 0.2


#: the benchmark cells. ``compute``: a ViT on 32x32 images (64 patches, width 128) whose steps
#: are dominated by matmuls, as the reference budgets' cells are; ``small``: the quick config's
#: ViT (9 patches, width 64), whose steps are dominated by per-step overhead that no kernel
#: fingerprint measures: calibration cannot hold there (measured: README, "Portable budgets")
CELLS: dict[str, dict[str, Any]] = {
    "compute": {"task": "vision", "dataset": "synthetic", "models": ["vit"],
                "dataset_params": {"size": 32, "num_train": 1500, "num_val": 300, "num_test": 300},
                "model_params": {"vit": {"d_model": 128, "patch_size": 4}}, "module_params": {"warmup_steps": 0}},
    "small": {"task": "vision", "dataset": "synthetic", "models": ["vit"], "module_params": {"warmup_steps": 0}},
}


def _suite(budget: Any, cell: str = "compute") -> dict[str, Any]:
    return {"suite": "budgets", "seeds": [0], "trainer": {"accelerator": "cpu", "max_epochs": 1000, "max_time_s": budget},
            "cells": [CELLS[cell]]}


def run_one(threads: int, budget: Any, work: Path, cell: str = "compute") -> dict[str, Any]:
    """Train the cell once with ``threads`` torch threads; its stop block, fingerprint and time."""
    import torch

    from benchmarks.run.runner import RunOptions, run_suite
    from benchmarks.config.suite import validate_suite

    before = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        out = Path(tempfile.mkdtemp(dir=work))
        run_suite(validate_suite(_suite(budget, cell), source="bench_budgets"),
                  RunOptions(out=out, cache_dir=work / "cache", log=lambda m: None))
    finally:
        torch.set_num_threads(before)
    (rec,) = R.load_records(out)
    if rec["status"] != "ok":
        raise RuntimeError(f"the benchmark cell failed: {rec['reason']}")
    stop = rec["stop"]
    return {"threads": threads, "budget": budget, "stop": stop, "fingerprint": rec["env"]["fingerprint"],
            "epochs": stop["steps"] / stop["steps_per_epoch"], "train_time_s": rec["cost"]["train_time_s"]}


def summarise(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """Per budget kind: epochs at each thread count, their ratio (max/min) and whether it is
    within +-TOLERANCE."""
    out = {}
    for kind in ("raw", "calibrated"):
        epochs = {str(r["threads"]): round(r["epochs"], 3) for r in runs if B.is_calibrated(r["budget"]) == (kind == "calibrated")}
        lo, hi = min(epochs.values()), max(epochs.values())
        ratio = hi / lo if lo > 0 else None
        out[kind] = {"epochs_by_threads": epochs, "max_over_min": None if ratio is None else round(ratio, 3),
                     "within_20pct": ratio is not None and ratio <= 1 + TOLERANCE}
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m benchmarks.micro.budgets", description=__doc__.splitlines()[0])
    p.add_argument("--seconds", type=float, default=20.0, help="the budget, seconds (reference seconds when calibrated)")
    p.add_argument("--threads", default="1,2", help="thread counts to compare (default 1,2)")
    p.add_argument("--out", type=Path, default=Path("results/bench/budgets"))
    p.add_argument("--cell", choices=tuple(CELLS), default="compute", help="which benchmark cell (default: compute)")
    args = p.parse_args(argv)
    try:
        threads = [int(t) for t in args.threads.split(",")]
        assert threads and min(threads) >= 1 and args.seconds > 0
    except (ValueError, AssertionError):
        print(f"bench_budgets: --threads {args.threads!r} / --seconds {args.seconds}: expected counts >= 1 "
              "(e.g. 1,2) and seconds > 0", file=sys.stderr)
        return 2
    args.out.mkdir(parents=True, exist_ok=True)
    runs = []
    with tempfile.TemporaryDirectory() as work:
        for t in threads:
            for budget in (args.seconds, {"seconds": args.seconds, "reference": REFERENCE}):
                runs.append(run_one(t, budget, Path(work), args.cell))
                r = runs[-1]
                print(f"threads={t} budget={json.dumps(budget)}: {r['epochs']:.2f} epochs in {r['train_time_s']:.1f} s "
                      f"(cap {r['stop']['time_cap_s']} s; {F.format_fingerprint(r['fingerprint'])})", flush=True)
    doc = {"benchmark": "budgets", "environment": R.environment("cpu"), "reference": {REFERENCE: B.REFERENCES[REFERENCE]},
           "seconds": args.seconds, "cell": {"name": args.cell, **CELLS[args.cell]}, "runs": runs, "summary": summarise(runs)}
    R.write_json_atomic(args.out / "bench_budgets.json", doc)
    for kind, s in doc["summary"].items():
        print(f"{kind}: epochs by threads {s['epochs_by_threads']}, max/min {s['max_over_min']}, "
              f"within +-20%: {s['within_20pct']}")
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
