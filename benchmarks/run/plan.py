"""A plan before the run: how long a suite takes on this machine, per model and in all, for the
local pool's parallelism (``--jobs``, ``--gpus``, ``--cells-per-gpu``), and the order the pool
starts the cells in (longest first, so the run's tail is short). A resumed run's plan counts only
the cells it would train: those already finished in its output folder are skipped, as the runner
skips them (:func:`benchmarks.run.records.to_run`).

Costs come from what runs measured, kept per machine in ``results/reference/<device>/costs.json``
(:func:`write_costs` from a results folder's records; ``<device>`` is :func:`device_key`, the
name of the machine's folder there) and from the records already in the run's own output; a
cell none of them knows gets the config header's ``# wall:`` time shared over its cells, marked
as an estimate, or stays unknown.

A cell's predicted time is ``seconds per epoch x epochs + overhead`` (data, test, start-up) as
measured for its suite, task, dataset and model (another suite's measurement of the same model
where its own has none), with the epochs capped by the cell's ``max_epochs`` and training by its
``max_time_s``; a measurement that the time cap stopped predicts the cap or ``max_epochs``,
whichever comes first. Packed cells are assumed as fast as the measured ones.

    python -m benchmarks.run.plan write RESULTS_DIR [--to PATH]   # measured costs -> costs.json
"""

from __future__ import annotations

import argparse
import heapq
import json
import math
import os
import re
import sys
from collections import Counter
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any, Iterable, Mapping, Sequence

from benchmarks.run import records as R

__all__ = ["COSTS_FILE", "REFERENCE_DIR", "device_key", "this_device", "costs_from_records", "write_costs",
           "load_costs", "pool_size", "cell_seconds", "longest_first", "PlanRow", "Plan", "plan", "format_plan",
           "header_seconds", "plan_run"]

COSTS_FILE = "costs.json"
REFERENCE_DIR = R.REPO_ROOT / "results" / "reference"


# ----------------------------------------------------------------------------- the machine
def _slug(text: str) -> str:
    text = re.sub(r"\((?:r|tm)\)", "", str(text), flags=re.IGNORECASE)
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-") or "unknown"


def device_key(env: Mapping[str, Any]) -> str:
    """The name of a machine's folder under ``results/reference/`` from a record's ``env``: the
    GPU's name on CUDA (``NVIDIA H100 80GB HBM3`` -> ``h100-80gb-hbm3``), else ``cpu-<cores>core-
    <model>`` with ``-avx512`` or ``-avx2`` when the record lists the CPU's vector units (a CUDA
    cell on a machine without CUDA ran on the CPU)."""
    if str(env.get("device") or "").startswith("cuda") and env.get("cuda") and env.get("device_name"):
        return _slug(re.sub(r"^\s*nvidia\s+", "", str(env["device_name"]), flags=re.IGNORECASE))
    vector = env.get("cpu_vector") or []
    isa = "-avx512" if "avx512f" in vector else "-avx2" if "avx2" in vector else ""
    cores = env.get("cpu_affinity") or env.get("cpu_count") or 0
    return f"cpu-{cores}core-{_slug(env.get('cpu_model') or 'unknown')}{isa}"


def this_device(cuda: bool = False) -> str:
    """:func:`device_key` of this machine (its first visible GPU when ``cuda``), from its hardware
    alone (:func:`benchmarks.run.records.machine_fields`: no git or version calls)."""
    import torch

    on_gpu = cuda and torch.cuda.is_available()
    props = torch.cuda.get_device_properties(torch.device("cuda")) if on_gpu else None
    return device_key({**R.machine_fields("cuda" if cuda else "cpu", props), "cuda": torch.version.cuda if on_gpu else None})


# ----------------------------------------------------------------------------- measured costs
def _seconds_between(start: Any, end: Any) -> float | None:
    try:
        return (datetime.fromisoformat(str(end)) - datetime.fromisoformat(str(start))).total_seconds()
    except ValueError:
        return None


def _key(suite: str, task: str, dataset: str, model: str, fraction: float = 1.0) -> str:
    return f"{suite}/{task}/{dataset}/{model}" + (f"@{fraction:g}" if fraction < 1 else "")


