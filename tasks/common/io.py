"""Atomic file writes, the one implementation every writer uses (records, reports, plots, data
caches). Standard library only, so the report and the CLI can use it without importing torch."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path
from typing import Callable

__all__ = ["write_atomic"]


def write_atomic(dst: str | os.PathLike, write: Callable[[Path], None], *, mode: int | None = 0o644,
                 fsync: bool = False) -> Path:
    """Call ``write(tmp)`` on a fresh temporary file beside ``dst``, then rename it onto ``dst``: a
    reader sees the old file or the whole new one, never a part, and a failed write leaves no
    temporary behind. The temporary keeps ``dst``'s suffix (``x.png`` -> ``.x.png.<rand>.tmp.png``)
    so writers that pick a format from the name still work. ``mode``: the file's permissions
    (``mkstemp`` makes 0600; results and caches are meant to be read by others); ``fsync``: flush
    the data to disk before the rename (records, which must survive a machine crash)."""
    dst = Path(dst)
    dst.parent.mkdir(parents=True, exist_ok=True)
    fd, name = tempfile.mkstemp(prefix=f".{dst.name}.", suffix=f".tmp{dst.suffix}", dir=dst.parent)
    os.close(fd)
    tmp = Path(name)
    try:
        write(tmp)
        if fsync:
            with open(tmp, "rb+") as fh:
                os.fsync(fh.fileno())
        if mode is not None:
            os.chmod(tmp, mode)
        os.replace(tmp, dst)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    return dst
