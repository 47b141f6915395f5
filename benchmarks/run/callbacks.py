"""Lightning callbacks of a cell: the learning curve, the NaN guard, train/test compute time
without a host synchronisation per batch, and progress lines; ``trainer.compile`` (the network
compiled in place, its compile time measured apart); extra callbacks a caller attaches to the
cells run in this process (:func:`attach_callbacks`: ``attnbench profile``, ``bench train``);
plus a context that keeps Lightning's banners out of the progress output."""

from __future__ import annotations

import contextlib
import logging
import time
import warnings
from typing import Any


class CellFailure(RuntimeError):
    """A cell could not finish (NaN loss, no validation metric, ...): recorded as failed."""


#: Callbacks attached to every cell this process trains while :func:`attach_callbacks` is open.
_EXTRA: list[Any] = []


@contextlib.contextmanager
def attach_callbacks(*callbacks: Any):
    """Attach ``callbacks`` (Lightning callbacks) to the trainer of every cell run in this process
    inside the ``with``: the runner builds its own callback list, and the cell's monitor adds
    these to it when fit starts (its ``setup``), so the real cell path is observed, not a copy."""
    _EXTRA.extend(callbacks)
    try:
        yield
    finally:
        for cb in callbacks:
            _EXTRA.remove(cb)



def callbacks_module():
    """Lightning callbacks, defined lazily so importing the runner stays cheap."""
    import lightning as L
    import torch

    class CellMonitor(L.Callback):
        """Learning curve, NaN guard, pure train/test compute time, and progress lines.

        No host synchronisation per batch: on CUDA each batch is timed by a pair of CUDA events
        (summed after one synchronisation per epoch), on CPU by the wall clock; the loss is
        checked for NaN/inf on the device and read once per epoch (a non-finite loss fails the
        cell at the end of the epoch it appeared in)."""

        def __init__(self, metric: str, mode: str, label: str, log, every_s: float) -> None:
            self.metric, self.mode, self.label, self.emit, self.every_s = metric, mode, label, log, every_s
            self.curve: list[dict[str, Any]] = []
            self.train_time = 0.0
            self.test_time = 0.0
            self._t0 = 0.0
            self._fit_start = 0.0
            self._last_print = 0.0
            self._events: dict[str, list] = {"train": [], "test": []}
            self._bad_loss = None  # device bool: a non-finite loss was seen this epoch
            self._first_bad: tuple[int, int] | None = None
            self.best: float | None = None
            self.best_epoch: int | None = None

        @staticmethod
        def _cuda(trainer) -> bool:
            return trainer.strategy.root_device.type == "cuda"

        def _start(self, trainer, stage: str) -> None:
            if self._cuda(trainer):
                ev = torch.cuda.Event(enable_timing=True)
                ev.record()
                self._events[stage].append([ev, None])
            else:
                self._t0 = time.perf_counter()

        def _stop(self, trainer, stage: str) -> None:
            if self._cuda(trainer):
                ev = torch.cuda.Event(enable_timing=True)
                ev.record()
                self._events[stage][-1][1] = ev
            else:
                dt = time.perf_counter() - self._t0
                if stage == "train":
                    self.train_time += dt
                else:
                    self.test_time += dt

        def _collect(self, stage: str) -> None:
            """Sum the CUDA event pairs of ``stage`` (one synchronisation)."""
            pairs = [p for p in self._events[stage] if p[1] is not None]
            if not pairs:
                return
            pairs[-1][1].synchronize()
            total = sum(a.elapsed_time(b) for a, b in pairs) / 1000.0
            if stage == "train":
                self.train_time += total
            else:
                self.test_time += total
            self._events[stage] = []

        def setup(self, trainer, pl_module, stage: str) -> None:
            # Lightning calls the callbacks' setup over trainer.callbacks, so the ones added here
            # have their own setup called in the same pass (before the model moves to its device)
            trainer.callbacks.extend(cb for cb in _EXTRA if cb not in trainer.callbacks)

        def on_fit_start(self, trainer, pl_module) -> None:
            self._fit_start = self._last_print = time.perf_counter()

        def on_fit_end(self, trainer, pl_module) -> None:
            self._collect("train")  # a time cap can end fit inside an epoch

        def on_train_batch_start(self, trainer, pl_module, batch, batch_idx) -> None:
            self._start(trainer, "train")

        def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx) -> None:
            self._stop(trainer, "train")
            loss = outputs["loss"] if isinstance(outputs, dict) else outputs
            if loss is None:
                return
            # kept on the device and read once per epoch (CPU too): no host sync per step
            bad = ~torch.isfinite(loss.detach()).all()
            self._bad_loss = bad if self._bad_loss is None else (self._bad_loss | bad)

        def on_train_epoch_end(self, trainer, pl_module) -> None:
            self._collect("train")
            if self._bad_loss is not None and bool(self._bad_loss):
                raise CellFailure(f"non-finite training loss during epoch {trainer.current_epoch}")
            self._bad_loss = None

        def on_test_batch_start(self, trainer, pl_module, batch, batch_idx, dataloader_idx=0) -> None:
            self._start(trainer, "test")

        def on_test_batch_end(self, trainer, pl_module, outputs, batch, batch_idx, dataloader_idx=0) -> None:
            self._stop(trainer, "test")

        def on_test_epoch_end(self, trainer, pl_module) -> None:
            self._collect("test")

        def on_validation_end(self, trainer, pl_module) -> None:
            # on_validation_end, not on_validation_epoch_end: callbacks' epoch-end hooks run
            # before the module's, so a corpus metric (BLEU, ...) logged there would be missed.
            if trainer.sanity_checking:
                return
            m = trainer.callback_metrics

            def get(key):
                v = m.get(key)
                return None if v is None else float(v)

            val = get(f"val/{self.metric}")
            # this epoch's training loss: the module's own epoch mean where it keeps one (one
            # process); callback_metrics holds a training epoch's values only after validation
            mine = getattr(pl_module, "epoch_means", {}).get("train", {}).get("loss")
            train_loss = float(mine) if mine is not None else get("train/loss")
            if val is not None and (
                self.best is None or (val > self.best if self.mode == "max" else val < self.best)
            ):
                self.best, self.best_epoch = val, trainer.current_epoch
            self.curve.append(
                {
                    "epoch": trainer.current_epoch,
                    "train_loss": train_loss,
                    "val_loss": get("val/loss"),
                    "val_metric": val,
                    "time_s": round(time.perf_counter() - self._fit_start, 3),
                }
            )
            now = time.perf_counter()
            if now - self._last_print >= self.every_s:
                self._last_print = now
                best = "n/a" if self.best is None else f"{self.best:.4f}@{self.best_epoch}"
                cur = "n/a" if val is None else f"{val:.4f}"
                self.emit(
                    f"    {self.label}: epoch {trainer.current_epoch + 1}/{trainer.max_epochs} "
                    f"val/{self.metric}={cur} best={best} ({now - self._fit_start:.0f}s)"
                )

    return CellMonitor


