"""The config of ``attnbench bench complexity``: its schema (the shared sweep fields, the layers,
the ``n`` and ``d`` sweeps, the path-length and sequential-operation probes), its loader with
the cross-field checks, and the dtype rule."""

from __future__ import annotations

from typing import Any

from benchmarks.config import CONFIG_DIR
from benchmarks.config.schema import ConfigError, Field, Section
from benchmarks.micro.common import sweep_fields
from benchmarks.micro.complexity.paper import DTYPES, LAYERS, PROBE_KINDS
from benchmarks.micro.sweep import config_loader

__all__ = ["SCHEMA", "DEFAULT_CONFIG", "load_config", "resolve_dtype"]

DEFAULT_CONFIG = CONFIG_DIR / "bench_complexity.yaml"


SCHEMA: dict[str, Any] = {
    **sweep_fields("complexity", dtypes=DTYPES, dtype="auto",
                   dtype_doc="auto = float32 (cuDNN RNNs and CPU kernels alike)", warmup=2, repeats=5,
                   min_repeats=3, target_point_s=3.0, point_timeout_s=120.0, threads=1,
                   skip_doc="after an oom/timeout skip the larger sizes of that layer"),
    "layers": Field("list[str]", list(LAYERS), choices=LAYERS, doc="layer types to time"),
    "batch": Field("int", 1, minimum=1),
    "heads": Field("int", 4, minimum=1, doc="attention heads (must divide every d)"),
    "window": Field("int", 32, minimum=1, doc="r of restricted attention: position i sees |i - j| <= r"),
    "kernel": Field("int", 3, minimum=2, doc="k of the convolutions (odd: centred padding keeps the length)"),
    "max_n": Section(
        {layer: Field("per_device[int]", None, minimum=1, nullable=True) for layer in LAYERS},
        doc="largest n timed per layer (null = no cap); larger points are recorded as skipped",
    ),
    "sweep_n": Section({
        "d": Field("int", 128, minimum=1, doc="fixed width of the n sweep"),
        "lengths": Field("per_device[list[int]]", {"cpu": [128, 256, 512, 1024, 2048, 4096, 8192],
                                                   "cuda": [256, 512, 1024, 2048, 4096, 8192, 16384]}, minimum=2),
    }),
    "sweep_d": Section({
        "n": Field("per_device[int]", {"cpu": 1024, "cuda": 4096}, minimum=2, doc="fixed length of the d sweep"),
        "widths": Field("per_device[list[int]]", {"cpu": [64, 128, 256, 512, 1024],
                                                  "cuda": [64, 128, 256, 512, 1024, 2048]}, minimum=1),
    }),
    "path_length": Section({
        "enabled": Field("bool", True),
        "kinds": Field("list[str]", list(PROBE_KINDS), choices=PROBE_KINDS),
        "lengths": Field("list[int]", [8, 16, 32, 64, 128], minimum=2, doc="n of the probes"),
        "width": Field("int", 8, minimum=1),
        "heads": Field("int", 2, minimum=1),
        "windows": Field("list[int]", [2, 4, 8], minimum=1, doc="r of restricted attention"),
        "kernels": Field("list[int]", [3, 5], minimum=2, doc="k of the undilated convolutions (odd)"),
        "dilated_kernels": Field("list[int]", [2, 3], minimum=2, doc="k of the dilated stack"),
    }),
    "sequential_ops": Section({
        "enabled": Field("bool", True),
        "lengths": Field("list[int]", [64, 256, 1024, 4096], minimum=1),
        "width": Field("int", 16, minimum=1),
        "heads": Field("int", 2, minimum=1),
    }),
}


def _complete(cfg: dict, src: str) -> None:
    """Repeats in order, heads dividing every width, odd kernels where padding is centred."""
    if cfg["min_repeats"] > cfg["repeats"]:
        raise ConfigError(f"{src}: min_repeats={cfg['min_repeats']} must be <= repeats={cfg['repeats']}")
    attn = any(layer in cfg["layers"] for layer in ("self_attention", "restricted_attention",
                                                     "self_attention_op", "restricted_attention_op"))
    if attn:
        widths = {cfg["sweep_n"]["d"], *cfg["sweep_d"]["widths"]["cpu"], *cfg["sweep_d"]["widths"]["cuda"]}
        bad = sorted(w for w in widths if w % cfg["heads"])
        if bad:
            raise ConfigError(f"{src}: heads={cfg['heads']} must divide every width d; it does not divide {bad}")
    for sec in ("path_length", "sequential_ops"):
        if cfg[sec]["width"] % cfg[sec]["heads"]:
            raise ConfigError(f"{src}: {sec}.heads={cfg[sec]['heads']} must divide {sec}.width={cfg[sec]['width']}")
    if cfg["kernel"] % 2 == 0 and any(layer in cfg["layers"] for layer in ("conv", "dilated_conv")):
        raise ConfigError(f"{src}: kernel={cfg['kernel']} is invalid: expected an odd kernel (centred padding)")
    even = [k for k in cfg["path_length"]["kernels"] if k % 2 == 0]
    if even and "conv_centred" in cfg["path_length"]["kinds"]:
        raise ConfigError(f"{src}: path_length.kernels={cfg['path_length']['kernels']} is invalid: "
                          f"the centred probe needs odd kernels, got {even}")


load_config = config_loader(SCHEMA, DEFAULT_CONFIG, complete=_complete)


def resolve_dtype(name: str) -> str:
    """``auto`` -> float32 (cuDNN RNNs and CPU kernels alike)."""
    return "float32" if name == "auto" else name
