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


def _trainer(r: dict[str, Any]) -> dict[str, Any]:
    return ((r.get("config") or {}).get("trainer") or {}) if isinstance(r.get("config"), dict) else {}


def _cap_text(v: Any) -> str:
    if isinstance(v, dict) and isinstance(v.get("seconds"), (int, float)):  # calibrated: {seconds, reference}
        return f"{v['seconds']:g} s on {v.get('reference')} (calibrated)"
    return f"{v:g} s" if isinstance(v, (int, float)) and not isinstance(v, bool) else f"{v!r} s"


def _plain(v: Any) -> Any:
    """A record's value as something hashable (a broken record's list or mapping as its text)."""
    return v if v is None or isinstance(v, (int, float, str)) else repr(v)


def held_equal(models: Iterable[Any]) -> tuple[str, str]:
    """What one table's models had in common as a training budget, from their records' resolved
    trainer configs: ``(short, sentence)``, e.g. ``("2 epochs", "...")``. Epochs or steps are
    machine-independent; a wall-clock cap is not (another CPU buys other epochs); models with
    different caps had nothing held equal, which the short form says."""
    models = list(models)
    per: dict[str, set] = {}
    patience: dict[str, set] = {}
    capped: list[str] = []
    for m in models:
        trainers = [t for t in map(_trainer, m.ok) if t]
        if not trainers:
            continue
        per[m.model] = {(_plain(t.get("max_epochs")), _plain(t.get("max_steps", -1)),
                         _cap_text(t["max_time_s"]) if t.get("max_time_s") is not None else None) for t in trainers}
        patience[m.model] = {p for t in trainers if isinstance(p := t.get("early_stopping_patience"), int)}
        if time_capped(m.ok):
            capped.append(m.model)
    if not per:
        return "–", "No record says what budget it trained under."
    budgets = set().union(*per.values())
    pats = sorted({p for ps in patience.values() for p in ps if p}, key=int)
    stop = (f" Early stopping on validation (patience {'/'.join(map(str, pats))} epochs) may end a model sooner; "
            "the best-validation checkpoint is tested." if pats else " No early stopping: every model trains to the end.")
    machine = " On another machine the same cap buys other epochs: a wall-clock budget is machine-dependent."
    if len(budgets) > 1:
        by: dict[str, list[str]] = {}
        for model, bs in per.items():
            by.setdefault(" or ".join(_describe(b) for b in sorted(bs, key=str)), []).append(model)
        caps = "; ".join(f"{', '.join(ms)}: {b}" for b, ms in by.items())
        if any(cap for _, _, cap in budgets):
            return "nothing (own caps)", f"Nothing held equal: the models have different caps ({caps})." + machine + stop
        if pats:
            return ("early stopping", f"Held equal: the stopping rule, not the budget: each model trains until its "
                    f"validation score stops improving (patience {'/'.join(map(str, pats))} epochs; the best-validation "
                    f"checkpoint is tested), under its own epoch ceiling ({caps}); no time cap, so machine-independent.")
        return "nothing (own epochs)", f"Nothing held equal: the models train for different epochs ({caps})." + stop
    (epochs, steps, cap), = budgets
    if cap is None:
        unit = f"{steps} optimiser steps" if steps not in (None, -1) else f"{epochs} epochs"
        return unit, (f"Held equal: {unit} for every model (the same training examples, no time cap), so the "
                      f"numbers do not depend on the machine's speed; not equal cost (see train time)." + stop)
    known = any(isinstance(r.get("stop"), dict) for m in models for r in m.ok)
    bound = ("" if not known else f" The cap ended {', '.join(capped)}'s training before its {epochs} epochs."
             if capped else f" The cap ended no model's training before its {epochs} epochs.")
    if "calibrated" in cap:
        machine = ""
    return f"{cap} wall-clock", f"Held equal: {cap} of training per model (at most {epochs} epochs)." + bound + machine + stop


def _describe(b: tuple[Any, Any, Any]) -> str:
    epochs, steps, cap = b
    parts = [f"{epochs} epochs"] + ([f"{steps} steps"] if steps not in (None, -1) else []) + ([cap] if cap else [])
    return ", ".join(parts)


__all__ = ["TIME_CAP_MARK", "BUDGET_KIND", "stop_reasons", "time_capped", "model_marker",
           "leaderboard_note", "held_equal", "budget_warnings", "machine_warnings", "machine_label", "environment_rows",
           "SPEED_SPREAD"]
