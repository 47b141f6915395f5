"""The micro-benchmarks' sections: where ``attnbench bench NAME`` output lies relative to a
results folder, and the built-in sections of the attention scaling benchmark
(``bench_attention.json``/``.png``) and of "Why self-attention: Table 1 measured"
(``bench_complexity.json``/``.png``). Other micro-benchmarks add theirs through
:data:`benchmarks.report.BENCH_RENDERERS`."""

from __future__ import annotations

import json
import os
import shutil
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Sequence

from benchmarks.report.format import interval_text
from benchmarks.report.document import Block, Heading, Image, Paragraph, Table
from benchmarks.report.format import as_number, fmt_seconds
from benchmarks.report.results import Warn

__all__ = ["BENCH_NAME", "COMPLEXITY_NAME", "BenchAttention", "bench_candidate_dirs", "find_bench",
           "find_bench_attention", "find_bench_complexity", "bench_attention_blocks", "complexity_blocks",
           "check_result", "checks_blocks"]

BENCH_NAME = "bench_attention"
COMPLEXITY_NAME = "bench_complexity"


@dataclass
class BenchAttention:
    """A micro-benchmark's output files (attention scaling or complexity) and its parsed JSON."""

    json_path: Path | None
    png_path: Path | None
    doc: dict[str, Any] | None


def bench_candidate_dirs(results_dir: str | os.PathLike, name: str = "attention") -> list[Path]:
    """Where ``attnbench bench NAME`` output may lie relative to a results folder: the folder
    itself, ``bench/`` and ``bench/NAME/`` in it, and ``../bench`` and ``../bench/NAME`` (the CLI
    default is ``results/bench/NAME``)."""
    r = Path(results_dir)
    return [r, r / "bench", r / "bench" / name, r.parent / "bench", r.parent / "bench" / name]


def find_bench(candidate_dirs: Sequence[str | os.PathLike], stem: str) -> BenchAttention | None:
    for d in candidate_dirs:
        d = Path(d)
        j, p = d / f"{stem}.json", d / f"{stem}.png"
        if not (j.is_file() or p.is_file()):
            continue
        doc = None
        if j.is_file():
            try:
                doc = json.loads(j.read_text(encoding="utf-8"))
            except (OSError, json.JSONDecodeError):
                doc = None
        return BenchAttention(j if j.is_file() else None, p if p.is_file() else None, doc if isinstance(doc, dict) else None)
    return None


def find_bench_attention(candidate_dirs: Sequence[str | os.PathLike]) -> BenchAttention | None:
    """The first candidate folder holding ``bench_attention.json`` or ``.png``; ``None`` if none."""
    return find_bench(candidate_dirs, BENCH_NAME)


def find_bench_complexity(candidate_dirs: Sequence[str | os.PathLike]) -> BenchAttention | None:
    """The first candidate folder holding ``bench_complexity.json`` or ``.png``; ``None`` if none."""
    return find_bench(candidate_dirs, COMPLEXITY_NAME)


def _plot_copy(png: Path, dest: Path, written: dict[str, Path], alt: str) -> Image:
    """A benchmark's own plot copied into the report's plots folder (unless it is there)."""
    if png.resolve() != dest.resolve():
        dest.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(png, dest)
    written[f"plots/{dest.name}"] = dest
    return Image(dest, f"plots/{dest.name}", alt)


