"""What the results page may say about a run, read from its records: seeds, epochs, cells, time
caps, train and wall times, config values. ``results/page.yaml``'s prose quotes them through
placeholders (``{seeds}``, ``{epochs:convs2s}``, ...) that :func:`fill` replaces, so a number in
the page's prose is computed, not typed.

A placeholder is ``{name}`` or ``{name:ARG}``; ARG selects records: model names, comma-separated
(empty: every model of the scope), optionally followed by ``@config.path=value`` to keep only the
records whose resolved config has that value (``{cap:s4d@model_params.mode=pixel}``). ``config``
takes ``[MODELS/]dotted.path`` instead. ``{not_recorded:TEXT}`` writes TEXT as it is: a number
that no record holds, declared as such (``attnbench page --check`` leaves it alone).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any, Callable

from benchmarks.report import stats
from benchmarks.report.format import fmt_seconds

__all__ = ["Scope", "PageError", "PLACEHOLDER", "PLACEHOLDERS", "fill", "span", "strip_placeholders"]

#: ``{name}`` or ``{name:arg}`` (no braces inside)
PLACEHOLDER = re.compile(r"\{([a-z_]+)(?::([^{}]*))?\}")


class PageError(ValueError):
    """``results/page.yaml`` names something that is not there (one line)."""


def span(lo: float, hi: float, fmt: Callable[[float], str] = lambda v: f"{v:,.0f}") -> str:
    """``3`` or ``3-10``."""
    return fmt(lo) if lo == hi else f"{fmt(lo)}-{fmt(hi)}"


def _fmt_value(v: Any) -> str:
    if isinstance(v, bool) or v is None:
        return str(v).lower() if isinstance(v, bool) else "none"
    if isinstance(v, int):
        return f"{v:,}"
    if isinstance(v, float):
        return f"{v:g}"
    return str(v)


def _get(cfg: Any, path: str) -> Any:
    for part in path.split("."):
        if not isinstance(cfg, dict) or part not in cfg:
            return _MISSING
        cfg = cfg[part]
    return cfg


_MISSING = object()


@dataclass
class Scope:
    """The records one piece of prose may quote: a headline group, a section's folders or the
    whole headline. ``label`` names them in messages; ``folder`` holds ``run.log`` and
    ``diagnostics.json`` where a run left them."""

    label: str
    records: list[dict[str, Any]]
    folder: Path | None = None
    extra: dict[str, str] = field(default_factory=dict)  # page-level values (cost_range, ...)

    # ------------------------------------------------------------------ selection
    @property
    def ok(self) -> list[dict[str, Any]]:
        return [r for r in self.records if r.get("status") == "ok"]

    def models(self) -> list[str]:
        return sorted({str(r.get("model")) for r in self.records})

    def select(self, arg: str | None, ok: bool = True) -> list[dict[str, Any]]:
        """The records ARG names (see the module docstring); a name or filter that matches
        nothing is a :class:`PageError`."""
        recs = self.ok if ok else self.records
        arg = (arg or "").strip()
        models, _, filt = arg.partition("@")
        names = [m.strip() for m in models.split(",") if m.strip()]
        for name in names:
            if not any(r.get("model") == name for r in self.records):
                raise PageError(f"no records of model {name} in {self.label} (it has: {', '.join(self.models())})")
        if names:
            recs = [r for r in recs if r.get("model") in names]
        if filt:
            path, eq, want = filt.partition("=")
            if not eq:
                raise PageError(f"filter @{filt}: write @config.path=value")
            got = [(r, _get(r.get("config"), path.strip())) for r in recs]
            recs = [r for r, v in got if want.strip() in (str(v), _fmt_value(v))]
        if not recs:
            raise PageError(f"no {'ok ' if ok else ''}records for {arg or 'this scope'} in {self.label}")
        return recs

    # ------------------------------------------------------------------ facts (numbers)
    def seeds(self, arg: str | None = None) -> tuple[int, int]:
        """The fewest and most ok seeds of one model."""
        per: dict[str, set[Any]] = {}
        for r in self.select(arg):
            per.setdefault(f"{r.get('task')}/{r.get('dataset')}/{r.get('model')}/{_cfg_key(r)}", set()).add(r.get("seed"))
        counts = [len(v) for v in per.values()]
        return min(counts), max(counts)

    def epochs(self, arg: str | None = None) -> tuple[int, int]:
        vals = [int(r["epochs_run"]) for r in self.select(arg) if isinstance(r.get("epochs_run"), (int, float))]
        if not vals:
            raise PageError(f"no record of {arg or 'this scope'} in {self.label} has epochs_run")
        return min(vals), max(vals)

    def max_epochs(self, arg: str | None = None) -> tuple[int, int]:
        vals = [int(v) for v in (_get(r.get("config"), "trainer.max_epochs") for r in self.select(arg, ok=False))
                if isinstance(v, (int, float))]
        if not vals:
            raise PageError(f"no record of {arg or 'this scope'} in {self.label} has an epoch cap")
        return min(vals), max(vals)

    def cores(self) -> tuple[int, int]:
        """The CPU cores the records ran on (``env.cpu_affinity``, else ``env.cpu_count``)."""
        vals = [int(v) for v in ((r.get("env") or {}).get("cpu_affinity") or (r.get("env") or {}).get("cpu_count")
                                 for r in self.records) if isinstance(v, (int, float))]
        if not vals:
            raise PageError(f"no record in {self.label} names its CPU cores")
        return min(vals), max(vals)

    def caps(self, arg: str | None = None) -> list[float | None]:
        """The time caps (``trainer.max_time_s``; None: no cap) of the records."""
        vals = [_get(r.get("config"), "trainer.max_time_s") for r in self.select(arg, ok=False)]
        return sorted({float(v) if isinstance(v, (int, float)) else None for v in vals},
                      key=lambda v: -1 if v is None else v)

    def train_time(self, arg: str | None = None) -> float:
        vals = [float(r["cost"]["train_time_s"]) for r in self.select(arg)
                if isinstance((r.get("cost") or {}).get("train_time_s"), (int, float))]
        if not vals:
            raise PageError(f"no record of {arg or 'this scope'} in {self.label} has a train time")
        return sum(vals) / len(vals)

    def train_times(self) -> list[float]:
        """Every model's mean train time (what a literal time in prose may quote)."""
        return [self.train_time(m) for m in self.models() if any(r.get("model") == m for r in self.ok)]

    def cells_wall(self) -> float:
        """Seconds from the first record's start to the last one's finish."""
        try:
            starts = [datetime.fromisoformat(r["started"]) for r in self.records]
            ends = [datetime.fromisoformat(r["finished"]) for r in self.records]
        except (KeyError, TypeError, ValueError):
            raise PageError(f"a record in {self.label} has no started/finished time") from None
        return (max(ends) - min(starts)).total_seconds()

    def log(self) -> dict[str, float]:
        """``wall`` (the job's elapsed time), ``sweep`` (the attention sweep) and ``exit`` from the
        folder's ``run.log`` (the job's output under GNU time -v)."""
        path = (self.folder or Path(".")) / "run.log"
        if self.folder is None or not path.is_file():
            raise PageError(f"no run.log in {self.label} (wall time, sweep time and exit status come from it)")
        text = path.read_text(encoding="utf-8", errors="replace")
        out: dict[str, float] = {}
        m = re.search(r"Elapsed \(wall clock\) time(?: \([^)]*\))?:\s*(?:(\d+):)?(\d+):(\d+(?:\.\d+)?)", text)
        if m:
            out["wall"] = int(m.group(1) or 0) * 3600 + int(m.group(2)) * 60 + float(m.group(3))
        m = re.search(r"^done in (\d+(?:\.\d+)?) s", text, re.M)
        if m:
            out["sweep"] = float(m.group(1))
        m = re.search(r"Exit status:\s*(\d+)", text)
        if m:
            out["exit"] = float(m.group(1))
        return out

    def log_value(self, key: str) -> float:
        v = self.log().get(key)
        if v is None:
            raise PageError(f"run.log in {self.label} has no {key} line")
        return v

    def diagnostics(self) -> list[dict[str, Any]]:
        path = (self.folder or Path(".")) / "diagnostics.json"
        if self.folder is None or not path.is_file():
            raise PageError(f"no diagnostics.json in {self.label}")
        try:
            rows = json.loads(path.read_text(encoding="utf-8"))
        except ValueError as err:
            raise PageError(f"{path}: not JSON ({err})") from None
        return rows if isinstance(rows, list) else list(rows.get("rows", []))

    def config(self, arg: str) -> str:
        models, slash, path = arg.rpartition("/")
        if not path:
            raise PageError("{config:...} needs a dotted config path, e.g. {config:model_params.heads}")
        vals = [_get(r.get("config"), path) for r in self.select(models if slash else None, ok=False)]
        vals = [v for v in vals if v is not _MISSING]
        if not vals:
            raise PageError(f"no record in {self.label} has config.{path}")
        nums = [v for v in vals if isinstance(v, (int, float)) and not isinstance(v, bool)]
        if len(nums) == len(vals):
            return span(min(nums), max(nums), _fmt_value)
        return " / ".join(sorted({_fmt_value(v) for v in vals}))

    def times(self) -> list[float]:
        """Every duration in seconds a literal time in this scope's prose may quote: time caps,
        mean train times, and the run's wall, sweep and cells times where its log has them."""
        out = [c for c in self.caps() if c is not None] + self.train_times()
        if self.folder is not None and (self.folder / "run.log").is_file():
            out += [v for k, v in self.log().items() if k != "exit"] + [self.cells_wall()]
        return out


