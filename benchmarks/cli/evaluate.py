"""``attnbench eval OUT --dataset-params KEY=VALUE ...``: score the weights that cells kept
(``--keep-checkpoints``) on a new test set, without training, and add it to their records.

Argument parsing only; the work is :func:`benchmarks.run.scoring.evaluate`."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from benchmarks.config.schema import CliError
from benchmarks.cli.options import check_data_dir

__all__ = ["add_eval", "cmd_eval"]


def add_eval(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "eval", help="score kept weights (run --keep-checkpoints) on a new test set, without training",
        description="Score every finished cell under OUT that kept its best weights on the cell's dataset with "
                    "--dataset-params changed (the test split only), store the result in each record under "
                    "test_sets.NAME, then rewrite OUT's report.")
    p.add_argument("out", metavar="OUT", help="a suite's output folder (holds suite.json and runs/)")
    p.add_argument("--dataset-params", nargs="+", required=True, metavar="KEY=VALUE",
                   help="dataset parameters that define the new test set (values as YAML), "
                        "e.g. test_set=test_2017_flickr or test_file=/data/en_gum-ud-test.conllu")
    p.add_argument("--name", help="the test set's name in the records and the report (default: from the values)")
    p.add_argument("--task", action="append", default=[], help="only cells of this task (repeatable)")
    p.add_argument("--dataset", action="append", default=[], help="only cells of this dataset (repeatable)")
    p.add_argument("--model", action="append", default=[], help="only cells of this model (repeatable)")
    p.add_argument("--data-dir", metavar="DIR", help="read-only datasets folder (default: $ATTNBENCH_DATA)")
    p.add_argument("--cache-dir", metavar="DIR", help="writable data cache (default: $ATTNBENCH_CACHE)")
    p.add_argument("--accelerator", choices=("cpu", "gpu", "cuda"), help="default: the device the cell trained on")
    p.add_argument("--force", action="store_true", help="score again where the test set is already stored")
    p.add_argument("--no-report", action="store_true", help="do not rewrite the report")
    p.set_defaults(handler=cmd_eval)


def _params(items: list[str]) -> dict[str, Any]:
    from benchmarks.config.schema import ConfigError, parse_override

    out: dict[str, Any] = {}
    for item in items:
        try:
            parts, value = parse_override(item)
        except ConfigError as err:
            raise ConfigError(str(err).replace("--set", "--dataset-params").replace("trainer.max_epochs=3", "test_set=NAME")) from None
        if len(parts) != 1:
            raise ConfigError(f"--dataset-params {item!r}: expected KEY=VALUE with a plain dataset parameter name")
        out[parts[0]] = value
    return out


def _check(out: Path, name: str, override: dict[str, Any], select) -> int:
    """Validate the override against every selected cell's dataset before anything is scored;
    returns how many records kept weights."""
    import json

    from benchmarks.run.records import iter_record_files
    from benchmarks.config.schema import ConfigError, Problems
    from benchmarks.config.suite import resolve_test_sets
    from tasks.common.registry import UnknownNameError, get_task

    problems, seen, kept = Problems("attnbench eval"), set(), 0
    for path in iter_record_files(out):
        try:
            rec = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue
        if not isinstance(rec, dict) or rec.get("status") != "ok" or not select(rec) or not rec.get("checkpoint"):
            continue
        kept += 1
        cfg = rec.get("config") or {}
        key = (cfg.get("task"), cfg.get("dataset"), json.dumps(cfg.get("dataset_params"), sort_keys=True))
        if key in seen:
            continue
        seen.add(key)
        with problems.collect():
            try:
                ds = get_task(cfg["task"]).datasets.get(cfg["dataset"])
            except UnknownNameError as err:
                raise ConfigError(f"attnbench eval: {path}: {err}") from None
            resolve_test_sets({name: override}, ds, cfg.get("dataset_params") or {},
                       f"--dataset-params (dataset {cfg['task']}/{cfg['dataset']})", "attnbench eval", named=False)
    problems.raise_if_any()
    return kept


def cmd_eval(args: argparse.Namespace) -> int:
    """Exit codes: 0 every selected record scored (or already had the test set), 1 some
    failed, 2 bad arguments or nothing to score."""
    from benchmarks.run.runner import DEFAULT_CACHE
    from benchmarks.config.schema import ConfigError
    from benchmarks.run.scoring import default_name, evaluate

    out = Path(args.out).expanduser()
    if not (out / "runs").is_dir():
        raise CliError(f"{out}: no runs/ folder (not a suite output folder)")
    try:
        override = _params(args.dataset_params)
    except ConfigError as err:
        raise CliError(str(err)) from None
    name = args.name or default_name(override)

    def select(rec: dict[str, Any]) -> bool:
        return all(not want or rec.get(key) in want
                   for key, want in (("task", args.task), ("dataset", args.dataset), ("model", args.model)))

    try:
        kept = _check(out, name, override, select)
    except ConfigError as err:
        raise CliError(str(err)) from None
    if not kept:
        raise CliError(f"{out}: no finished cell{' of the selection' if args.task or args.dataset or args.model else ''} "
                         "kept its weights (run the suite with --keep-checkpoints)")
    print(f"test set {name!r} ({', '.join(f'{k}={v!r}' for k, v in override.items())}): {kept} cells with kept weights")
    scored, skipped, failures = evaluate(
        out, name, override, select=select, data_dir=check_data_dir(args.data_dir),
        cache_dir=Path(args.cache_dir).expanduser() if args.cache_dir else DEFAULT_CACHE,
        accelerator=args.accelerator, force=args.force)
    print(f"scored {scored}, skipped {skipped} (already scored: --force scores again), failed {len(failures)}")
    if scored and not args.no_report:
        from benchmarks.report import write_report

        written = write_report(out)
        print(f"report: {written['REPORT.md']}")
    if failures:
        print(f"attnbench: {len(failures)} cells could not be scored (exit code 1)", file=sys.stderr)
        return 1
    return 0
