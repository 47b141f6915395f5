"""Learning-rate tuning over records: the choice ``attnbench tune`` writes to a tuning file,
and the report section that shows each model's learning-rate window.

The choice (:func:`tuning_entries`), per tuned (task, dataset, model, setting): every grid
point's validation score (``best_val.value`` of its ``ok`` records) over the seeds, as mean,
sample std and Student-t interval (:mod:`benchmarks.report.stats`); a point is eligible when every
seed trained; the chosen point has the best mean in the metric's direction (ties: the first in
grid order, i.e. the smaller lr). Its **window** is every eligible point whose mean lies inside
the chosen point's interval: a model that works in a wide window is robust to its learning
rate, one whose window is the chosen value alone is a finding. Test scores are never read.

The section (:func:`tuning_blocks`) appears in a report whose records name a tuning file
(``config.tuning`` of a record, :mod:`benchmarks.config.tuning`) that can be read.
"""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any, Callable, Iterable

import yaml

from benchmarks.report import stats
from benchmarks.report.document import Block, Bold, Heading, Image, Paragraph, Table, render_markdown
from benchmarks.report.format import fmt_metric, slug
from benchmarks.report.results import METRIC_BOUNDS

__all__ = ["CONFIDENCE", "RULE", "tuning_entries", "point_label", "dump_tuning", "tuning_doc_blocks",
           "tuning_blocks", "summary_lines", "doc_differences", "tuning_markdown", "plot_lr_windows"]

CONFIDENCE = 0.95
RULE = ("best mean validation score over the seeds, among the grid points where every seed trained; ties: "
        "the first in grid order (smaller lr); window: the eligible points whose mean lies in the chosen "
        "point's 95% t-interval")


def _round(x: float | None) -> float | None:
    return None if x is None else round(float(x), 6)


def point_label(point: dict[str, Any]) -> str:
    """``lr=0.003`` or ``lr=0.003, weight_decay=0``."""
    return ", ".join(f"{k}={v:g}" if isinstance(v, float) else f"{k}={v}" for k, v in point.items())


def _val(rec: dict[str, Any] | None) -> float | None:
    """A record's best validation value when it is ``ok``; else None."""
    if not isinstance(rec, dict) or rec.get("status") != "ok" or not isinstance(rec.get("best_val"), dict):
        return None
    v = rec["best_val"].get("value")
    return float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else None


def tuning_entries(cells: list[Any], records: dict[str, dict[str, Any]], points: list[dict[str, Any]],
                   keys: list[str]) -> list[dict[str, Any]]:
    """One tuning entry per (task, dataset, model, setting) of the trial ``cells`` (in their
    order), from ``records`` (cell id -> record). Shapes: ``points`` G dicts; per entry G trials."""
    from benchmarks.config.tuning import setting_of
    from tasks.common.registry import get_task

    groups: dict[tuple, list[Any]] = {}
    for c in cells:
        groups.setdefault((c.task, c.dataset, c.model, setting_of(c.config, keys)["id"]), []).append(c)
    out: list[dict[str, Any]] = []
    configs: list[dict[str, Any]] = []
    for (task, dataset, model, _), members in groups.items():
        t = get_task(task)
        first = members[0]
        trials = []
        for point in points:
            here = sorted((c for c in members if all(c.config["module_params"].get(k) == v for k, v in point.items())),
                          key=lambda c: c.seed)
            vals = [v for v in (_val(records.get(c.cell_id)) for c in here) if v is not None]
            s = stats.summarize(vals, CONFIDENCE, METRIC_BOUNDS.get(t.metric))
            trials.append({**point, "n": s.n, "failed": len(here) - s.n, "mean": _round(s.mean), "std": _round(s.std),
                           "ci": None if s.ci_low is None else [_round(s.ci_low), _round(s.ci_high)],
                           "cells": [c.cell_id for c in here], "_s": s, "_all": bool(here) and s.n == len(here)})
        chosen, window = _choose(trials, t.mode)
        entry = {"task": task, "dataset": dataset, "model": model, "family": first.family}
        if first.config.get("diagnostic"):
            entry["diagnostic"] = first.config["diagnostic"]
        entry.update(setting=setting_of(first.config, keys), metric={"name": t.metric, "mode": t.mode},
                     chosen=None if chosen is None else {k: chosen[k] for k in keys},
                     window=[{k: w[k] for k in keys} for w in window],
                     trials=[{k: v for k, v in tr.items() if not k.startswith("_")} for tr in trials])
        out.append(entry)
        configs.append(first.config)
    _label_settings(out, configs, keys)
    return out


