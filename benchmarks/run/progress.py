"""Progress of one run over all its workers, whatever the launcher: cells done / running /
failed / pending and an ETA, read from the output folder itself (records written since the run
started, live claims), so a local pool, Slurm arrays and Ray tasks are followed the same way.

On a terminal it is a bar (tqdm) under the log lines; in a log file, a plain line every
``every_s`` seconds when something changed."""

from __future__ import annotations

import sys
import threading
import time
from pathlib import Path
from typing import Any, Callable, TextIO

__all__ = ["Counts", "SuiteProgress", "count_cells", "format_counts"]


class Counts(dict):
    """``{"done", "failed", "running", "pending"}`` -> number of this run's cells."""


def count_cells(out: Path, cells: list[Any], seen: dict[str, Any]) -> Counts:
    """How this run's ``cells`` stand now: a record that differs from ``seen[cell_id]`` (the
    one on disk when the run started) is done or failed; a live claim is running."""
    from benchmarks.run import claims as C
    from benchmarks.run.records import on_disk, same_record
    from benchmarks.run.worker import record_target

    c = Counts(done=0, failed=0, running=0, pending=0)
    for cell in cells:
        target = record_target(out, cell)
        rec = on_disk(target)
        claim = C.claim_path(target)
        if rec is not None and not same_record(rec, seen.get(cell.cell_id)):
            c["done" if rec.get("status") == "ok" else "failed"] += 1
        elif claim.exists() and not C.is_stale(claim):
            c["running"] += 1
        else:
            c["pending"] += 1
    return c


def format_counts(c: Counts, total: int, elapsed_s: float) -> str:
    """``12/62 finished (1 failed), 2 running, 48 pending, ETA 3.1 min``."""
    finished = c["done"] + c["failed"]
    eta = f", ETA {elapsed_s / finished * (total - finished) / 60:.1f} min" if finished and finished < total else ""
    return (f"{finished}/{total} finished ({c['failed']} failed), {c['running']} running, {c['pending']} pending"
            f"{eta}")


class SuiteProgress:
    """Follows a run from a background thread; :meth:`log` is the log function to hand to the
    launcher (on a terminal it prints above the bar instead of through it)."""

    def __init__(self, out: Path, cells: list[Any], seen: dict[str, Any], log: Callable[[str], None], *,
                 every_s: float = 10.0, poll_s: float = 2.0, stream: TextIO | None = None,
                 bar: bool | None = None) -> None:
        self.out, self.cells, self.seen, self._log = Path(out), cells, seen, log
        self.every_s, self.poll_s, self.total = every_s, poll_s, len(cells)
        stream = stream or sys.stderr
        use_bar = bar if bar is not None else bool(getattr(stream, "isatty", lambda: False)())
        self.bar = None
        if use_bar and cells:
            from tqdm import tqdm

            self.bar = tqdm(total=self.total, unit="cell", file=stream, dynamic_ncols=True, leave=True,
                            desc="cells")
        self.t0 = time.monotonic()
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._last_line, self._last_text = 0.0, ""
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
        text = format_counts(c, self.total, now - self.t0)
        with self._lock:
            if self.bar is not None:
                self.bar.n = c["done"] + c["failed"]
                self.bar.set_postfix_str(f"{c['failed']} failed, {c['running']} running, {c['pending']} pending",
                                         refresh=False)
                self.bar.refresh()
            elif not final and text != self._last_text and now - self._last_line >= self.every_s:
                self._last_line, self._last_text = now, text
                self._log(f"  progress: {text}")
        return c
