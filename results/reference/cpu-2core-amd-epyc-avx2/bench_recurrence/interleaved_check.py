"""Interleaved re-measurement of the crossover ratios closest to 1 (bench recurrence's own point
functions, in one process, A B A B ...): ratio = time(A) / time(B) per round, median and range."""
import json, os, statistics, sys, time

from benchmarks.micro.attention import point_sequence
from benchmarks.micro.recurrence import point_recurrence

B, D, H = 8, 128, 4
common = dict(dtype="float32", device="cpu", seed=0, target_s=None, threads=1)


def rec(method, family, L, repeats):
    return lambda: point_recurrence(method=method, family=family, params={}, L=L, batch=B, d_model=D,
                                    warmup=1, repeats=repeats, min_repeats=repeats, **common)


def att(window, L, repeats):
    return lambda: point_sequence(impl="sdpa" if window is None else "ours_truncated", L=L, window=window, batch=B,
                                  heads=H, head_dim=D // H, causal=True, warmup=1, repeats=repeats,
                                  min_repeats=repeats, **common)


pairs = [
    ("torch_lstm / sdpa @ L=1024", rec("torch_lstm", "peer", 1024, 3), att(None, 1024, 3), 5),
    ("truncated_w128 / torch_lstm @ L=256", att(128, 256, 5), rec("torch_lstm", "peer", 256, 5), 5),
    ("min_rnn / torch_lstm @ L=4096", rec("min_rnn", "recurrence", 4096, 2), rec("torch_lstm", "peer", 4096, 2), 3),
    ("lru / torch_lstm @ L=4096", rec("lru", "recurrence", 4096, 2), rec("torch_lstm", "peer", 4096, 2), 3),
    ("s4d / sdpa @ L=4096", rec("s4d", "recurrence", 4096, 2), att(None, 4096, 2), 3),
]
out = {"load_1m_start": os.getloadavg()[0], "pairs": {}}
for name, a, b, rounds in pairs:
    ratios = []
    for _ in range(rounds):
        ra, rb = a(), b()
        ratios.append(ra["time_ms"] / rb["time_ms"])
    out["pairs"][name] = {"ratios": [round(r, 3) for r in ratios], "median": round(statistics.median(ratios), 3),
                          "min": round(min(ratios), 3), "max": round(max(ratios), 3)}
    print(name, out["pairs"][name], f"load {os.getloadavg()[0]:.2f}", flush=True)
out["load_1m_end"] = os.getloadavg()[0]
json.dump(out, open(sys.argv[1], "w"), indent=1)