def _mean(xs: Sequence[float]) -> float | None:
    return round(sum(xs) / len(xs), 3) if xs else None


def _record_fraction(rec: Mapping[str, Any]) -> float:
    return float((rec.get("config") or {}).get("train_fraction") or 1.0)


def costs_from_records(records: Iterable[Mapping[str, Any]]) -> dict[str, dict[str, dict[str, Any]]]:
    """``device -> key -> cost`` from result records (``ok`` ones that trained at least one epoch);
    the key is ``suite/task/dataset/model`` (``@fraction`` for a training subset). A cost holds the
    means over the key's records of seconds per epoch (``cost.train_time_s / epochs_run``),
    epochs run, train time and wall per cell (``started`` to ``finished``), the overhead (wall -
    train), what stopped training, and the threads and sharing they ran with."""
    groups: dict[tuple[str, str], list[Mapping[str, Any]]] = {}
    for rec in records:
        cost, epochs = rec.get("cost") or {}, rec.get("epochs_run")
        if rec.get("status") != "ok" or not epochs or not cost.get("train_time_s"):
            continue
        key = _key(rec["suite"], rec["task"], rec["dataset"], rec["model"], _record_fraction(rec))
        groups.setdefault((device_key(rec.get("env") or {}), key), []).append(rec)
    out: dict[str, dict[str, dict[str, Any]]] = {}
    for (device, key), recs in sorted(groups.items()):
        first = recs[0]
        train = [float(r["cost"]["train_time_s"]) for r in recs]
        each = [_seconds_between(r.get("started"), r.get("finished")) for r in recs]
        walls = [w for w in each if w is not None]
        over = [max(0.0, w - t) for w, t in zip(each, train) if w is not None]
        res = [r.get("resources") or {} for r in recs]
        entry = {
            "suite": first["suite"], "task": first["task"], "dataset": first["dataset"], "model": first["model"],
            **({"train_fraction": _record_fraction(first)} if _record_fraction(first) < 1 else {}),
            "cells": len(recs),
            "seconds_per_epoch": _mean([t / r["epochs_run"] for r, t in zip(recs, train)]),
            "epochs_run": _mean([float(r["epochs_run"]) for r in recs]),
            "train_time_s": _mean(train),
            "wall_s": _mean(walls),
            "overhead_s": _mean(over) or 0.0,
            "stopped_by": dict(Counter((r.get("stop") or {}).get("reason") or "unknown" for r in recs)),
            "cpu_threads": Counter(x.get("cpu_threads") or (r.get("env") or {}).get("torch_threads")
                                   for x, r in zip(res, recs)).most_common(1)[0][0],
            "cells_sharing_device": Counter(x.get("cells_sharing_device") or 1 for x in res).most_common(1)[0][0],
            "measured": max(str(r.get("finished") or "") for r in recs) or None,
        }
        out.setdefault(device, {})[key] = entry
    return out


