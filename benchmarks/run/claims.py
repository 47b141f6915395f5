"""Exactly-once cells on a shared output folder: a worker *claims* a cell before training it.

A claim is a small file beside the cell's record (``runs/<task>/<dataset>/<model>/
seed<k>-<cell_id>.claim``), created with ``O_CREAT | O_EXCL`` so that of any number of
processes (on one machine or on several sharing a file system) exactly one gets it. While the
cell trains, a daemon thread refreshes the file's mtime every ``HEARTBEAT_S`` seconds. A claim
is *stale*, and may be taken over, when its heartbeat is older than ``STALE_AFTER_S`` or when
it was made on this host by a process that no longer exists (a killed run). Take-over renames
the stale file away first; ``os.rename`` is atomic, so only one of several takers wins.
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
import threading
import time
import uuid
from pathlib import Path

__all__ = ["Claim", "claim", "claim_path", "is_stale", "HEARTBEAT_S", "STALE_AFTER_S"]

HEARTBEAT_S = 10.0
STALE_AFTER_S = 90.0


def claim_path(record_path: Path) -> Path:
    """The claim file of the cell whose record is (or will be) ``record_path``."""
    return record_path.with_suffix(".claim")


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # exists, owned by someone else
        return True
    return True


def is_stale(path: Path, stale_after_s: float = STALE_AFTER_S) -> bool:
    """Whether the claim at ``path`` may be taken over (old heartbeat, or a dead local process)."""
    try:
        age = time.time() - path.stat().st_mtime
    except FileNotFoundError:
        return False  # released meanwhile: the next create decides
    if age > stale_after_s:
        return True
    try:
        info = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False  # young and still being written, or released meanwhile
    if info.get("host") == socket.gethostname() and isinstance(info.get("pid"), int):
        return not _pid_alive(info["pid"])
    return False


class Claim:
    """A held claim; :meth:`release` (or leaving the ``with`` block) gives it back."""

    def __init__(self, path: Path, token: str, heartbeat_s: float) -> None:
        self.path, self.token = path, token
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._beat, args=(heartbeat_s,), daemon=True,
                                        name=f"claim-heartbeat-{path.stem}")
        self._thread.start()

    def _beat(self, every: float) -> None:
        while not self._stop.wait(every):
            with contextlib.suppress(OSError):
                os.utime(self.path)

    def owned(self) -> bool:
        try:
            return json.loads(self.path.read_text(encoding="utf-8")).get("token") == self.token
        except (OSError, ValueError):
            return False

    def release(self) -> None:
        self._stop.set()
        self._thread.join(timeout=1.0)
        if self.owned():
            with contextlib.suppress(FileNotFoundError):
                self.path.unlink()

    def __enter__(self) -> "Claim":
        return self

    def __exit__(self, *exc) -> None:
        self.release()


def claim(path: Path, *, heartbeat_s: float = HEARTBEAT_S, stale_after_s: float = STALE_AFTER_S) -> Claim | None:
    """Try to claim ``path``: a :class:`Claim` if this process now holds it, ``None`` if another
    live process does."""
    path.parent.mkdir(parents=True, exist_ok=True)
    token = uuid.uuid4().hex
    body = json.dumps({"pid": os.getpid(), "host": socket.gethostname(), "token": token,
                       "claimed": time.strftime("%Y-%m-%dT%H:%M:%S%z")})
    for _ in range(3):
        try:
            fd = os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
        except FileExistsError:
            if not is_stale(path, stale_after_s):
                return None
            with contextlib.suppress(FileNotFoundError):  # another taker may win this rename
                os.rename(path, path.with_name(f"{path.name}.stale-{token[:8]}"))
                path.with_name(f"{path.name}.stale-{token[:8]}").unlink()
            continue
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(body)
        return Claim(path, token, heartbeat_s)
    return None
