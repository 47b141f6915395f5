"""Per-item test outcomes beside a record: what a bootstrap over test items (and seeds) resamples,
without retraining (DESIGN.md, "Intervals need the data").

A cell whose task keeps test items (:attr:`tasks.common.module.TaskModule.test_items`) writes them
beside its record, same stem, suffix ``.items`` (not ``.json``: every ``*.json`` under ``runs/`` is a
record to :func:`benchmarks.run.records.iter_record_files`), and the record points to the file::

    "items": {"file": "seed0-<id>.items", "unit": "token", "n": 1456, "bytes": 612, "sha256": "..."}

The sidecar is JSON (schema :data:`SCHEMA`), its arrays packed (a test set of 25k tokens is ~4 KB)::

    {"schema": 1, "cell_id": ..., "split": "test", "unit": "token" | "node" | "utterance" | "frame"
       | "image" | "sentence", "n": N,
     "ids": {"range": [0, N]} | <int array>,         # ascending: dataset index or position in data order
     "correct": {"bits": <base64 of numpy.packbits>, "n": N},            # (N,) bool; or, translation:
     "stats": {"metric": "bleu", "fields": [...], "rows": <int array (N, 10)>},  # sacreBLEU's sentence stats
     "group": {"unit": "sentence", "ids": ..., "sizes": <int array (E,)>},    # units finer than examples
     "axis": {"name": "head_distance", "values": <int array (N,)>}}          # a per-unit covariate, if any

An ``<int array>`` is ``{"dtype": "uint16", "shape": [...], "data": <base64, little-endian>}`` (the
smallest unsigned type that holds it; ``int64`` with negatives). Units are in data order: examples
by dataset index, an example's units (tokens, frames) in order; ``group.sizes`` says how many units
each example holds, so a bootstrap can resample whole sentences or utterances. Graph nodes are
positions among the test nodes in node order (no group: the graph is not a sampled unit).

:func:`load_items` reads it back (None for a record without one: records from before, several-rank
cells, fit-only cells); :func:`score` recomputes the record's test metric on a resample. Standard
library and numpy only: the report imports this without torch.
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import warnings
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np

from benchmarks.run import records as R

__all__ = ["SCHEMA", "SUFFIX", "Items", "items_path", "write_items", "load_items", "score", "bleu_from_stats",
           "bleu_rows",
           "encode_ints", "decode_ints"]

SCHEMA = 1
SUFFIX = ".items"


class Items(NamedTuple):
    """A record's test items, as :func:`load_items` returns them."""

    unit: str  #: token | node | utterance | frame | image | sentence
    ids: np.ndarray  #: (N,) int64, ascending
    values: np.ndarray  #: (N,) bool correctness, or (N, K) int64 statistics (``fields``; translation: BLEU's)
    group: str | None = None  #: the example several units belong to (sentence, utterance), else None
    group_of: np.ndarray | None = None  #: (N,) int64 each unit's example (its dataset index), else None
    fields: tuple[str, ...] | None = None  #: the statistics' column names
    metric: str | None = None  #: what ``values`` score (the record's metric name)
    axis: str | None = None  #: a per-unit covariate's name (POS on UD: ``head_distance``), else None
    axis_values: np.ndarray | None = None  #: (N,) int64 its value per unit


def items_path(record_path: str | os.PathLike) -> Path:
    """The sidecar of the record at ``record_path``: beside it, same stem, suffix ``.items``."""
    return Path(record_path).with_suffix(SUFFIX)


# --------------------------------------------------------------------------- arrays
def encode_ints(a: np.ndarray) -> dict[str, Any] | list[int]:
    """An integer array as ``{"dtype", "shape", "data"}`` (base64 of the little-endian bytes of the
    smallest unsigned type that holds it, int64 when negative)."""
    a = np.asarray(a, dtype=np.int64)
    hi = int(a.max()) if a.size else 0
    lo = int(a.min()) if a.size else 0
    kind = "int64" if lo < 0 else next(t for t in ("uint8", "uint16", "uint32", "int64")
                                         if t == "int64" or hi <= np.iinfo(t).max)
    raw = a.astype(np.dtype(kind).newbyteorder("<")).tobytes()
    return {"dtype": kind, "shape": list(a.shape), "data": base64.b64encode(raw).decode("ascii")}


