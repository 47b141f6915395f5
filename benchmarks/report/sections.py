"""Section hooks: what a domain or a micro-benchmark adds to the report.

* :data:`EXTRA_RENDERERS`: ``rec["extras"]`` key -> renderer of a task artefact (confusion
  tables, attention maps, ...); called once per group that has the key, with an
  :class:`ExtraContext` that carries the group as the report ranked it.
* :data:`BENCH_RENDERERS`: micro-benchmark name -> renderer of its section, called with a
  :class:`BenchContext` when ``bench_<name>.json`` is found next to the results.

A domain's renderers live in ``benchmarks/report/domains/<task>.py`` (its record keys stay in the
domain), which the report imports (:func:`load_sections`) when it shows that domain's results or
micro-benchmark. A renderer builds its
section from the blocks of :mod:`benchmarks.report.document` and returns an
:class:`ExtraSection` (or None: nothing to show); one that raises costs its section, never the
report: the error becomes a warning.
"""

from __future__ import annotations

import importlib
import importlib.util
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterable, Sequence

from benchmarks.report.document import Block, Image, Paragraph, Raw, render_html_fragment, render_markdown
from benchmarks.report.micro import bench_candidate_dirs, find_bench
from benchmarks.report.results import Group, ModelResult, Warn

#: where the domains' sections live: ``<DOMAINS_PACKAGE>.<task>``
DOMAINS_PACKAGE = "benchmarks.report.domains"

__all__ = ["DOMAINS_PACKAGE", "ExtraContext", "ExtraSection", "BenchContext", "ExtraRenderer", "BenchRenderer", "EXTRA_RENDERERS",
           "BENCH_RENDERERS", "load_sections", "extras_blocks", "bench_blocks"]


@dataclass
class ExtraContext:
    """What an extras renderer gets: the key, its group (the models ranked by the group's
    metric and mode, with their statistics: ``group.ranked``), and ``(record,
    rec["extras"][key])`` for every ``ok`` record of the group that has the key. ``plots_dir``
    is where it may write images (:meth:`image` makes the block that shows one)."""

    key: str
    group: Group
    items: list[tuple[dict[str, Any], Any]]
    plots_dir: Path
    out_dir: Path

    #: the group's suite, task, dataset, metric (``test[metric]`` in records) and its direction
    suite = property(lambda self: self.group.suite)
    task = property(lambda self: self.group.task)
    dataset = property(lambda self: self.group.dataset)
    metric = property(lambda self: self.group.metric)
    mode = property(lambda self: self.group.mode)

    @property
    def ranked(self) -> list[ModelResult]:
        """The group's models with a mean of its metric, best first (the leaderboard's order)."""
        return self.group.ranked

    def image(self, path: Path, alt: str) -> Image:
        """The block showing a plot the renderer wrote (under ``plots_dir``)."""
        return Image.of(path, self.out_dir, alt)


@dataclass
class ExtraSection:
    """A section's Markdown and HTML; :meth:`from_blocks` renders them from blocks."""

    markdown: str
    html: str

    @classmethod
    def from_blocks(cls, blocks: Sequence[Block]) -> "ExtraSection":
        return cls(render_markdown(blocks), render_html_fragment(blocks))


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

    def image(self, path: Path, alt: str) -> Image:
        """The block showing a plot the renderer wrote (under ``plots_dir``)."""
        return Image.of(path, self.out_dir, alt)


BenchRenderer = Callable[[BenchContext], "ExtraSection | None"]

#: micro-benchmark name -> renderer of its report section (for benchmarks beyond ``attention``
#: and ``complexity``, whose sections are built in); found like those, via bench_candidate_dirs.
BENCH_RENDERERS: dict[str, BenchRenderer] = {}


def load_sections(tasks: Iterable[str], warn: Warn) -> None:
    """Import ``benchmarks.report.domains.<name>`` for each registered task named that has one
    (importing it registers its renderers). A section imports its domain (for the record keys),
    which brings torch and Lightning with it, so the report names only the tasks it shows: those
    of its groups, and a domain whose micro-benchmark output it found (a domain's micro-benchmark
    is named after it). A module that fails to import (e.g. a missing dependency of its domain)
    is a warning; the report goes on without its sections."""
    from tasks.common.registry import TASK_PACKAGES

    for name in sorted(set(tasks)):
        module = f"{DOMAINS_PACKAGE}.{name}"
        if name not in TASK_PACKAGES or importlib.util.find_spec(module) is None:
            continue
        try:
            importlib.import_module(module)
        except ImportError as exc:
            warn("render", f"domain section not loaded: {module}: {type(exc).__name__}: {exc}")


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
            sec = fn(ExtraContext(key, g, items[key], plots_dir, out_dir))
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
    """The sections of the micro-benchmarks whose JSON is found, by name: those registered,
    and those of a domain (its renderer loaded when its output is there)."""
    from tasks.common.registry import TASK_PACKAGES

    blocks: list[Block] = []
    for bname in sorted(set(BENCH_RENDERERS) | set(TASK_PACKAGES)):
        cands = bench_dirs if bench_dirs is not None else bench_candidate_dirs(results_dir, bname)
        found = find_bench(cands, f"bench_{bname}")
        if found is None or found.json_path is None:
            continue
        if bname not in BENCH_RENDERERS:
            load_sections([bname], warn)
        render = BENCH_RENDERERS.get(bname)
        if render is None:
            continue
        try:
            sec = render(BenchContext(bname, found.json_path.parent, found.doc, plots_dir, out_dir))
        except Exception as exc:  # noqa: BLE001 - one bad renderer must not lose the report
            warn("render", f"{bname} benchmark: {type(exc).__name__}: {exc}")
            continue
        if sec is not None:
            blocks.append(Raw(sec.markdown, sec.html))
    return blocks
