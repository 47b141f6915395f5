"""Driver processes started by tests: wait for them with a generous deadline and never leave one
running when a test fails (a leftover driver would go on training and disturb the next tests)."""

from __future__ import annotations

import contextlib
import subprocess
from typing import Iterator

#: the deadline for a driver of a few tiny cells; generous: a starved CPU (nice 19, a busy
#: machine) only waits longer, a hang still ends
DRIVER_TIMEOUT_S = 600.0


@contextlib.contextmanager
def reaped(*procs: subprocess.Popen) -> Iterator[tuple[subprocess.Popen, ...]]:
    """Yield ``procs``; on the way out stop every one still running: SIGTERM first (a driver then
    stops its cells' processes, which run in sessions of their own), SIGKILL after 30 s."""
    try:
        yield procs
    finally:
        running = [p for p in procs if p.poll() is None]
        for p in running:
            p.terminate()
        for p in running:  # communicate again after a time-out is allowed (and drains the pipes)
            try:
                p.communicate(timeout=30)
            except subprocess.TimeoutExpired:
                p.kill()
                with contextlib.suppress(subprocess.TimeoutExpired):
                    p.communicate(timeout=30)


def communicate_all(procs: list[subprocess.Popen], timeout_s: float = DRIVER_TIMEOUT_S) -> list[tuple[str, str]]:
    """``(stdout, stderr)`` of each process once all have ended; on a time-out they are killed."""
    with reaped(*procs):
        return [p.communicate(timeout=timeout_s) for p in procs]
