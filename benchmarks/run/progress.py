"""Progress of one run over all its workers, whatever the launcher: cells done / running /
failed / pending and an ETA, read from the output folder itself (records written since the run
started, live claims), so a local pool, Slurm arrays and Ray tasks are followed the same way.

The ETA weighs each cell by its predicted seconds when the run has them (the plan's measured costs,
:func:`benchmarks.run.plan.predicted_seconds`): a run that starts its longest cells first would
otherwise extrapolate their pace to every cell (the vision search's first two ResNets put it at 23 h).
Unpredicted cells weigh the mean of the others; with no prediction at all, every cell weighs the same.
A running cell counts for the time it has run so far (from its claim, since this run started), at most
:data:`RUNNING_CREDIT` of its weight: without that, the ETA of a run whose cells take an hour each grows
by the minutes that pass until the next one finishes (the vision search read 312, then 406 min, in 10 min).

On a terminal it is a bar (tqdm) under the log lines; in a log file, a plain line when the counts
change (at most every ``every_s`` seconds), and every ``heartbeat_s`` seconds with the ETA alone."""

from __future__ import annotations

import sys
import threading
import time
from pathlib import Path
from typing import Any, Callable, Iterable, Mapping, TextIO

__all__ = ["Counts", "SuiteProgress", "count_cells", "finished_share", "format_counts"]


#: the most of its predicted seconds a running cell is credited with, however long it has run
RUNNING_CREDIT = 0.9


class Counts(dict):
    """``{"done", "failed", "running", "pending"}`` -> number of this run's cells; ``finished``: the
    ids of those done or failed; ``running_since``: running cell id -> when its claim was made
    (epoch seconds; absent where the claim does not say)."""

    finished: frozenset = frozenset()
    running_since: Mapping[str, float] = {}


def _claimed_at(claim: Path) -> float | None:
    """When ``claim`` was made (its ``claimed`` field, epoch seconds), or None."""
    import json
    from datetime import datetime

    try:
        return datetime.strptime(json.loads(claim.read_text(encoding="utf-8"))["claimed"],
                                 "%Y-%m-%dT%H:%M:%S%z").timestamp()
    except (OSError, ValueError, KeyError, TypeError):
        return None


def count_cells(out: Path, cells: list[Any], seen: dict[str, Any]) -> Counts:
    """How this run's ``cells`` stand now: a record that differs from ``seen[cell_id]`` (the
    one on disk when the run started) is done or failed; a live claim is running."""
    from benchmarks.run import claims as C
    from benchmarks.run.records import on_disk, same_record
    from benchmarks.run.worker import record_target

    c, finished, since = Counts(done=0, failed=0, running=0, pending=0), set(), {}
    for cell in cells:
        target = record_target(out, cell)
        rec = on_disk(target)
        claim = C.claim_path(target)
        if rec is not None and not same_record(rec, seen.get(cell.cell_id)):
            c["done" if rec.get("status") == "ok" else "failed"] += 1
            finished.add(cell.cell_id)
        elif claim.exists() and not C.is_stale(claim):
            c["running"] += 1
            at = _claimed_at(claim)
            if at is not None:
                since[cell.cell_id] = at
        else:
            c["pending"] += 1
    c.finished, c.running_since = frozenset(finished), since
    return c


def finished_share(finished: Iterable[str], cells: list[Any], weights: Mapping[str, float] | None, *,
                   running: Mapping[str, float] | None = None, since: float | None = None,
                   now: float | None = None) -> float | None:
    """The share of the run's predicted work in the ``finished`` cells (``weights``: cell id ->
    predicted seconds; a cell without one weighs the mean of the others), plus what the ``running``
    cells (id -> epoch seconds they started) have done: the seconds each has run since ``since``
    (the run's start; earlier work is not this run's pace) until ``now``, at most
    :data:`RUNNING_CREDIT` of its weight. ``None`` without weights."""
    known = [w for w in (weights or {}).values() if w > 0]
    if not known:
        return None
    fill = sum(known) / len(known)
    w = {c.cell_id: (weights or {}).get(c.cell_id) or fill for c in cells}
    total = sum(w.values())
    if not total:
        return None
    done = sum(w[cid] for cid in finished if cid in w)
    if now is not None:
        for cid, start in (running or {}).items():
            if cid in w and cid not in finished:  # a weight is the cell's predicted seconds
                ran = now - (start if since is None else max(start, since))
                done += min(max(ran, 0.0), RUNNING_CREDIT * w[cid])
    return done / total


