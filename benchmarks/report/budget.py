"""The report's view of budgets and machines: which budget ended each model's training (a
marker on time-capped leaderboard rows, a warning when one table's models stopped for different
kinds of budget, or ran on machines of different kind or speed) and the speed fingerprint rows of
the environment block.

Reads only records: a record without a ``stop`` block (written before it existed) is neither
marked nor warned about, so older reports come out as before.
"""

from __future__ import annotations

from collections import Counter
from typing import Any, Callable, Iterable

from benchmarks.run.budget import comparable, scale_factor
from benchmarks.run.fingerprint import format_fingerprint

#: the leaderboard's marker on a model some of whose seeds were ended by the time cap
TIME_CAP_MARK = "†"
#: how far apart (fastest / slowest) the speed fingerprints of one table's time-capped records may
#: be before the report warns: runs of one machine kind here spread up to ~1.24x (a fingerprint is
#: a few seconds of measurement, and a neighbour's load moves it)
SPEED_SPREAD = 1.25
#: kinds of budget a stop reason belongs to (early stopping ends by the epoch budget's rule)
BUDGET_KIND = {"max_epochs": "epochs", "early_stopping": "epochs", "max_steps": "steps", "time_cap": "time cap"}


def stop_reasons(records: Iterable[dict[str, Any]]) -> Counter:
    """Stop reasons of the records that say what ended their training."""
    return Counter(str(r["stop"].get("reason")) for r in records if isinstance(r.get("stop"), dict))


