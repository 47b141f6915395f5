"""``attnbench run CONFIG --reuse DIR``: take finished cells from another results folder instead
of training them again.

A cell's id hashes its resolved config, and the tuning file that chose a value is not part of it
(:func:`benchmarks.config.params.cell_id`): so the trial of ``attnbench tune`` at a model's chosen
rate *is* the tuned run's cell, with the same id. ``--reuse`` copies such finished ``ok`` records
(and their sidecars: per-item ``.items``, the cell's ``.log``, kept weights ``.pt``) into the run's
folder, as the run would have written them, except for where they ran:

- ``suite`` becomes the run's suite (a report reads only its own suite's records);
- ``config`` becomes the run's resolved config of that cell, which names the tuning file
  (``config.tuning``) where the trial's did not;
- ``reused`` says where the record came from (its path relative to the run's folder, its suite)
  and when it was copied. ``env``, ``started`` and ``finished`` stay the trial's: the machine,
  code and time of the training.

Only cells the run would train are taken (:func:`benchmarks.run.records.to_run`: a failed record
it would retry is replaced), never over an ``ok`` record, never a cell another live run holds
(its claim). ``--force`` trains every cell and reuses none."""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import Any, Iterable

from benchmarks.run import records as R
from benchmarks.run.claims import claim_path, is_stale
from benchmarks.run.items import items_path
from benchmarks.run.scoring import weights_path
from tasks.common.io import write_atomic

__all__ = ["reusable", "reuse_records", "SIDECARS"]

#: a record's sidecars that travel with it (same stem): per-item results, its log, kept weights
SIDECARS = (items_path, lambda p: Path(p).with_suffix(".log"), weights_path)


def reusable(cells: Iterable[Any], sources: Iterable[Path]) -> dict[str, dict[str, Any]]:
    """cell_id -> the finished ``ok`` record (from :func:`benchmarks.run.records.load_records`)
    of one of ``cells`` in the folders ``sources`` (results folders or folders of them): the
    first source that has it, its newest there."""
    want = {c.cell_id for c in cells}
    found: dict[str, dict[str, Any]] = {}
    for src in sources:  # a results folder, or a folder of them
        mine: dict[str, dict[str, Any]] = {}
        for rec in R.load_records(src):
            cid = rec["cell_id"]
            if cid in want and cid not in found and rec.get("status") == "ok" and \
                    str(rec.get("finished") or "") >= str((mine.get(cid) or {}).get("finished") or ""):
                mine[cid] = rec
        found.update(mine)
    return found


def _copy(src: Path, dest: Path) -> None:
    write_atomic(dest, lambda tmp: shutil.copyfile(src, tmp))


def reuse_records(cells: list[Any], sources: Iterable[Path], out: Path, suite: str, log: Any = print) -> int:
    """Copy into ``out`` the records of ``sources`` whose id is one of ``cells`` (the cells the run
    would train), rewritten as the module docstring says; returns how many. The sidecars are
    copied first and the record last (atomically): a crash between leaves the cell unfinished."""
    sources = [Path(s) for s in sources]
    found = reusable(cells, sources)
    n = 0
    for cell in cells:
        rec = found.get(cell.cell_id)
        if rec is None:
            continue
        src = Path(rec.pop("_path"))
        new = {**rec, "suite": suite, "config": cell.config,
               "reused": {"from": os.path.relpath(src, out), "copied": R.now_iso(),  # a copy's copy: the first suite
                          "suite": (rec.get("reused") or {}).get("suite") or rec.get("suite")}}
        dest = R.record_path(out, new)
        claim = claim_path(dest)
        if (claim.exists() and not is_stale(claim)) or (R.on_disk(dest) or {}).get("status") == "ok":
            continue  # being trained, or finished, meanwhile: the folder's own
        dest.parent.mkdir(parents=True, exist_ok=True)
        for side in SIDECARS:  # the source's, and none left from a failed attempt here
            if side(src).is_file():
                _copy(side(src), side(dest))
            else:
                side(dest).unlink(missing_ok=True)
        R.write_json_atomic(dest, new)
        n += 1
    shown = ", ".join(str(s) for s in sources)
    if n:
        log(f"  reused {n} finished cell(s) from {shown} (--reuse: same cell ids; records say reused.from)")
    elif cells:
        log(f"  --reuse {shown}: no finished record of the {len(cells)} cell(s) left to run (other cell ids)")
    return n
