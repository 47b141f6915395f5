"""The float32 error of ``attnbench bench recurrence``: one forward pass of a scan, a torch.nn peer
or a recurrence in float32 against the same pass in float64 (untimed; run in a worker)."""

from __future__ import annotations

from benchmarks.micro.common import set_threads

__all__ = ["point_f32_error"]


def point_f32_error(*, method: str, family: str, params: dict, L: int, batch: int, d_model: int, seed: int,
                    threads: int | None = None) -> dict:
    """``max |y32 - y64| / max |y64|`` at length ``L`` on the CPU: the scan on ``a (B, L, d_model)
    = 1 - 0.01 u`` (long memory: ``|a|`` close to 1, the hard case, as in the scan's unit test)
    and ``b`` normal, or the layer (default init, float64, then the same parameters cast to
    float32) on ``x (B, L, d_model)`` normal."""
    import torch

    from benchmarks.config.plugins import load_plugins
    from benchmarks.micro.common import attn_core_fingerprint
    from benchmarks.micro.recurrence.points import build_layer, scan_fn

    load_plugins()
    nthreads = set_threads(threads)
    gen = torch.Generator().manual_seed(seed)
    x = torch.randn(batch, L, d_model, generator=gen, dtype=torch.float64)  # (B, L, E)
    with torch.no_grad():
        if family == "scan":
            a = 1 - 0.01 * torch.rand(batch, L, d_model, generator=gen, dtype=torch.float64)  # (B, L, E)
            scan = scan_fn(method)
            ref, out = scan(a, x), scan(a.float(), x.float())
        else:
            torch.manual_seed(seed)
            net, call = build_layer(method, family, params, d_model)
            net.double().eval()  # in place: ``call`` runs this module
            ref = call(x)
            net.float()
            out = call(x.float())
    err = (out.double() - ref).abs().max().item()
    scale = ref.abs().max().item()
    return {"status": "ok", "f32_rel_err": err / scale if scale else None, "f32_max_abs_err": err,
            "f64_max_abs": scale, "threads": nthreads, "attn_core_sha1": attn_core_fingerprint()}