#: ``trainer.compile``: how the compile time is measured (stored in the record with the numbers).
COMPILE_METHOD = ("torch.compile of the task module's network in place (nn.Module.compile: the same parameters "
                  "and state-dict keys) when fit sets up; compile happens lazily in the first batch of each mode, so "
                  "compile_s = (first train batch - median of the next train batches) + (the same for validation); "
                  "wall clock, synchronised at the end of each of those first batches")
#: extra keyword arguments of torch.compile (tests set a backend here)
COMPILE_KWARGS: dict[str, Any] = {}
#: batches timed per stage to measure the compile time (the first, then the steady median of the rest)
COMPILE_PROBE_BATCHES = 4


def compile_failure(model: str, reason: str | None) -> str:
    """The one-line reason of a cell whose network ``torch.compile`` could not compile."""
    return (f"trainer.compile: torch.compile could not compile model {model!r} ({reason}); "
            "set trainer.compile: false for this cell")


def compile_callback():
    """The ``trainer.compile`` callback class, defined lazily (Lightning and torch imports)."""
    import statistics

    import lightning as L
    import torch

    class CompileNetwork(L.Callback):
        """Compiles ``pl_module.net`` in place at fit's setup and times the first
        :data:`COMPILE_PROBE_BATCHES` batches of training and of validation (see
        :data:`COMPILE_METHOD`); :meth:`summary` is the record's ``cost.compile`` block.
        ``failed_compiling``: an exception came out of a stage's first batch (where compiling happens)."""

        def __init__(self) -> None:
            self.times: dict[str, list[float]] = {"train": [], "val": []}
            self._t0 = 0.0
            self._in_first: str | None = None
            self.failed_compiling = False
            self.error: str | None = None  # the compile error, one line
            self.compiled = False

        def setup(self, trainer, pl_module, stage: str) -> None:
            if stage == "fit" and not self.compiled:
                net = getattr(pl_module, "net", None)
                if not isinstance(net, torch.nn.Module):
                    raise CellFailure(f"trainer.compile: the task module {type(pl_module).__name__} has no network "
                                      "in .net to compile")
                net.compile(**COMPILE_KWARGS)
                self.compiled = True

        def _begin(self, trainer, stage: str) -> None:
            if len(self.times[stage]) < COMPILE_PROBE_BATCHES:
                self._in_first = stage if not self.times[stage] else None
                self._t0 = time.perf_counter()

        def _end(self, trainer, stage: str) -> None:
            if len(self.times[stage]) < COMPILE_PROBE_BATCHES:
                if trainer.strategy.root_device.type == "cuda":
                    torch.cuda.synchronize()
                self.times[stage].append(time.perf_counter() - self._t0)
                self._in_first = None

        def on_train_batch_start(self, trainer, pl_module, batch, batch_idx) -> None:
            self._begin(trainer, "train")

        def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx) -> None:
            self._end(trainer, "train")

        def on_validation_batch_start(self, trainer, pl_module, batch, batch_idx, dataloader_idx=0) -> None:
            if not trainer.sanity_checking:
                self._begin(trainer, "val")

        def on_validation_batch_end(self, trainer, pl_module, outputs, batch, batch_idx, dataloader_idx=0) -> None:
            if not trainer.sanity_checking:
                self._end(trainer, "val")

        def on_exception(self, trainer, pl_module, exception: BaseException) -> None:
            self.failed_compiling = self._in_first is not None
            inner = getattr(exception, "inner_exception", None) or exception  # a backend's own error
            lines = [ln for ln in str(inner).strip().splitlines() if ln.strip()]
            self.error = f"{type(inner).__name__}: {lines[0][:300] if lines else repr(inner)}"

        def summary(self) -> dict[str, Any]:
            """``{"method", "compile_s", "train": {first_batch_s, steady_batch_s, compile_s}, "val": ...}``
            (a stage with one batch only: its compile_s is the whole first batch, ``steady_batch_s`` None)."""
            out: dict[str, Any] = {"method": COMPILE_METHOD, "compile_s": 0.0}
            for stage, ts in self.times.items():
                if not ts:
                    continue
                steady = statistics.median(ts[1:]) if len(ts) > 1 else None
                c = max(ts[0] - (steady or 0.0), 0.0)
                out[stage] = {"first_batch_s": round(ts[0], 4), "steady_batch_s": None if steady is None
                              else round(steady, 4), "compile_s": round(c, 4)}
                out["compile_s"] += c
            out["compile_s"] = round(out["compile_s"], 4)
            return out

    return CompileNetwork