def _label_settings(entries: list[dict[str, Any]], configs: list[dict[str, Any]], keys: list[str]) -> None:
    """Give the entries that share task, dataset, model and diagnostic (a sweep's points) an
    ``at`` mapping: the parameters (outside the searched ``keys``) whose values tell them apart."""
    def flat(config: dict[str, Any]) -> dict[str, Any]:
        out = {"train_fraction": config.get("train_fraction")}
        for section in ("dataset_params", "model_params", "module_params"):
            out.update({k: v for k, v in (config.get(section) or {}).items() if k not in keys})
        return out

    groups: dict[tuple, list[int]] = {}
    for i, e in enumerate(entries):
        groups.setdefault((e["task"], e["dataset"], e["model"], e.get("diagnostic")), []).append(i)
    for members in groups.values():
        if len(members) < 2:
            continue
        params = [flat(configs[i]) for i in members]
        names = [k for k in params[0] if any(repr(p.get(k)) != repr(params[0].get(k)) for p in params[1:])]
        for i, p in zip(members, params):  # placed before the setting, where a reader looks
            e = entries[i]
            head = {k: e[k] for k in ("task", "dataset", "model", "family", "diagnostic") if k in e}
            entries[i] = {**head, "at": {k: p.get(k) for k in names}, **{k: v for k, v in e.items() if k not in head}}


def _choose(trials: list[dict[str, Any]], mode: str) -> tuple[dict[str, Any] | None, list[dict[str, Any]]]:
    """The chosen trial (best mean of the eligible ones) and the window (eligible trials whose mean
    lies in its interval; with one seed, those with its very mean)."""
    eligible = [t for t in trials if t["_all"]]
    if not eligible:
        return None, []
    sign = 1.0 if mode == "max" else -1.0
    best = max(eligible, key=lambda t: sign * t["_s"].mean)  # max() keeps the first of equals
    lo, hi = (best["_s"].ci_low, best["_s"].ci_high) if best["_s"].ci_low is not None else (best["_s"].mean,) * 2
    return best, [t for t in eligible if lo <= t["_s"].mean <= hi]


class _Flow(dict):
    """A mapping written on one line (a grid point, a trial, a setting)."""


class _Dumper(yaml.SafeDumper):
    pass


_Dumper.add_representer(_Flow, lambda d, data: d.represent_mapping("tag:yaml.org,2002:map", data, flow_style=True))


def _flowed(doc: dict[str, Any]) -> dict[str, Any]:
    """``doc`` with its row-like mappings marked for one-line output."""
    doc = dict(doc)
    doc["search"] = {**doc["search"], "grid": [_Flow(p) for p in doc["search"]["grid"]]}
    doc["entries"] = [{**e, **({"at": _Flow(e["at"])} if "at" in e else {}), "setting": _Flow(e["setting"]), "metric": _Flow(e["metric"]),
                       "chosen": None if e["chosen"] is None else _Flow(e["chosen"]),
                       "window": [_Flow(w) for w in e["window"]], "trials": [_Flow(t) for t in e["trials"]]}
                      for e in doc["entries"]]
    return doc


def dump_tuning(doc: dict[str, Any]) -> str:
    """The tuning file's text: the header, then YAML in a fixed key order (one line per grid
    point, trial and setting), so that the same records give the same bytes."""
    from benchmarks.config.tuning import HEADER

    return HEADER + yaml.dump(_flowed(doc), Dumper=_Dumper, sort_keys=False, default_flow_style=None, width=120,
                              allow_unicode=True)


def _window_text(entry: dict[str, Any], keys: list[str]) -> str:
    """The window's learning rates (``0.001 – 0.01``, or one value), with the other key's value."""
    lrs = sorted(w["lr"] for w in entry.get("window") or [])
    if not lrs:
        return "–"
    text = f"{lrs[0]:g}" if len(lrs) == 1 else f"{lrs[0]:g} – {lrs[-1]:g}"
    n = sum(1 for t in entry.get("trials") or [] if t.get("failed") == 0 and t.get("n"))
    return f"{text} ({len(lrs)} of {n})"


