"""Synthetic result records in the schema the runner writes: the report's tests build folders of
them (exact values, failed cells, several commits) without training anything."""

from __future__ import annotations

import hashlib

SUITE = "synthetic"
ACC = {  # toy/synth, acc (max)
    "transformer": {0: 0.90, 1: 0.92, 2: 0.94},
    "lstm": {0: 0.60, 1: 0.62},
    "tcn": {0: 0.70, 1: 0.74},
}
PER = {  # tagging/synth2, per (min)
    "transformer": {0: 0.30, 1: 0.31, 2: 0.33},
    "gru": {0: 0.20, 1: 0.21, 2: 0.22},
}
FAMILY = {"transformer": "attention", "lstm": "rnn", "gru": "rnn", "tcn": "cnn"}
PATTERN = {"transformer": "full"}
FAILED_REASON = "out of memory: CUDA out of memory. Tried to allocate 2.00 GiB"


def cid(*parts) -> str:
    return hashlib.sha256("/".join(map(str, parts)).encode()).hexdigest()[:12]


def _env(commit: str) -> dict:
    return {
        "date": "2026-11-20T10:00:00+00:00", "python": "3.11.9", "platform": "Linux-6.1-x86_64",
        "torch": "2.5.1", "lightning": "2.4.0", "torch_geometric": "2.6.1", "torchvision": "0.20.1",
        "torchaudio": "2.5.1", "cuda": None, "device": "cpu", "device_name": "Test CPU 9000",
        "cpu_count": 2, "torch_threads": 2, "git_commit": commit, "git_dirty": False,
        "argv": ["attnbench", "run", "synthetic.yaml"],
    }


def make_record(task, dataset, model, seed, metric, mode, value, *, status="ok", reason=None, commit="a" * 40,
                hour=10) -> dict:
    ok = status == "ok"
    rid = cid(task, dataset, model, seed)
    curve = [
        {"epoch": e, "train_loss": 1.0 / (e + 1), "val_loss": 1.1 / (e + 1),
         "val_metric": (value * (e + 1) / 3 if ok else 0.1), "time_s": 0.1 * (e + 1)}
        for e in range(3)
    ]
    params = {"transformer": 120_000, "lstm": 80_000, "gru": 60_000, "tcn": 95_000}[model]
    return {
        "schema": 1,
        "suite": SUITE, "cell_id": rid, "task": task, "dataset": dataset,
        "model": model, "family": FAMILY[model], "pattern": PATTERN.get(model), "seed": seed,
        "status": status, "reason": reason,
        "metric": {"name": metric, "mode": mode},
        "test": {metric: value, "loss": 0.5} if ok else {},
        "best_val": {"value": value, "epoch": 2} if ok else None,
        "epochs_run": 3 if ok else 1,
        "cost": {"params": params, "flops_per_sample": 2.5e6, "train_time_s": 10.0 + seed + params / 1e5,
                 "train_samples_per_s": 1000.0 + seed, "train_tokens_per_s": 32000.0 if model == "transformer" else None,
                 "infer_samples_per_s": 3000.0, "infer_tokens_per_s": None,
                 "peak_mem_bytes": 50_000_000 + seed * 1_000_000, "peak_mem_kind": "cpu_rss_growth"} if ok else {},
        "curve": curve if ok else [],
        "data": {"name": dataset, "synthetic": True, "checksum": f"sha256:{dataset}-0123abcd"},
        "extras": {"confusion": [[1, 0], [0, 1]], "unknown_artefact": {"x": 1}} if ok else {},
        "config": {"task": task, "dataset": dataset, "model": model, "seed": seed},
        "env": _env(commit),
        "started": f"2026-11-20T{hour:02d}:00:00+00:00", "finished": f"2026-11-20T{hour:02d}:05:00+00:00",
    }
