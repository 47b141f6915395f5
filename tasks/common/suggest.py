"""Suggestions for a mistyped name: the valid names nearest to it (:func:`difflib.get_close_matches`),
for the one-line "unknown NAME" messages of the registries, the config checks and the CLI. It sits
at the bottom of the import layers (tasks <- benchmarks) so that every layer can use it."""

from __future__ import annotations

import difflib
from typing import Iterable

__all__ = ["nearest", "did_you_mean"]


def nearest(name: str, choices: Iterable[str], n: int = 3) -> list[str]:
    """Up to ``n`` of ``choices`` closest to ``name``, best first; empty when none is close."""
    return difflib.get_close_matches(str(name), [str(c) for c in choices], n=n)


def did_you_mean(name: str, choices: Iterable[str]) -> str:
    """``"did you mean a, b or c?"`` for the names of ``choices`` nearest to ``name``, or ``""``."""
    near = nearest(name, choices)
    if not near:
        return ""
    return "did you mean " + (near[0] if len(near) == 1 else ", ".join(near[:-1]) + " or " + near[-1]) + "?"