def _trial_text(t: dict[str, Any], chosen: dict[str, Any] | None, keys: list[str]) -> Any:
    if t.get("mean") is None:
        return "failed" if t.get("failed") else "–"
    ci = t.get("ci")
    text = fmt_metric(t["mean"]) + (f" [{fmt_metric(ci[0])}, {fmt_metric(ci[1])}]" if ci else "")
    if t.get("failed"):
        text += f" ({t['failed']} failed)"
    return Bold(text) if chosen is not None and all(t.get(k) == chosen.get(k) for k in keys) else text


def grid_edge(doc: dict[str, Any], chosen: dict[str, Any] | None) -> str | None:
    """``"largest"`` or ``"smallest"`` when ``chosen``'s lr is the grid's largest or smallest of
    several (the search did not bracket the best rate: it may lie beyond), else ``None``."""
    lrs = sorted({p["lr"] for p in (doc.get("search") or {}).get("grid") or [] if isinstance(p.get("lr"), (int, float))})
    if not chosen or len(lrs) < 2 or chosen.get("lr") not in (lrs[0], lrs[-1]):
        return None
    return "largest" if chosen["lr"] == lrs[-1] else "smallest"


def _where(e: dict[str, Any]) -> str:
    """``task / dataset`` (`` · diagnostic`` `` · key=value`` of a sweep point): an entry's place."""
    where = f"{e['task']} / {e['dataset']}" + (f" · {e['diagnostic']}" if e.get("diagnostic") else "")
    return where + "".join(f" · {k}={v:g}" if isinstance(v, float) else f" · {k}={v}" for k, v in (e.get("at") or {}).items())


