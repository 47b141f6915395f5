"""Hostile inputs the data tests share: a pickle that would run code, a file rewritten with a
later mtime, and a snapshot of a folder to prove it was left untouched."""

from __future__ import annotations

import os
import pickle
from pathlib import Path


def tree_state(root: Path) -> dict[str, tuple[int, int, int]]:
    """Every path under ``root`` with its size, mtime_ns and mode: equal before/after = untouched
    (compared rather than relying on chmod, which does not stop root)."""
    return {str(p.relative_to(root)): (p.stat().st_size, p.stat().st_mtime_ns, p.stat().st_mode)
            for p in sorted(root.rglob("*"))}


def touch_later(path: Path, data: bytes) -> None:
    """Rewrite ``path`` and make sure its mtime moves on (coarse file-system clocks)."""
    old = path.stat().st_mtime_ns if path.exists() else 0
    path.write_bytes(data)
    os.utime(path, ns=(old + 2_000_000_000, old + 2_000_000_000))


class _Payload:
    """Unpickling this calls ``fn(*args)``: the classic pickle code-execution trick."""

    def __init__(self, fn, *args) -> None:
        self.fn, self.args = fn, args

    def __reduce__(self):
        return self.fn, self.args


def poisoned_pickle(path: Path, marker: Path, how: str) -> None:
    """A pickle whose loading would create ``marker`` by one of several routes."""
    import builtins
    import subprocess

    payloads = {
        "os.system": _Payload(os.system, f"touch {marker}"),
        "builtins.exec": _Payload(builtins.exec, f"open({str(marker)!r}, 'w').close()"),
        "builtins.eval": _Payload(builtins.eval, f"open({str(marker)!r}, 'w')"),
        "subprocess.call": _Payload(subprocess.call, ["touch", str(marker)]),
        "nested in a dict": {"graph": {0: [1]}, "x": _Payload(os.system, f"touch {marker}")},
    }
    path.write_bytes(pickle.dumps(payloads[how], protocol=2))


def one_error_line(capsys) -> str:
    """The single line a refused command wrote to stderr (asserts one line, no traceback)."""
    captured = capsys.readouterr()
    lines = captured.err.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in captured.err, captured.err
    return lines[0]
