"""The cell-level subcommands and options of ``attnbench``: ``cell OUT CELL_ID`` (run one unit of
work), ``status OUT`` (done / running / failed / pending for any launcher) and the launcher
options of ``run`` (``--launcher``, ``--jobs``, ``--gpus``, ``--cells-per-gpu``, ...)."""

from __future__ import annotations

import argparse
import importlib
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

from benchmarks.config.schema import CliError
from benchmarks.cli.options import add_data_options, check_data_dir

#: modules that add their own ``run`` options (``add_arguments(parser)``), if present
LAUNCHER_OPTION_MODULES = ("benchmarks.run.launchers.slurm_launcher", "benchmarks.run.launchers.ray_launcher")


def add_launcher_arguments(p: argparse.ArgumentParser) -> None:
    from benchmarks.run.launchers import LAUNCHERS

    g = p.add_argument_group("where cells run")
    g.add_argument("--launcher", choices=tuple(LAUNCHERS), default="local",
                   help="local: a pool of worker processes (default); inline: in this process, for "
                        "debugging; slurm: submitit job arrays; ray: Ray tasks")
    g.add_argument("--jobs", type=int, metavar="N", help="local: cells at once (default 1, or one per GPU slot)")
    g.add_argument("--gpus", metavar="IDS", help="local: GPU indices for the workers, e.g. 0,1 (one "
                   "CUDA_VISIBLE_DEVICES slot per worker)")
    g.add_argument("--cells-per-gpu", type=int, metavar="K", help="local: pack K cells onto each GPU")
    g.add_argument("--strict-sharing", action="store_true",
                   help="refuse to pack time-budgeted cells (trainer.max_time_s) onto a shared device "
                        "instead of warning: their budgets and throughput are only comparable unshared")
    g.add_argument("--cell-timeout", type=float, metavar="S",
                   help="wall limit per cell process in seconds (default: 2 x max_time_s + 600; none "
                        "for cells without a time budget)")
    g.add_argument("--logger", action="append", default=[], metavar="NAME",
                   help="attach an experiment tracker to every cell: csv, tensorboard, wandb or mlflow "
                        "(repeatable; offline, under OUT/logs or OUT/mlruns; the JSON records stay the truth)")
    for name in LAUNCHER_OPTION_MODULES:
        try:
            mod = importlib.import_module(name)
        except ImportError:
            continue
        if callable(getattr(mod, "add_arguments", None)):
            known = set(map(id, g._group_actions))
            mod.add_arguments(g)
            launcher = name.rsplit(".", 1)[1].split("_")[0]  # benchmarks.run.launchers.slurm_launcher -> slurm
            for action in g._group_actions:
                if id(action) not in known:
                    _LAUNCHER_OPTIONS[action.dest] = (action.option_strings[0], launcher, action.default)


#: ``dest -> (option, launcher, default)`` of the options a launcher module added: given with
#: another launcher they would be silently ignored, so :func:`make_launcher` refuses them
_LAUNCHER_OPTIONS: dict[str, tuple[str, str, Any]] = {}


def make_launcher(args: argparse.Namespace, opts: Any, cells: list) -> Any:
    """The launcher ``run`` asked for, after checking its options against the cells."""
    from benchmarks.run.launchers import get_launcher

    check_launcher_args(args, cells)
    opts.cell_timeout = args.cell_timeout
    _check_loggers(args.logger)
    try:
        cls = get_launcher(args.launcher)
    except ImportError as err:
        raise CliError(f"the {args.launcher} launcher is not available: {err}") from None
    return cls(opts, args)


