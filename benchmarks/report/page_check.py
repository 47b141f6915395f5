"""``attnbench page --check``: one line per drift, none when the page holds.

Two kinds of drift:

- **prose against records**: a literal number in ``results/page.yaml``'s prose that claims to
  come from the records (seeds, cells, epochs, durations; runs of a published figure) and that
  the records contradict (:mod:`benchmarks.report.page_claims`);
- **generated files against a fresh build**: ``results/README.md`` or a generated block of
  ``README.md`` that differs from what the records and the spec give now (a hand edit, or a
  record or spec changed without ``attnbench page``). Each differing line is named with its
  sentence, the text it has and the text a fresh build has.
"""

from __future__ import annotations

import difflib
import re
from pathlib import Path
from typing import Sequence

import yaml

from benchmarks.report.page import (PAGE_SPEC, Built, PageError, build, display_path, markers, patched_blocks, readme_path,
                                    write_page)
from benchmarks.report.page_claims import check_prose, check_runs

__all__ = ["check", "prose_drifts", "file_drifts"]

_CONTEXT = 140


def prose_drifts(built: Built) -> list[str]:
    """Literal claims in the spec's prose that the records (or the figure's runs) contradict."""
    lines: list[str] = []
    for where, template, scope in built.prose:
        lines += check_prose(template, scope, where)
    for where, text, runs in built.published:
        lines += check_runs(text, runs, where)
    return lines


def _sentence(line: str, pos: int) -> str:
    """The sentence (or table row's first cell) of ``line`` around character ``pos``."""
    if line.startswith("|"):
        first = line.strip("|").split("|")[0].strip()
        return f"table row {first!r}"
    starts = [0] + [m.end() for m in re.finditer(r"(?<=[.;!?])\s+", line) if m.end() <= pos]
    start = starts[-1]
    end_m = re.search(r"[.;!?](\s|$)", line[pos:])
    end = pos + end_m.end() if end_m else len(line)
    text = line[start:end].strip()
    if len(text) > _CONTEXT:
        rel = pos - start
        lo = 0 if rel < _CONTEXT - 30 else rel - _CONTEXT // 2
        text = ("..." if lo else "") + text[lo:lo + _CONTEXT] + ("..." if lo + _CONTEXT < len(text) else "")
    return repr(text)


def _line_drift(label: str, lineno: int, old: str, new: str) -> str:
    """``old`` against ``new``: where they first differ, what each says there."""
    a, b = re.findall(r"\S+", old), re.findall(r"\S+", new)
    sm = difflib.SequenceMatcher(a=a, b=b, autojunk=False)
    op = next(o for o in sm.get_opcodes() if o[0] != "equal")
    _, i1, i2, j1, j2 = op
    said, want = " ".join(a[i1:i2]), " ".join(b[j1:j2])
    pos = sum(len(w) + 1 for w in a[:i1])
    more = sum(1 for o in sm.get_opcodes() if o[0] != "equal") - 1
    tail = f" (and {more} more change{'s' if more > 1 else ''} on the line)" if more > 0 else ""
    if not said:
        what = f'lacks "{want}" that a fresh build from the records has'
    elif not want:
        what = f'has "{said}" that a fresh build from the records does not'
    else:
        what = f'says "{said}" where a fresh build from the records says "{want}"'
    return f"{label}:{lineno}: {_sentence(old, pos)} {what}{tail} (run attnbench page)"


def file_drifts(label: str, old: str, new: str, offset: int = 0) -> list[str]:
    """One line per line of ``old`` that a fresh build (``new``) writes otherwise."""
    a, b = old.splitlines(), new.splitlines()
    out: list[str] = []
    for tag, i1, i2, j1, j2 in difflib.SequenceMatcher(a=a, b=b, autojunk=False).get_opcodes():
        if tag == "equal":
            continue
        pairs = list(zip(range(i1, i2), range(j1, j2)))
        for i, j in pairs:
            out.append(_line_drift(label, offset + i + 1, a[i], b[j]))
        for i in range(i1 + len(pairs), i2):
            out.append(f"{label}:{offset + i + 1}: a line a fresh build does not have: {a[i][:_CONTEXT]!r} "
                       f"(run attnbench page)")
        for j in range(j1 + len(pairs), j2):
            out.append(f"{label}:{offset + i2 + 1}: missing a line a fresh build has: {b[j][:_CONTEXT]!r} "
                       f"(run attnbench page)")
    return out


def check(spec_path: str | Path = PAGE_SPEC) -> list[str]:
    """Every drift of the page, its README blocks and its prose from the records (empty: the
    page holds). A bad spec raises :class:`~benchmarks.report.page_facts.PageError`."""
    spec_path = Path(spec_path)
    built = build(spec_path)
    lines = prose_drifts(built)
    page = spec_path.parent / "README.md"
    if page.is_file():
        lines += file_drifts(display_path(page), page.read_text(encoding="utf-8"), built.page)
    else:
        lines.append(f"{display_path(page)}: missing (run attnbench page)")
    readme = readme_path(spec_path)
    if readme.is_file():
        text = readme.read_text(encoding="utf-8")
        new = patched_blocks(text, built)  # raises when a block's markers are missing
        if new != text:
            lines += _block_drifts(display_path(readme), text, new, list(built.blocks))
    return lines


def _block_drifts(label: str, old: str, new: str, names: list[str]) -> list[str]:
    """Drifts inside the README's generated blocks, with the README's own line numbers."""
    out: list[str] = []
    for name in names:
        start, end = markers(name)
        o_head, o_rest = old.split(start, 1)
        n_rest = new.split(start, 1)[1]
        o_body, n_body = o_rest.split(end, 1)[0], n_rest.split(end, 1)[0]
        out += file_drifts(label, o_body, n_body, offset=o_head.count("\n"))
    return out


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m benchmarks.report.page [SPEC] [--check]``: write the page, or with ``--check``
    print one line per drift (a generated file out of date, a prose number the records
    contradict) and exit 1 when there is any."""
    import sys

    args = list(sys.argv[1:] if argv is None else argv)
    is_check = "--check" in args
    args = [a for a in args if a != "--check"]
    spec = Path(args[0]) if args else PAGE_SPEC
    try:
        if is_check:
            drifts = check(spec)
            for line in drifts:
                print(line)
            if not drifts:
                print("results page and README blocks are current; every checked prose number matches the records")
            return 1 if drifts else 0
        for path in write_page(spec):
            print(f"wrote {path}")
    except OSError as err:
        print(f"attnbench page: error: {err.filename or spec}: {err.strerror or err}", file=sys.stderr)
        return 2
    except (PageError, KeyError, TypeError, yaml.YAMLError) as err:
        msg = str(err) if isinstance(err, PageError) else f"{spec}: {type(err).__name__}: {err}"
        if isinstance(err, KeyError):
            msg = f"{spec}: a required key is missing: {err}"
        print(f"attnbench page: error: {' '.join(msg.split())}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