def decode_ints(obj: Any) -> np.ndarray:
    """The int64 array of :func:`encode_ints` (a plain JSON list is read as one too)."""
    if isinstance(obj, list):
        return np.asarray(obj, dtype=np.int64)
    dt = np.dtype(str(obj["dtype"])).newbyteorder("<")
    return np.frombuffer(base64.b64decode(obj["data"]), dtype=dt).astype(np.int64).reshape(obj["shape"])


def _encode_ids(ids: np.ndarray) -> dict[str, Any]:
    ids = np.asarray(ids, dtype=np.int64)
    if ids.size and (ids == np.arange(ids[0], ids[0] + ids.size)).all():
        return {"range": [int(ids[0]), int(ids[0]) + int(ids.size)]}
    return {"range": [0, 0]} if not ids.size else encode_ints(ids)


def _decode_ids(obj: Any) -> np.ndarray:
    if isinstance(obj, dict) and "range" in obj:
        return np.arange(*obj["range"], dtype=np.int64)
    return decode_ints(obj)


def _encode_bits(values: np.ndarray) -> dict[str, Any]:
    bits = np.packbits(np.asarray(values, dtype=bool))  # big-endian bit order (numpy's default)
    return {"bits": base64.b64encode(bits.tobytes()).decode("ascii"), "n": int(np.asarray(values).size)}


def _decode_bits(obj: dict[str, Any]) -> np.ndarray:
    packed = np.frombuffer(base64.b64decode(obj["bits"]), dtype=np.uint8)
    return np.unpackbits(packed, count=int(obj["n"])).astype(bool)


# --------------------------------------------------------------------------- writing
def write_items(record_path: str | os.PathLike, items: Any, *, cell_id: str, metric: str) -> dict[str, Any]:
    """Write ``items`` (a :class:`tasks.common.module.ItemOutcomes`) beside the record at
    ``record_path``, atomically; returns the record's ``items`` pointer (file name, unit, n, bytes,
    sha256 of the sidecar)."""
    values = np.asarray(items.values)
    doc: dict[str, Any] = {"schema": SCHEMA, "cell_id": cell_id, "split": "test", "unit": items.unit,
                           "n": int(values.shape[0]), "ids": _encode_ids(items.ids)}
    if values.ndim == 1:
        doc["correct"] = _encode_bits(values)
    else:
        doc["stats"] = {"metric": metric, "fields": list(items.fields or ()), "rows": encode_ints(values)}
    if items.group is not None:
        doc["group"] = {"unit": items.group, "ids": _encode_ids(items.group_ids),
                        "sizes": encode_ints(items.group_sizes)}
    if getattr(items, "axis", None) is not None:
        doc["axis"] = {"name": items.axis, "values": encode_ints(items.axis_values)}
    path = R.write_json_atomic(items_path(record_path), doc)
    data = path.read_bytes()
    return {"file": path.name, "unit": items.unit, "n": doc["n"], "bytes": len(data),
            "sha256": hashlib.sha256(data).hexdigest()}


