"""Fixtures for the micro-benchmark tests: a config writer, the CLI as a function, and ``toy``, a
micro-benchmark of a few lines over the shared machinery (:mod:`benchmarks.micro.sweep`), whose
points run in-process by their target ``tests.helpers.micro:point_toy``."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any, Callable

import yaml

from benchmarks.config.schema import ConfigError, Field
from benchmarks.micro.checks import check, format_checks
from benchmarks.micro.common import sweep_fields
from benchmarks.micro.sweep import Sweep, config_loader, entry_point


#: what torch raises when an allocation fails on the CPU
OOM_MESSAGE = "DefaultCPUAllocator: not enough memory: you tried to allocate 9 TB"


def oom_when(monkeypatch: Any, module: Any, name: str, when: Callable[[dict], bool]) -> None:
    """Patch the point function ``module.name`` to run out of memory where ``when(kwargs)``."""
    original = getattr(module, name)

    def flaky(**kw: Any) -> dict:
        if when(kw):
            raise RuntimeError(OOM_MESSAGE)
        return original(**kw)

    monkeypatch.setattr(module, name, flaky)


def write_config(tmp_path: Path, data: dict, name: str = "c.yaml") -> Path:
    """``data`` as a YAML file in ``tmp_path``."""
    path = tmp_path / name
    path.write_text(yaml.safe_dump(data))
    return path


def run_cli(args: list[Any]) -> int:
    """``attnbench ARGS`` in this process; returns the exit code."""
    from benchmarks import cli

    return cli.main([str(a) for a in args])


# --------------------------------------------------------------------------- the toy benchmark
TOY_SCHEMA = {
    **sweep_fields("toy", dtypes=("float32", "float64"), warmup=0, repeats=1, min_repeats=1, target_point_s=1.0,
                   point_timeout_s=10.0),
    "sizes": Field("list[int]", [1, 2, 4], minimum=1),
    "fail_at": Field("int", None, nullable=True, doc="the size whose point raises"),
    "oom_at": Field("int", None, nullable=True, doc="the size whose point runs out of memory"),
    "limit": Field("float", 10.0, doc="time_ms of the largest size must stay below it"),
}


def _complete(cfg: dict, src: str) -> None:
    if cfg["fail_at"] is not None and cfg["fail_at"] == cfg["oom_at"]:
        raise ConfigError(f"{src}: fail_at and oom_at name the same size {cfg['fail_at']}")


def toy_config(tmp_path: Path, **data: Any) -> Path:
    """A toy config (in-process points, no plot) with ``data`` over its defaults."""
    return write_config(tmp_path, {"benchmark": "toy", "isolate": False, "plot": False, **data}, "toy.yaml")


load_toy_config = config_loader(TOY_SCHEMA, Path("toy.yaml"), complete=_complete, auto_dtype="float64")


def point_toy(*, size: int, fail: bool = False, oom: bool = False) -> dict:
    """A measured point whose time is its size (ms)."""
    if oom:
        raise RuntimeError(OOM_MESSAGE)
    if fail:
        raise ValueError(f"toy point failed at size {size}")
    return {"time_ms": float(size), "peak_mem_bytes": 1024 * size}


def point_phases(*, size: int, timing: bool = True, memory: bool = True, oom: bool = False) -> dict:
    """A point measured in two workers: its time is its size (ms) when ``timing``; its peak is
    ``$ATTNBENCH_TOY_PEAK`` (else ``1024 * size``) when ``memory``, so a test sees which
    worker's environment the peak came from."""
    if oom:
        raise RuntimeError(OOM_MESSAGE)
    res: dict = {"time_ms": float(size)} if timing else {}
    if memory:
        res.update(peak_mem_bytes=int(os.environ.get("ATTNBENCH_TOY_PEAK", 1024 * size)), mem_method="env")
    return res


def toy_checks(points: list[dict], limit: float) -> list[dict]:
    """The largest size ran and its time is at most ``limit``."""
    last = points[-1] if points else None
    if last is None or last["status"] != "ok":
        return [check("time @ largest size", None, f"<= {limit:g}", False,
                      note=f"status {last['status'] if last else 'absent'}")]
    return [check("time @ largest size", last["time_ms"], f"<= {limit:g}", last["time_ms"] <= limit)]


def run_toy_sweep(cfg: dict, out_dir: Path, *, log: Callable[[str], None] = print,
                  plot_fn: Callable[[dict, Path], None] | None = None) -> dict:
    """The toy's sweep: one point per size, by increasing size."""
    sw = Sweep("toy", cfg, out_dir, log=log)
    points = [{"kind": "toy", "method": "toy", "size": s, "target": "tests.helpers.micro:point_toy",
               "kwargs": {"size": s, "fail": s == cfg["fail_at"], "oom": s == cfg["oom_at"]}}
              for s in sorted(cfg["sizes"])]
    doc = sw.new_doc({"device": sw.device, **sw.limits()}, tail={"checks": []})
    sw.open(doc, len(points), dtype=cfg["dtype"])
    sw.run(doc, points, keep=("status", "reason", "time_ms", "peak_mem_bytes"), where=lambda p: f"size={p['size']}",
           line=lambda k, n, p, r: f"[{k}/{n}] size={p['size']} {r['status']}")
    return sw.close(doc, toy_checks(doc["points"], cfg["limit"]), plot_fn=plot_fn or (lambda doc, path: None),
                    format_checks=format_checks)


toy_main = entry_point("toy", load_toy_config, run_toy_sweep)


def tiny_recurrence_config(tmp_path: Path, **extra: Any) -> str:
    """A ``bench recurrence`` config of toy sizes (in-process, lengths 8 and 32) with ``extra`` on top; its path."""
    body = {"device": "cpu", "warmup": 1, "repeats": 1, "min_repeats": 1, "isolate": False, "batch": 2, "d_model": 8,
            "lengths": [8, 32], "params": {"mamba2": {"headdim": 4, "chunk_size": 8}}, "check_length": 32,
            "loop_max_length": 32, "report_length": 32, "attention": {"heads": 2, "window": 4},
            "f32_error": {"length": 40}, **extra}
    p = tmp_path / "recurrence.yaml"
    p.write_text("benchmark: recurrence\n" + "\n".join(f"{k}: {json.dumps(v)}" for k, v in body.items()) + "\n")
    return str(p)