def _read_costs(path: Path) -> dict[str, Any]:
    """A ``costs.json`` (``{}`` when absent); a broken one is one clear error."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return {}
    except (OSError, ValueError) as err:
        raise ValueError(f"{path}: not a readable costs file ({err}); fix or delete it") from None
    if not isinstance(data, dict) or not isinstance(data.get("costs"), dict):
        raise ValueError(f"{path}: not a costs file (expected an object with 'costs'); fix or delete it")
    return data


def write_costs(results_dir: str | os.PathLike, path: str | os.PathLike, device: str | None = None) -> dict[str, Any]:
    """Merge the costs measured by the records under ``results_dir`` into ``path`` (atomically):
    a key the records have replaces the file's, the file's other keys stay. ``device``: whose
    records (default: the only device there, or the one named by ``path``'s folder). Returns the
    file's costs."""
    path = Path(path)
    found = costs_from_records(R.load_records(results_dir))
    if device is None:
        if len(found) == 1:
            device = next(iter(found))
        elif path.parent.name in found:
            device = path.parent.name
        else:
            raise ValueError(f"{results_dir}: records of {len(found)} devices ({', '.join(found) or 'none'}); "
                             "name one (--device) or write to results/reference/<device>/costs.json")
    old = _read_costs(path)
    if old.get("device") not in (None, device):
        raise ValueError(f"{path} holds the costs of {old['device']}, not {device}")
    merged = dict(sorted({**old.get("costs", {}), **found.get(device, {})}.items()))
    if merged != old.get("costs"):  # unchanged: the file (and its date) stays as it is
        R.write_json_atomic(path, {"device": device, "written": R.now_iso(), "costs": merged})
    return merged


def load_costs(device: str, out: str | os.PathLike | None = None, reference: Path | None = None,
               records: Iterable[Mapping[str, Any]] | None = None) -> dict[str, Any]:
    """The costs known for ``device``: its ``costs.json`` under ``reference`` (default
    ``results/reference``), then those of the records already in ``out`` (a run's own folder;
    ``records``: those records, already loaded)."""
    costs = dict(_read_costs((reference or REFERENCE_DIR) / device / COSTS_FILE).get("costs", {}))
    if records is None and out is not None and (Path(out) / R.RUNS_DIR).exists():
        records = R.load_records(out)
    if records is not None:
        costs.update(costs_from_records(records).get(device, {}))
    return costs


# ----------------------------------------------------------------------------- predicting
def pool_size(jobs: int | None, gpus: int, cells_per_gpu: int | None, cores: int) -> tuple[int, int, int]:
    """The local pool's ``(workers, threads each, cells per GPU)``: ``--jobs`` (default one per GPU
    slot, else 1), at most the ``gpus x cells_per_gpu`` slots; packed GPU workers at most one per
    core (each trains on the host too), so their threads never add up to more than the cores."""
    per_gpu = int(cells_per_gpu or 1)
    slots = gpus * per_gpu
    workers = int(jobs or slots or 1)
    if slots:
        workers = min(workers, slots, max(1, cores))
        per_gpu = min(per_gpu, math.ceil(workers / gpus))
    return workers, max(1, cores // workers), per_gpu


def _cap_s(value: Any) -> float | None:
    """A ``max_time_s`` in seconds (a calibrated budget's reference seconds)."""
    if isinstance(value, Mapping):
        value = value.get("seconds")
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) and value > 0 else None


def _lookup(cell: Any, costs: Mapping[str, Any], suite: str | None) -> dict[str, Any] | None:
    """The cost measured for the cell's suite, else for the suite a tuning search (``<suite>.tuning``)
    searches (the same budget), else the most measured one of its model elsewhere."""
    for name in dict.fromkeys([suite or "", (suite or "").removesuffix(".tuning")]):
        own = costs.get(_key(name, cell.task, cell.dataset, cell.model, cell.train_fraction))
        if own is not None:
            return own
    same = (cell.task, cell.dataset, cell.model, cell.train_fraction)
    others = [c for c in costs.values()
              if (c.get("task"), c.get("dataset"), c.get("model"), float(c.get("train_fraction") or 1.0)) == same]
    return max(others, key=lambda c: (c.get("cells") or 0, c.get("measured") or "")) if others else None


def cell_seconds(cell: Any, costs: Mapping[str, Any], suite: str | None = None,
                 estimate_s: float | None = None) -> tuple[float | None, str, dict[str, Any] | None]:
    """``(seconds, source, cost)``: the cell's predicted wall from a measured cost (source
    ``measured``), else ``estimate_s`` (``estimated``), else ``(None, "unknown", None)``."""
    m = _lookup(cell, costs, suite)
    if m is None or not m.get("seconds_per_epoch") or not m.get("epochs_run"):
        return (estimate_s, "estimated", None) if estimate_s is not None else (None, "unknown", None)
    trainer = cell.config.get("trainer") or {}
    max_epochs = trainer.get("max_epochs") if (trainer.get("max_epochs") or 0) > 0 else math.inf
    capped = (m.get("stopped_by") or {}).get("time_cap", 0) * 2 > (m.get("cells") or 1)
    epochs = max_epochs if capped and max_epochs < math.inf else min(float(m["epochs_run"]), max_epochs)
    train = float(m["seconds_per_epoch"]) * epochs
    cap = _cap_s(trainer.get("max_time_s"))
    return (min(train, cap) if cap else train) + float(m.get("overhead_s") or 0.0), "measured", m


def predicted_seconds(cells: Sequence[Any], suite: str | None, out: str | os.PathLike | None = None,
                      records: Iterable[Mapping[str, Any]] | None = None) -> dict[str, float]:
    """cell_id -> the seconds :func:`cell_seconds` predicts from this machine's measured costs
    (``out``'s records: ``records`` when already loaded), for the cells it can predict; ``{}`` when
    none can be (no costs here, or CUDA cells and no CUDA here). The progress's ETA weighs the cells
    by it, and credits a running cell with the seconds it has run, up to most of its prediction."""
    cuda = any(c.config.get("device") == "cuda" for c in cells)
    try:
        device = this_device(cuda)
        if cuda and device.startswith("cpu-"):
            return {}
        costs = load_costs(device, out, records=records)
    except (ValueError, OSError):
        return {}
    seconds = {c.cell_id: cell_seconds(c, costs, suite)[0] for c in cells}
    return {cid: float(s) for cid, s in seconds.items() if s}


def longest_first(cells: Sequence[Any], seconds: Mapping[str, float | None]) -> list[Any]:
    """``cells`` in the order to start them: unknown costs first (any of them may be the longest:
    started last, one would make the run's tail; started first, the known cells fill in around
    it), then the rest longest first; ties keep the config's order."""
    return sorted(cells, key=lambda c: (seconds.get(c.cell_id) is not None, -(seconds.get(c.cell_id) or 0.0)))


def _makespan(durations: Sequence[tuple[float, int]], workers: int) -> float:
    """Wall of a list schedule: each ``(seconds, places)`` in turn starts when ``places`` workers are
    free (the pool does not let a later cell pass one that waits)."""
    free = [0.0] * workers
    end = 0.0
    for seconds, places in durations:
        k = min(max(places, 1), workers)
        taken = [heapq.heappop(free) for _ in range(k)]
        start = max(taken)
        for _ in range(k):
            heapq.heappush(free, start + seconds)
        end = max(end, start + seconds)
    return end


@dataclass
class PlanRow:
    """One model of the plan: its cells and the seconds each is predicted to take."""

    model: str  # task/dataset/model[@fraction]
    cells: int
    seconds: float | None  # mean per cell; None: unknown
    source: str  # measured | estimated | unknown
    basis: str = ""  # where the number comes from


@dataclass
class Plan:
    device: str
    workers: int
    threads: int
    rows: list[PlanRow]
    wall_s: float  # the list schedule's wall over the known cells
    cell_s: float  # the known cells' seconds added up
    order: list[str] = field(default_factory=list)  # cell ids, in the order the pool starts them
    unknown: int = 0
    estimated: int = 0
    notes: list[str] = field(default_factory=list)
    finished: int = 0  # cells already finished in the run's output folder: not run, not in the plan
    reused: int = 0  # of ``finished``: those that ``--reuse`` would copy from another folder


def plan(cells: Sequence[Any], *, jobs: int | None, cells_per_gpu: int | None, costs: Mapping[str, Any],
         gpus: int = 0, suite: str | None = None, estimate_s: float | None = None, device: str = "",
         cores: int | None = None) -> Plan:
    """The run's plan: per model the cells and seconds each, and the wall of starting them longest
    first on the pool :func:`pool_size` gives (``gpus`` GPU indices, ``cells_per_gpu`` each)."""
    from benchmarks.run.distributed import cell_ranks

    cores = cores or (len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1)
    workers, threads, _ = pool_size(jobs, gpus, cells_per_gpu, cores)
    predicted = {c.cell_id: cell_seconds(c, costs, suite, estimate_s) for c in cells}
    seconds = {cid: p[0] for cid, p in predicted.items()}
    order = longest_first(cells, seconds)
    wall = _makespan([(seconds[c.cell_id] or 0.0, cell_ranks(c.config, visible_gpus=1 if gpus else None))
                      for c in order], workers)
    groups: dict[str, list[Any]] = {}
    for c in cells:
        groups.setdefault(f"{c.task}/{c.dataset}/{c.model}" + (f"@{c.train_fraction:g}" if c.train_fraction < 1 else ""),
                          []).append(c)
    rows, notes = [], []
    for name, group in groups.items():
        secs = [seconds[c.cell_id] for c in group]
        _, source, m = predicted[group[0].cell_id]
        basis = ""
        if m is not None:
            basis = (f"{m['suite']}: {m['epochs_run']:.3g} ep x {m['seconds_per_epoch']:.3g} s + {m['overhead_s']:.3g} s, "
                     f"{m['cells']} run(s)")
            if m.get("cpu_threads") and m["cpu_threads"] != threads and not gpus:
                basis += f", measured with {m['cpu_threads']} thread(s)"
        elif source == "estimated":
            basis = "config header's wall shared over its cells"
        known = [s for s in secs if s is not None]
        rows.append(PlanRow(name, len(group), sum(known) / len(known) if known else None, source, basis))
    if any(r.source == "measured" for r in rows) and (cells_per_gpu or 1) > 1 and gpus:
        notes.append("packed cells are assumed as fast as the measured (unshared) ones")
    return Plan(device=device, workers=workers, threads=threads, rows=sorted(rows, key=lambda r: -(r.seconds or 0)),
                wall_s=wall, cell_s=sum(s for s in seconds.values() if s is not None),
                order=[c.cell_id for c in order], unknown=sum(1 for s in seconds.values() if s is None),
                estimated=sum(1 for p in predicted.values() if p[1] == "estimated"), notes=notes)


def _hms(seconds: float) -> str:
    """``45 s``, ``12.5 min``, ``2 h 05 min``."""
    if seconds < 90:
        return f"{seconds:.0f} s"
    if seconds < 5400:
        return f"{seconds / 60:.1f} min"
    h, m = divmod(round(seconds / 60), 60)
    return f"{h} h {m:02d} min"


def format_plan(p: Plan) -> str:
    """The plan as a short table (estimates marked ``~``, unknown ``?``) and its total."""
    n = sum(r.cells for r in p.rows)
    reused = f", {p.reused} of them copied from --reuse" if p.reused else ""
    resumed = f" to run ({p.finished} of {n + p.finished} already finished{reused}: skipped)" if p.finished else ""
    lines = [f"plan on {p.device or 'this machine'}: {n} cells{resumed}, {p.workers} at once x {p.threads} thread(s), "
             "longest first"]
    if not n:
        return "\n".join(lines + ["  total: nothing left to run (rerun with --force to train them again)"])
    w = max([len(r.model) for r in p.rows] + [5])
    lines.append(f"  {'model':<{w}}  cells  {'each':>11}  source")
    for r in p.rows:
        each = "?" if r.seconds is None else ("~" if r.source == "estimated" else "") + _hms(r.seconds)
        lines.append(f"  {r.model:<{w}}  {r.cells:>5}  {each:>11}  {r.source}{' (' + r.basis + ')' if r.basis else ''}")
    mark = ("at least " if p.unknown else "") + ("~" if p.estimated else "")
    total = f"  total: {mark}{_hms(p.wall_s)} wall ({mark}{_hms(p.cell_s)} of cells over {p.workers} worker(s))"
    if p.unknown == n:
        total = "  total: unknown (no cell measured or estimated on this machine)"
    elif p.estimated:
        total += f"; ~ = estimate ({p.estimated} cells from the config header, not measured)"
    lines.append(total)
    if p.unknown:
        lines.append(f"  {p.unknown} cells have no measured cost or estimate and are not in the total (they start "
                     "first); a run measures them: python -m benchmarks.run.plan write OUT")
    lines += [f"  note: {note}" for note in p.notes]
    return "\n".join(lines)


# ----------------------------------------------------------------------------- the run's plan
_DURATION = re.compile(r"(\d+(?:\.\d+)?)(?:\s*[-\u2013]\s*(\d+(?:\.\d+)?))?\s*(h|hours?|min|minutes?|s|sec|seconds?)\b")
_UNIT_S = {"h": 3600.0, "m": 60.0, "s": 1.0}


def header_seconds(wall: str | None) -> float | None:
    """Seconds of a config header's wall time as ``attnbench list`` shows it (``"~1-2 h (at most
    2.5 h), estimated for one H100"``: the upper end of the first range, 7200); None when not stated."""
    if not wall or wall.strip().startswith("not stated"):
        return None
    m = _DURATION.search(wall.split(",", 1)[0])
    if m is None:
        return None
    return float(m.group(2) or m.group(1)) * _UNIT_S[m.group(3)[0]]


def plan_run(cells: Sequence[Any], cfg: Mapping[str, Any], *, jobs: int | None = None, cells_per_gpu: int | None = None,
             gpus: str | None = None, header_wall: str | None = None, out: str | os.PathLike | None = None,
             force: bool = False, retry_failed: bool = False, reuse: Sequence[os.PathLike] = ()) -> Plan:
    """The plan of ``run CONFIG --dry-run``: this machine's costs (and the records already in
    ``out``), the header's wall (``header_wall``, as ``attnbench list`` shows it) shared over
    the config's cells at its own ``jobs`` where nothing was measured, and the pool the run's
    options give (``--jobs``, default the suite's ``jobs``). Only the cells the run would train
    are planned: those finished in ``out`` are counted in ``Plan.finished`` (``force`` and
    ``retry_failed`` as the run's options), and so are those ``reuse`` would copy (``--reuse``)."""
    from benchmarks.config.suite import expand, resolve_device

    cuda = any(c.config.get("device") == "cuda" or resolve_device((c.config.get("trainer") or {}).get("accelerator", "cpu"))
               == "cuda" for c in cells)
    device = this_device(cuda)
    gpu_elsewhere = cuda and device.startswith("cpu-")  # CUDA cells, no CUDA here (a Slurm or Ray run)
    total = header_seconds(header_wall)
    estimate = total * (cfg.get("jobs") or 1) / max(1, len(expand(dict(cfg)))) if total else None
    n_gpus = len([g for g in gpus.split(",") if g.strip()]) if gpus else 0
    try:  # this CPU's costs never plan GPU cells
        costs = {} if gpu_elsewhere else load_costs(device, out)
    except ValueError as err:  # a broken costs.json: one line, exit code 2
        from benchmarks.config.schema import CliError

        raise CliError(str(err)) from None
    todo = R.to_run(list(cells), R.finished_records(out), force=force, retry_failed=retry_failed) if out else list(cells)
    reused = 0
    if reuse and not force:
        from benchmarks.run.reuse import reusable

        found = reusable(todo, [Path(r) for r in reuse])
        todo, reused = [c for c in todo if c.cell_id not in found], len(found)
    p = plan(todo, jobs=jobs or cfg.get("jobs"), cells_per_gpu=cells_per_gpu, gpus=n_gpus, costs=costs,
             suite=cfg.get("suite"), estimate_s=estimate,
             device="a GPU machine (none here: no measured GPU costs apply)" if gpu_elsewhere else device)
    p.finished, p.reused = len(cells) - len(todo), reused
    return p


def main(argv: list[str] | None = None) -> int:
    """``write RESULTS_DIR [--to PATH] [--device KEY]``: the records' costs into ``costs.json``
    (default ``results/reference/<device>/costs.json`` for each device the records are of)."""
    p = argparse.ArgumentParser(prog="python -m benchmarks.run.plan", description=__doc__.split("\n\n")[0])
    sub = p.add_subparsers(dest="command", required=True)
    w = sub.add_parser("write", help="merge the costs measured by a results folder's records into costs.json")
    w.add_argument("results_dir")
    w.add_argument("--to", metavar="PATH", help="the costs file (default results/reference/<device>/costs.json)")
    w.add_argument("--device", metavar="KEY", help="whose records (default: every device there, each to its file)")
    args = p.parse_args(argv)
    try:
        if args.to:
            done = {args.device or "?": write_costs(args.results_dir, args.to, args.device)}
            paths = {k: Path(args.to) for k in done}
        else:
            found = costs_from_records(R.load_records(args.results_dir))
            devices = [args.device] if args.device else list(found)
            paths = {d: REFERENCE_DIR / d / COSTS_FILE for d in devices}
            done = {d: write_costs(args.results_dir, paths[d], d) for d in devices}
    except ValueError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    if not done:
        print(f"error: {args.results_dir}: no ok records with a train time", file=sys.stderr)
        return 2
    for d, costs in done.items():
        print(f"{paths[d]}: {len(costs)} costs")
    return 0


if __name__ == "__main__":
    sys.exit(main())
