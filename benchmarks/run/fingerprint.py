"""A machine's speed fingerprint: a few seconds of calibrated throughput measured at the start
of a run, in the suite's dtype and with the torch threads its cells will use: dense matmul
(GFLOP/s), 3x3 convolution (GFLOP/s), LSTM time steps per second (forward passes, fastest of 10
timed slots after a warm-up) and a whole training step. It is stored in the run's manifest and in
every record's ``env``, so that two records say whether they came from equally fast machines
(``cpu_model: AMD EPYC`` does not); :mod:`benchmarks.run.budget` scales calibrated time budgets
with it.

``ATTNBENCH_FINGERPRINT_S`` sets the measuring time (seconds in total, default 2; ``0``: off).
"""

from __future__ import annotations

import contextlib
import math
import os
import time
from typing import Any, Callable, Iterator, Mapping


#: the rates of a fingerprint, higher = faster
RATES = ("matmul_gflops", "conv_gflops", "lstm_steps_per_s", "train_steps_per_s")
#: rates every fingerprint has had; ``train_steps_per_s`` (a Transformer block's forward, backward
#: and AdamW step: the element-wise, memory-bound and autograd work that the kernel rates miss)
#: came later, so a fingerprint stored without it is scaled over these three
CORE_RATES = RATES[:3]
FINGERPRINT_ENV = "ATTNBENCH_FINGERPRINT_S"
DEFAULT_SECONDS = 2.0
REPEATS = 10

#: trainer.precision -> the dtype the fingerprint is measured in
PRECISION_DTYPES = {"bf16-mixed": "bfloat16", "bf16-true": "bfloat16", "16-mixed": "float16", "64-true": "float64"}


# ----------------------------------------------------------------------------- measuring
def dtype_for(precision: str | None) -> str:
    """The dtype name a suite's ``trainer.precision`` computes in."""
    return PRECISION_DTYPES.get(str(precision or "32-true"), "float32")


def configured_seconds() -> float:
    """Measuring time from ``$ATTNBENCH_FINGERPRINT_S`` (0: off); a bad value is one clear error."""
    raw = os.environ.get(FINGERPRINT_ENV, "").strip()
    if not raw:
        return DEFAULT_SECONDS
    try:
        value = float(raw)
    except ValueError:
        value = -1.0
    if not (math.isfinite(value) and 0 <= value <= 60):
        from benchmarks.config.schema import ConfigError

        raise ConfigError(f"${FINGERPRINT_ENV}={raw!r} is invalid: expected seconds in [0, 60] (0: no fingerprint)")
    return value


@contextlib.contextmanager
def _threads(n: int | None) -> Iterator[int]:
    import torch

    before = torch.get_num_threads()
    if n:
        torch.set_num_threads(int(n))
    try:
        yield torch.get_num_threads()
    finally:
        torch.set_num_threads(before)


def _seconds_per_call(fn: Callable[[], Any], sync: Callable[[], None], budget_s: float) -> float:
    """Seconds per call in the fastest of :data:`REPEATS` timed slots of ``budget_s / REPEATS`` each
    (as many calls as fit in a slot, at least one), after one warm-up call: bounded time on any
    machine. The fastest slot, not the median: the fingerprint says what the machine can do, and a
    moment of contention from another process (which cost a 2-thread LSTM up to 400x here) must
    not decide it."""
    fn(), sync()
    slot = budget_s / REPEATS
    times = []
    for _ in range(REPEATS):
        calls, t0 = 0, time.perf_counter()
        while True:
            fn()
            sync()
            calls += 1
            elapsed = time.perf_counter() - t0
            if elapsed >= slot:
                break
        times.append(elapsed / calls)
    return min(times)


def _train_steps_per_s(dev: Any, dt: Any, gpu: bool, g: Any, sync: Callable[[], None], budget_s: float) -> float | None:
    """Training steps per second of one pre-LN Transformer encoder block (forward, backward,
    AdamW): what a training step spends beyond the big kernels (norms, softmax, activations,
    autograd, the optimiser), which scales differently with threads and memory bandwidth."""
    import torch

    d, length, batch = (512, 128, 32) if gpu else (128, 64, 16)
    try:
        with torch.enable_grad():
            block = torch.nn.TransformerEncoderLayer(d, 4, 2 * d, dropout=0.0, batch_first=True, norm_first=True)
            block = block.to(dev, dt)
            opt = torch.optim.AdamW(block.parameters(), lr=1e-4)
            x = torch.randn(batch, length, d, device=dev, dtype=dt, generator=g)

            def step() -> None:
                opt.zero_grad(set_to_none=True)
                block(x).square().mean().backward()
                opt.step()

            return 1.0 / _seconds_per_call(step, sync, budget_s)
    except RuntimeError:  # a kernel missing for this dtype/device
        return None