def _cfg_key(r: dict[str, Any]) -> str:
    """Records of one model that differ in config (a sweep) count their seeds apart."""
    cfg = r.get("config") or {}
    return json.dumps([cfg.get("model_params"), cfg.get("train_fraction"), cfg.get("diagnostic")], sort_keys=True,
                      default=str)


def _cap_text(scope: Scope, arg: str | None) -> str:
    caps = scope.caps(arg)
    if caps == [None]:
        return "no time cap"
    nums = [c for c in caps if c is not None]
    text = span(min(nums), max(nums), lambda v: f"{v:g}") + " s"
    return text + (" (some without)" if None in caps else "")


def _fraction(scope: Scope, arg: str | None) -> str:
    vals = {_get(r.get("config"), "train_fraction") for r in scope.select(arg, ok=False)}
    fr = sorted({1.0 if v in (None, _MISSING) else float(v) for v in vals})
    return " / ".join(f"{v * 100:.4g}%" for v in fr)


def _diag_counts(scope: Scope) -> tuple[int, int]:
    rows = scope.diagnostics()
    return sum(1 for r in rows if str(r.get("outcome")) == "matched"), len(rows)


def _commits(scope: Scope) -> str:
    cs = sorted({str((r.get("env") or {}).get("git_commit") or "")[:7] for r in scope.records} - {""})
    if not cs:
        raise PageError(f"no record in {scope.label} names its git commit")
    return ", ".join(cs)


