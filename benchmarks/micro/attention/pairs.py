"""The time checks of ``attnbench bench attention`` measured as pairs: for each check of ours
against its peer (``ours_full / sdpa`` at every ``L >= 1024``, ``ours_graph /
pyg_transformerconv`` at the largest graph, ``ours_encoder / torch_encoder``), one point that
builds both in one process and times them in interleaved rounds
(:func:`benchmarks.micro.attention.points.point_pair`); the check reads the confidence interval
of the ratio (:func:`benchmarks.micro.checks.interval_check`). The separate points of each
method still give the plot its times and every memory figure."""

from __future__ import annotations

from typing import Any

from benchmarks.config.schema import Field, Section
from benchmarks.micro.attention.encoder import KIND as ENCODER

__all__ = ["KIND", "SECTION", "SDPA_MIN_L", "LIMITS", "NOTES", "plan_pair_points", "pair_index"]

KIND = "pair"
#: ``ours_full / sdpa`` is checked from this length up (shorter calls are dominated by overheads)
SDPA_MIN_L = 1024
#: the upper targets of ``ours / peer`` time
LIMITS = {("ours_full", "sdpa"): 1.10, ("ours_graph", "pyg_transformerconv"): 1.0,
          ("ours_encoder", "torch_encoder"): 1.2}
#: what a check's note says about where its target was measured
NOTES = {("ours_graph", "pyg_transformerconv"): (
    "CPU float32: sparse CSR kernels (attn_core.graph). 2 threads of an AMD EPYC (AVX-512), interleaved: 0.45x "
    "at N=5k and 0.52x at 2k quiet, 0.45x at 50k, 0.26x at 200k busy; the gather/scatter kernels before: "
    "0.72-0.79x there quiet, up to 1.5x busy, 1.2-1.4x on a quiet AVX-512 Xeon (issue 44)")}

SECTION = Section({
    "enabled": Field("bool", True, doc="false: no time checks"),
    "warmup": Field("int", 1, minimum=0, doc="untimed rounds (ours, peer) first"),
    "repeats": Field("int", 10, minimum=2, doc="timed rounds per check (at most)"),
    "min_repeats": Field("int", 5, minimum=2, doc="timed rounds per check (at least)"),
    "target_s": Field("float", 4.0, minimum=0, nullable=True,
                      doc="fewer rounds (not below min_repeats) once they have taken this long"),
    "confidence": Field("float", 0.95, minimum=0.5, maximum=0.999, doc="of the interval that decides"),
}, doc="time checks: ours and its peer timed in alternation in one process; each passes when the whole "
       "confidence interval of the ratio is within the target, fails when all of it is beyond, else inconclusive")


def _pair(build: str, ours: str, peer: str, shape: dict[str, Any], where: dict[str, Any], cfg: dict,
          common: dict[str, Any], preload: list[str]) -> dict:
    sec = cfg["paired"]
    runs = {"warmup": sec["warmup"], "repeats": sec["repeats"], "min_repeats": sec["min_repeats"],
            "target_s": sec["target_s"]}
    return {
        "kind": KIND, "method": f"{ours}/{peer}", "ours": ours, "peer": peer, "build": build, **where,
        "limit": LIMITS[(ours, peer)], "confidence": sec["confidence"],
        "target": "benchmarks.micro.attention:point_pair", "preload": preload,
        "kwargs": {"build": build, "ours": ours, "peer": peer, "shape": shape, **common, **runs},
    }


def plan_pair_points(cfg: dict, device: str, common: dict[str, Any]) -> list[dict]:
    """One paired point per time check the sweep's methods and sizes allow (none when the
    ``paired`` section is disabled). ``common``: dtype, device, seed and threads of every point."""
    if not cfg["paired"]["enabled"]:
        return []
    base = {k: common[k] for k in ("dtype", "device", "seed", "threads")}
    out: list[dict] = []
    seq = cfg["sequence"]
    if {"ours_full", "sdpa"} <= set(seq["methods"]):
        shape = {k: seq[k] for k in ("batch", "heads", "head_dim", "causal")}
        for L in sorted(L for L in set(seq["lengths"][device]) if L >= SDPA_MIN_L):
            out.append(_pair("sequence", "ours_full", "sdpa", {**shape, "L": L, "window": None}, {"L": L}, cfg, base,
                             ["torch", "attn_core"]))
    enc = cfg["encoder"]
    if enc["enabled"] and {"ours_encoder", "torch_encoder"} <= set(enc["methods"]):
        shape = {k: enc[k] for k in ("d_model", "heads", "dim_feedforward", "dropout", "lengths")}
        out.append(_pair(ENCODER, "ours_encoder", "torch_encoder", shape,
                         {"L": max(enc["lengths"]), "B": len(enc["lengths"])}, cfg, base, ["torch", "attn_core"]))
    g = cfg["graph"]
    if g["sizes"] and {"ours_graph", "pyg_transformerconv"} <= set(g["methods"]):
        size = max(g["sizes"], key=lambda s: (s["nodes"], s["edges"]))
        shape = {"nodes": size["nodes"], "edges": size["edges"], "embed_dim": g["embed_dim"], "heads": g["heads"]}
        out.append(_pair("graph", "ours_graph", "pyg_transformerconv", shape, {"N": size["nodes"], "E": size["edges"]},
                         cfg, base, ["torch", "attn_core", "torch_geometric.nn"]))
    return out


def pair_index(points: list[dict]) -> dict[tuple, dict]:
    """The paired points by ``(ours, peer, size)``, size ``L`` (sequences), ``(B, L)`` (encoder)
    or ``(N, E)`` (graphs)."""
    idx = {}
    for r in points:
        if r.get("kind") != KIND:
            continue
        size = (r["N"], r["E"]) if "N" in r else ((r["B"], r["L"]) if "B" in r else r["L"])
        idx[(r["ours"], r["peer"], size)] = r
    return idx
