"""The encoder-layer peer check of ``attnbench bench attention``: attnbench's
``attn_core.TransformerEncoderLayer`` against ``torch.nn.TransformerEncoderLayer`` (the layer a
user would pick instead), same sizes, pre-LN, GELU, batch-first, one padded batch of real
sentence lengths, forward + backward in training mode. Target: ours <= 1.2x torch.nn's time
(checked from a paired point: :mod:`benchmarks.micro.attention.pairs`)."""

from __future__ import annotations

from typing import Callable

from benchmarks.config.schema import Field, Section
from benchmarks.micro.common import attn_core_fingerprint, set_threads
from benchmarks.run import measure

__all__ = ["SECTION", "KIND", "METHODS", "POS_LENGTHS", "plan_encoder_points", "encoder_step", "point_encoder"]

KIND = "encoder"
METHODS = ("ours_encoder", "torch_encoder")
#: 32 sentence lengths drawn (random.Random(0).sample, sorted) from UD English EWT train: a
#: realistic POS-tagging batch, padded to its longest sentence (42).
POS_LENGTHS = [2, 2, 3, 3, 4, 4, 4, 6, 8, 8, 9, 9, 9, 11, 14, 14, 15, 21, 21, 22, 25, 25, 26, 28, 28, 32, 33,
               35, 36, 39, 40, 42]

SECTION = Section({
    "enabled": Field("bool", True),
    "d_model": Field("int", 128, minimum=1),
    "heads": Field("int", 4, minimum=1),
    "dim_feedforward": Field("int", 512, minimum=1),
    "dropout": Field("float", 0.1, minimum=0.0, maximum=0.99),
    "lengths": Field("list[int]", POS_LENGTHS, minimum=1, doc="the batch's real lengths (padded to the longest)"),
    "methods": Field("list[str]", list(METHODS), choices=METHODS),
}, doc="attn_core.TransformerEncoderLayer vs torch.nn.TransformerEncoderLayer with a key padding mask")


def plan_encoder_points(cfg: dict, device: str, common: dict) -> list[dict]:
    """One point per method (none when the section is disabled)."""
    enc = cfg["encoder"]
    if not enc["enabled"]:
        return []
    sizes = {k: enc[k] for k in ("d_model", "heads", "dim_feedforward", "dropout", "lengths")}
    return [{
        "kind": KIND, "method": impl, "impl": impl, "L": max(enc["lengths"]), "B": len(enc["lengths"]),
        "target": "benchmarks.micro.attention:point_encoder", "preload": ["torch", "attn_core"],
        "kwargs": {"impl": impl, **sizes, **common},
    } for impl in enc["methods"]]


def encoder_step(
    *, impl: str, d_model: int, heads: int, dim_feedforward: int, dropout: float, lengths: list[int], dtype: str,
    device: str, seed: int,
) -> tuple[Callable[[], None], dict]:
    """Forward + backward (loss = output.sum()) of one encoder layer on a ``(B, L, E)`` batch whose
    rows have the given real lengths, as a step to time, and what the point records beside its
    times (``params``, ``real_tokens``)."""
    import torch

    import attn_core

    dt = getattr(torch, dtype)
    gen = torch.Generator(device="cpu").manual_seed(seed)
    b, length = len(lengths), max(lengths)
    x = torch.randn(b, length, d_model, generator=gen).to(device=device, dtype=dt)  # (B, L, E)
    real = (torch.arange(length)[None] < torch.tensor(lengths)[:, None]).to(device)  # (B, L), True = token
    torch.manual_seed(seed)
    sizes = dict(dim_feedforward=dim_feedforward, dropout=dropout, activation="gelu", norm_first=True)
    if impl == "ours_encoder":
        mod = attn_core.TransformerEncoderLayer(d_model, heads, **sizes)
        fn = lambda: mod(x, key_padding_mask=real)  # noqa: E731
    elif impl == "torch_encoder":
        mod = torch.nn.TransformerEncoderLayer(d_model, heads, batch_first=True, **sizes)
        pad = ~real  # torch.nn's convention: True = padding
        fn = lambda: mod(x, src_key_padding_mask=pad)  # noqa: E731
    else:
        raise ValueError(f"unknown encoder method {impl!r}; valid: {', '.join(METHODS)}")
    mod.to(device=device, dtype=dt).train()
    params = list(mod.parameters())

    def step() -> None:
        out = fn()
        out.sum().backward()
        del out
        for p in params:
            p.grad = None

    return step, {"params": sum(p.numel() for p in params), "real_tokens": int(sum(lengths))}


def point_encoder(
    *, impl: str, d_model: int, heads: int, dim_feedforward: int, dropout: float, lengths: list[int], dtype: str,
    device: str, seed: int, warmup: int, repeats: int, min_repeats: int, target_s: float | None,
    threads: int | None = None,
) -> dict:
    """One encoder point: :func:`encoder_step` timed, then its peak memory."""
    nthreads = set_threads(threads)
    step, info = encoder_step(impl=impl, d_model=d_model, heads=heads, dim_feedforward=dim_feedforward,
                              dropout=dropout, lengths=lengths, dtype=dtype, device=device, seed=seed)
    res = measure.measure_step(
        step, device=device, warmup=warmup, repeats=repeats, min_repeats=min_repeats, target_s=target_s
    )
    res.update(info)
    res["threads"] = nthreads
    res["attn_core_sha1"] = attn_core_fingerprint()
    return res