def measure(device: str = "cpu", dtype: str = "float32", threads: int | None = None,
            seconds: float = DEFAULT_SECONDS) -> dict[str, Any]:
    """The fingerprint of this machine: :data:`RATES` measured for about ``seconds`` in all."""
    import torch

    dev = torch.device(device)
    dt = getattr(torch, dtype)
    gpu = dev.type == "cuda"
    n, (b, c, hw), (lb, lh, ll) = (4096, (32, 64, 64), (64, 512, 64)) if gpu else (1024, (8, 32, 32), (16, 128, 32))
    sync = (lambda: torch.cuda.synchronize(dev)) if gpu else (lambda: None)
    each = seconds / len(RATES)
    t_start = time.perf_counter()
    out: dict[str, Any] = {"device": dev.type, "dtype": dtype}
    with _threads(threads) as used, torch.no_grad():
        out["threads"] = used
        g = torch.Generator(device=dev).manual_seed(0)
        a = torch.randn(n, n, device=dev, dtype=dt, generator=g)
        bm = torch.randn(n, n, device=dev, dtype=dt, generator=g)
        out["matmul_gflops"] = 2 * n**3 / _seconds_per_call(lambda: a @ bm, sync, each) / 1e9
        conv = torch.nn.Conv2d(c, 2 * c, 3, padding=1, bias=False).to(dev, dt)
        x = torch.randn(b, c, hw, hw, device=dev, dtype=dt, generator=g)
        flops = 2 * b * 2 * c * c * 9 * hw * hw
        out["conv_gflops"] = flops / _seconds_per_call(lambda: conv(x), sync, each) / 1e9
        try:
            lstm = torch.nn.LSTM(lh, lh, batch_first=True).to(dev, dt)
            xs = torch.randn(lb, ll, lh, device=dev, dtype=dt, generator=g)
            out["lstm_steps_per_s"] = ll / _seconds_per_call(lambda: lstm(xs), sync, each)
        except RuntimeError:  # an LSTM kernel missing for this dtype/device
            out["lstm_steps_per_s"] = None
        out["train_steps_per_s"] = _train_steps_per_s(dev, dt, gpu, g, sync, each)
    for key in RATES:
        if out[key] is not None:
            out[key] = float(f"{out[key]:.4g}")
    out["shapes"] = {"matmul": [n, n, n], "conv": [b, c, 2 * c, hw, hw, 3], "lstm": [lb, ll, lh]}
    out["seconds"] = round(time.perf_counter() - t_start, 2)
    out["torch"] = torch.__version__
    return out


def measure_for_run(device: str, precision: str | None, threads: int | None) -> dict[str, Any] | None:
    """The run's fingerprint (``None`` when ``$ATTNBENCH_FINGERPRINT_S`` is 0)."""
    seconds = configured_seconds()
    return measure(device, dtype_for(precision), threads, seconds) if seconds > 0 else None


def format_fingerprint(fp: Mapping[str, Any] | None) -> str:
    """One line: ``matmul 61.2 GFLOP/s, conv 40.1 GFLOP/s, LSTM 5,210 steps/s (cpu float32, 2 threads)``."""
    if not fp:
        return "–"

    def num(v: Any) -> str:
        return "–" if v is None else f"{v:,.1f}" if v < 1000 else f"{v:,.0f}"

    train = f", train {num(fp['train_steps_per_s'])} steps/s" if "train_steps_per_s" in fp else ""
    return (f"matmul {num(fp.get('matmul_gflops'))} GFLOP/s, conv {num(fp.get('conv_gflops'))} GFLOP/s, "
            f"LSTM {num(fp.get('lstm_steps_per_s'))} steps/s{train} ({fp.get('device')} {fp.get('dtype')}, "
            f"{fp.get('threads')} thread{'s' if fp.get('threads') != 1 else ''})")


# ----------------------------------------------------------------------------- in a run
def manifest_fingerprint(out: Any) -> dict[str, Any] | None:
    """The fingerprint the run's driver stored in ``OUT/suite.json`` (``None`` if absent)."""
    import json
    from pathlib import Path

    try:
        fp = json.loads((Path(out) / "suite.json").read_text(encoding="utf-8")).get("fingerprint")
    except (OSError, ValueError, AttributeError):
        return None
    return fp if isinstance(fp, dict) else None
