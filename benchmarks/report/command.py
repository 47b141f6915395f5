"""``attnbench report``: its arguments, which reports to write for the folders named, and the
handler. A :class:`~benchmarks.report.ReportError` is a :class:`~benchmarks.config.schema.ConfigError`,
which the CLI prints as a one-line usage error (exit code 2); nothing here imports the CLI."""

from __future__ import annotations

import argparse
import os
import re
from pathlib import Path
from typing import Sequence

from benchmarks.run.records import MANIFEST, RUNS_DIR
from benchmarks.report.build import write_report
from benchmarks.report.results import ReportError

__all__ = ["add_report_arguments", "suite_folders", "report_targets", "run_report_command"]


def add_report_arguments(parser: argparse.ArgumentParser) -> None:
    """Arguments of ``attnbench report``: ``[RESULTS_DIR ...] [--out DIR] [--bench-dir DIR ...]``."""
    parser.add_argument("results_dirs", nargs="*", metavar="RESULTS_DIR",
                        help="a suite folder (results/<suite>); a folder of suites reports each suite on "
                             "its own; several folders make one combined report (needs --out). Default: "
                             "every suite folder under results/ except results/reference, each on its own")
    parser.add_argument("--out", metavar="DIR", default=None, help="where to write the report (default: the suite folder)")
    parser.add_argument("--merge-suites", dest="merge_suites", metavar="NAME", default=None,
                        help="report the suites of the folders named as one suite NAME: leaderboards and "
                             "comparisons by task and dataset across them (peers run from another config "
                             "beside a suite's models); a model that ran in several suites keeps a row per "
                             "suite, 'model [suite]'")
    parser.add_argument("--bench-dir", dest="bench_dirs", action="append", default=None, metavar="DIR",
                        help="folder with bench_attention.json/.png or bench_complexity.json/.png (repeatable; "
                             "default: RESULTS_DIR, RESULTS_DIR/bench[/NAME], RESULTS_DIR/../bench[/NAME])")


def suite_folders(root: str | os.PathLike, *, skip_reference: bool = True) -> list[Path]:
    """The suite folders at or under ``root``: folders with a ``suite.json`` or a ``runs/``
    folder (not searched further). ``skip_reference`` leaves out ``reference/`` sub-folders
    (committed reference results), so that fresh results are never pooled with them."""
    root = Path(root)
    if (root / MANIFEST).is_file() or (root / RUNS_DIR).is_dir():
        return [root]
    found: list[Path] = []
    if not root.is_dir():
        return found
    for child in sorted(p for p in root.iterdir() if p.is_dir() and not p.name.startswith(".")):
        if skip_reference and child.name == "reference":
            continue
        found.extend(suite_folders(child, skip_reference=skip_reference))
    return found


#: a ``--merge-suites`` name: it becomes the merged suite's name in titles, file names and CSV rows
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]*")


def report_targets(results_dirs: Sequence[str], out: str | None,
                   merge: str | None = None) -> list[tuple[list[Path], Path | None]]:
    """What ``attnbench report`` writes: ``[(folders, out_dir)]``, one report per entry. A report
    covers one suite folder unless the user names several (then one combined report in
    ``out``) or ``merge``s them (one report, in ``out`` or the one folder named); committed
    reference results are never pooled with fresh ones."""
    if merge is not None and not _NAME.fullmatch(merge):
        raise ReportError(f"--merge-suites {merge!r}: expected a suite name of letters, digits, '_', '.' or '-' "
                          "(e.g. --merge-suites speech_all)")
    if not results_dirs:
        folders = suite_folders("results")
        if not folders:
            raise ReportError("no suite folders under results/ (results/reference is left out unless named); "
                              "name one: attnbench report results/<suite>")
        if merge is not None and out is None and len(folders) > 1:
            raise ReportError(f"--merge-suites makes one report of the {len(folders)} suite folders under results/: "
                              "name where with --out DIR")
        return [([f], None) for f in folders] if out is None or len(folders) == 1 else [(folders, Path(out))]
    for d in results_dirs:
        if not Path(d).is_dir():
            raise ReportError(f"results folder not found: {d}")
    if len(results_dirs) > 1:
        if out is None:
            raise ReportError(f"{len(results_dirs)} results folders make one combined report: name where with --out DIR")
        return [([Path(d) for d in results_dirs], Path(out))]
    root = Path(results_dirs[0])
    folders = suite_folders(root, skip_reference=root.name != "reference" and "reference" not in root.parts)
    if len(folders) <= 1:
        return [([root], Path(out) if out else None)]
    if merge is not None:
        return [(folders, Path(out) if out else root)]
    if out is not None:
        raise ReportError(f"{root} holds {len(folders)} suites ({', '.join(f.name for f in folders)}): each is "
                          "reported in its own folder, so --out does not apply; name the folders to combine them")
    return [([f], None) for f in folders]


def run_report_command(args: argparse.Namespace) -> int:
    """Handler for ``attnbench report``: writes each report and prints what it wrote. A
    :class:`ReportError` (nothing to report on, a bad folder) reaches the CLI as its usage
    error (exit code 2)."""
    merge = getattr(args, "merge_suites", None)
    targets = report_targets(args.results_dirs, args.out, merge)
    for folders, out in targets:
        written = write_report(folders if len(folders) > 1 else folders[0], out, bench_dirs=args.bench_dirs,
                               merge=merge)
        for key in ("REPORT.md", "report.html", "summary.csv"):
            print(f"wrote {written[key]}")
        n_plots = sum(1 for k in written if k.startswith("plots/"))
        if n_plots:
            print(f"wrote {n_plots} plot(s) in {written['REPORT.md'].parent / 'plots'}")
    return 0
