"""``attnbench tune CONFIG``: a fair learning rate for every model family.

The search is a grid (no search library: every point is tried, the same points for every model,
with the same seeds): the config's cells (of ``--tasks`` / ``--diagnostic``), once per grid point
with the point as ``module_params`` (:func:`benchmarks.config.tuning.trial_config`), run as
ordinary cells through ``run``'s launchers into ``--out`` (finished trials are skipped on a
rerun); then the choice on validation (:mod:`benchmarks.report.tuning`) is written to the tuning
file (``--file``), and ``TUNING.md`` beside the trials. ``--check`` rebuilds the file from its
records and prints one line per difference.

Exit codes: 0 written (``--check``: the file matches its records); 1 a tuned model without a
choice (no grid point trained every seed), or (``--check``) a difference; 2 a usage, config or
input error (bad grid, unknown config, a tuning file that is missing or does not match the config).
"""

from __future__ import annotations

import argparse
import hashlib
from pathlib import Path
from typing import Any

from benchmarks.cli.options import add_data_options, check_data_dir, check_out_dir, resolve_config
from benchmarks.config.schema import CliError, ConfigError


def add_tune(sub: argparse._SubParsersAction) -> None:
    from benchmarks.config.tuning import DEFAULT_GRID

    p = sub.add_parser("tune", help="choose each model's learning rate on validation over one grid; write a tuning file",
                       description="Run a config's cells once per learning rate of a grid (ordinary cells: any "
                                   "launcher, finished trials skipped), choose each model's on validation, and write "
                                   "the tuning file a config names with `tuning: PATH`.")
    p.add_argument("config", metavar="CONFIG", help="a suite YAML, or the name of a shipped one (e.g. quick)")
    p.add_argument("--grid", metavar="LR1,LR2,...",
                   help=f"learning rates to try, the same for every model (default {','.join(map(str, DEFAULT_GRID))})")
    p.add_argument("--also", metavar="KEY=V1,V2,...", help="one more module_params key searched with lr (every pair)")
    p.add_argument("--tasks", metavar="T1,T2", help="tune only the cells of these tasks")
    p.add_argument("--diagnostic", metavar="NAME", help="tune only the cells of this diagnostic")
    p.add_argument("--set", dest="sets", action="append", default=[], metavar="KEY=VALUE",
                   help="override a config key before the trials are made (as run --set; e.g. seeds=3)")
    p.add_argument("--out", metavar="DIR", help="the trials' records (default: results/tuning/<suite>)")
    p.add_argument("--file", metavar="PATH", help="the tuning file (default: benchmarks/configs/tuning/<suite>.yaml)")
    p.add_argument("--check", action="store_true", help="write nothing: rebuild --file from its records (its own "
                   "grid, --set and selection) and print one line per difference (exit 1)")
    p.add_argument("--dry-run", action="store_true", help="list the trial cells and their plan; run nothing")
    add_data_options(p)
    p.add_argument("--force", action="store_true", help="rerun finished trials too")
    p.add_argument("--retry-failed", action="store_true", help="rerun trials whose record says failed")
    p.add_argument("--plugin", action="append", default=[], metavar="MODULE", help="import MODULE first (repeatable)")
    from benchmarks.cli.cells import add_launcher_arguments

    add_launcher_arguments(p)
    p.set_defaults(handler=cmd_tune)


def _search(args: argparse.Namespace) -> dict[str, Any]:
    """The search the command line asks for: grid points, keys, selection and overrides."""
    from benchmarks.config.tuning import DEFAULT_GRID, grid_points, parse_values

    lrs = parse_values(args.grid, "lr", "--grid") if args.grid is not None else list(DEFAULT_GRID)
    also = None
    if args.also is not None:
        key, sep, values = args.also.partition("=")
        key = key.strip().removeprefix("module_params.")
        if not sep or not key or key == "lr":
            raise ConfigError(f"--also {args.also!r}: expected KEY=V1,V2 with a module_params key other than lr, "
                              "e.g. --also weight_decay=0,0.01")
        also = (key, parse_values(values, key, f"--also {key}="))
    tasks = [t.strip() for t in args.tasks.split(",") if t.strip()] if args.tasks else None
    if args.tasks is not None and not tasks:
        raise ConfigError(f"--tasks {args.tasks!r}: expected task names separated by commas")
    return {"method": "grid", "keys": ["lr"] + ([also[0]] if also else []), "grid": grid_points(lrs, also),
            "tasks": tasks, "diagnostic": args.diagnostic, "sets": list(args.sets)}