def check_launcher_args(args: argparse.Namespace, cells: list) -> None:
    """Every launcher option checked (also by ``--dry-run``): values, and options of another
    launcher than the one chosen, which would otherwise be ignored without a word."""
    if args.jobs is not None and args.jobs < 1:
        raise CliError(f"--jobs {args.jobs}: expected a count >= 1")
    if args.cells_per_gpu is not None and args.cells_per_gpu < 1:
        raise CliError(f"--cells-per-gpu {args.cells_per_gpu}: expected a count >= 1")
    if args.gpus is not None:
        ids = [g.strip() for g in args.gpus.split(",")]
        if not ids or not all(i.isdigit() for i in ids) or len(set(ids)) != len(ids):
            raise CliError(f"--gpus {args.gpus!r}: expected distinct GPU indices, e.g. 0,1")
    if (args.gpus or args.jobs or args.cells_per_gpu) and args.launcher != "local":
        raise CliError(f"--jobs/--gpus/--cells-per-gpu are options of the local launcher, not {args.launcher!r}")
    for dest, (flag, launcher, default) in _LAUNCHER_OPTIONS.items():
        if launcher != args.launcher and getattr(args, dest, default) != default:
            raise CliError(f"{flag} is an option of the {launcher} launcher (--launcher {launcher}); "
                             f"with --launcher {args.launcher} it would be ignored")
    if args.cell_timeout is not None and args.cell_timeout <= 0:
        raise CliError(f"--cell-timeout {args.cell_timeout}: expected seconds > 0")
    _check_cuda_here(args.launcher, cells)
    if (args.cells_per_gpu or 1) > 1:
        budgeted = [c.label for c in cells if (c.config.get("trainer") or {}).get("max_time_s")]
        if budgeted:
            msg = (f"--cells-per-gpu {args.cells_per_gpu} shares a GPU between {len(budgeted)} time-budgeted "
                   f"cell(s) (e.g. {budgeted[0]}): their epochs and throughput are not comparable with "
                   "unshared runs (records say cells_sharing_device)")
            if args.strict_sharing:
                raise CliError(msg + "; drop --strict-sharing or --cells-per-gpu")
            print(f"warning: {msg}", file=sys.stderr)


def print_dry_run(cells: list, describe: Any, make_plan: Any) -> None:
    """The cells of a ``--dry-run`` (id, label, ``describe(cell)``; ``finished`` where the output
    folder holds one that the run would skip), then the plan ``make_plan()`` gives: advice, so a
    plan that cannot be made here is one line and never fails a valid dry run."""
    from benchmarks.run.plan import format_plan

    try:
        plan, why = make_plan(), ""
    except Exception as err:  # noqa: BLE001
        plan, why = None, f"plan: not available here ({type(err).__name__}: {' '.join(str(err).split())[:200]})"
    left = set(plan.order) if plan is not None and plan.finished else None
    for c in cells:
        done = "  finished" if left is not None and c.cell_id not in left else ""
        print(f"  {c.cell_id}  {c.label}  {describe(c)}{done}")
    print(format_plan(plan) if plan is not None else why)


def _check_cuda_here(launcher: str, cells: list) -> None:
    """CUDA cells run by a launcher on this machine (local, inline) need CUDA here: refused before
    any cell (``--dry-run`` too) rather than failing in every cell. Slurm and Ray run them elsewhere."""
    if launcher not in ("local", "inline"):
        return
    gpu = [c for c in cells if c.config.get("device") == "cuda"]
    if not gpu:
        return
    import torch

    if torch.cuda.is_available():
        return
    accel = (gpu[0].config.get("trainer") or {}).get("accelerator")
    raise CliError(f"trainer.accelerator={accel!r}: CUDA is not available on this machine (torch "
                   f"{torch.__version__}, CUDA build {torch.version.cuda or 'none'}), so {len(gpu)} cells "
                   f"(e.g. {gpu[0].label}) cannot run here; valid here: --accelerator cpu or auto "
                   f"(or --launcher slurm/ray to run them on GPU nodes)")


#: the package each tracker needs, and the pip name to install
_LOGGER_PACKAGES = {"tensorboard": ("tensorboard", "tensorboard"), "wandb": ("wandb", "wandb"),
                    "mlflow": ("mlflow", "mlflow")}


def _check_loggers(names: list[str]) -> None:
    """Each ``--logger`` known and importable (else one line naming what to install); the
    choice reaches every worker through ``$ATTNBENCH_LOGGER``."""
    import importlib.util

    from benchmarks.run.cell import LOGGER_ENV, LOGGERS

    for name in names:
        if name not in LOGGERS:
            raise CliError(f"--logger {name!r}: unknown; valid: {', '.join(LOGGERS)}")
        module, pip = _LOGGER_PACKAGES.get(name, (None, None))
        if module and importlib.util.find_spec(module) is None:
            raise CliError(f"--logger {name} needs the {pip} package: pip install {pip}")
    if names:
        os.environ[LOGGER_ENV] = ",".join(dict.fromkeys(names))


