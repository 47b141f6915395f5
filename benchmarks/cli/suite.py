"""The suite subcommands of ``attnbench``: ``run``, ``report``, ``data`` and the task part of
``list``. Each ``add_*`` adds a subparser; each handler returns an exit code, and raises
:class:`benchmarks.config.schema.CliError` for a usage error (one line, exit code 2)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from benchmarks.config.schema import CliError, ConfigError
from benchmarks.cli.options import add_data_options, check_data_dir, check_out_dir, resolve_config


# ----------------------------------------------------------------------------- run
def _reuse_dirs(values: list[str], out: Path, force: bool) -> tuple[Path, ...]:
    """The ``--reuse`` folders, checked: each an existing results folder, not ``--out`` itself."""
    if values and force:
        raise CliError("--reuse and --force contradict each other: --force trains every cell again, --reuse copies "
                       "finished ones; give one")
    dirs = []
    for v in values:
        d = Path(v).expanduser()
        if not d.is_dir():
            what = "is not a folder" if d.exists() else "no such directory"
            raise CliError(f"--reuse {v}: {what} (expected a results folder: the --out of an earlier run or tune)")
        if d.resolve() == out.resolve():
            raise CliError(f"--reuse {v}: is the run's own --out folder (its finished cells are skipped anyway)")
        dirs.append(d)
    return tuple(dirs)


def add_run(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("run", help="train and evaluate a suite (task x dataset x model x seed), then report",
                       description="Run every unfinished cell of a suite config, then write its report.")
    p.add_argument("config", metavar="CONFIG", help="a suite YAML, or the name of a shipped one (e.g. quick)")
    p.add_argument("--set", dest="sets", action="append", default=[], metavar="KEY=VALUE",
                   help="override a config key (dotted path, value as YAML), e.g. --set trainer.max_epochs=5; repeatable")
    p.add_argument("--out", metavar="DIR", help="output folder (default: results/<suite>)")
    add_data_options(p)
    p.add_argument("--accelerator", choices=("auto", "cpu", "gpu", "cuda"), help="override trainer.accelerator (as --set, so part of the cell ids)")
    p.add_argument("--devices", help="override trainer.devices (e.g. 1, or 0,1; as --set)")
    p.add_argument("--force", action="store_true", help="rerun finished cells too")
    p.add_argument("--retry-failed", action="store_true", help="rerun cells whose record says failed")
    p.add_argument("--reuse", action="append", default=[], metavar="DIR",
                   help="copy the finished records of this run's cells (same cell ids) from the results folder DIR "
                        "instead of training them, e.g. the folder of an attnbench tune whose trials at the chosen "
                        "values are this run's tuned cells; the copies name the tuning file and say reused.from "
                        "(repeatable; not with --force)")
    p.add_argument("--keep-checkpoints", action="store_true",
                   help="keep each cell's best weights beside its record (<record>.pt, weights only) for "
                        "attnbench eval (as --set keep_checkpoints=true; not part of the cell ids)")
    p.add_argument("--no-report", action="store_true", help="do not write the report at the end")
    p.add_argument("--tasks", metavar="T1,T2", help="run only the cells of these tasks: a slice of a long suite; "
                   "the cell ids are those of the whole suite, so a later run of it into the same --out skips them, "
                   "and the folder's manifest lists the whole suite, so the report counts the cells still to run "
                   "(the suite's micro_benchmarks still run)")
    p.add_argument("--models", metavar="M1,M2", help="run only the cells of these models: a slice, as --tasks (the "
                   "same cell ids; with --tasks, the cells of both)")
    p.add_argument("--dry-run", action="store_true", help="validate and list the cells, run nothing")
    p.add_argument("--plugin", action="append", default=[], metavar="MODULE",
                   help="import MODULE first, so it can register models, datasets or tasks (repeatable; "
                        "also $ATTNBENCH_PLUGINS, comma-separated); workers import it too")
    p.add_argument("--print-config", action="store_true",
                   help="print the resolved config (file + --set, defaults filled in) as YAML and exit")
    p.add_argument("--allow-failures", action="store_true",
                   help="exit 0 even when cells failed (exploratory use); by default any failed cell, "
                        "and a micro-benchmark that crashed, makes the exit code 1")
    p.add_argument("--strict", action="store_true",
                   help="also exit 1 when a micro-benchmark target is missed (a failed check: regression use "
                        "in CI); by default a missed target is a finding about this machine, listed first in "
                        "the summary and in the report's Warnings, and the run still exits 0")
    from benchmarks.cli.cells import add_launcher_arguments

    add_launcher_arguments(p)
    p.set_defaults(handler=cmd_run)


def cmd_run(args: argparse.Namespace) -> int:
    """Exit codes: 0 every cell ran and the report was written; 1 a cell failed (this run or a
    standing failed record) or a micro-benchmark crashed (0 with ``--allow-failures``), or, with
    ``--strict``, a micro-benchmark target was missed; 2 a usage or config error (nothing ran).
    A missed target (a failed check) is listed first in the closing summary either way."""
    from benchmarks.run.runner import DEFAULT_CACHE, RunOptions, run_cells, run_micro_benchmarks, run_suite
    from benchmarks.config.suite import expand, load_suite_with_notices

    if args.strict and args.allow_failures:
        raise CliError("--strict and --allow-failures contradict each other: --strict fails the run on a missed "
                       "micro-benchmark target, --allow-failures never fails it; give one")
    path = resolve_config(args.config)
    sets = list(args.sets)
    # --accelerator/--devices are overrides like any --set: they enter each cell's config and
    # so its id (a GPU run never takes a CPU record for its own)
    if args.accelerator:
        sets.append(f"trainer.accelerator={args.accelerator}")
    if args.devices is not None:
        parts = [d.strip() for d in args.devices.split(",")]
        if not all(p.isdigit() for p in parts) or (len(parts) == 1 and int(parts[0]) < 1):
            raise CliError(f"--devices {args.devices!r}: expected a count >= 1 (e.g. 1) or device indices (e.g. 0,1)")
        sets.append(f"trainer.devices={parts[0] if len(parts) == 1 else '[' + ','.join(parts) + ']'}")
    if args.keep_checkpoints:
        sets.append("keep_checkpoints=true")
    try:
        cfg, notices = load_suite_with_notices(path, sets)
    except ConfigError as err:
        raise CliError(str(err)) from None
    for line in notices:
        print(f"note: {line}")
    only_tasks = _only_tasks(cfg, args.tasks) if args.tasks is not None else None
    only_models = _only_models(cfg, args.models) if getattr(args, "models", None) is not None else None
    if args.print_config:
        import yaml

        print(yaml.safe_dump(cfg, sort_keys=False, default_flow_style=None), end="")
        return 0
    out = check_out_dir(args.out, cfg["suite"])
    data_dir = check_data_dir(args.data_dir)  # checked before --dry-run: it refuses what run would
    reuse = _reuse_dirs(args.reuse, out, args.force)
    opts = RunOptions(
        out=out,
        data_dir=data_dir,
        cache_dir=Path(args.cache_dir).expanduser() if args.cache_dir else DEFAULT_CACHE,
        force=args.force,
        retry_failed=args.retry_failed,
        only_tasks=only_tasks,
        only_models=only_models,
        reuse=reuse,
    )
    cells = run_cells(expand(cfg), opts)
    if args.jobs is None and cfg.get("jobs") and args.launcher == "local" and not args.gpus:
        args.jobs = cfg["jobs"]  # the suite's own parallelism, when the command line gives none
    if args.dry_run:
        from benchmarks.cli.cells import check_launcher_args, print_dry_run
        from benchmarks.cli.listing import wall_of
        from benchmarks.run.plan import plan_run

        check_launcher_args(args, cells)
        print(f"{path}: valid; {len(cells)} cells -> {out}")
        print_dry_run(cells, lambda c: f"({c.family})", lambda: plan_run(
            cells, cfg, jobs=args.jobs, cells_per_gpu=args.cells_per_gpu, gpus=args.gpus,
            header_wall=wall_of(path.read_text(encoding="utf-8")), out=out, force=args.force,
            retry_failed=args.retry_failed, reuse=reuse))
        return 0
    from benchmarks.cli.cells import make_launcher

    launcher = make_launcher(args, opts, cells)
    summary = run_suite(cfg, opts, source=str(path), launcher=launcher)
    if not getattr(launcher, "wait", True):  # --no-wait: submitted, nothing finished here yet
        print(f"submitted; follow with: attnbench status {out}  (then attnbench report {out})")
        return 0
    from benchmarks.cli.topup import top_up

    for more in top_up(cfg, out, lambda c: run_suite(c, opts, source=str(path), launcher=launcher), print):
        summary.ran += more.ran  # more seeds where a diagnostic is undecided (its max_seeds)
        summary.failed += more.failed
        summary.elsewhere += more.elsewhere
    bench_failed = run_micro_benchmarks(cfg, opts)
    missed = _failed_checks(out, cfg)
    _print_missed_targets(missed, strict=args.strict)
    elsewhere = f", {summary.elsewhere} left to another run" if summary.elsewhere else ""
    standing = f" ({summary.standing_failed} of them failed)" if summary.standing_failed else ""
    print(f"ran {summary.ran} cells ({len(summary.failed)} failed), skipped {summary.skipped} finished ones"
          f"{standing}{elsewhere}")
    for label in summary.failed:
        print(f"  failed: {label}")
    for name in bench_failed:
        print(f"  failed: micro-benchmark {name} (crashed)")
    if not args.no_report:
        from benchmarks.report import write_report

        written = write_report(out)
        from benchmarks.report.diagnostics import read_summary

        lines = read_summary(out)
        if lines:
            print("diagnostics (expected vs found; the report's overview has the table):")
            print("\n".join(lines))
        from benchmarks.report.sweeps import read_summary as read_sweeps

        if flips := read_sweeps(out):
            print("when (each swept expectation: where along its axis the verdict flips):")
            print("\n".join(flips))
        print(f"report: {written['REPORT.md']}  and  {written['report.html']}")
    if args.allow_failures:
        return 0
    counted = len(summary.failed) + len(bench_failed) + (len(missed) if args.strict else 0)
    if counted:
        hint = "--strict counts the missed targets" if args.strict and missed else "--allow-failures makes it 0"
        print(f"attnbench: {counted} failed in this run (exit code 1; {hint})", file=sys.stderr)
    if summary.standing_failed:  # a rerun that skipped failed records has not succeeded either
        print(f"attnbench: {summary.standing_failed} failed records from earlier runs stand (exit code 1; "
              "--retry-failed reruns them, --allow-failures makes it 0)", file=sys.stderr)
    return 1 if counted or summary.standing_failed else 0


def _print_missed_targets(missed: list[str], *, strict: bool) -> None:
    """The micro-benchmark targets this machine missed, first in the closing summary: a finding
    about the machine, which fails the run only with ``--strict``."""
    if not missed:
        return
    what = ("they fail this run (--strict)" if strict
            else "findings about this machine, not failures of the run; --strict makes them fail it")
    print(f"micro-benchmark targets missed ({len(missed)}; {what}):")
    for line in missed:
        print(f"  missed: {line}")


def _failed_checks(out: Path, cfg: dict) -> list[str]:
    """The suite's micro-benchmark checks that failed (``benchmarks.report.failed_checks``), each
    as one line: listed first in the summary; they make the run exit 1 only with ``--strict``."""
    from benchmarks.report import failed_checks

    return list(failed_checks(out, [out / "bench" / n for n in cfg.get("micro_benchmarks", [])]))


def _only_tasks(cfg: dict, tasks: str) -> tuple[str, ...]:
    """The task names of ``--tasks`` (comma-separated); a task the suite does not have is a
    one-line usage error listing those it has."""
    wanted = [t.strip() for t in tasks.split(",") if t.strip()]
    present = list(dict.fromkeys(entry["task"] for entry in cfg["cells"]))
    unknown = [t for t in wanted if t not in present]
    if not wanted:
        raise CliError(f"--tasks {tasks!r}: expected task names separated by commas, e.g. {','.join(present[:2])}; "
                       f"suite {cfg['suite']!r} has: {', '.join(present)}")
    if unknown:
        raise CliError(f"--tasks {tasks!r}: {', '.join(unknown)} not in suite {cfg['suite']!r}; "
                       f"its tasks: {', '.join(present)}")
    return tuple(wanted)


def _only_models(cfg: dict, models: str) -> tuple[str, ...]:
    """The model names of ``--models`` (comma-separated); a model the suite does not run is a
    one-line usage error listing those it runs."""
    from benchmarks.config.suite import expand

    wanted = [m.strip() for m in models.split(",") if m.strip()]
    present = list(dict.fromkeys(c.model for c in expand(cfg)))
    unknown = [m for m in wanted if m not in present]
    if not wanted or unknown:
        what = f"{', '.join(unknown)} not in suite {cfg['suite']!r}" if unknown else "expected model names separated by commas"
        raise CliError(f"--models {models!r}: {what}; its models: {', '.join(present)}")
    return tuple(wanted)


# ----------------------------------------------------------------------------- report
def add_report(sub: argparse._SubParsersAction) -> None:
    from benchmarks.report import add_report_arguments

    p = sub.add_parser("report", help="write REPORT.md, report.html, summary.csv and plots from result records")
    add_report_arguments(p)
    p.set_defaults(handler=cmd_report)


def cmd_report(args: argparse.Namespace) -> int:
    from benchmarks.report import run_report_command

    return run_report_command(args)


# ----------------------------------------------------------------------------- data
def add_data(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("data", help="check (and fetch, with a network) the datasets a config needs",
                       description="Load each real dataset of a config (default: every registered real "
                       "dataset with its default parameters) and print its size and checksum, or what is missing.")
    p.add_argument("config", nargs="?", metavar="CONFIG", help="a suite YAML or shipped config name")
    add_data_options(p)
    p.set_defaults(handler=cmd_data)


def cmd_data(args: argparse.Namespace) -> int:
    from benchmarks.run.runner import DEFAULT_CACHE
    from benchmarks.config.suite import load_suite
    from benchmarks.run.data_check import check_dataset
    from tasks.common.registry import available_tasks, get_task

    data_dir = check_data_dir(args.data_dir)
    cache = Path(args.cache_dir).expanduser() if args.cache_dir else DEFAULT_CACHE
    wanted: list[tuple[str, str, dict]] = []
    if args.config:
        try:
            cfg = load_suite(resolve_config(args.config))
        except ConfigError as err:
            raise CliError(str(err)) from None
        for entry in cfg["cells"]:
            ds = get_task(entry["task"]).datasets.get(entry["dataset"])
            params = {**ds.params, **(entry["dataset_params"] or {})}
            if (entry["task"], entry["dataset"], params) not in wanted:
                wanted.append((entry["task"], entry["dataset"], params))
    else:
        for tname in available_tasks():
            task = get_task(tname)
            for dname, ds in task.datasets.items():
                wanted.append((tname, dname, dict(ds.params)))
    bad = 0
    for tname, dname, params in wanted:
        label = f"{tname}/{dname} {params}" if params else f"{tname}/{dname}"
        status, text = check_dataset(tname, dname, params, data_dir, cache)
        bad += status != "ok"
        print(f"{status:<8} {label}{' ' if status == 'ok' else ': '}{text}")
    return 1 if bad else 0


# ----------------------------------------------------------------------------- page
def add_page(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("page", help="regenerate the results page (results/README.md) and the README's headline table",
                       description="Write results/README.md and the README's headline table from results/page.yaml "
                                   "and the committed reference records it names.")
    p.add_argument("spec", nargs="?", metavar="SPEC", help="the page spec (default: results/page.yaml)")
    p.add_argument("--check", action="store_true", help="write nothing; exit 1 with one line per drift: a generated file out of date, or a prose number (seeds, cells, epochs, cores, times, a published figure's runs) the records contradict")
    p.set_defaults(handler=cmd_page)


def cmd_page(args: argparse.Namespace) -> int:
    """Exit codes: 0 written (or current with --check), 1 out of date (--check), 2 a bad spec."""
    from benchmarks.report.page_check import main as page_main

    return page_main(([args.spec] if args.spec else []) + (["--check"] if args.check else []))

