"""The encoder-layer peer check of ``attnbench bench attention``: attnbench's
``attn_core.TransformerEncoderLayer`` against ``torch.nn.TransformerEncoderLayer`` (the layer a
user would pick instead), same sizes, pre-LN, GELU, batch-first, one padded batch of real
sentence lengths, forward + backward in training mode. Target: ours <= 1.2x torch.nn's time."""

from __future__ import annotations

from benchmarks.config.schema import Field, Section
from benchmarks.micro.checks import ratio_check
from benchmarks.micro.common import attn_core_fingerprint, set_threads
from benchmarks.run import measure

__all__ = ["SECTION", "KIND", "METHODS", "POS_LENGTHS", "plan_encoder_points", "point_encoder", "encoder_checks"]

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


def point_encoder(
    *, impl: str, d_model: int, heads: int, dim_feedforward: int, dropout: float, lengths: list[int], dtype: str,
    device: str, seed: int, warmup: int, repeats: int, min_repeats: int, target_s: float | None,
    threads: int | None = None,
) -> dict:
    """Forward + backward (loss = output.sum()) of one encoder layer on a ``(B, L, E)`` batch
    whose rows have the given real lengths."""
    import torch

    import attn_core

    nthreads = set_threads(threads)
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

    res = measure.measure_step(
        step, device=device, warmup=warmup, repeats=repeats, min_repeats=min_repeats, target_s=target_s
    )
    res["params"] = sum(p.numel() for p in params)
    res["real_tokens"] = int(sum(lengths))
    res["threads"] = nthreads
    res["attn_core_sha1"] = attn_core_fingerprint()
    return res


def encoder_checks(points: list[dict]) -> list[dict]:
    """``time ours_encoder / torch_encoder <= 1.2`` when both points ran."""
    idx = {r["method"]: r for r in points if r.get("kind") == KIND}
    if not idx:
        return []
    L, B = next(iter(idx.values())).get("L"), next(iter(idx.values())).get("B")
    c = ratio_check(f"time ours_encoder / torch_encoder @ B={B} L={L}", idx.get("ours_encoder"),
                    idx.get("torch_encoder"), "<= 1.2", lambda v: v <= 1.2)
    return [c] if c else []