# ----------------------------------------------------------------------------- cell
def add_cell(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("cell", help="run one cell of a suite (what every launcher's worker runs)",
                       description="Run exactly one cell of the suite whose manifest is OUT/suite.json, in "
                       "this process: claim it, train it, write its record. Exit codes: 0 ok, 1 the cell "
                       "failed (record written), 3 another worker holds it, 4 already finished.")
    p.add_argument("out", metavar="OUT", help="the suite's output folder (holds suite.json)")
    p.add_argument("cell_id", metavar="CELL_ID")
    add_data_options(p)
    p.add_argument("--force", action="store_true", help="rerun it even if finished")
    p.add_argument("--retry-failed", action="store_true", help="rerun it if its record says failed")
    p.add_argument("--plugin", action="append", default=[], metavar="MODULE", help="import MODULE first (repeatable)")
    p.set_defaults(handler=cmd_cell)


def _read_folder(read: Any, out: Path) -> Any:
    """``read(out)``; an unreadable or foreign output folder is a one-line usage error."""
    try:
        return read(out)
    except (OSError, ValueError) as err:
        raise CliError(str(err)) from None


def cmd_cell(args: argparse.Namespace) -> int:
    from benchmarks.run import distributed as D
    from benchmarks.run.runner import DEFAULT_CACHE, RunOptions
    from benchmarks.run.worker import EXIT, cells_from_manifest, execute_cell, manifest_suite

    out = Path(args.out)
    cells = _read_folder(cells_from_manifest, out)
    if args.cell_id not in cells:
        raise CliError(f"cell {args.cell_id!r} is not in {out / 'suite.json'} ({len(cells)} cells; "
                         f"attnbench status {out} lists them)")
    opts = RunOptions(out=out, data_dir=check_data_dir(args.data_dir),
                      cache_dir=Path(args.cache_dir).expanduser() if args.cache_dir else DEFAULT_CACHE,
                      force=args.force, retry_failed=args.retry_failed, log=lambda m: print(m, flush=True))
    cell = cells[args.cell_id]
    rank, ranks = D.launch_rank(), D.cell_ranks(cell.config)
    of = f" rank {rank} of {ranks}" if ranks > 1 else ""  # a multi-device cell: one line per rank
    print(f"cell {cell.cell_id}: {cell.label} ({cell.family}) pid {os.getpid()}{of}", flush=True)
    status, rec, _ = execute_cell(cell, manifest_suite(out), opts)
    reason = f": {rec.get('reason')}" if status == "failed" and rec else ""
    if rank > 0:  # rank 0 writes the record; a failure here exits 1 (Lightning's launcher then stops rank 0)
        print(f"cell {cell.cell_id}:{of} {status}{reason} (rank 0 writes the record)", flush=True)
        return EXIT["ok"] if status == "ok" else EXIT["failed"]
    print(f"cell {cell.cell_id}: {status}{reason}", flush=True)
    return EXIT[status]


# ----------------------------------------------------------------------------- status
def add_status(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("status", help="done / running / failed / pending cells of a suite folder (any launcher)")
    p.add_argument("out", metavar="OUT", help="the suite's output folder (holds suite.json)")
    p.add_argument("--json", action="store_true", help="print one JSON object instead of lines")
    p.set_defaults(handler=cmd_status)


def suite_status(out: Path) -> dict[str, list[dict[str, Any]]]:
    """Every manifest cell under one of ``done``, ``failed``, ``running`` (a live claim) or
    ``pending``, with its label and, where there is one, the reason or the claimant."""
    from benchmarks.run import claims as C
    from benchmarks.run.records import on_disk
    from benchmarks.run.worker import cells_from_manifest, record_target

    groups: dict[str, list[dict[str, Any]]] = {"done": [], "failed": [], "running": [], "pending": []}
    for cell in cells_from_manifest(out).values():
        target = record_target(out, cell)
        rec = on_disk(target)
        claim = C.claim_path(target)
        item = {"cell_id": cell.cell_id, "label": cell.label}
        if claim.exists() and not C.is_stale(claim):
            try:
                info = json.loads(claim.read_text(encoding="utf-8"))
            except (OSError, ValueError):
                info = {}
            age = time.time() - claim.stat().st_mtime if claim.exists() else 0
            groups["running"].append({**item, "host": info.get("host"), "pid": info.get("pid"),
                                      "heartbeat_age_s": round(age, 1)})
        elif rec is not None and rec.get("status") == "ok":
            groups["done"].append(item)
        elif rec is not None:
            groups["failed"].append({**item, "reason": rec.get("reason")})
        else:
            groups["pending"].append(item)
    return groups


def cmd_status(args: argparse.Namespace) -> int:
    out = Path(args.out)
    groups = _read_folder(suite_status, out)
    if args.json:
        print(json.dumps(groups, indent=2))
        return 0
    total = sum(len(v) for v in groups.values())
    print(f"{out}: {total} cells: " + ", ".join(f"{len(v)} {k}" for k, v in groups.items()))
    for item in groups["running"]:
        print(f"  running  {item['label']}  (pid {item['pid']} on {item['host']}, heartbeat {item['heartbeat_age_s']} s ago)")
    for item in groups["failed"]:
        print(f"  failed   {item['label']}: {item['reason']}")
    for item in groups["pending"]:
        print(f"  pending  {item['label']}")
    return 0
