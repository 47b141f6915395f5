"""The plot of ``attnbench bench recurrence``: training-step time and peak memory vs ``L``."""

from __future__ import annotations

from pathlib import Path

from benchmarks.micro.common import plot_over_length, save_figure_atomic

__all__ = ["plot_results"]

STYLE = {"scan": ":", "peer": "-", "attention": "-.", "recurrence": "--"}


def plot_results(doc: dict, path: str | Path) -> None:
    """Log-log time and peak memory vs L, one line per method: scans dotted, the torch.nn peers
    solid black/grey, the attention peers dash-dotted red/orange, the recurrences dashed; an x
    marks a failed point."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    pts = [r for r in doc["points"] if r.get("kind") == "recurrence"]
    methods = list(dict.fromkeys(r["method"] for r in pts))
    colours = {"torch_gru": "black", "torch_lstm": "grey"}
    colours.update({m: c for m, c in zip([m for m in methods if m == "sdpa" or m.startswith("truncated_w")],
                                         ("tab:red", "tab:orange", "tab:brown"))})
    others = [m for m in methods if m not in colours]
    palette = [plt.cm.tab10(i) for i in (0, 2, 4, 6, 8, 9, 7)]  # no orange/red/brown: the attention's
    colours.update({m: palette[i % len(palette)] for i, m in enumerate(others)})
    fig, axes = plt.subplots(1, 2, figsize=(13, 5))
    for ax, key, scale, ylabel in ((axes[0], "time_ms", 1.0, "training step (ms, median)"),
                                   (axes[1], "peak_mem_bytes", 1 / (1 << 20), "peak memory growth (MiB)")):
        plot_over_length(ax, pts, methods, key, scale, colours, style=lambda m, r: STYLE.get(r.get("family"), "-"),
                         label=lambda m, r: m, xlabel="sequence length L", ylabel=ylabel)
    s = doc["setup"]
    fig.suptitle(f"recurrences, one training step: {doc['environment'].get('device_name')}, {s['dtype']}, "
                 f"batch {s['batch']}, d_model {s['d_model']}"
                 + (f"; attention {s['attention']['heads']} heads, "
                    f"{'causal' if s['attention']['causal'] else 'bidirectional'}"
                    if s.get("attention", {}).get("enabled") else ""), fontsize=10)
    fig.tight_layout()
    save_figure_atomic(fig, path, dpi=110)
