"""The plot of ``attnbench bench complexity``: time and peak memory vs ``n`` and ``d`` per layer,
path length vs ``n`` per probe, and the critical path vs ``n`` per layer."""

from __future__ import annotations

import math
from pathlib import Path

from benchmarks.micro.common import save_figure_atomic
from benchmarks.micro.complexity.paper import LAYERS

__all__ = ["plot_results"]


def plot_results(doc: dict, path: str | Path) -> None:
    """3 x 2 log-log panels: time and peak memory vs ``n`` and vs ``d`` per layer (failed
    points marked x at the top, dotted guides of slope 1 and 2), path length vs ``n`` per probe,
    and the critical path (autograd ops) vs ``n`` per layer."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    pts = doc["points"]
    layers = list(dict.fromkeys(p["layer"] for p in pts)) or list((doc.get("sequential_ops") or {}).get("layers") or [])
    colors = {m: plt.cm.tab10(i % 10) for i, m in enumerate(LAYERS)}
    fig, axes = plt.subplots(3, 2, figsize=(14, 15))
    for ax, sweep, key, scale, ylabel in (
        (axes[0][0], "n", "time_ms", 1.0, "forward + backward time (ms)"),
        (axes[0][1], "d", "time_ms", 1.0, "forward + backward time (ms)"),
        (axes[1][0], "n", "peak_mem_bytes", 1 / (1 << 20), "peak memory growth (MiB)"),
        (axes[1][1], "d", "peak_mem_bytes", 1 / (1 << 20), "peak memory growth (MiB)"),
    ):
        xs_all = sorted({p[sweep] for p in pts if sweep in p["sweeps"]})
        any_fail = False
        for j, layer in enumerate(layers):
            rs = sorted((p for p in pts if p["layer"] == layer and sweep in p["sweeps"]), key=lambda p: p[sweep])
            ok = [(p[sweep], p[key] * scale) for p in rs if p["status"] == "ok" and p.get(key)]
            style = "--" if layer.endswith("_op") else "-"
            if ok:
                ax.plot(*zip(*ok), style, marker="o", ms=4, color=colors[layer], label=layer)
            for p in rs:
                if p["status"] in ("oom", "timeout", "error"):
                    any_fail = True
                    y = 0.97 - 0.03 * j
                    ax.plot([p[sweep]], [y], marker="x", ms=9, mew=2, color=colors[layer],
                            transform=ax.get_xaxis_transform(), clip_on=False)
                    ax.annotate(p["status"].upper(), (p[sweep], y), xycoords=ax.get_xaxis_transform(),
                                xytext=(5, -3), textcoords="offset points", fontsize=7, color=colors[layer])
        if xs_all:
            ax.set_xscale("log", base=2)
            ax.set_yscale("log")
            ys = [p[key] * scale for p in pts if sweep in p["sweeps"] and p["status"] == "ok" and p.get(key)]
            if ys and len(xs_all) > 1:  # guides of slope 1 and 2 through the geometric middle
                x0, x1 = xs_all[0], xs_all[-1]
                ym = math.exp(sum(math.log(y) for y in ys) / len(ys))
                xm = math.sqrt(x0 * x1)
                for slope in (1, 2):
                    ax.plot([x0, x1], [ym * (x0 / xm) ** slope, ym * (x1 / xm) ** slope], ":", color="grey", lw=1)
                    ax.annotate(f"slope {slope}", (x1, ym * (x1 / xm) ** slope), fontsize=7, color="grey")
            if any_fail:
                lo, hi = ax.get_ylim()
                ax.set_ylim(lo, hi * 6)
            ax.set_xticks(xs_all)
            ax.set_xticklabels([str(x) for x in xs_all], rotation=45)
            ax.minorticks_off()
        fixed = doc["setup"]["sweep_n"]["d"] if sweep == "n" else doc["setup"]["sweep_d"]["n"]
        ax.set_xlabel(f"sequence length n (d={fixed})" if sweep == "n" else f"width d (n={fixed})")
        ax.set_ylabel(ylabel)
        ax.grid(True, which="major", alpha=0.3)
        if layers:
            ax.legend(fontsize=7, loc="upper left")
        ax.set_title(f"{'time' if key == 'time_ms' else 'peak memory'} vs {sweep}")

    ax = axes[2][0]
    kinds = (doc.get("path_length") or {}).get("kinds") or {}
    markers = ("o", "s", "^", "v", "D", "P", "X")
    for i, (kind, k) in enumerate(kinds.items()):
        params = list(dict.fromkeys(p["param"] for p in k["points"]))
        for j, param in enumerate(params):
            ps = sorted((p for p in k["points"] if p["param"] == param and p["hops"]), key=lambda p: p["n"])
            if ps:  # marker and size per kind: identical curves (lstm, gru: n-1) stay visible
                ax.plot([p["n"] for p in ps], [p["hops"] for p in ps], ["-", "--", ":", "-."][j % 4],
                        marker=markers[i % len(markers)], ms=9 - i, lw=2.5 - 0.25 * i, mfc="none",
                        color=plt.cm.Dark2(i % 8),
                        label=f"{kind}{'' if param is None else (' r=' if 'attention' in kind else ' k=') + str(param)}"
                              f" [{k['fit']['best']}]")
    ax.set_xscale("log", base=2)
    ax.set_yscale("log", base=2)
    ax.set_xlabel("sequence length n")
    ax.set_ylabel("maximum path length (hops, measured)")
    ax.set_title("maximum path length: input 0 -> output n-1 [best fit]")
    ax.grid(True, alpha=0.3)
    if kinds:
        ax.legend(fontsize=6, ncol=2)

    ax = axes[2][1]
    seq = (doc.get("sequential_ops") or {}).get("layers") or {}
    for layer, s in seq.items():
        ps = [p for p in s["points"] if p.get("critical_path_ops")]
        if ps:
            ax.plot([p["n"] for p in ps], [p["critical_path_ops"] for p in ps], "--" if layer.endswith("_op") else "-",
                    marker="o", ms=4, color=colors.get(layer, "k"),
                    label=f"{layer} [steps {s.get('steps_class')}]")
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xlabel("sequence length n")
    ax.set_ylabel("critical path (autograd ops, input -> output)")
    ax.set_title("sequential operations [dependent steps: growth class]")
    ax.grid(True, alpha=0.3)
    if seq:
        ax.legend(fontsize=7)
    setup = doc["setup"]
    fig.suptitle(
        f"Why self-attention (Vaswani et al. 2017, Table 1) measured: {doc['environment'].get('device_name')}, "
        f"{setup['dtype']}, B={setup['batch']}, heads={setup['heads']}, r={setup['window']}, k={setup['kernel']}",
        fontsize=10,
    )
    fig.tight_layout()
    save_figure_atomic(fig, path, dpi=100)
