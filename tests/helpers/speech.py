"""Made-up speech scaling points (the shape benchmarks.micro.speech writes), for its checks and report section."""

from __future__ import annotations


def bench_points() -> list[dict]:
    """Scaling points of three attention presets and an LSTM that ran out of memory."""
    pts = []
    for L, (tf, mf) in {2000: (100.0, 400e6), 4000: (400.0, 1600e6)}.items():
        pts.append({"kind": "speech", "method": "transformer", "family": "attention", "pattern": "full", "L": L,
                    "status": "ok", "time_ms": tf, "peak_mem_bytes": mf, "time_ms_per_seq": tf,
                    "peak_mem_bytes_per_seq": mf})
        for m, (t, mem) in {"transformer_w8": (tf / 8, mf / 10), "transformer_w64": (tf / 2, mf / 3)}.items():
            pts.append({"kind": "speech", "method": m, "family": "attention", "pattern": "truncated", "L": L,
                        "status": "ok", "time_ms": t, "peak_mem_bytes": mem, "time_ms_per_seq": t,
                        "peak_mem_bytes_per_seq": mem})
        pts.append({"kind": "speech", "method": "lstm", "family": "rnn", "pattern": None, "L": L, "status": "oom",
                    "reason": "x"})
    return pts

