"""The config of ``attnbench bench recurrence``: the shared sweep fields, the lengths, the
layers and their parameters, and the checks' limits."""

from __future__ import annotations

from typing import Any

from benchmarks.config import CONFIG_DIR
from benchmarks.config.schema import ConfigError, Field
from benchmarks.micro.common import sweep_fields
from benchmarks.micro.sweep import config_loader

__all__ = ["SCHEMA", "DEFAULT_CONFIG", "load_config", "resolve_recurrences"]

DEFAULT_CONFIG = CONFIG_DIR / "bench_recurrence.yaml"

SCHEMA: dict[str, Any] = {
    **sweep_fields("recurrence", dtypes=("float32", "float64"), warmup=2, repeats=10, min_repeats=3,
                   target_point_s=3.0, point_timeout_s=300.0, unit="training steps (forward + backward)",
                   skip_doc="after an oom/timeout skip larger L for that method"),
    "batch": Field("int", 8, minimum=1, doc="sequences per step"),
    "d_model": Field("int", 128, minimum=1, doc="width of the scan and of every layer"),
    "lengths": Field("per_device[list[int]]", {"cpu": [256, 1024, 4096], "cuda": [1024, 4096, 16384]},
                     minimum=1, doc="sequence lengths L"),
    "recurrences": Field("any", "all", doc="'all' (every registered recurrence) or a list of names"),
    "params": Field("any", {}, doc="{recurrence: {param: value}} passed to its layer"),
    "scan": Field("bool", True, doc="time the scan primitive: odd/even doubling and the sequential loop"),
    "peers": Field("bool", True, doc="also time torch.nn.GRU and torch.nn.LSTM"),
    "loop_max_length": Field("per_device[int]", {"cpu": 1024, "cuda": 4096}, minimum=1,
                             doc="longest L of the sequential loop (one step per position is slow)"),
    "check_length": Field("per_device[int]", {"cpu": 1024, "cuda": 4096}, minimum=1,
                          doc="the L the scan is checked against the loop at (and layers compared to torch_gru)"),
    "linear_limit": Field("float", 3.0, minimum=1.0,
                          doc="most growth of a layer's time per position, longest over shortest L"),
}


def resolve_recurrences(cfg: dict, source: str = "config") -> dict[str, dict[str, Any]]:
    """``{recurrence: params}``: the registered ones (a plug-in's too) or the listed ones, each
    checked by building it once at a tiny size (one-line ConfigError naming the valid ones)."""
    from attn_core.recurrent import build_recurrence, list_recurrences
    from benchmarks.config.plugins import load_plugins

    load_plugins()
    names, params = cfg["recurrences"], cfg["params"] or {}
    every = list_recurrences()
    names = list(every) if names == "all" else names
    if not isinstance(names, list) or not all(isinstance(n, str) for n in names):
        raise ConfigError(f"{source}: recurrences={names!r} is invalid: expected 'all' or a list of names")
    if not isinstance(params, dict) or not all(isinstance(v, dict) for v in params.values()):
        raise ConfigError(f"{source}: params={params!r} is invalid: expected {{recurrence: {{param: value}}}}")
    out = {}
    for name in names + [n for n in params if n not in names]:
        try:
            build_recurrence(name, cfg["d_model"], **params.get(name, {}))
        except ValueError as err:
            raise ConfigError(f"{source}: recurrences: {' '.join(str(err).split())}") from None
        out[name] = dict(params.get(name, {}))
    return out


def _complete(cfg: dict, src: str) -> None:
    if cfg["min_repeats"] > cfg["repeats"]:
        raise ConfigError(f"{src}: min_repeats={cfg['min_repeats']} must be <= repeats={cfg['repeats']}")
    cfg["resolved_recurrences"] = resolve_recurrences(cfg, src)


load_config = config_loader(SCHEMA, DEFAULT_CONFIG, complete=_complete, auto_dtype="float32")