def _dates(scope: Scope) -> str:
    ds = sorted({str(r.get("started") or "")[:10] for r in scope.records} - {""})
    if not ds:
        raise PageError(f"no record in {scope.label} has a start date")
    return ds[0] if len(ds) == 1 else f"{ds[0]} to {ds[-1]}"


def _extra(name: str) -> Callable[[Scope, str | None], str]:
    def get(scope: Scope, arg: str | None) -> str:
        if name not in scope.extra:
            raise PageError(f"{{{name}}} is a page-level value (intro, readme_caption), not one of {scope.label}")
        return scope.extra[name]
    return get


#: name -> (what it writes, how)
PLACEHOLDERS: dict[str, tuple[str, Callable[[Scope, str | None], str]]] = {
    "seeds": ("ok seeds per model (range)", lambda s, a: span(*s.seeds(a))),
    "epochs": ("epochs run (range over the records)", lambda s, a: span(*s.epochs(a))),
    "max_epochs": ("the epoch cap (trainer.max_epochs)", lambda s, a: span(*s.max_epochs(a))),
    "cap": ("the time cap (trainer.max_time_s)", _cap_text),
    "train_time": ("mean train time", lambda s, a: fmt_seconds(s.train_time(a))),
    "cells": ("records (cells run, failed included)", lambda s, a: f"{len(s.select(a, ok=False)):,}"),
    "failed": ("failed records", lambda s, a: str(sum(r.get("status") != "ok" for r in s.select(a, ok=False)))),
    "train_size": ("training-set size (data.train_size)",
                   lambda s, a: span(*_minmax([(r.get("data") or {}).get("train_size") for r in s.select(a, ok=False)], s))),
    "fraction": ("training fraction in percent", _fraction),
    "config": ("a resolved config value: [MODELS/]dotted.path", lambda s, a: s.config(a or "")),
    "commits": ("git commits of the records", lambda s, a: _commits(s)),
    "date": ("dates the records started", lambda s, a: _dates(s)),
    "cells_wall": ("first start to last finish of the records", lambda s, a: fmt_seconds(s.cells_wall())),
    "wall": ("the job's wall time (run.log)", lambda s, a: fmt_seconds(s.log_value("wall"))),
    "sweep": ("the attention sweep's time (run.log)", lambda s, a: fmt_seconds(s.log_value("sweep"))),
    "exit": ("the job's exit status (run.log)", lambda s, a: f"{s.log_value('exit'):g}"),
    "matched": ("diagnostic expectations matched (diagnostics.json)", lambda s, a: str(_diag_counts(s)[0])),
    "expectations": ("diagnostic expectations (diagnostics.json)", lambda s, a: str(_diag_counts(s)[1])),
    "cost_range": ("best attention's train time over each compared baseline's (page level)", _extra("cost_range")),
    "not_recorded": ("TEXT as it is: a number no record holds, declared so", lambda s, a: a or ""),
}


