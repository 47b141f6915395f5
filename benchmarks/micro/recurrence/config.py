"""The config of ``attnbench bench recurrence``: the shared sweep fields, the lengths, the
layers and their parameters, and the checks' limits."""

from __future__ import annotations

from typing import Any

from benchmarks.config import CONFIG_DIR
from benchmarks.config.schema import ConfigError, Field, Section
from benchmarks.micro.common import sweep_fields
from benchmarks.micro.sweep import config_loader

__all__ = ["SCHEMA", "DEFAULT_CONFIG", "load_config", "resolve_recurrences", "recurrence_of", "SEP"]

SEP = "@"  # a row label '<recurrence>@<backend>': the recurrence on another scan path


def recurrence_of(label: str) -> str:
    """The registered recurrence of a row label (``min_rnn@fla`` -> ``min_rnn``)."""
    return label.split(SEP, 1)[0]

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
    "backends": Field("list[str]", ["pure"],
                      doc="scan paths timed for the recurrences that take backend= (pure | fla): one row per path, "
                          "'<recurrence>@<backend>' for all but pure (fla: CUDA only)"),
    "scan": Field("bool", True, doc="time the scan primitive: odd/even doubling and the sequential loop"),
    "peers": Field("bool", True, doc="also time torch.nn.GRU and torch.nn.LSTM"),
    "loop_max_length": Field("per_device[int]", {"cpu": 1024, "cuda": 4096}, minimum=1,
                             doc="longest L of the sequential loop (one step per position is slow)"),
    "check_length": Field("per_device[int]", {"cpu": 1024, "cuda": 4096}, minimum=1,
                          doc="the L the scan is checked against the loop at (and layers compared to torch_gru)"),
    "linear_limit": Field("float", 3.0, minimum=1.0,
                          doc="most growth of a layer's time per position, longest over shortest L"),
    "attention": Section({
        "enabled": Field("bool", True, doc="also time SDPA and attnbench's truncated attention"),
        "heads": Field("int", 4, minimum=1,
                       doc="d_model split into heads (head_dim = d_model / heads), as bench attention"),
        "window": Field("int", 128, minimum=1, doc="w of the truncated attention: query i sees |i - j| <= w"),
        "causal": Field("bool", True, doc="causal attention (a recurrence is causal)"),
    }, doc="attention peers on the same (batch, L, d_model): SDPA and attn_core.attention(window=w)"),
    "report_length": Field("per_device[int]", {"cpu": 4096, "cuda": 4096}, minimum=1,
                           doc="the L of the summary table's ms and MiB columns"),
    "f32_error": Section({
        "enabled": Field("bool", True, doc="float32 against float64 error of the scans, peers and recurrences"),
        "length": Field("int", 5000, minimum=2, doc="L of the error measurement"),
        "batch": Field("int", 2, minimum=1),
    }, doc="max |y_float32 - y_float64| / max |y_float64| of one forward pass (untimed)"),
}


def resolve_recurrences(cfg: dict, source: str = "config") -> dict[str, dict[str, Any]]:
    """``{row label: params}``: the registered recurrences (a plug-in's too) or the listed ones, each
    checked by building it once at a tiny size (one-line ConfigError naming the valid ones); plus
    ``<recurrence>@<backend>`` with ``backend`` in its params for every non-pure entry of
    ``backends`` and every recurrence whose layer takes ``backend=``."""
    import inspect

    from attn_core.recurrent import BACKENDS, build_recurrence, get_recurrence, list_recurrences
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
    backends = cfg.get("backends") or ["pure"]
    bad = [b for b in backends if b not in BACKENDS]
    if bad:
        raise ConfigError(f"{source}: backends={backends!r} is invalid: {bad[0]!r} is not a backend; "
                          f"valid: {', '.join(BACKENDS)}")
    for name in list(out):
        takes = "backend" in inspect.signature(get_recurrence(name).cls).parameters
        for b in backends:
            if b != "pure" and takes and "backend" not in out[name]:
                out[f"{name}{SEP}{b}"] = {**out[name], "backend": b}
    return out


def _complete(cfg: dict, src: str) -> None:
    if cfg["min_repeats"] > cfg["repeats"]:
        raise ConfigError(f"{src}: min_repeats={cfg['min_repeats']} must be <= repeats={cfg['repeats']}")
    att = cfg["attention"]
    if att["enabled"] and cfg["d_model"] % att["heads"]:
        raise ConfigError(f"{src}: attention.heads={att['heads']} must divide d_model={cfg['d_model']} "
                          "(or set attention.enabled: false)")
    cfg["resolved_recurrences"] = resolve_recurrences(cfg, src)


load_config = config_loader(SCHEMA, DEFAULT_CONFIG, complete=_complete, auto_dtype="float32")
