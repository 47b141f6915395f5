"""The results of ``attnbench bench complexity`` put together: power-law fits per layer, the
measured table next to the paper's, the checks, and their plain-text forms."""

from __future__ import annotations

from typing import Any

from benchmarks.micro.checks import check as _check, format_checks as _format_checks
from benchmarks.micro.complexity.fits import fit_power_law
from benchmarks.micro.complexity.paper import LAYER_DOC, LAYER_PROBES, LAYER_ROW, PAPER

__all__ = ["compute_fits", "measured_table", "compute_checks", "format_checks", "format_table"]


def compute_fits(points: list[dict]) -> dict:
    """Per layer: power-law fits of time and peak memory in ``n`` (the ``n`` sweep) and in ``d``
    (the ``d`` sweep), over the ``ok`` points."""
    fits: dict[str, dict] = {}
    for layer in dict.fromkeys(p["layer"] for p in points):
        f: dict[str, Any] = {}
        for sweep, var in (("n", "n"), ("d", "d")):
            ok = [p for p in points if p["layer"] == layer and sweep in p["sweeps"] and p["status"] == "ok"]
            for key, name in (("time_ms", "time"), ("peak_mem_bytes", "mem")):
                f[f"{name}_{var}"] = fit_power_law([p[var] for p in ok], [p.get(key) for p in ok])
            f[f"failed_{var}"] = [{"n": p["n"], "d": p["d"], "status": p["status"]}
                                  for p in points if p["layer"] == layer and sweep in p["sweeps"] and p["status"] != "ok"]
        fits[layer] = f
    return fits


def measured_table(doc: dict) -> list[dict]:
    """Rows of the side-by-side table: per timed layer the paper's three columns and the measured
    exponents, sequential-operation classes and best path-length fits."""
    rows = []
    seq = (doc.get("sequential_ops") or {}).get("layers") or {}
    paths = (doc.get("path_length") or {}).get("kinds") or {}
    for layer, f in (doc.get("fits") or {}).items():
        paper = PAPER[LAYER_ROW[layer]]
        s = seq.get(layer) or {}
        sp = s.get("points") or []
        row = {
            "layer": layer, "paper_row": paper["row"], "doc": LAYER_DOC.get(layer),
            "paper_complexity": paper["complexity"], "paper_exp_n": paper["exp_n"], "paper_exp_d": paper["exp_d"],
            "paper_sequential": paper["sequential"], "paper_path": paper["path"],
            "time_exp_n": f.get("time_n"), "time_exp_d": f.get("time_d"),
            "mem_exp_n": f.get("mem_n"), "mem_exp_d": f.get("mem_d"),
            "sequential_steps": {str(p["n"]): p["steps"] for p in sp},
            "sequential_class": s.get("steps_class"), "critical_path_class": s.get("critical_path_class"),
            "critical_path_ops": {str(p["n"]): p["critical_path_ops"] for p in sp},
            "path": [],
        }
        for kind in LAYER_PROBES.get(layer, ()):
            k = paths.get(kind)
            if not k:
                continue
            row["path"].append({"probe": kind, "best": k["fit"]["best"], "paper": k["paper"],
                                "all_match": k["all_match"],
                                "hops": [{"n": p["n"], "param": p["param"], "hops": p["hops"]} for p in k["points"]]})
        rows.append(row)
    return rows


def compute_checks(doc: dict) -> list[dict]:
    """Structural checks (pass/fail): path-length probes equal their closed forms and their best
    fit is the paper's class; sequential steps grow as the paper says; the explicit loops equal
    the fused RNNs. Exponents next to the paper's are ``info`` (timings on a shared CPU
    include fixed per-call costs; see the table)."""
    checks: list[dict] = []
    for kind, k in ((doc.get("path_length") or {}).get("kinds") or {}).items():
        bad = [f"n={p['n']}{'' if p['param'] is None else ' param=' + str(p['param'])}: {p['hops']} != {p['expected']}"
               for p in k["points"] if not p["matches"]]
        checks.append(_check(f"path length {kind}: probe == closed form", f"{len(k['points']) - len(bad)}/{len(k['points'])}",
                             "all", not bad, note="; ".join(bad[:4]) or None))
        best, paper = k["fit"]["best"], k["paper"]
        checks.append(_check(f"path length {kind}: best fit", best, paper, best == paper))
    for layer, s in ((doc.get("sequential_ops") or {}).get("layers") or {}).items():
        if s.get("steps_class") is not None:
            checks.append(_check(f"sequential steps {layer}: growth in n", s["steps_class"], s["paper"],
                                 s["steps_class"] == s["paper"]))
        diffs = [p["max_abs_diff_vs_fused"] for p in s.get("points") or [] if "max_abs_diff_vs_fused" in p]
        if diffs:
            checks.append(_check(f"explicit {layer} loop == fused {layer} (float64)", max(diffs), "<= 1e-9",
                                 max(diffs) <= 1e-9))
    for layer, f in (doc.get("fits") or {}).items():
        paper = PAPER[LAYER_ROW[layer]]
        for var in ("n", "d"):
            fit = f.get(f"time_{var}")
            if fit is None:
                continue
            checks.append(_check(f"time exponent in {var}: {layer}", fit["exponent"], f"{paper['exp_' + var]:g} (paper)",
                                 None, tail=round(fit["tail_exponent"], 3) if fit["tail_exponent"] is not None else None))
    return checks


def format_checks(checks: list[dict]) -> str:
    """The checks as the sweep prints them (:func:`benchmarks.micro.checks.format_checks`)."""
    return _format_checks(checks, empty="checks: none applicable", width=9)


def _fmt_exp(fit: dict | None) -> str:
    if not fit or fit.get("exponent") is None:
        return "–"
    s = f"{fit['exponent']:.2f}"
    if fit.get("stderr") is not None:
        s += f"±{fit['stderr']:.2f}"
    if fit.get("tail_exponent") is not None:
        s += f" (top {fit['tail_exponent']:.2f})"
    return s


def format_table(rows: list[dict]) -> str:
    """The measured table next to the paper's, as plain text."""
    head = ("layer", "paper", "t~n^ (paper)", "t~d^ (paper)", "mem~n^", "seq ops (paper)", "path (paper)")
    lines = []
    body = []
    for r in rows:
        path = "; ".join(f"{p['probe']} {p['best']}" for p in r["path"]) or "–"
        body.append((
            r["layer"], r["paper_row"], f"{_fmt_exp(r['time_exp_n'])} ({r['paper_exp_n']:g})",
            f"{_fmt_exp(r['time_exp_d'])} ({r['paper_exp_d']:g})", _fmt_exp(r["mem_exp_n"]),
            f"{r['sequential_class'] or '–'} ({r['paper_sequential']})", f"{path} ({r['paper_path']})",
        ))
    widths = [max(len(str(x)) for x in col) for col in zip(head, *body)]
    for row in (head, *body):
        lines.append("  ".join(str(x).ljust(w) for x, w in zip(row, widths)).rstrip())
    return "\n".join(lines)