def _minmax(vals: list[Any], scope: Scope) -> tuple[float, float]:
    nums = [v for v in vals if isinstance(v, (int, float)) and not isinstance(v, bool)]
    if not nums:
        raise PageError(f"no record in {scope.label} has data.train_size")
    return min(nums), max(nums)


def learning_rates(folder: Path | None, task: str | None = None, dataset: str | None = None) -> str:
    """How a run set its learning rates, from its manifest (``suite.json``): ``tuned`` when its
    config named a tuning file (each model's rate chosen on validation by ``attnbench tune``), with
    the models whose rate is at the grid's edge (the search did not bracket it; only those of
    ``task``/``dataset`` when given: a headline row is one dataset of the run), ``hand-set`` when
    not, ``–`` without a manifest."""
    try:
        cfg = json.loads((folder / "suite.json").read_text(encoding="utf-8")).get("config") if folder else None
    except (OSError, ValueError, AttributeError):
        cfg = None
    if not isinstance(cfg, dict):
        return "–"
    if not cfg.get("tuning"):
        return "hand-set"
    edge = _at_grid_edge(str(cfg["tuning"]), task, dataset)
    return f"tuned ({', '.join(edge)} at the grid's edge)" if edge else "tuned"


def _at_grid_edge(tuning: str, task: str | None = None, dataset: str | None = None) -> list[str]:
    """The models of tuning file ``tuning`` (as the manifest names it: absolute on the machine that
    ran it, so else the committed file of that name) whose chosen rate is the grid's first or last,
    of ``task`` and ``dataset`` where given."""
    import yaml

    from benchmarks.config.tuning import TUNING_DIR
    from benchmarks.report.tuning import grid_edge

    path = Path(tuning) if Path(tuning).is_file() else TUNING_DIR / Path(tuning).name
    try:
        doc = yaml.safe_load(path.read_text(encoding="utf-8"))
    except (OSError, yaml.YAMLError):
        return []
    entries = doc.get("entries") if isinstance(doc, dict) else None
    return sorted({e["model"] for e in entries or [] if isinstance(e, dict) and "model" in e
                   and task in (None, e.get("task")) and dataset in (None, e.get("dataset"))
                   and grid_edge(doc, e.get("chosen"))})


def fill(text: str, scope: Scope, where: str) -> str:
    """``text`` with every placeholder replaced from ``scope``; an unknown placeholder or one the
    records cannot answer is a one-line :class:`PageError` naming ``where``."""
    def one(m: re.Match[str]) -> str:
        name, arg = m.group(1), m.group(2)
        if name not in PLACEHOLDERS:
            raise PageError(f"{where}: unknown placeholder {m.group(0)} (known: {', '.join(sorted(PLACEHOLDERS))})")
        try:
            return PLACEHOLDERS[name][1](scope, arg)
        except PageError as err:
            raise PageError(f"{where}: {m.group(0)}: {err}") from None

    stray = re.search(r"[{}]", PLACEHOLDER.sub("", text))
    if stray:
        raise PageError(f"{where}: a brace that is no placeholder near {text[max(0, stray.start() - 20):stray.start() + 20]!r}")
    return PLACEHOLDER.sub(one, text)


def strip_placeholders(text: str) -> str:
    """``text`` with each placeholder (whose value is right by construction) replaced by ``§``,
    so that only literal numbers are left for the claim checks."""
    return PLACEHOLDER.sub("§", text)


# --------------------------------------------------------------------------- numbers as the page shows them
UNITS = {"acc": (100.0, "accuracy %"), "bleu": (1.0, "BLEU"), "f1": (100.0, "F1 %"), "chrf": (1.0, "chrF")}


def shown_unit(metric: str) -> tuple[float, str]:
    """(factor, unit) a metric is shown in on the page (accuracy 0.95 -> 95.00 %)."""
    return UNITS.get(metric, (1.0, metric))


def shown_number(x: float | None, metric: str, signed: bool = False) -> str:
    """A record value in the page's unit, 2 decimals (signed: with its sign)."""
    if x is None:
        return "–"
    v = x * shown_unit(metric)[0]
    return f"{v:+.2f}" if signed else f"{v:.2f}"


def ci_text(x: stats.Summary | stats.Difference | None, metric: str) -> str:
    """``[lo, hi]`` in the shown unit, ``(clipped)`` where cut to the metric's range, ``n=3,
    identical`` for tied seeds (the report's rule)."""
    if x is None or x.ci_low is None or x.ci_high is None:
        return "–" if x is None else f"undefined (n={x.n})"
    if x.identical:
        return f"n={x.n}, identical"
    return f"[{shown_number(x.ci_low, metric)}, {shown_number(x.ci_high, metric)}]" + (" (clipped)" if x.clipped else "")
