"""Count host-device synchronisations: a :class:`~torch.utils._python_dispatch.TorchDispatchMode`
that counts the aten ops which make the host wait for the device (a scalar read such as
``.item()``/``bool()``/``int()`` of a tensor, ops whose output size depends on the values,
device-to-host copies). On a CPU run nothing waits, but the same ops are counted: they are the
ones that would stall a GPU, so a CPU test can prove a step sync-free. On a GPU run
(``host_ops=False``) ops on host tensors only are left out: they wait for nothing.

Usage::

    with SyncCounter() as syncs:
        train_step()
    syncs.total, syncs.by_op   # e.g. 2, {"aten._local_scalar_dense": 2}

It also counts every aten op dispatched (``ops``; on a GPU run those on device tensors): the
host work of a step, each op a kernel launch on a GPU (views aside). Device-independent, so a
CPU run measures what makes a small model's GPU step host-bound.

Costs Python time per op while active: count in steps apart from the timed ones.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

import torch
from torch.utils._python_dispatch import TorchDispatchMode

__all__ = ["SYNC_OPS", "SyncCounter"]

#: aten ops (overload packets) that synchronise whatever their arguments: a scalar read, or an
#: output whose size the host must learn from the device
SYNC_OPS: frozenset[str] = frozenset({
    "aten._local_scalar_dense", "aten.nonzero", "aten.nonzero_static", "aten.masked_select", "aten.unique",
    "aten._unique", "aten._unique2", "aten.unique_dim", "aten.unique_consecutive", "aten.bincount",
    "aten.equal", "aten.is_nonzero", "aten.allclose", "aten.histc",
})


def _is_bool_index(x: Any) -> bool:
    return isinstance(x, torch.Tensor) and x.dtype in (torch.bool, torch.uint8)


def _device_to_host(func: Any, args: tuple, kwargs: dict) -> bool:
    """A copy from an accelerator into host memory (``.cpu()``, ``.to("cpu")``, ``.tolist()``)."""
    name = str(func.overloadpacket)
    src = args[0] if args and isinstance(args[0], torch.Tensor) else None
    if name == "aten._to_copy" and src is not None and src.device.type != "cpu":
        dev = kwargs.get("device")
        return dev is not None and torch.device(dev).type == "cpu"
    if name == "aten.copy_" and len(args) > 1 and isinstance(args[1], torch.Tensor):
        return args[0].device.type == "cpu" and args[1].device.type != "cpu" and not kwargs.get("non_blocking")
    return False


class SyncCounter(TorchDispatchMode):
    """Counts synchronising aten ops while active (re-entrant: each ``with`` adds to the counts).
    ``by_op``: op name -> count; ``total``: their sum; ``ops``: every aten op dispatched (on a
    GPU run, ``host_ops=False``: those with a device tensor).

    An optimiser's reads of its own host-side state are not counted: it keeps its step counters
    on the host (``state["step"]``, unless capturable or fused) and reads them there, which is
    no synchronisation on a GPU; counting them on a CPU run would bury the real ones. (Only
    those tensors are left out: Lightning runs forward and backward inside ``optimizer.step``.)"""

    def __init__(self, *, host_ops: bool = True) -> None:
        super().__init__()
        self.host_ops = host_ops
        self.by_op: Counter[str] = Counter()
        self.ops = 0
        self._host_state: set[int] = set()  # ids of optimisers' host-side state tensors
        self._hooks: list[Any] = []

    def _note_state(self, optimizer: Any, *_: Any) -> None:
        for st in optimizer.state.values():
            self._host_state.update(id(v) for v in st.values()
                                    if isinstance(v, torch.Tensor) and v.device.type == "cpu" and v.dim() == 0)

    def __enter__(self):
        from torch.optim.optimizer import register_optimizer_step_post_hook, register_optimizer_step_pre_hook

        # before (state of earlier steps) and after (state created by a first step) each step
        self._hooks = [register_optimizer_step_pre_hook(self._note_state),
                       register_optimizer_step_post_hook(self._note_state)]
        return super().__enter__()

    def __exit__(self, *exc: Any):
        for h in self._hooks:
            h.remove()
        self._hooks = []
        return super().__exit__(*exc)

    @property
    def total(self) -> int:
        return sum(self.by_op.values())

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        name = str(func.overloadpacket)
        on_host = not self.host_ops and all(a.device.type == "cpu" for a in args if isinstance(a, torch.Tensor))
        self.ops += not on_host
        if name == "aten._local_scalar_dense" and args and id(args[0]) in self._host_state:
            pass
        elif on_host:
            pass
        elif name in SYNC_OPS:
            self.by_op[name] += 1
        elif name in ("aten.index", "aten.index_put", "aten.index_put_") and len(args) > 1 \
                and any(_is_bool_index(i) for i in (args[1] or ())):
            self.by_op[f"{name} (boolean mask)"] += 1  # the mask's true count sizes the output
        elif name == "aten.repeat_interleave" and kwargs.get("output_size") is None \
                and (len(args) == 1 or isinstance(args[1], torch.Tensor)):  # repeats in a tensor
            self.by_op[name] += 1
        elif _device_to_host(func, args, kwargs):
            self.by_op[f"{name} (device to host)"] += 1
        return func(*args, **kwargs)