# --------------------------------------------------------------------------- reading
def load_items(record: str | os.PathLike | dict[str, Any]) -> Items | None:
    """The test items of a record (its path, or the record as :func:`benchmarks.run.records.load_records`
    gives it, with ``_path``): None when the record has none (older records, several ranks, fit
    only); None with a warning when its sidecar is missing or is not the one the record names
    (another sha256)."""
    if isinstance(record, dict):
        rec, where = record, record.get("_path")
        if where is None:
            raise ValueError("load_items: a record dict needs its '_path' (as load_records sets it)")
    else:
        where = Path(record)
        rec = json.loads(where.read_text(encoding="utf-8"))
    pointer = rec.get("items") if isinstance(rec, dict) else None
    if not isinstance(pointer, dict) or not pointer.get("file"):
        return None
    path = Path(where).parent / str(pointer["file"])
    try:
        data = path.read_bytes()
    except OSError as err:
        warnings.warn(f"{where}: its test items {path.name} are not readable ({err.strerror or err})")
        return None
    if pointer.get("sha256") and hashlib.sha256(data).hexdigest() != pointer["sha256"]:
        warnings.warn(f"{path}: not the test items its record names (sha256 differs): left out")
        return None
    doc = json.loads(data.decode("utf-8"))
    if doc.get("schema") != SCHEMA:
        warnings.warn(f"{path}: test items of schema {doc.get('schema')!r}, not {SCHEMA}: left out")
        return None
    n = int(doc["n"])
    ids = _decode_ids(doc["ids"])
    stats = doc.get("stats")
    values = _decode_bits(doc["correct"]) if "correct" in doc else decode_ints(stats["rows"])
    group, group_of = None, None
    if doc.get("group"):
        g = doc["group"]
        group = str(g["unit"])
        group_of = np.repeat(_decode_ids(g["ids"]), decode_ints(g["sizes"]))
    axis = doc.get("axis")
    axis_values = decode_ints(axis["values"]) if axis else None
    if len(ids) != n or len(values) != n or any(a is not None and len(a) != n for a in (group_of, axis_values)):
        warnings.warn(f"{path}: its arrays do not hold n={n} units: left out")
        return None
    return Items(str(doc["unit"]), ids, values, group, group_of,
                 tuple(stats["fields"]) if stats else None, (stats or {}).get("metric") or (rec.get("metric") or {}).get("name"),
                 str(axis["name"]) if axis else None, axis_values)


# --------------------------------------------------------------------------- metrics
def bleu_from_stats(stats: np.ndarray) -> float:
    """Corpus BLEU of sentence statistics ``(N, 10)`` (or their column sums ``(10,)``), as sacreBLEU's
    ``corpus_bleu`` gives it (exponential smoothing, 4-grams)."""
    from sacrebleu.metrics.bleu import BLEU

    s = np.asarray(stats, dtype=np.int64)
    s = s.sum(0) if s.ndim == 2 else s
    v = [int(x) for x in s]
    return float(BLEU.compute_bleu(v[2:6], v[6:10], v[0], v[1], smooth_method="exp").score)


def bleu_rows(stats: np.ndarray) -> np.ndarray:
    """Corpus BLEU of each row of summed statistics ``(R, 10)`` at once (a bootstrap's resamples):
    :func:`bleu_from_stats`'s rule, vectorised; tested against it on random statistics."""
    s = np.asarray(stats, dtype=np.float64)  # (R, 10): sys_len, ref_len, correct[4], total[4]
    sys_len, ref_len, correct, total = s[:, 0], s[:, 1], s[:, 2:6], s[:, 6:10]
    with np.errstate(divide="ignore", invalid="ignore"):
        bp = np.where(sys_len < ref_len, np.where(sys_len > 0, np.exp(1.0 - ref_len / sys_len), 0.0), 1.0)
        halvings = np.cumsum(correct == 0, axis=1)  # sacreBLEU's 'exp' smoothing: 1/2, 1/4, ... per zero order
        prec = np.where(correct > 0, 100.0 * correct / total, 100.0 / (2.0 ** halvings * total))  # (R, 4)
        logs = np.log(prec)
    mean_log = (logs[:, 0] + logs[:, 1] + logs[:, 2] + logs[:, 3]) / 4.0  # left to right, as sacreBLEU sums
    zero = (correct.sum(1) == 0) | (total == 0).any(1)  # no match at all, or an order with no n-grams
    return np.where(zero, 0.0, bp * np.exp(np.where(zero, 0.0, mean_log)))


def score(items: Items, take: np.ndarray | None = None) -> float:
    """The test metric of ``items`` (the units ``take``, with repeats: a resample; all of them by
    default): the mean correctness (accuracy), or corpus BLEU from the statistics."""
    values = items.values if take is None else items.values[np.asarray(take, dtype=np.int64)]
    if values.ndim == 2:
        if items.metric != "bleu" or not items.fields or items.fields[:2] != ("sys_len", "ref_len"):
            raise ValueError(f"score: statistics of {items.metric!r} ({items.fields}); only BLEU's are known")
        return bleu_from_stats(values)
    return float(values.mean()) if values.size else float("nan")
