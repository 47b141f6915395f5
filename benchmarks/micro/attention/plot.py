"""The plot of ``attnbench bench attention``: time and peak memory vs ``L`` per method, and the
graph comparison as bars."""

from __future__ import annotations

from pathlib import Path

from benchmarks.micro.attention.variants import KIND as VARIANT
from benchmarks.micro.common import save_figure_atomic

__all__ = ["plot_results"]


def plot_results(doc: dict, path: str | Path) -> None:
    """Log-log time and peak memory vs L per method (failures marked with x at the top),
    and bar charts of the graph comparison."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    pts = doc["points"]
    seq = [r for r in pts if r["kind"] in ("sequence", VARIANT)]
    graph = [r for r in pts if r["kind"] == "graph"]
    fig, axes = plt.subplots(2 if graph else 1, 2, figsize=(14, 10 if graph else 5.5), squeeze=False)
    ax_t, ax_m = axes[0]
    methods = list(dict.fromkeys(r["method"] for r in seq))
    colors = {m: plt.cm.tab10(i % 10) for i, m in enumerate(methods)}
    all_L = sorted({r["L"] for r in seq})
    for ax, key, scale, ylabel in (
        (ax_t, "time_ms", 1.0, "forward + backward time (ms)"),
        (ax_m, "peak_mem_bytes", 1 / (1 << 20), "peak memory growth (MiB)"),
    ):
        for j, m in enumerate(methods):
            rs = sorted((r for r in seq if r["method"] == m), key=lambda r: r["L"])
            ok = [(r["L"], r[key] * scale) for r in rs if r["status"] == "ok" and r.get(key)]
            style = "--" if m.startswith("ours_truncated") else (":" if m.startswith("sdpa_band") else
                                                                 "-." if m.startswith("variant_") else "-")
            if ok:
                ax.plot(*zip(*ok), style, marker="o", ms=4, color=colors[m], label=m)
            for r in rs:
                if r["status"] in ("oom", "timeout", "error"):
                    y = 0.97 - 0.035 * j
                    ax.plot([r["L"]], [y], marker="x", ms=9, mew=2, color=colors[m],
                            transform=ax.get_xaxis_transform(), clip_on=False)
                    ax.annotate(r["status"].upper(), (r["L"], y), xycoords=ax.get_xaxis_transform(),
                                xytext=(5, -3), textcoords="offset points", fontsize=7, color=colors[m])
        if all_L:
            ax.set_xscale("log", base=2)
            ax.set_yscale("log")
            if any(r["status"] in ("oom", "timeout", "error") for r in seq):
                lo, hi = ax.get_ylim()
                ax.set_ylim(lo, hi * 6)  # headroom for the failure marks at the top
            ax.set_xticks(all_L)
            ax.set_xticklabels([str(L) for L in all_L], rotation=45)
            ax.minorticks_off()
            ax.set_xlim(all_L[0] / 1.3, all_L[-1] * 1.3)
        ax.set_xlabel("sequence length L")
        ax.set_ylabel(ylabel)
        ax.grid(True, which="major", alpha=0.3)
        if methods:
            ax.legend(fontsize=8, loc="lower right")
    ax_t.set_title("time vs L (x at the top = OOM/timeout)")
    ax_m.set_title("peak memory vs L")

    if graph:  # the graph comparison's row only when it ran
        _plot_graph(axes[1], graph, plt)
    setup = doc["setup"]
    s = setup["sequence"]
    fig.suptitle(
        f"attention scaling, fwd+bwd: {doc['environment'].get('device_name')}, {setup['dtype']}; "
        f"sequences B={s['batch']} H={s['heads']} D={s['head_dim']}; graphs E={setup['graph']['embed_dim']} "
        f"H={setup['graph']['heads']}",
        fontsize=10,
    )
    fig.tight_layout()
    save_figure_atomic(fig, path, dpi=110)


def _plot_graph(row, graph: list[dict], plt) -> None:
    """Bar charts of the graph comparison (time, peak memory) per graph size and method."""
    ax_gt, ax_gm = row
    sizes = sorted({(r["N"], r["E"]) for r in graph})
    gmethods = list(dict.fromkeys(r["method"] for r in graph))
    width = 0.8 / max(1, len(gmethods))
    for ax, key, scale, ylabel in (
        (ax_gt, "time_ms", 1.0, "forward + backward time (ms)"),
        (ax_gm, "peak_mem_bytes", 1 / (1 << 20), "peak memory growth (MiB)"),
    ):
        for j, m in enumerate(gmethods):
            for i, (N, E) in enumerate(sizes):
                r = next((r for r in graph if r["method"] == m and (r["N"], r["E"]) == (N, E)), None)
                if r is None:
                    continue
                x = i + (j - (len(gmethods) - 1) / 2) * width
                if r["status"] == "ok" and r.get(key):
                    ax.bar(x, r[key] * scale, width, color=plt.cm.Set2(j), label=m if i == 0 else None)
                else:
                    ax.bar(x, 0, width, color=plt.cm.Set2(j), label=m if i == 0 else None)
                    ax.text(x, 0.02, r["status"].upper(), transform=ax.get_xaxis_transform(), ha="center",
                            va="bottom", rotation=90, fontsize=8, color="crimson")
        ax.set_xticks(range(len(sizes)))
        ax.set_xticklabels([f"N={N:,}\nE={E:,}" for N, E in sizes])
        ax.set_yscale("log")
        ax.set_ylabel(ylabel)
        ax.grid(True, axis="y", alpha=0.3)
        if gmethods:
            ax.legend(fontsize=8)
    ax_gt.set_title("graph attention: time")
    ax_gm.set_title("graph attention: peak memory")