def time_capped(records: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
    """The records whose training the time cap ended."""
    return [r for r in records if isinstance(r.get("stop"), dict) and r["stop"].get("reason") == "time_cap"]


def model_marker(ok_records: list[dict[str, Any]]) -> str:
    """:data:`TIME_CAP_MARK` when the time cap ended any of a model's seeds, else empty."""
    return TIME_CAP_MARK if time_capped(ok_records) else ""


def leaderboard_note(models: Iterable[Any]) -> str | None:
    """The footnote under a leaderboard with time-capped models: which, how many seeds, and
    the epochs they reached against their epoch budget."""
    parts = []
    for m in models:
        capped = time_capped(m.ok)
        if not capped:
            continue
        epochs = sorted({int(r["stop"].get("epochs") or 0) for r in capped})
        budget = sorted({r["stop"].get("max_epochs") for r in capped}, key=str)
        caps = sorted({round(float(r["stop"].get("time_cap_s") or 0)) for r in capped})
        span = f"{epochs[0]}" if len(epochs) == 1 else f"{epochs[0]}-{epochs[-1]}"
        parts.append(f"{m.model}: {len(capped)} of {len(m.ok)} seed(s) at epoch {span} of "
                     f"{'/'.join(map(str, budget))} ({'/'.join(map(str, caps))} s cap)")
    if not parts:
        return None
    return (f"{TIME_CAP_MARK} the time cap (max_time_s), not the epoch budget, ended training: " + "; ".join(parts)
            + ". On another machine these models reach other epochs: compare with care.")


def budget_warnings(groups: Iterable[Any], title: Callable[[Any], str]) -> list[str]:
    """One warning per group whose models were stopped by different kinds of budget (e.g.
    one by its epochs, another by the clock)."""
    out = []
    for g in groups:
        kinds: dict[str, Counter] = {}
        for m in g.models:
            reasons = stop_reasons(m.ok)
            if reasons:
                kinds[m.model] = Counter({BUDGET_KIND.get(k, k): n for k, n in reasons.items()})
        distinct = {k for c in kinds.values() for k in c}
        if len(distinct) > 1:
            by = "; ".join(f"{model} by {', '.join(f'{k} ({n})' for k, n in sorted(c.items()))}"
                           for model, c in kinds.items())
            out.append(f"{title(g)}: models were stopped by different kinds of budget ({by}): "
                       f"the comparison is not at equal epochs nor at equal time")
    return out


def machine_label(env: dict[str, Any]) -> str:
    """A record's machine in a few words: the GPU name, or the CPU model with its torch kernels
    (AVX2 / AVX512) and core count; ``"?"`` for a record that stored none of these."""
    if env.get("device") not in (None, "cpu"):
        return f"{env.get('device_name') or env.get('device')}"
    parts = [str(v) for v in (env.get("cpu_model") or env.get("device_name"), env.get("cpu_capability")) if v]
    if env.get("cpu_count"):
        parts.append(f"{env['cpu_count']} cores")
    return " ".join(parts) or "?"


def machine_warnings(groups: Iterable[Any], title: Callable[[Any], str]) -> list[str]:
    """Warnings for a table whose records were not measured alike: models that ran on different
    machines (their times, throughput and memory are not comparable), and time-capped models
    whose machines' speed fingerprints are more than :data:`SPEED_SPREAD` apart (the clock
    bought them different amounts of training: their quality is not at equal work)."""
    out = []
    for g in groups:
        recs = [r for m in g.models for r in m.ok]
        labels = Counter(machine_label(r.get("env") or {}) for r in recs)
        if len(labels) > 1:
            out.append(f"{title(g)}: records from {len(labels)} machines ("
                       + "; ".join(f"{k}: {n}" for k, n in sorted(labels.items()))
                       + "): train time, throughput and memory are not comparable across them")
        fps = [(r.get("model"), (r.get("env") or {}).get("fingerprint")) for r in time_capped(recs)]
        fps = [(m, fp) for m, fp in fps if isinstance(fp, dict)]
        if len(fps) < 2:
            continue
        ref = fps[0][1]
        if not all(comparable(fp, ref) for _, fp in fps):
            kinds = sorted({f"{fp.get('device')} {fp.get('dtype')}" for _, fp in fps})
            out.append(f"{title(g)}: time-capped records were fingerprinted on different devices or dtypes "
                       f"({', '.join(kinds)}): their quality is not at equal work")
            continue
        try:
            speeds = [(1.0 / scale_factor(fp, ref), m, fp) for m, fp in fps]
        except ValueError:  # a fingerprint without the rates: nothing to compare
            continue
        (lo, lo_m, lo_fp), (hi, hi_m, hi_fp) = min(speeds, key=lambda x: x[0]), max(speeds, key=lambda x: x[0])
        if hi / lo > SPEED_SPREAD:
            out.append(f"{title(g)}: time-capped records ran on machines {hi / lo:.2f}x apart in speed "
                       f"(fastest, {hi_m}: {format_fingerprint(hi_fp)}; slowest, {lo_m}: {format_fingerprint(lo_fp)}): "
                       "the clock bought them different amounts of training, so their quality is not at equal work "
                       "(a calibrated budget, max_time_s: {seconds: S, reference: NAME}, scales the cap per machine)")
    return out


def environment_rows(envs: list[dict[str, Any]], distinct: Callable[[Iterable[Any]], str]) -> list[list[str]]:
    """Environment-block rows: CPU identity (vector units, MHz), GPU driver and the speed
    fingerprint, as distinct values with record counts (``distinct``); none for old records."""
    rows = []
    for label, key in (("CPU vector units", "cpu_vector"), ("CPU kernels (torch)", "cpu_capability"),
                       ("CPU MHz", "cpu_mhz"), ("GPU driver", "gpu_driver")):
        values = [e.get(key) for e in envs]
        if any(v is not None for v in values):
            rows.append([label, distinct(" ".join(v) if isinstance(v, list) else v for v in values)])
    fps = [e.get("fingerprint") if isinstance(e.get("fingerprint"), dict) else None for e in envs]
    if any(fps):
        rows.append(["speed fingerprint", distinct(format_fingerprint(fp) if fp else None for fp in fps)])
    return rows


__all__ = ["TIME_CAP_MARK", "BUDGET_KIND", "stop_reasons", "time_capped", "model_marker",
           "leaderboard_note", "budget_warnings", "machine_warnings", "machine_label", "environment_rows",
           "SPEED_SPREAD"]
