"""The report's environment block: where and with what the records were measured (versions,
device, CPU, precision, git commit, data checksums), each value with its record count where
records disagree, so that numbers measured on different set-ups are never silently compared."""

from __future__ import annotations

import datetime as _dt
from collections import Counter, defaultdict
from typing import Any, Iterable

from benchmarks.report.analysis import manifest_cells
from benchmarks.report.results import Analysis, short_commit
from benchmarks.report.budget import environment_rows
from benchmarks.report.document import Block, Heading, Paragraph, Table

__all__ = ["environment_blocks"]


def _parse_date(s: Any) -> _dt.datetime | None:
    if not isinstance(s, str):
        return None
    try:
        d = _dt.datetime.fromisoformat(s.replace("Z", "+00:00"))
    except ValueError:
        return None
    return d if d.tzinfo else d.replace(tzinfo=_dt.timezone.utc)


def _distinct(values: Iterable[Any]) -> str:
    c = Counter("–" if v is None else str(v) for v in values)
    if len(c) <= 1:
        return next(iter(c), "–")
    return "DIFFER: " + "; ".join(f"{k} ({n})" for k, n in sorted(c.items()))


def environment_blocks(an: Analysis) -> list[Block]:
    """The Environment section: one row per property, a warning naming those that differ,
    and the data checksums per task and dataset."""
    recs = an.records
    envs = [r.get("env") or {} for r in recs]
    dates = [d for r in recs for d in (_parse_date((r.get("env") or {}).get("date")), _parse_date(r.get("started")),
                                        _parse_date(r.get("finished"))) if d]
    rows = [["records", f"{len(recs)} ({sum(r.get('status') == 'ok' for r in recs)} ok, "
                        f"{sum(r.get('status') != 'ok' for r in recs)} failed)"]]
    suites = sorted({str(r.get("suite")) for r in recs} | {str(c["suite"]) for c in manifest_cells(an.manifests)})
    rows.append(["suites", ", ".join(suites) or "–"])
    descriptions = sorted({str(d) for m in an.manifests if isinstance(m, dict)
                           for d in [(m.get("config") if isinstance(m.get("config"), dict) else {}).get("description")]
                           if d})
    if descriptions:
        rows.append(["description", " | ".join(descriptions)])
    if dates:
        lo, hi = min(dates), max(dates)
        rows.append(["date range", f"{lo.isoformat(timespec='seconds')} .. {hi.isoformat(timespec='seconds')}"])
    commits = [(e.get("git_commit"), e.get("git_dirty")) for e in envs]
    commit_txt = _distinct(f"{short_commit(c)}{' (dirty)' if d else ''}" for c, d in commits)
    for label, key in (("python", "python"), ("torch", "torch"), ("lightning", "lightning"),
                       ("torch_geometric", "torch_geometric"), ("CUDA", "cuda"), ("device", "device"),
                       ("device name", "device_name"), ("platform", "platform"), ("CPU count", "cpu_count"),
                       ("torch threads", "torch_threads")):
        rows.append([label, _distinct(e.get(key) for e in envs)])
    rows += environment_rows(envs, _distinct)
    rows.append(["precision", _distinct(((r.get("config") or {}).get("trainer") or {}).get("precision", "32-true")
                                        for r in recs)])
    if any(e.get("float32_matmul_precision") for e in envs):
        rows.append(["float32 matmul", _distinct(e.get("float32_matmul_precision") for e in envs)])
    rows.append(["git commit", commit_txt])
    blocks: list[Block] = [Heading(2, "Environment", "environment"), Table(["", "value"], rows)]
    differ = [r[0] for r in rows if str(r[1]).startswith("DIFFER")]
    if differ:
        blocks.append(Paragraph("Records disagree on: " + ", ".join(differ) + " (values with record counts above). "
                                "Compare numbers across those records with care.", "warn"))
    # data checksums
    data_rows = []
    seen: dict[tuple, Counter] = defaultdict(Counter)
    for r in recs:
        d = r.get("data") if isinstance(r.get("data"), dict) else None
        if d:
            seen[(str(r.get("task")), str(r.get("dataset")), str(d.get("name")), str(d.get("synthetic")))][str(d.get("checksum"))] += 1
    for (task, ds, name, syn), cs in sorted(seen.items()):
        data_rows.append([task, ds, name, syn, "; ".join(f"{c} ({n})" if len(cs) > 1 else c for c, n in sorted(cs.items()))])
    if data_rows:
        blocks += [Heading(3, "Data"), Table(["task", "dataset", "data", "synthetic", "checksum"], data_rows)]
    return blocks
