"""Counting host-device synchronisations on the CPU.

A CUDA step that reads a tensor's value on the host (``.item()``, ``int(t)``, ``bool(t)``, a
Python ``if`` on a tensor), sizes an output by its values (``nonzero``, boolean-mask indexing,
``unique``, ``repeat_interleave`` with tensor repeats) or copies to the host (``.cpu()``,
``.tolist()``) waits for the GPU. :class:`SyncCounter` sees those ops on any device, so a CPU
test can require a step to have none: a ``TorchDispatchMode`` records the aten ops that force a
sync on CUDA, and the Python methods that copy to the host (invisible to the dispatcher on a CPU
tensor) are wrapped while it is active. Each record names *where* it came from: the innermost
stack frame of this repository (``file:line``), and for an op run by backward, the autograd node
and (with anomaly mode on, as :func:`count_syncs` sets) the forward line that made it.
"""

from __future__ import annotations

import contextlib
import functools
import sys
import traceback
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterator

import torch
from torch.utils._python_dispatch import TorchDispatchMode

__all__ = ["SyncCounter", "Sync", "count_syncs", "syncing_op"]

REPO = Path(__file__).resolve().parents[2]
_HERE = Path(__file__).resolve()
_aten = torch.ops.aten

#: ops that read device values on the host whatever their arguments
_ALWAYS = {
    _aten._local_scalar_dense.default: "item/int/float/bool of a tensor",
    _aten.nonzero.default: "nonzero",
    _aten.nonzero_static.default: None,  # sized by the caller: no sync
    _aten.masked_select.default: "masked_select",
    _aten.unique_consecutive.default: "unique_consecutive",
    _aten._unique.default: "unique",
    _aten._unique2.default: "unique",
    _aten.unique_dim.default: "unique",
    _aten.is_nonzero.default: "bool of a tensor",
}
_ALWAYS = {k: v for k, v in _ALWAYS.items() if v is not None}

#: ops that sync when an index is boolean (its True count sizes the output)
_BOOL_INDEX = {_aten.index.Tensor, _aten.index_put_.default, _aten.index_put.default,
               _aten._index_put_impl_.default}


def _is_cpu(device: Any) -> bool:
    return device is not None and torch.device(device).type == "cpu"


def syncing_op(func: Any, args: tuple, kwargs: dict) -> str | None:
    """Why aten op ``func`` called with ``args``/``kwargs`` forces a host-device sync on CUDA,
    or ``None`` when it does not."""
    if func in _ALWAYS:
        return _ALWAYS[func]
    if func in _BOOL_INDEX:
        indices = args[1] if len(args) > 1 else kwargs.get("indices", ())
        if any(isinstance(i, torch.Tensor) and i.dtype in (torch.bool, torch.uint8) for i in indices or ()):
            return f"{func.overloadpacket.__name__} with a boolean index"
        return None
    if func is _aten.repeat_interleave.Tensor and kwargs.get("output_size", args[2] if len(args) > 2 else None) is None:
        return "repeat_interleave with tensor repeats and no output_size"
    if func is _aten.repeat_interleave.self_Tensor and \
            kwargs.get("output_size", args[3] if len(args) > 3 else None) is None:
        return "repeat_interleave with tensor repeats and no output_size"
    if func is _aten._to_copy.default:
        src = args[0]
        if isinstance(src, torch.Tensor) and src.device.type != "cpu" and _is_cpu(kwargs.get("device")):
            return "copy to the host"
    if func is _aten.copy_.default:
        dst, src = args[0], args[1]
        if isinstance(src, torch.Tensor) and src.device.type != "cpu" and dst.device.type == "cpu":
            return "copy to the host"
    return None


@dataclass(frozen=True)
class Sync:
    """One op that would synchronise: what it is and where it came from."""

    what: str
    where: str

    def __str__(self) -> str:
        return f"{self.what} at {self.where}"