def _trials(path: Path, search: dict[str, Any]) -> tuple[dict[str, Any], list[Any]]:
    """The validated trial config of ``search`` over the config at ``path``, and its cells."""
    from benchmarks.config.suite import expand, load_suite_with_notices, validate_suite
    from benchmarks.config.tuning import trial_config

    # the trials are what a tuning file is made from: the config's own (perhaps not written yet) is not read
    cfg, notices = load_suite_with_notices(path, [*search["sets"], "tuning=null"])
    for line in notices:
        print(f"note: {line}")
    trial = validate_suite(trial_config(cfg, search["grid"], tasks=search["tasks"], diagnostic=search["diagnostic"]),
                           source=str(path))
    return trial, expand(trial)


def _cells_sha(cells: list[Any]) -> str:
    return "sha256:" + hashlib.sha256(",".join(sorted(c.cell_id for c in cells)).encode()).hexdigest()


def _records_dir(value: str) -> Path:
    from benchmarks.config.tuning import REPO_ROOT

    p = Path(value)
    return p if p.is_absolute() else REPO_ROOT / p


def build_doc(path: Path, trial: dict[str, Any], cells: list[Any], search: dict[str, Any], out: Path
              ) -> tuple[dict[str, Any], int]:
    """The tuning document of the trials' records under ``out``, and how many trial cells have
    no record yet."""
    from benchmarks.config.tuning import TUNING_SCHEMA, display_path
    from benchmarks.report.tuning import CONFIDENCE, RULE, tuning_entries
    from benchmarks.run import records as R

    ids = {c.cell_id for c in cells}
    recs = {r["cell_id"]: r for r in (R.load_records(out) if (out / R.RUNS_DIR).is_dir() else [])
            if r.get("cell_id") in ids}
    dates = sorted(str(r.get("finished")) for r in recs.values() if r.get("finished"))
    doc = {
        "schema": TUNING_SCHEMA,
        "suite": trial["suite"].removesuffix(".tuning"),
        "config": {"path": display_path(path), "sets": search["sets"], "cells_sha256": _cells_sha(cells)},
        "search": {"method": "grid", "keys": search["keys"], "grid": search["grid"],
                   "seeds": sorted({c.seed for c in cells}), "tasks": search["tasks"], "diagnostic": search["diagnostic"],
                   "trials": len(cells), "confidence": CONFIDENCE, "rule": RULE},
        "records": display_path(out),
        "date": dates[-1] if dates else None,
        "entries": tuning_entries(cells, recs, search["grid"], search["keys"]),
    }
    return doc, len(ids - set(recs))


def cmd_tune(args: argparse.Namespace) -> int:
    try:
        if args.check:
            return _check(args)
        return _tune(args)
    except ConfigError as err:
        raise CliError(str(err)) from None


def _default_file(suite: str) -> Path:
    from benchmarks.config.tuning import TUNING_DIR

    return TUNING_DIR / f"{suite}.yaml"


def _check_writable(target: Path) -> None:
    """The tuning file's folder is (or can be made) writable: checked before any trial runs."""
    import os

    probe = target.parent
    while not probe.exists():
        probe = probe.parent
    if not probe.is_dir() or not os.access(probe, os.W_OK | os.X_OK):
        raise CliError(f"--file {target}: {probe} is not a writable folder")


