"""Sequential operations, counted (``attnbench bench complexity``): the longest chain of dependent
step-module applications (forward hooks) and of autograd operations, per layer over ``n``;
recurrences on an explicit cell loop sharing the fused module's weights."""

from __future__ import annotations

import contextlib
from typing import Any, Callable, Iterator, Sequence

import torch

from benchmarks.micro.complexity.fits import fit_power_law, growth_class
from benchmarks.micro.complexity.layers import CellLoopRNN, build_layer
from benchmarks.micro.complexity.paper import LAYER_ROW, PAPER, RNN_LAYERS
from benchmarks.run import measure

__all__ = ["single_thread", "critical_path_ops", "count_sequential", "run_sequential"]


@contextlib.contextmanager
def single_thread() -> Iterator[None]:
    """Run tiny tensor work on one CPU thread (restored after): on a shared machine an OpenMP
    pool waiting for busy cores turns a 20 µs op into 20 ms."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(before)


def critical_path_ops(output, inp) -> int | None:
    """Longest chain of autograd operations from ``inp`` (a leaf that requires grad) to
    ``output``: the number of dependent operations the forward computation needs. ``None``
    when ``output`` does not depend on ``inp``."""
    root = output.grad_fn
    if root is None:
        return None
    memo: dict[int, int | None] = {}
    keep: list[Any] = []  # hold the nodes: ids must stay unique while the walk runs
    stack: list[tuple[Any, bool]] = [(root, False)]
    while stack:
        node, ready = stack.pop()
        k = id(node)
        if k in memo:
            continue
        children = [f for f, _ in node.next_functions if f is not None]
        if not ready:
            stack.append((node, True))
            stack.extend((c, False) for c in children if id(c) not in memo)
            continue
        keep.append(node)
        if getattr(node, "variable", None) is inp:
            memo[k] = 0
            continue
        depths = [memo[id(c)] for c in children if memo.get(id(c)) is not None]
        memo[k] = 1 + max(depths) if depths else None
    return memo[id(root)]


def _tensors(obj) -> list:
    if isinstance(obj, torch.Tensor):
        return [obj]
    if isinstance(obj, (tuple, list)):
        return [t for o in obj for t in _tensors(o)]
    return []


class _StepCounter:
    """Forward hooks on the step modules: each output is tagged 1 + the largest tag among the
    module's tensor inputs (untagged = 0); ``depth`` is the largest tag seen: the longest chain
    of dependent step applications."""

    ATTR = "_attnbench_step_depth"

    def __init__(self, modules) -> None:
        self.depth = 0
        self.calls = 0
        self.handles = [m.register_forward_hook(self._hook) for m in modules]

    def _hook(self, module, inputs, output) -> None:
        d = 1 + max((getattr(t, self.ATTR, 0) for t in _tensors(inputs)), default=0)
        for t in _tensors(output):
            setattr(t, self.ATTR, d)
        self.depth = max(self.depth, d)
        self.calls += 1

    def remove(self) -> None:
        for h in self.handles:
            h.remove()


def _count_sequential(layer: str, n: int, *, width: int = 16, heads: int = 2, window: int = 32, kernel: int = 3,
                     seed: int = 0) -> dict:
    """Count the sequential operations of one ``layer`` at length ``n`` (float64, CPU, batch 1):
    ``steps`` = longest chain of dependent step applications (the layer itself for parallel
    layers; the ``LSTMCell``/``GRUCell`` of an explicit loop for recurrences) and
    ``critical_path_ops`` (:func:`critical_path_ops`). For the recurrences the fused module's
    output is compared with the loop's (``max_abs_diff_vs_fused``) and its own critical path
    is reported too: ``critical_path_ops_fused_float64`` (torch runs the recurrence as per-step
    ATen ops) and ``critical_path_ops_fused_float32`` (one opaque oneDNN kernel, as timed)."""
    torch.manual_seed(seed)
    mod = build_layer(layer, width, heads=heads, window=window, kernel=kernel).to(torch.float64)
    impl, step_modules, how = mod, [mod], "the layer is one step module"
    if layer in RNN_LAYERS:
        impl = CellLoopRNN(mod)
        step_modules = [impl.cell]
        how = f"explicit {'LSTMCell' if layer == 'lstm' else 'GRUCell'} loop sharing the fused module's weights"
    gen = torch.Generator().manual_seed(seed)
    x = torch.randn(1, n, width, generator=gen, dtype=torch.float64).requires_grad_()
    counter = _StepCounter(step_modules)
    try:
        y = impl(x)
    finally:
        counter.remove()
    res = {"n": n, "steps": counter.depth, "step_calls": counter.calls, "critical_path_ops": critical_path_ops(y, x),
           "counted_on": how}
    if layer in RNN_LAYERS:
        yf = mod(x)
        res["max_abs_diff_vs_fused"] = float((yf - y).detach().abs().max())
        res["loop_iterations"] = impl.steps
        # the fused module's own graph: per-step ATen ops in float64 on the CPU, one opaque
        # kernel (oneDNN) in float32, as timed
        res["critical_path_ops_fused_float64"] = critical_path_ops(yf, x)
        x32 = x.detach().float().requires_grad_()
        res["critical_path_ops_fused_float32"] = critical_path_ops(mod.float()(x32), x32)
    return res


def count_sequential(layer: str, n: int, **kwargs) -> dict:
    """:func:`_count_sequential` on one CPU thread (see :func:`single_thread`)."""
    with single_thread():
        return _count_sequential(layer, n, **kwargs)


def run_sequential(sc: dict, layers: Sequence[str], *, window: int, kernel: int, seed: int,
                   log: Callable[[str], None] = print) -> dict:
    """:func:`count_sequential` for every layer over ``sc["lengths"]``, with growth exponents."""
    out: dict[str, Any] = {
        "method": "steps = longest chain of dependent step-module applications (forward hooks tag each output "
                  "with 1 + the largest tag of its inputs); critical_path_ops = longest chain of autograd ops from "
                  "input to output (float64, batch 1); the fused nn.LSTM/GRU as timed (float32, oneDNN) is one "
                  "opaque autograd op (critical_path_ops_fused_float32), so recurrences are counted on an explicit "
                  "LSTMCell/GRUCell loop sharing its weights (outputs compared: max_abs_diff_vs_fused)",
        "width": sc["width"], "heads": sc["heads"], "window": window, "kernel": kernel, "layers": {},
    }
    for layer in layers:
        pts, errors = [], []
        for n in sorted(set(sc["lengths"])):
            rec = measure.run_inline(count_sequential, {"layer": layer, "n": n, "width": sc["width"],
                                                        "heads": sc["heads"], "window": window, "kernel": kernel,
                                                        "seed": seed})
            if rec["status"] != "ok":
                errors.append(f"n={n}: {rec['status']}: {rec.get('reason')}")
                continue
            rec.pop("status", None)
            rec.pop("wall_s", None)
            pts.append(rec)
        steps_fit = fit_power_law([p["n"] for p in pts], [p["steps"] for p in pts])
        ops_fit = fit_power_law([p["n"] for p in pts], [p["critical_path_ops"] for p in pts])
        entry = {
            "points": pts, "errors": errors, "paper": PAPER[LAYER_ROW[layer]]["sequential_class"],
            "steps_exponent": steps_fit["exponent"] if steps_fit else None,
            "steps_class": growth_class(steps_fit["exponent"]) if steps_fit else None,
            "critical_path_exponent": ops_fit["exponent"] if ops_fit else None,
            "critical_path_class": growth_class(ops_fit["exponent"]) if ops_fit else None,
        }
        out["layers"][layer] = entry
        vals = ", ".join(f"{p['n']}:{p['steps']}/{p['critical_path_ops']}" for p in pts)
        log(f"sequential {layer:<24} steps {entry['steps_class']}, critical path {entry['critical_path_class']} "
            f"(paper {entry['paper']}); n:steps/ops {vals}" + (f"  errors: {errors}" if errors else ""))
    return out