def plot_lr_windows(doc: dict[str, Any], path: Path, title: str) -> Path | None:
    """Validation score (mean, error bar: the t-interval) against the learning rate (log axis), one
    panel per place (task, dataset, diagnostic, sweep point), one line per model coloured by its
    family; the chosen point a star, the other points of its window filled, the rest hollow."""
    from benchmarks.report.plots import FAMILY_COLORS, line_styles, new_figure, save_figure

    keys = list((doc.get("search") or {}).get("keys") or ["lr"])
    panels: dict[str, list[dict[str, Any]]] = {}
    for e in doc.get("entries") or []:
        panels.setdefault(_where(e), []).append(e)
    if not panels or not any(t.get("mean") is not None for es in panels.values() for e in es for t in e.get("trials") or []):
        return None
    cols = min(3, len(panels))
    rows = -(-len(panels) // cols)
    fig = new_figure((4.2 * cols, 3.0 * rows + 0.4))
    fig.set_layout_engine("constrained")  # panel titles clear of the axis labels above them
    for i, (where, entries) in enumerate(panels.items()):
        ax = fig.add_subplot(rows, cols, i + 1)
        style = line_styles()
        for e in entries:
            color, ls = FAMILY_COLORS.get(e.get("family", ""), "black"), style(e.get("family", ""))
            others = {tuple((k, t.get(k)) for k in keys if k != "lr") for t in e.get("trials") or []}
            for other in sorted(others, key=str):  # one line per value of the --also key (none: one line)
                pts = sorted((t["lr"], t) for t in e.get("trials") or [] if t.get("mean") is not None
                             and tuple((k, t.get(k)) for k in keys if k != "lr") == other)
                if not pts:
                    continue
                xs, ys = [x for x, _ in pts], [t["mean"] for _, t in pts]
                err = [[max(0.0, t["mean"] - t["ci"][0]) if t.get("ci") else 0.0 for _, t in pts],
                       [max(0.0, t["ci"][1] - t["mean"]) if t.get("ci") else 0.0 for _, t in pts]]
                label = e["model"] + "".join(f", {k}={v}" for k, v in other)
                ax.errorbar(xs, ys, yerr=err, fmt=ls, color=color, lw=1.3, capsize=2, label=label)
                window = [tuple(w.get(k) for k in keys) for w in e.get("window") or []]
                chosen = tuple((e.get("chosen") or {}).get(k) for k in keys)
                for x, t in pts:
                    at = tuple(t.get(k) for k in keys)
                    ax.plot([x], [t["mean"]], "*" if at == chosen else "o", ms=11 if at == chosen else 5, color=color,
                            mfc=color if at in window else "white", zorder=3)
        ax.set_xscale("log")
        lrs = sorted({t["lr"] for e in entries for t in e.get("trials") or [] if t.get("lr")})
        ax.set_xticks(lrs, [f"{x:g}" for x in lrs], fontsize=7)
        ax.minorticks_off()
        metric = (entries[0].get("metric") or {})
        ax.set_title(where, fontsize=8)
        ax.set_xlabel("learning rate (log)", fontsize=8)
        ax.set_ylabel(f"validation {metric.get('name', 'metric')} ({'higher' if metric.get('mode', 'max') == 'max' else 'lower'} better)",
                      fontsize=7)
        ax.tick_params(labelsize=7)
        ax.grid(True, alpha=0.3)
        ax.legend(fontsize=6)
    fig.suptitle(title, fontsize=10)
    return save_figure(fig, path)


def tuning_doc_blocks(doc: dict[str, Any], shown: str, level: int = 2, plots: tuple[Path, Path] | None = None,
                      written: dict[str, Path] | None = None, warn: Callable[[str, str], None] | None = None) -> list[Block]:
    """A tuning document as report blocks: one row per tuned model with its chosen value, its
    window and the validation score of every grid point; with ``plots`` (the plots folder, the
    report's folder) the same as a figure (:func:`plot_lr_windows`), its file added to ``written``."""
    search = doc.get("search") or {}
    keys = list(search.get("keys") or ["lr"])
    grid = list(search.get("grid") or [])
    pct = int(round(float(search.get("confidence", CONFIDENCE)) * 100))
    headers = ["task / dataset", "model", "family", "chosen", "lr window"] + [point_label(p) for p in grid]
    rows, narrow, edge = [], [], []
    for e in doc.get("entries") or []:
        chosen = e.get("chosen")
        if (side := grid_edge(doc, chosen)) is not None:
            edge.append(f"{e['model']} ({point_label(chosen)}, the grid's {side})")
        by_point = {tuple(t.get(k) for k in keys): t for t in e.get("trials") or []}
        cells = [_trial_text(by_point.get(tuple(p.get(k) for k in keys), {}), chosen, keys) for p in grid]
        rows.append([_where(e), e["model"], e.get("family", ""), point_label(chosen) if chosen else "none", _window_text(e, keys), *cells])
        if chosen and len(e.get("window") or []) == 1 and len(grid) > 1:
            narrow.append(f"{e['model']} ({e.get('family', '')})")
    seeds = search.get("seeds") or []
    blocks: list[Block] = [
        Heading(level, "Learning-rate tuning", slug("tuning", Path(shown).stem)),
        Paragraph([f"Each model's {', '.join(keys)} was chosen on validation from ", Bold(shown),
                   f" ({search.get('method', 'grid')} of {len(grid)} points, the same for every model; "
                   f"{len(seeds)} seeds each; trials finished {doc.get('date') or 'unknown'}; their records: "
                   f"{doc.get('records') or 'unknown'})."], "note"),
        Table(headers, rows),
        Paragraph(f"Validation {((doc.get('entries') or [{}])[0].get('metric') or {}).get('name', 'metric')} per grid "
                  f"point: mean [{pct}% t-interval] over seeds; the chosen point in bold. Rule: {search.get('rule', RULE)}. "
                  "Lr window: the learning rates inside the chosen value's interval (of the grid points where every "
                  "seed trained): a wide window means the comparison does not hinge on the learning rate.", "note"),
    ]
    if plots is not None:
        name = f"{slug('tuning', Path(shown).stem)}__lr_windows.png"
        try:
            p = plot_lr_windows(doc, plots[0] / name, f"Learning-rate search: {shown}")
        except Exception as exc:  # noqa: BLE001 - a plot failure must not lose the report
            p = None
            if warn is not None:
                warn("plots", f"{name}: {type(exc).__name__}: {exc}")
        if p is not None:
            if written is not None:
                written[f"plots/{name}"] = p
            blocks += [Image.of(p, plots[1], "learning-rate windows"),
                       Paragraph("Validation score against the learning rate, mean over seeds with its t-interval; colour: "
                                 "model family; star: the chosen value; filled: inside its window; hollow: outside.",
                                 "note")]
    if narrow:
        blocks.append(Paragraph(f"Narrow window (only the chosen value is inside its interval): {', '.join(narrow)}. "
                                "These models are sensitive to their learning rate on this task.", "warn"))
    if edge:
        blocks.append(Paragraph(f"Chosen at the grid's edge: {', '.join(sorted(set(edge)))}. The best rate may lie "
                                "beyond the grid; a search over a wider --grid would say.", "warn"))
    return blocks


def summary_lines(doc: dict[str, Any]) -> list[str]:
    """One line per tuned model, for the terminal."""
    keys = list((doc.get("search") or {}).get("keys") or ["lr"])
    out = []
    for e in doc.get("entries") or []:
        chosen = e.get("chosen")
        what = point_label(chosen) if chosen else "no value (no grid point trained every seed)"
        at = "".join(f" {k}={v}" for k, v in (e.get("at") or {}).items())
        side = grid_edge(doc, chosen)
        beyond = f" (the grid's {side} lr: the best may lie beyond it)" if side else ""
        out.append(f"  {e['task']}/{e['dataset']}{at} {e['model']} ({e.get('family', '')}): {what}{beyond}; "
                   f"lr window {_window_text(e, keys)}")
    return out


def tuning_markdown(doc: dict[str, Any], shown: str, out: Path | None = None) -> str:
    """``TUNING.md``: the section as a page of its own (with its figure in ``out/plots`` when ``out``
    is given: the folder ``TUNING.md`` is written to)."""
    plots = (out / "plots", out) if out is not None else None
    return render_markdown([Heading(1, f"attnbench tune: {doc.get('suite', '')}"), *tuning_doc_blocks(doc, shown, plots=plots)])


def tuning_blocks(records: Iterable[dict[str, Any]], warn: Callable[[str, str], None],
                  root: Path | None = None, plots: tuple[Path, Path] | None = None,
                  written: dict[str, Path] | None = None) -> list[Block]:
    """The report section of every tuning file the records name (``config.tuning.file``, relative
    to the repository ``root``); a file that is missing, unreadable or changed since the records
    were written is a warning instead. ``plots``, ``written``: as :func:`tuning_doc_blocks`."""
    from benchmarks.config.tuning import REPO_ROOT

    root = REPO_ROOT if root is None else root
    named: dict[str, set[str]] = {}
    for r in records:
        t = (r.get("config") or {}).get("tuning") if isinstance(r.get("config"), dict) else None
        if isinstance(t, dict) and isinstance(t.get("file"), str):
            named.setdefault(t["file"], set()).add(str(t.get("sha256")))
    blocks: list[Block] = []
    for shown, hashes in sorted(named.items()):
        path = Path(shown) if Path(shown).is_absolute() else root / shown
        try:
            data = path.read_bytes()
            doc = yaml.safe_load(data)
        except (OSError, yaml.YAMLError) as err:
            warn("tuning", f"tuning file {shown} named by the records: cannot read it ({type(err).__name__}); "
                           "its learning-rate windows are not shown")
            continue
        sha = "sha256:" + hashlib.sha256(data).hexdigest()
        if hashes != {sha}:
            warn("tuning", f"tuning file {shown} differs from the one the records were run with "
                           f"({', '.join(sorted(hashes))}; now {sha}): the windows shown are the file's now")
        if isinstance(doc, dict):
            blocks += tuning_doc_blocks(doc, shown, plots=plots, written=written, warn=warn)
    return blocks


def doc_differences(old: Any, new: Any, where: str = "") -> list[str]:
    """Where two tuning documents differ, one line each (``entries[task/dataset/model].chosen.lr:
    0.003 in the file, 0.001 from the records``)."""
    if isinstance(old, dict) and isinstance(new, dict):
        out = []
        for k in list(old) + [k for k in new if k not in old]:
            at = f"{where}.{k}" if where else str(k)
            if k not in new or k not in old:
                out.append(f"{at}: {'only in the file' if k in old else 'missing from the file'}")
            else:
                out += doc_differences(old[k], new[k], at)
        return out
    if isinstance(old, list) and isinstance(new, list) and len(old) == len(new):
        out = []
        for i, (a, b) in enumerate(zip(old, new)):
            out += doc_differences(a, b, f"{where}[{_item_name(a, i)}]")
        return out
    return [] if old == new else [f"{where}: {old!r} in the file, {new!r} from the records"]


def _item_name(item: Any, i: int) -> str:
    """A list item's name in a difference: an entry's task/dataset/model, a trial's grid point."""
    if isinstance(item, dict) and {"task", "dataset", "model"} <= set(item):
        return f"{item['task']}/{item['dataset']}/{item['model']}"
    if isinstance(item, dict) and "lr" in item and "n" in item:
        return point_label({k: v for k, v in item.items() if k not in ("n", "failed", "mean", "std", "ci", "cells")})
    return str(i)