def _where() -> str:
    """The innermost frame of this repository outside this file (``path:line in function``), plus
    the autograd node and its forward line when backward runs the op."""
    place = "?"
    for frame in reversed(traceback.extract_stack()):
        path = Path(frame.filename)
        if path.resolve() == _HERE or REPO not in path.resolve().parents or ".venv" in path.parts:
            continue
        place = f"{path.resolve().relative_to(REPO)}:{frame.lineno} in {frame.name}"
        break
    node = torch._C._current_autograd_node()
    if node is None:
        return place
    fwd = ""
    trace = node.metadata.get("traceback_") if hasattr(node, "metadata") else None
    if trace:
        lines = [ln for ln in "".join(trace).splitlines() if ln.strip().startswith("File ")]
        ours = [ln for ln in lines if str(REPO) in ln and ".venv" not in ln and str(_HERE) not in ln]
        if ours:
            fwd = " from " + ours[-1].strip().replace(str(REPO) + "/", "")
    return f"backward of {node.name()}{fwd} (called at {place})"


#: Tensor methods that copy to the host; on a CPU tensor they reach no aten op, so they are
#: wrapped while a :class:`SyncCounter` is active (``item`` goes through ``_local_scalar_dense``)
_HOST_METHODS = ("tolist", "cpu", "numpy")


class SyncCounter(TorchDispatchMode):
    """Records every op that would force a host-device sync on CUDA (see :func:`syncing_op`)
    while active, in :attr:`syncs`; ``.tolist()``, ``.cpu()``, ``.numpy()`` and ``.to("cpu")``
    calls too (on a CPU tensor too: they copy to the host on a GPU)."""

    def __init__(self) -> None:
        super().__init__()
        self.syncs: list[Sync] = []
        self._saved: dict[str, Callable] = {}

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        why = syncing_op(func, args, kwargs)
        if why is not None:
            self.syncs.append(Sync(why, _where()))
        return func(*args, **kwargs)

    def _wrap(self, name: str, fn: Callable) -> Callable:
        counter = self

        @functools.wraps(fn)
        def wrapper(t, *args, **kwargs):
            # only a call from this repository's code: a library moving a tensor to the device
            # it runs on (the CPU here, Lightning's logging) is no host copy on a GPU
            caller = Path(sys._getframe(1).f_code.co_filename).resolve()
            ours = REPO in caller.parents and ".venv" not in caller.parts and caller != _HERE
            to_cpu = name != "to" or any(_is_cpu(a) for a in args if isinstance(a, (str, torch.device))) \
                or _is_cpu(kwargs.get("device"))
            if ours and to_cpu:
                counter.syncs.append(Sync(f"Tensor.{name}() (a host copy on a GPU)", _where()))
            return fn(t, *args, **kwargs)

        return wrapper

    def __enter__(self):
        for name in (*_HOST_METHODS, "to"):
            self._saved[name] = getattr(torch.Tensor, name)
            setattr(torch.Tensor, name, self._wrap(name, self._saved[name]))
        return super().__enter__()

    def __exit__(self, *exc):
        try:
            return super().__exit__(*exc)
        finally:
            for name, fn in self._saved.items():
                setattr(torch.Tensor, name, fn)
            self._saved.clear()

    def summary(self) -> str:
        """One line per distinct sync, with how often it happened."""
        return "\n".join(f"  {n} x {s}" for s, n in Counter(self.syncs).items())


@contextlib.contextmanager
def count_syncs(locate_backward: bool = True) -> Iterator[SyncCounter]:
    """``with count_syncs() as c: ...`` records the syncs of the block in ``c.syncs``;
    ``locate_backward``: with anomaly mode on (slow: it records every forward stack), so that a
    sync in backward names its forward line, not only its autograd node."""
    counter = SyncCounter()
    with torch.autograd.set_detect_anomaly(locate_backward, check_nan=False), counter:
        yield counter

