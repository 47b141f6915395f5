"""What running cells as isolated units costs and gains: a suite run ``inline`` (in the driver's
process), with the local pool at ``--jobs 1`` and at ``--jobs N``, each into a fresh folder,
timed end to end (wall clock, report excluded). Issue 16 asks ``--jobs 2`` <= 0.7x ``--jobs 1``
and ``--jobs 1`` <= 1.15x ``inline`` on ``quick.yaml`` on a 2-core CPU.

    python -m benchmarks.micro.pool [--config quick] [--jobs 2] [--out results/bench/pool]

Writes ``bench_pool.json`` (times, ratios, checks, machine) and prints a table. A benchmark,
not a test: run it on quiet cores."""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

from benchmarks.run import records as R
def _run(config: str, out: Path, extra: list[str], sets: list[str]) -> dict:
    shutil.rmtree(out, ignore_errors=True)
    argv = [sys.executable, "-m", "benchmarks", "run", config, "--out", str(out), "--no-report", *extra]
    for s in sets:
        argv += ["--set", s]
    t0 = time.perf_counter()
    proc = subprocess.run(argv, capture_output=True, text=True)
    wall = time.perf_counter() - t0
    recs = R.load_records(out)
    return {"argv": argv[3:], "exit_code": proc.returncode, "wall_s": round(wall, 2), "cells": len(recs),
            "ok": sum(r["status"] == "ok" for r in recs),
            "train_time_s": round(sum((r.get("cost") or {}).get("train_time_s") or 0 for r in recs), 2),
            "stderr_tail": proc.stderr[-500:] if proc.returncode else ""}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--config", default="quick")
    p.add_argument("--jobs", type=int, default=2)
    p.add_argument("--set", dest="sets", action="append", default=["micro_benchmarks=[]"])
    p.add_argument("--out", default="results/bench/pool")
    args = p.parse_args(argv)
    out = Path(args.out)
    runs = {}
    for name, extra in (("inline", ["--launcher", "inline"]), ("jobs1", ["--jobs", "1"]),
                        (f"jobs{args.jobs}", ["--jobs", str(args.jobs)])):
        print(f"{name}: running ...", flush=True)
        runs[name] = _run(args.config, out / "runs" / name, extra, args.sets)
        print(f"{name}: {runs[name]['wall_s']:.1f} s, {runs[name]['ok']}/{runs[name]['cells']} ok", flush=True)
    par = runs[f"jobs{args.jobs}"]["wall_s"] / runs["jobs1"]["wall_s"]
    iso = runs["jobs1"]["wall_s"] / runs["inline"]["wall_s"]
    doc = {
        "benchmark": "pool", "config": args.config, "sets": args.sets, "runs": runs,
        "ratios": {f"jobs{args.jobs}_over_jobs1": round(par, 3), "jobs1_over_inline": round(iso, 3)},
        "checks": [
            {"check": f"--jobs {args.jobs} <= 0.7 x --jobs 1", "value": round(par, 3), "pass": par <= 0.7},
            {"check": "--jobs 1 <= 1.15 x inline", "value": round(iso, 3), "pass": iso <= 1.15},
        ],
        "env": R.environment("cpu"), "cores": len(os.sched_getaffinity(0)), "written": R.now_iso(),
    }
    R.write_json_atomic(out / "bench_pool.json", doc)
    print(f"\n{'run':<8} {'wall s':>8} {'ok':>7}")
    for name, r in runs.items():
        print(f"{name:<8} {r['wall_s']:>8.1f} {r['ok']:>3}/{r['cells']:<3}")
    for c in doc["checks"]:
        print(f"{'PASS' if c['pass'] else 'FAIL'}  {c['check']}: {c['value']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
