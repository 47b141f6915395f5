"""Section hooks: what a domain or a micro-benchmark adds to the report.

* :data:`EXTRA_RENDERERS`: ``rec["extras"]`` key -> renderer of a task artefact (confusion
  tables, attention maps, ...); called once per group that has the key, with an
  :class:`ExtraContext`.
* :data:`BENCH_RENDERERS`: micro-benchmark name -> renderer of its section, called with a
  :class:`BenchContext` when ``bench_<name>.json`` is found next to the results.

A renderer returns an :class:`ExtraSection` (or None: nothing to show). A renderer that raises
costs its section, never the report: the error becomes a warning.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Sequence

from benchmarks.report.document import Block, Paragraph, Raw
from benchmarks.report.micro import bench_candidate_dirs, find_bench
from benchmarks.report.results import Group, Warn

__all__ = ["ExtraContext", "ExtraSection", "BenchContext", "ExtraRenderer", "BenchRenderer", "EXTRA_RENDERERS",
           "BENCH_RENDERERS", "load_sections", "extras_blocks", "bench_blocks"]


@dataclass
class ExtraContext:
    """What an extras renderer gets: the key, the group, and ``(record, rec["extras"][key])``
    for every ``ok`` record of the group that has the key. ``plots_dir`` is where it may write
    images (reference them as ``plots/<name>`` in markdown and with :func:`embed_png` in html)."""

    key: str
    suite: str
    task: str
    dataset: str
    items: list[tuple[dict[str, Any], Any]]
    plots_dir: Path
    out_dir: Path


@dataclass
class ExtraSection:
    markdown: str
    html: str


ExtraRenderer = Callable[[ExtraContext], "ExtraSection | None"]

#: ``rec["extras"]`` key -> renderer. Tasks register here (e.g. confusion tables, attention
#: maps); keys without a renderer are listed in the report as not rendered.
EXTRA_RENDERERS: dict[str, ExtraRenderer] = {}


@dataclass
class BenchContext:
    """What a micro-benchmark section renderer gets: the benchmark's name, the folder holding
    its ``bench_<name>.json``, the parsed JSON (None if unreadable), and where to write plots."""

    name: str
    bench_dir: Path
    doc: Any
    plots_dir: Path
    out_dir: Path


BenchRenderer = Callable[[BenchContext], "ExtraSection | None"]

#: micro-benchmark name -> renderer of its report section (for benchmarks beyond ``attention``
#: and ``complexity``, whose sections are built in); found like those, via bench_candidate_dirs.
BENCH_RENDERERS: dict[str, BenchRenderer] = {}


def load_sections() -> None:
    """Import the domains' renderers, which register in the tables above."""
    from benchmarks.extras import load_all

    load_all()


def extras_blocks(g: Group, plots_dir: Path, out_dir: Path, warn: Warn) -> list[Block]:
    """The sections of a group's task artefacts, in key order, and a note naming the keys
    that no renderer knows."""
    items: dict[str, list[tuple[dict, Any]]] = defaultdict(list)
    for m in g.models:
        for r in m.ok:
            ex = r.get("extras")
            if isinstance(ex, dict):
                for k, v in ex.items():
                    items[k].append((r, v))
    if not items:
        return []
    blocks: list[Block] = []
    unrendered = []
    for key in sorted(items):
        fn = EXTRA_RENDERERS.get(key)
        if fn is None:
            unrendered.append(key)
            continue
        try:
            sec = fn(ExtraContext(key, g.suite, g.task, g.dataset, items[key], plots_dir, out_dir))
        except Exception as exc:  # noqa: BLE001 - one bad renderer must not lose the report
            warn("render", f"{g.task}/{g.dataset}: extras renderer for {key!r} failed: {type(exc).__name__}: {exc}")
            continue
        if sec is not None:
            blocks.append(Raw(sec.markdown, sec.html))
    if unrendered:
        blocks.append(Paragraph("Task artefacts in the records without a renderer (see EXTRA_RENDERERS): "
                                + ", ".join(unrendered), "note"))
    return blocks


def bench_blocks(results_dir: Path, bench_dirs: Sequence[str | Path] | None, plots_dir: Path, out_dir: Path,
                 warn: Warn) -> list[Block]:
    """The sections of the registered micro-benchmarks whose JSON is found, by name."""
    blocks: list[Block] = []
    for bname, render in sorted(BENCH_RENDERERS.items()):
        cands = bench_dirs if bench_dirs is not None else bench_candidate_dirs(results_dir, bname)
        found = find_bench(cands, f"bench_{bname}")
        if found is None or found.json_path is None:
            continue
        try:
            sec = render(BenchContext(bname, found.json_path.parent, found.doc, plots_dir, out_dir))
        except Exception as exc:  # noqa: BLE001 - one bad renderer must not lose the report
            warn("render", f"{bname} benchmark: {type(exc).__name__}: {exc}")
            continue
        if sec is not None:
            blocks.append(Raw(sec.markdown, sec.html))
    return blocks