def _tune(args: argparse.Namespace) -> int:
    from benchmarks.config.tuning import display_path
    from benchmarks.report.document import write_text_atomic
    from benchmarks.report.tuning import dump_tuning, summary_lines, tuning_markdown
    from benchmarks.run.runner import DEFAULT_CACHE, RunOptions, run_suite

    path = resolve_config(args.config)
    search = _search(args)
    trial, cells = _trials(path, search)
    suite = trial["suite"].removesuffix(".tuning")
    out = check_out_dir(args.out or str(Path("results") / "tuning" / suite), suite)
    target = Path(args.file) if args.file else _default_file(suite)
    if target.is_dir():
        raise CliError(f"--file {target}: is a folder, expected the tuning file's path (e.g. {target / (suite + '.yaml')})")
    _check_writable(target)
    entries = len({(c.task, c.dataset, c.model) for c in cells})
    per = len(cells) // max(1, len(search["grid"]))
    print(f"tune {suite}: {len(cells)} trial cells = {len(search['grid'])} grid points x {per} cells "
          f"({entries} models, {len({c.seed for c in cells})} seeds) -> {out}; tuning file {display_path(target)}")
    opts = RunOptions(out=out, data_dir=check_data_dir(args.data_dir),
                      cache_dir=Path(args.cache_dir).expanduser() if args.cache_dir else DEFAULT_CACHE,
                      force=args.force, retry_failed=args.retry_failed)
    if args.jobs is None and trial.get("jobs") and args.launcher == "local" and not args.gpus:
        args.jobs = trial["jobs"]
    if args.dry_run:
        from benchmarks.cli.cells import check_launcher_args, print_dry_run
        from benchmarks.run.plan import plan_run

        check_launcher_args(args, cells)
        print_dry_run(cells, lambda c: f"{c.config['module_params'].get('lr'):g}  ({c.family})", lambda: plan_run(
            cells, trial, jobs=args.jobs, cells_per_gpu=args.cells_per_gpu, gpus=args.gpus, out=out, force=args.force,
            retry_failed=args.retry_failed))
        return 0
    from benchmarks.cli.cells import make_launcher

    launcher = make_launcher(args, opts, cells)
    summary = run_suite(trial, opts, source=str(path), launcher=launcher)
    if not getattr(launcher, "wait", True):
        print(f"submitted; when the trials are done, rerun this command to write {display_path(target)}")
        return 0
    doc, missing = build_doc(path, trial, cells, search, out)
    if missing:
        raise CliError(f"{missing} trial cells have no record in {out} (another run still holds them?): rerun "
                       "this command when they are done")
    target.parent.mkdir(parents=True, exist_ok=True)
    write_text_atomic(target, dump_tuning(doc))
    write_text_atomic(out / "TUNING.md", tuning_markdown(doc, display_path(target), out))
    print(f"ran {summary.ran} trials ({len(summary.failed)} failed), skipped {summary.skipped} finished ones")
    print("\n".join(summary_lines(doc)))
    print(f"tuning file: {display_path(target)}  (a config names it with `tuning: PATH`); table: {out / 'TUNING.md'}")
    print(f"then `attnbench run {args.config} --reuse {out}` copies the trials at the chosen values (the same cells) "
          "instead of training them again")
    unchosen = [e for e in doc["entries"] if e["chosen"] is None]
    if unchosen:
        print(f"attnbench: {len(unchosen)} model(s) without a choice: no grid point trained every seed (exit code 1)")
    return 1 if unchosen else 0


def _check(args: argparse.Namespace) -> int:
    """``--check``: the file against a fresh build from its records (exit 0 same, 1 different)."""
    import yaml

    from benchmarks.config.tuning import display_path, read_tuning_file
    from benchmarks.report.tuning import doc_differences, dump_tuning

    given = [o for o, v in (("--grid", args.grid), ("--also", args.also), ("--tasks", args.tasks),
                            ("--diagnostic", args.diagnostic), ("--set", args.sets or None)) if v is not None]
    if given:
        raise CliError(f"--check takes the search from the tuning file (its grid, sets and selection); drop {', '.join(given)}")
    path = resolve_config(args.config)
    if args.file:
        target = Path(args.file)
    else:
        from benchmarks.config.suite import load_suite

        target = _default_file(load_suite(path)["suite"])
    if not target.is_file():
        from benchmarks.config.tuning import TUNING_DIR, tuning_files

        have = tuning_files([target.parent, TUNING_DIR])
        raise CliError(f"--file {display_path(target)}: no such tuning file; tuning files: {', '.join(have) or 'none'} "
                       f"(attnbench tune {args.config} writes one)")
    doc, _ = read_tuning_file(target)
    search = {k: (doc.get("search") or {}).get(k) for k in ("keys", "grid", "tasks", "diagnostic")}
    search["sets"] = list((doc.get("config") or {}).get("sets") or [])
    if not isinstance(search["grid"], list) or not search["grid"]:
        raise CliError(f"tuning file {display_path(target)}: search.grid is missing; rerun attnbench tune")
    trial, cells = _trials(path, search)
    want = (doc.get("config") or {}).get("cells_sha256")
    if want != _cells_sha(cells):
        raise CliError(f"tuning file {display_path(target)} does not match {display_path(path)}: its trial cells "
                       f"({(doc.get('search') or {}).get('trials')}) are not the {len(cells)} this config makes now "
                       f"(its cells, seeds or epochs changed); rerun attnbench tune {args.config}")
    out = Path(args.out) if args.out else _records_dir(str(doc.get("records") or ""))
    if not out.is_dir():
        raise CliError(f"the records of {display_path(target)} are not at {out}: give --out DIR")
    fresh, missing = build_doc(path, trial, cells, search, out)
    fresh["records"] = doc.get("records")  # where they are read from now is no difference
    text, now = target.read_text(encoding="utf-8"), dump_tuning(fresh)
    if text == now:
        print(f"{display_path(target)}: matches its {len(cells)} trial records in {out}")
        return 0
    lines = doc_differences(doc, yaml.safe_load(now)) or [f"{display_path(target)}: the text differs from a fresh build "
                                                         "(formatting or the header): rerun attnbench tune"]
    if missing:
        lines.insert(0, f"{missing} trial cells have no record in {out}")
    for line in lines:
        print(f"{display_path(target)}: {line}")
    return 1