def format_counts(c: Counts, total: int, elapsed_s: float, share: float | None = None) -> str:
    """``12/62 finished (1 failed), 2 running, 48 pending, ETA 3.1 min``: the ETA from the pace so
    far, of the ``share`` of the predicted work done when given (:func:`finished_share`), else of the
    finished cells."""
    finished = c["done"] + c["failed"]
    done = share if share is not None else (finished / total if total else 0.0)
    # with a share, running cells count too: an ETA before the first cell finishes
    eta = f", ETA {elapsed_s / done * (1 - done) / 60:.1f} min" if finished < total and 0 < done < 1 else ""
    return (f"{finished}/{total} finished ({c['failed']} failed), {c['running']} running, {c['pending']} pending"
            f"{eta}")


class SuiteProgress:
    """Follows a run from a background thread; :meth:`log` is the log function to hand to the
    launcher (on a terminal it prints above the bar instead of through it)."""

    def __init__(self, out: Path, cells: list[Any], seen: dict[str, Any], log: Callable[[str], None], *,
                 every_s: float = 10.0, poll_s: float = 2.0, stream: TextIO | None = None,
                 bar: bool | None = None, weights: Mapping[str, float] | None = None,
                 heartbeat_s: float = 300.0) -> None:
        self.out, self.cells, self.seen, self._log = Path(out), cells, seen, log
        self.every_s, self.poll_s, self.total = every_s, poll_s, len(cells)
        self.weights, self.heartbeat_s = weights, heartbeat_s
        stream = stream or sys.stderr
        use_bar = bar if bar is not None else bool(getattr(stream, "isatty", lambda: False)())
        self.bar = None
        if use_bar and cells:
            from tqdm import tqdm

            self.bar = tqdm(total=self.total, unit="cell", file=stream, dynamic_ncols=True, leave=True,
                            desc="cells")
        self.t0, self.t0_wall = time.monotonic(), time.time()
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._last_line, self._last_counts = 0.0, None
        self._thread = threading.Thread(target=self._loop, name="attnbench-progress", daemon=True)

    def log(self, msg: str) -> None:
        with self._lock:
            if self.bar is not None:
                self.bar.write(msg)
            else:
                self._log(msg)

    def __enter__(self) -> "SuiteProgress":
        if self.cells:
            self._thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout=10)
        if self.cells:
            self.update(final=True)
        if self.bar is not None:
            self.bar.close()

    def _loop(self) -> None:
        while not self._stop.wait(self.poll_s):
            try:
                self.update()
            except Exception:  # noqa: BLE001 - progress must never stop a run
                pass

    def update(self, final: bool = False) -> Counts:
        c = count_cells(self.out, self.cells, self.seen)
        now = time.monotonic()
        share = finished_share(c.finished, self.cells, self.weights, running=c.running_since, since=self.t0_wall,
                               now=time.time())
        text = format_counts(c, self.total, now - self.t0, share)
        with self._lock:
            if self.bar is not None:
                self.bar.n = c["done"] + c["failed"]
                self.bar.set_postfix_str(f"{c['failed']} failed, {c['running']} running, {c['pending']} pending",
                                         refresh=False)
                self.bar.refresh()
            elif not final and ((dict(c) != self._last_counts and now - self._last_line >= self.every_s)
                                or now - self._last_line >= self.heartbeat_s):
                self._last_line, self._last_counts = now, dict(c)
                self._log(f"  progress: {text}")
        return c
