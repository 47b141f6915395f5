"""What the micro-benchmarks next to a results folder say about themselves: their failed checks
and the warnings they stored (a busy machine at start, attn_core changing mid-sweep, a plot
that failed). The report lists them under Warnings and at the top of the Overview;
:func:`failed_checks` gives ``attnbench run`` the targets this machine missed, which it lists
first in its closing summary (a finding about the machine; they fail the run only with
``--strict``).

A check is ``{"name", "value", "target", "pass", "note"?}`` (:mod:`benchmarks.micro.checks`):
``pass`` False is a failure; True a pass (an expected outcome that was met, such as
``oom (expected)``, included); None is information, a time ratio whose interval could not
decide (``decision: inconclusive``), or a target that does not apply to the sizes measured
(the report says "not applicable", never "FAIL").
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Sequence

from benchmarks.report.format import interval_text
from benchmarks.report.micro import bench_candidate_dirs, find_bench
from benchmarks.report.results import Warn

__all__ = ["BenchOutput", "bench_outputs", "failed_checks", "check_message", "bench_warnings"]


@dataclass
class BenchOutput:
    """One micro-benchmark's JSON found for a report: its name, file and parsed document
    (None when the file is not readable JSON, or not a JSON object)."""

    name: str
    json_path: Path
    doc: dict[str, Any] | None


def _bench_names() -> list[str]:
    """Every micro-benchmark name a report may find output of: the registry of ``attnbench
    bench``, the registered section renderers and the domains (a domain's benchmark is named
    after it)."""
    from benchmarks.config.micro import MICRO_BENCHMARKS
    from benchmarks.report.sections import BENCH_RENDERERS
    from tasks.common.registry import TASK_PACKAGES

    return sorted(set(MICRO_BENCHMARKS) | set(BENCH_RENDERERS) | set(TASK_PACKAGES))


def bench_outputs(results_dir: str | os.PathLike,
                  bench_dirs: Sequence[str | os.PathLike] | None = None) -> list[BenchOutput]:
    """The micro-benchmark JSONs the report of ``results_dir`` shows (looked for as the report
    does: ``bench_dirs``, else :func:`~benchmarks.report.micro.bench_candidate_dirs`), each once."""
    out, seen = [], set()
    for name in _bench_names():
        cands = bench_dirs if bench_dirs is not None else bench_candidate_dirs(results_dir, name)
        found = find_bench(cands, f"bench_{name}")
        if found is None or found.json_path is None:
            continue
        key = found.json_path.resolve()
        if key in seen:
            continue
        seen.add(key)
        out.append(BenchOutput(name, found.json_path, found.doc))
    return out


def check_message(name: str, check: dict[str, Any]) -> str:
    """``bench NAME: FAIL <check>: <value> (target <target>)``, with the interval of a time ratio
    (``95% CI 1.12-1.23, 10 interleaved rounds``) and the check's note."""
    v = check.get("value")
    value = f"{v:.4g}" if isinstance(v, float) else ("–" if v is None else str(v))
    note = "".join(f"; {t}" for t in (interval_text(check), check.get("note")) if t)
    return f"bench {name}: FAIL {check.get('name')}: {value} (target {check.get('target')}){note}"


def _failed(doc: dict[str, Any] | None) -> list[dict[str, Any]]:
    checks = (doc or {}).get("checks")
    if not isinstance(checks, list):
        return []
    return [c for c in checks if isinstance(c, dict) and c.get("pass") is False]


def failed_checks(results_dir: str | os.PathLike,
                  bench_dirs: Sequence[str | os.PathLike] | None = None) -> list[str]:
    """One line per failed micro-benchmark check next to ``results_dir`` (as its report finds
    them), naming the benchmark, the check, its value and target; empty when every check passed,
    was inconclusive or was information. ``attnbench run`` lists them first in its summary and
    counts them as failures only with ``--strict``."""
    return [f"{check_message(b.name, c)} [{b.json_path}]"
            for b in bench_outputs(results_dir, bench_dirs) for c in _failed(b.doc)]


def bench_warnings(outputs: Sequence[BenchOutput], warn: Warn) -> None:
    """The report's warnings from micro-benchmark output: each failed check (``failed_checks``),
    each warning a benchmark stored, a benchmark that did not finish or whose plot failed, and a
    file that is not readable JSON (``unreadable``)."""
    for b in outputs:
        where = f"bench {b.name} ({b.json_path})"
        if b.doc is None:
            warn("unreadable", f"{b.json_path}: not readable as JSON (an object); its checks and warnings are unknown")
            continue
        for c in _failed(b.doc):
            warn("failed_checks", check_message(b.name, c))
        stored = b.doc.get("warnings")
        if isinstance(stored, str):
            stored = [stored]
        for w in stored if isinstance(stored, list) else []:
            warn("bench", f"{where}: {w}")
        status = b.doc.get("status")
        if status not in (None, "done"):
            warn("bench", f"{where}: status {status!r}: the sweep did not finish, its points and checks are partial")
        if b.doc.get("plot_error"):
            warn("bench", f"{where}: plot failed: {b.doc['plot_error']}")