def bench_attention_blocks(bench: BenchAttention, plots_dir: Path, out_dir: Path, written: dict[str, Path],
                  warn: Warn) -> list[Block]:
    blocks: list[Block] = [Heading(2, "Attention scaling benchmark", "bench-attention")]
    src = bench.json_path or bench.png_path
    blocks.append(Paragraph(f"From {src} (attnbench bench attention).", "note"))
    doc = bench.doc  # an unreadable file is warned about with the checks (benchmarks.report.checks)
    if doc:
        setup = doc.get("setup") or {}
        env = doc.get("environment") or {}
        blocks.append(Paragraph(
            f"Status: {doc.get('status')}; device: {env.get('device_name') or setup.get('device')}; "
            f"dtype: {setup.get('dtype')}; {len(doc.get('points') or [])} points; date {env.get('date', '–')}."
        ))
    if bench.png_path is not None:
        blocks.append(_plot_copy(bench.png_path, plots_dir / f"{BENCH_NAME}.png", written,
                                 "attention scaling: time and memory vs size"))
    blocks += checks_blocks(doc)
    return blocks


def check_result(c: dict[str, Any]) -> str:
    """A check's result column: PASS (an expected outcome that was met included), FAIL,
    inconclusive (a time ratio whose confidence interval straddles the target), info
    (undecided: a comparison with the paper, a failed baseline), or "not applicable" for an
    undecided expected outcome (target ``... (expected)``, e.g. an OOM expected only at sizes the
    sweep did not reach; its note says why): never a word that reads like a failure when it is none."""
    if c.get("decision") == "inconclusive":
        return "inconclusive"
    p = c.get("pass")
    if p is True:
        return "PASS"
    if p is False:
        return "FAIL"
    if p is None:
        return "not applicable" if str(c.get("target", "")).strip().endswith("(expected)") else "info"
    return str(p)


def checks_blocks(doc: dict[str, Any] | None) -> list[Block]:
    """A micro-benchmark's ``checks`` as a table (result, check, value, target, note; a time
    ratio's note leads with its confidence interval and rounds)."""
    checks = (doc or {}).get("checks")
    if isinstance(checks, list) and checks:
        rows = []
        for c in checks:
            if not isinstance(c, dict):
                continue
            v = c.get("value")
            rows.append([
                check_result(c),
                str(c.get("name", "")),
                f"{v:.4g}" if isinstance(v, float) else ("–" if v is None else str(v)),
                str(c.get("target", "")),
                "; ".join(t for t in (interval_text(c), str(c.get("note") or "")) if t),
            ])
        return [Heading(3, "Checks"), Table(["result", "check", "value", "target", "note"], rows)]
    if doc is not None:
        return [Paragraph("The benchmark JSON has no checks.", "note")]
    return []


def _fmt_exponent(fit: Any, paper: Any = None) -> str:
    """``1.93 ± 0.04 (top 2.01)`` and, with ``paper``, ``[paper 2]``."""
    if not isinstance(fit, dict) or as_number(fit.get("exponent")) is None:
        s = "–"
    else:
        s = f"{fit['exponent']:.2f}"
        if as_number(fit.get("stderr")) is not None:
            s += f" ± {fit['stderr']:.2f}"
        if as_number(fit.get("tail_exponent")) is not None:
            s += f" (top {fit['tail_exponent']:.2f})"
    if as_number(paper) is not None:
        s += f" [paper {paper:g}]"
    return s


def _by_n(values: Any, limit: int = 6) -> str:
    """``{"64": 1, "256": 1}`` -> ``n=64: 1, n=256: 1`` (largest ``limit`` n)."""
    if not isinstance(values, dict) or not values:
        return "–"
    items = sorted(((int(k), v) for k, v in values.items() if str(k).lstrip("-").isdigit()), key=lambda kv: kv[0])
    return ", ".join(f"n={n}: {v}" for n, v in items[-limit:])


def _path_cell(paths: Any) -> str:
    if not isinstance(paths, list) or not paths:
        return "–"
    parts = []
    for p in paths:
        if not isinstance(p, dict):
            continue
        hops = [h for h in p.get("hops") or [] if isinstance(h, dict) and h.get("hops") is not None]
        largest = max((h["n"] for h in hops), default=None)
        at = [h for h in hops if h["n"] == largest]
        shown = ", ".join(
            f"{h['hops']}" + ("" if h.get("param") is None else f" ({'r' if 'attention' in str(p.get('probe')) else 'k'}={h['param']})")
            for h in at)
        mark = "" if p.get("all_match", True) else " (probe ≠ closed form!)"
        parts.append(f"{p.get('probe')}: {p.get('best')}{mark}" + (f"; n={largest}: {shown} hops" if at else ""))
    return "; ".join(parts) or "–"


