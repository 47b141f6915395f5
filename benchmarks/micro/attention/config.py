"""The config of ``attnbench bench attention``: its schema (the shared sweep fields plus the
``sequence``, ``band_compare``, ``graph``, ``variants``, ``encoder``, ``paired`` and ``matmul``
sections), its loader and the
dtype rule."""

from __future__ import annotations

from typing import Any

from benchmarks.config import CONFIG_DIR
from benchmarks.config.schema import ConfigError, Field, Section
from benchmarks.micro.attention.encoder import SECTION as ENCODER_SECTION
from benchmarks.micro.attention.pairs import SECTION as PAIRED_SECTION
from benchmarks.micro.attention.variants import SECTION as VARIANTS_SECTION, variant_patterns
from benchmarks.micro.common import sweep_fields
from benchmarks.micro.sweep import config_loader

__all__ = ["SCHEMA", "DEFAULT_CONFIG", "FULL_CONFIG", "SEQ_METHODS", "GRAPH_METHODS", "DTYPES", "load_config",
           "resolve_dtype"]

DEFAULT_CONFIG = CONFIG_DIR / "bench_attention.yaml"
FULL_CONFIG = CONFIG_DIR / "bench_attention_full.yaml"

SEQ_METHODS = ("ours_full", "sdpa", "naive", "ours_truncated")
GRAPH_METHODS = ("ours_graph", "pyg_transformerconv", "dense_masked")
DTYPES = ("auto", "float32", "bfloat16", "float16", "float64")

SCHEMA: dict[str, Any] = {
    **sweep_fields("attention", dtypes=DTYPES, dtype="auto", dtype_doc="auto = float32 on CPU, bfloat16 on CUDA",
                   warmup=1, repeats=5, min_repeats=2, target_point_s=10.0, point_timeout_s=300.0,
                   skip_doc="sequences: after an oom/timeout skip larger L; graphs: after a timeout"),
    "sequence": Section({
        "batch": Field("int", 1, minimum=1),
        "heads": Field("int", 4, minimum=1),
        "head_dim": Field("int", 64, minimum=1),
        "causal": Field("bool", False),
        "lengths": Field("per_device[list[int]]", [256, 512, 1024, 2048, 4096], minimum=1),
        "methods": Field("list[str]", list(SEQ_METHODS), choices=SEQ_METHODS),
        "windows": Field("list[int]", [32, 128, 512], minimum=0, doc="windows of ours_truncated"),
    }),
    "band_compare": Section({
        "devices": Field("list[str]", ["cuda"], choices=("cpu", "cuda"), doc="where to run it"),
        "lengths": Field("list[int]", [16384], minimum=1),
        "windows": Field("list[int]", [256], minimum=0),
    }, doc="ours_truncated vs SDPA with a dense band mask (the FlexAttention comparison)"),
    "graph": Section({
        "embed_dim": Field("int", 64, minimum=1),
        "heads": Field("int", 4, minimum=1),
        "sizes": Field("list[any]", [{"nodes": 2000, "edges": 20000}], doc="list of {nodes, edges}"),
        "methods": Field("list[str]", list(GRAPH_METHODS), choices=GRAPH_METHODS),
    }),
    "variants": VARIANTS_SECTION,
    "encoder": ENCODER_SECTION,
    "paired": PAIRED_SECTION,
    "matmul": Section({
        "enabled": Field("bool", True, doc="measure a large matmul as the peak rate for TFLOP/s"),
        "size": Field("per_device[int]", {"cpu": 2048, "cuda": 8192}, minimum=16),
        "dtype": Field("str", "auto", choices=DTYPES, doc="auto = bfloat16 on CUDA, the bench dtype on CPU"),
        "repeats": Field("int", 10, minimum=1),
    }),
}

_SIZE_KEYS = ("nodes", "edges")


def _check_sizes(sizes: list, source: str) -> list[dict]:
    out = []
    for i, s in enumerate(sizes):
        where = f"graph.sizes[{i}]"
        if not isinstance(s, dict):
            raise ConfigError(f"{source}: {where}={s!r} is invalid: expected a mapping {{nodes: N, edges: E}}")
        unknown = [k for k in s if k not in _SIZE_KEYS]
        if unknown:
            raise ConfigError(f"{source}: unknown key '{where}.{unknown[0]}'; valid keys: {', '.join(_SIZE_KEYS)}")
        for k in _SIZE_KEYS:
            v = s.get(k)
            if isinstance(v, bool) or not isinstance(v, int) or v < 1:
                raise ConfigError(f"{source}: {where}.{k}={v!r} is invalid: expected a positive integer")
        out.append({"nodes": s["nodes"], "edges": s["edges"]})
    return out



def _complete(cfg: dict, src: str) -> None:
    """Graph sizes are ``{nodes, edges}`` mappings, heads divide the width, variants exist."""
    cfg["graph"]["sizes"] = _check_sizes(cfg["graph"]["sizes"], src)
    if cfg["graph"]["embed_dim"] % cfg["graph"]["heads"]:
        raise ConfigError(f"{src}: graph.heads={cfg['graph']['heads']} must divide graph.embed_dim={cfg['graph']['embed_dim']}")
    if cfg["variants"]["enabled"]:  # unknown patterns or parameters fail before anything runs
        variant_patterns(cfg["variants"], causal=cfg["sequence"]["causal"], source=src)


load_config = config_loader(SCHEMA, DEFAULT_CONFIG, complete=_complete)


def resolve_dtype(name: str, device: str) -> str:
    """``auto`` -> bfloat16 on CUDA, float32 elsewhere."""
    if name == "auto":
        return "bfloat16" if device == "cuda" else "float32"
    return name
