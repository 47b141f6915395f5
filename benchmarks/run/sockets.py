"""Folders for Unix sockets that work whatever the length of ``TMPDIR`` and ``--out``.

A Unix socket's path is limited to 107 bytes on Linux (103 on macOS): ``sun_path`` holds 108
(104) with its NUL. Three things this package starts bind sockets in a folder they derive from
a path the user chose:

* the local pool's forkserver (``multiprocessing``: ``$TMPDIR/pymp-XXXXXXXX/listener-XXXXXXXX``),
  and a cell's own ``multiprocessing`` listeners (DataLoader workers sharing tensors);
* CUDA MPS daemons (their pipe folder, under ``OUT/mps``);
* a local Ray instance (``$RAY_TMPDIR`` or ``$TMPDIR`` + ``/ray/session_<date>_<pid>/sockets/...``).

Long ``TMPDIR`` paths are common on clusters (per-job scratch) and CI runners. Each of the three
keeps the user's folder when its sockets fit there, and otherwise puts only its sockets in a short
private folder (:func:`short_base`: ``TMPDIR``, ``/tmp``, ``/var/tmp``, ``/dev/shm``, the first that
is a writable folder short enough); everything else (logs, caches, records) stays where the user
asked. When none fits, :class:`SocketPathError` is one line naming the path and the fix.
"""

from __future__ import annotations

import multiprocessing as mp
import os
import sys
import tempfile
from multiprocessing import util as mp_util

__all__ = ["SUN_PATH_MAX", "SocketPathError", "fits", "short_base", "short_folder", "pool_tempdir",
           "use_pool_tempdir", "POOL_TEMPDIR_ENV", "RAY_ROOM", "ray_temp_dir"]

#: bytes of ``sockaddr_un.sun_path``, its NUL included
SUN_PATH_MAX = 104 if sys.platform == "darwin" else 108
#: what ``multiprocessing`` adds under its base: ``/pymp-XXXXXXXX/listener-XXXXXXXX``
PYMP_ROOM = len("/pymp-XXXXXXXX/listener-XXXXXXXX")
#: what a listener adds under ``multiprocessing``'s own folder: ``/listener-XXXXXXXX``
LISTENER_ROOM = len("/listener-XXXXXXXX")
#: what Ray adds under its temp folder: ``/session_2026-11-28_23-40-13_123456_1234567/sockets/plasma_store``
RAY_ROOM = len("/session_2026-11-28_23-40-13_123456_1234567/sockets/plasma_store")
#: the driver's short ``multiprocessing`` folder, handed to the cells it forks
POOL_TEMPDIR_ENV = "ATTNBENCH_POOL_TEMPDIR"
_CANDIDATES = ("/tmp", "/var/tmp", "/dev/shm")


class SocketPathError(OSError):
    """No folder on this machine is short enough for a socket: the message is the one line."""


def fits(folder: str | os.PathLike, room: int) -> bool:
    """Whether a socket ``room`` bytes below ``folder`` fits ``sun_path``."""
    return len(os.fsencode(os.path.abspath(folder))) + room < SUN_PATH_MAX


def short_base(room: int, what: str) -> str:
    """The first writable folder of ``TMPDIR``, ``/tmp``, ``/var/tmp``, ``/dev/shm`` under which a
    socket ``room`` bytes deep fits; ``what`` names the user in the error."""
    tried = [tempfile.gettempdir(), *_CANDIDATES]
    for base in dict.fromkeys(tried):
        if os.path.isdir(base) and os.access(base, os.W_OK | os.X_OK) and fits(base, room):
            return base
    limit = SUN_PATH_MAX - 1 - room
    raise SocketPathError(f"{what} needs a folder for its Unix sockets of at most {limit} characters, and "
                          f"none of {', '.join(dict.fromkeys(tried))} is both that short and writable (TMPDIR="
                          f"{tempfile.gettempdir()!r}, {len(tempfile.gettempdir())} characters): set TMPDIR "
                          "to a short writable folder for this command, e.g. TMPDIR=/tmp")


def short_folder(prefix: str, room: int, what: str) -> str:
    """A new private folder (mode 0700) for sockets ``room`` bytes deep: under ``TMPDIR`` when it
    is short enough, else under :func:`short_base`. The caller removes it."""
    return tempfile.mkdtemp(prefix=prefix, dir=short_base(room + len(prefix) + 9, what))


def pool_tempdir() -> str:
    """``multiprocessing``'s folder for this process, made short enough for its sockets.

    ``multiprocessing.util.get_temp_dir`` makes ``pymp-*`` under ``tempfile.gettempdir()`` once per
    process (removed at exit) and every forkserver or listener socket goes there. Where that would
    be too long, it is made once under :func:`short_base` instead (Python 3.14 does the same)."""
    config = mp.current_process()._config  # where get_temp_dir caches it (CPython 3.8-3.14)
    current = config.get("tempdir")
    if current is not None and fits(current, LISTENER_ROOM):
        return current
    if current is None and fits(tempfile.gettempdir(), PYMP_ROOM):
        return mp_util.get_temp_dir()
    base = short_base(PYMP_ROOM, "the local pool (multiprocessing's forkserver)")
    config.pop("tempdir", None)
    saved = tempfile.tempdir
    tempfile.tempdir = base  # only while get_temp_dir makes its folder: nothing else moves
    try:
        return mp_util.get_temp_dir()
    finally:
        tempfile.tempdir = saved


def use_pool_tempdir(folder: str | None) -> None:
    """In a forked cell: use the driver's short ``multiprocessing`` folder (``folder``, from
    :data:`POOL_TEMPDIR_ENV`), so the cell's own listeners fit too; the driver removes it."""
    if folder and os.path.isdir(folder):
        mp.current_process()._config["tempdir"] = folder


def ray_temp_dir() -> str | None:
    """A ``_temp_dir`` for a local ``ray.init`` where Ray's own (``$RAY_TMPDIR``, ``$TMPDIR`` or
    ``/tmp``, plus ``/ray``) is too long for its sockets; None where Ray's own fits."""
    base = os.environ.get("RAY_TMPDIR") or os.environ.get("TMPDIR") or "/tmp"
    if fits(os.path.join(base, "ray"), RAY_ROOM):
        return None
    return os.path.join(short_base(RAY_ROOM + len("/ray"), "a local Ray instance"), "ray")