def null_profiler():
    """The trainer's profiler: Lightning's default (``PassThroughProfiler``) opens a generator
    context manager around every hook call of every callback and of the module (~50 a training
    step here: ``_call_callback_hooks``), each a few Python frames for nothing; this one hands
    out one shared ``nullcontext``. Part of the per-step host cost ``attnbench bench train``
    measures against a bare loop (Python calls per step: tests/benchmarks/run/test_callbacks.py)."""
    from lightning.pytorch.profilers import PassThroughProfiler

    class NullProfiler(PassThroughProfiler):
        _NULL = contextlib.nullcontext()

        def profile(self, action_name: str):  # noqa: ARG002 - the name is not needed
            return self._NULL

    return NullProfiler()


@contextlib.contextmanager
def quiet_lightning():
    """Lightning's info banners and data-loader advice would bury the progress lines."""
    names = ("lightning", "lightning.pytorch", "lightning.fabric", "pytorch_lightning", "lightning_fabric")
    loggers = [logging.getLogger(n) for n in names]
    levels = [lg.level for lg in loggers]
    for lg in loggers:
        lg.setLevel(logging.WARNING)
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=".*does not have many workers.*")
        warnings.filterwarnings("ignore", message=".*Checkpoint directory .* exists and is not empty.*")
        warnings.filterwarnings("ignore", message=".*number of training batches.*smaller than the logging interval.*")
        warnings.filterwarnings("ignore", message=".*`isinstance\\(treespec, LeafSpec\\)` is deprecated.*")
        warnings.filterwarnings("ignore", message=".*GPU available but not used.*")
        warnings.filterwarnings("ignore", message=".*tensorboardX.*")
        warnings.filterwarnings("ignore", message=r".*`torch\.jit\.script` is deprecated.*")  # torch_geometric's import
        # a machine with Slurm's tools installed: the advice is for jobs meant to run under srun
        warnings.filterwarnings("ignore", message=".*The `srun` command is available on your system.*")
        try:
            yield
        finally:
            for lg, lvl in zip(loggers, levels):
                lg.setLevel(lvl)


