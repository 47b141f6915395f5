"""What the launchers that hand cells to another scheduler (Slurm, Ray) share: one-line usage
errors for a missing extra, and turning a job or task that died without a result into the
cell's ``failed`` record (the unit inside it could not write one)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from benchmarks.run.worker import UnitResult

__all__ = ["usage_error", "first_line", "record_lost_unit", "current_record", "prepare_worker"]


def usage_error(msg: str) -> Exception:
    """A usage error of ``attnbench``: printed as one line, exit code 2."""
    from benchmarks.config.schema import CliError

    return CliError(msg)


def first_line(err: BaseException, limit: int = 200) -> str:
    """The telling line of a scheduler's long error message: the exception line at the end of
    a traceback it quotes (between ``----`` rules, as submitit does), else its first line."""
    lines = [ln.strip() for ln in str(err).splitlines() if ln.strip()]
    rules = [i for i, ln in enumerate(lines) if set(ln) == {"-"}]
    if len(rules) >= 2 and rules[1] > rules[0] + 1:
        return lines[rules[1] - 1][:limit]
    return (lines[0] if lines else type(err).__name__)[:limit]


def prepare_worker(plugins: list[str] | tuple[str, ...] = ()) -> None:
    """In a Slurm job or Ray worker before it runs a unit: import the plug-ins named in
    ``$ATTNBENCH_PLUGINS`` and ``plugins``, so that a cell of a plug-in task that crashes can
    still get its ``failed`` record written here (the unit's own process reports a broken
    plug-in itself)."""
    import contextlib

    from benchmarks.run.worker import load_plugins

    with contextlib.suppress(RuntimeError):
        load_plugins(list(plugins))


def current_record(out: Path, cell: Any) -> dict | None:
    """The cell's record as it is on disk now (for the one-line summary), or ``None``."""
    from benchmarks.run.records import on_disk
    from benchmarks.run.worker import record_target

    return on_disk(record_target(out, cell))


def record_lost_unit(out: Path, cell: Any, cause: str, resources: dict[str, Any]) -> UnitResult:
    """A job or task ended without returning the unit's result (cancelled, node lost, too many
    time-outs): write the cell's ``failed`` record with ``cause``, unless an ok one is there."""
    from benchmarks.run.worker import manifest_suite, write_crash_record

    if write_crash_record(out, cell, manifest_suite(out), cause, resources=resources, failure="external") is None:
        return UnitResult(cell.cell_id, "ok", None)
    return UnitResult(cell.cell_id, "failed", f"crashed: {cause}")