def complexity_blocks(bench: BenchAttention, plots_dir: Path, out_dir: Path, written: dict[str, Path],
                       warn: Warn) -> list[Block]:
    """"Why self-attention: Table 1 measured": the paper's columns and the measured ones side by
    side, memory exponents, path-length and sequential-operation details, the plot, checks."""
    blocks: list[Block] = [Heading(2, "Why self-attention: Table 1 measured", "bench-complexity")]
    src = bench.json_path or bench.png_path
    blocks.append(Paragraph(f"From {src} (attnbench bench complexity). Paper: Vaswani et al. (2017), "
                     f"Attention Is All You Need, Table 1.", "note"))
    doc = bench.doc  # an unreadable file is warned about with the checks (benchmarks.report.checks)
    doc = doc or {}
    setup = doc.get("setup") or {}
    env = doc.get("environment") or {}
    if doc:
        sn, sd = setup.get("sweep_n") or {}, setup.get("sweep_d") or {}
        blocks.append(Paragraph(
            f"Status: {doc.get('status')}; device: {env.get('device_name') or setup.get('device')}; dtype: "
            f"{setup.get('dtype')}; batch {setup.get('batch')}, heads {setup.get('heads')}, window r={setup.get('window')}, "
            f"kernel k={setup.get('kernel')}; n sweep {sn.get('lengths')} at d={sn.get('d')}; d sweep "
            f"{sd.get('widths')} at n={sd.get('n')}; {len(doc.get('points') or [])} timing points in "
            f"{fmt_seconds(doc.get('wall_time_s'))}; date {env.get('date', '–')}."))
    rows = [r for r in doc.get("table") or [] if isinstance(r, dict)]
    if rows:
        paper_rows = (doc.get("paper") or {}).get("rows") or {}
        if paper_rows:
            blocks.append(Heading(3, "The paper's table"))
            blocks.append(Table(
                ["layer type", "complexity per layer", "sequential operations", "maximum path length"],
                [[str(r.get("row")), str(r.get("complexity")), str(r.get("sequential")), str(r.get("path"))]
                 for r in paper_rows.values() if isinstance(r, dict)]))
        blocks.append(Heading(3, "Paper and measured, side by side"))
        blocks.append(Table(
            ["layer (measured)", "paper row", "complexity per layer (paper)", "time ∝ n^e: e measured",
             "time ∝ d^e: e measured", "sequential operations (paper)", "sequential steps, measured",
             "maximum path length (paper)", "maximum path length, measured (best fit)"],
            [[str(r.get("layer")), str(r.get("paper_row")), str(r.get("paper_complexity")),
              _fmt_exponent(r.get("time_exp_n"), r.get("paper_exp_n")),
              _fmt_exponent(r.get("time_exp_d"), r.get("paper_exp_d")),
              str(r.get("paper_sequential")),
              f"{r.get('sequential_class') or '–'} ({_by_n(r.get('sequential_steps'), 2)})",
              str(r.get("paper_path")), _path_cell(r.get("path"))] for r in rows]))
        blocks.append(Paragraph(
            "Exponent e: slope of the least-squares line through (log size, log time) over the sweep ± its standard "
            "error; 'top': the slope over the largest three sizes, where fixed per-call costs matter least. Time is "
            "forward + backward of one layer (median of the timed repeats). The *_op rows time the attention alone, "
            "the part of a layer Table 1 counts; the layers add O(n·d²) projections. Sequential steps: the longest "
            "chain of dependent step applications (a recurrence is counted on an explicit cell loop with the fused "
            "module's weights). Maximum path length: the fewest hops (layers, or time steps inside a recurrence) "
            "through which input 0 reaches output n−1, measured by autograd (nonzero gradient), fitted against 1, "
            "log n, n/r (n/k) and n; the best R² is named.", "note"))
        blocks.append(Heading(3, "Memory"))
        blocks.append(Table(
            ["layer", "peak memory ∝ n^e", "peak memory ∝ d^e", "implementation"],
            [[str(r.get("layer")), _fmt_exponent(r.get("mem_exp_n")), _fmt_exponent(r.get("mem_exp_d")),
              str((setup.get("layers") or {}).get(r.get("layer"), ""))] for r in rows]))
        blocks.append(Paragraph("Peak memory: growth over the inputs during one forward + backward call (activations kept "
                         "for backward and gradients); the paper's table has no memory column.", "note"))
    kinds = ((doc.get("path_length") or {}).get("kinds")) or {}
    if kinds:
        prow = []
        for kind, k in kinds.items():
            if not isinstance(k, dict):
                continue
            fit = k.get("fit") or {}
            r2 = ", ".join(f"{m}: {'–' if v.get('r2') is None else format(v['r2'], '.3f')}"
                           for m, v in (fit.get("models") or {}).items() if isinstance(v, dict))
            pts = [p for p in k.get("points") or [] if isinstance(p, dict)]
            by_param: dict[Any, list[str]] = defaultdict(list)
            for p in pts:
                by_param[p.get("param")].append(f"{p.get('n')}:{p.get('hops')}")
            hops = "; ".join(("" if prm is None else f"{'r' if 'attention' in kind else 'k'}={prm}: ") + " ".join(v)
                             for prm, v in by_param.items())
            prow.append([kind, str(k.get("paper")), str(fit.get("best")),
                         "yes" if k.get("all_match") else "NO", r2, hops])
        blocks.append(Heading(3, "Maximum path length, measured"))
        blocks.append(Table(["probe", "paper", "best fit", "= closed form", "R² per model", "n:hops"], prow))
        method = (doc.get("path_length") or {}).get("method")
        if method:
            blocks.append(Paragraph(f"Method: {method}.", "note"))
    seq = ((doc.get("sequential_ops") or {}).get("layers")) or {}
    if seq:
        srow = []
        for layer, s in seq.items():
            if not isinstance(s, dict):
                continue
            pts = [p for p in s.get("points") or [] if isinstance(p, dict)]
            srow.append([layer, str(s.get("paper")), str(s.get("steps_class")),
                         " ".join(f"{p.get('n')}:{p.get('steps')}" for p in pts),
                         str(s.get("critical_path_class")),
                         " ".join(f"{p.get('n')}:{p.get('critical_path_ops')}" for p in pts)])
        blocks.append(Heading(3, "Sequential operations, counted"))
        blocks.append(Table(["layer", "paper", "steps: growth", "n:steps", "critical path: growth",
                              "n:autograd ops"], srow))
        method = (doc.get("sequential_ops") or {}).get("method")
        if method:
            blocks.append(Paragraph(f"Method: {method}.", "note"))
    failed = [p for p in doc.get("points") or [] if isinstance(p, dict) and p.get("status") not in (None, "ok")]
    if failed:
        blocks.append(Paragraph("Points not measured: " + "; ".join(
            f"{p.get('layer')} n={p.get('n')} d={p.get('d')}: {p.get('status')}"
            + (f" ({p['reason']})" if p.get("reason") else "") for p in failed), "warn"))
    if bench.png_path is not None:
        blocks.append(_plot_copy(bench.png_path, plots_dir / f"{COMPLEXITY_NAME}.png", written,
                                 "Table 1 measured: log-log time, memory, path length, sequential operations"))
    blocks += checks_blocks(doc if bench.doc is not None else None)
    return blocks
