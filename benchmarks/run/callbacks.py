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
                  "and state-dict keys) when fit sets up; compile happens lazily in the first batch of each batch "
                  "shape and mode, so compile_s = the sum over training's first batches of a shape of (that batch - "
                  "the median of the next batches of a shape seen before), plus the same for validation; wall "
                  "clock, synchronised at the end of each timed batch")
#: extra keyword arguments of torch.compile (tests set a backend here; a backend drops ``mode``)
COMPILE_KWARGS: dict[str, Any] = {}
#: batches timed per stage to measure the compile time (the first, then the steady median of the rest)
COMPILE_PROBE_BATCHES = 4
#: ``trainer.compile`` value -> torch.compile arguments. ``reduce-overhead``: the whole network one
#: graph (``fullgraph``: a graph break is the cell's one-line failure, never a silent eager part) and
#: one graph per batch shape (``dynamic=False``: CUDA graphs replay fixed shapes; length buckets keep
#: their number small)
COMPILE_MODE_KWARGS: dict[str, dict[str, Any]] = {
    "default": {},
    "reduce-overhead": {"mode": "reduce-overhead", "fullgraph": True, "dynamic": False},
}


def compile_mode(value: Any) -> str | None:
    """``trainer.compile``'s value as a mode name (``true`` is ``default``), None when off."""
    if value is True:
        return "default"
    return value if isinstance(value, str) else None


def compile_failure(model: str, reason: str | None, mode: str = "default") -> str:
    """The one-line reason of a cell whose network ``torch.compile`` could not compile (or, with
    ``reduce-overhead``, could not capture as one graph)."""
    if mode == "reduce-overhead":
        return (f"trainer.compile: reduce-overhead could not capture model {model!r} as one graph ({reason}); "
                "set trainer.compile: default (graph breaks allowed) or false for this cell")
    return (f"trainer.compile: torch.compile could not compile model {model!r} ({reason}); "
            "set trainer.compile: false for this cell")


def batch_shape(batch: Any) -> tuple:
    """The shapes of every tensor in a batch (dicts, lists, tuples walked; other leaves ignored):
    what decides whether a compiled graph is reused."""
    import torch

    if isinstance(batch, torch.Tensor):
        return tuple(batch.shape)
    if isinstance(batch, dict):
        return tuple((k, batch_shape(v)) for k, v in sorted(batch.items(), key=lambda kv: str(kv[0])))
    if isinstance(batch, (list, tuple)):
        return tuple(batch_shape(v) for v in batch)
    return ()


def compile_callback():
    """The ``trainer.compile`` callback class, defined lazily (Lightning and torch imports)."""
    import statistics

    import lightning as L
    import torch
    from torch._dynamo.utils import counters

    class CompileNetwork(L.Callback):
        """Compiles ``pl_module.net`` in place at fit's setup and times the first
        :data:`COMPILE_PROBE_BATCHES` batches of training and of validation (see
        :data:`COMPILE_METHOD`); :meth:`summary` is the record's ``cost.compile`` block.
        ``failed_compiling``: an exception came out of a stage's first batch of a shape (where
        compiling happens). ``mode``: a :data:`COMPILE_MODE_KWARGS` key; ``buckets``: the length
        buckets in use (the recompile limit must hold a graph per shape and stage)."""

        def __init__(self, mode: str = "default", buckets: int = 1) -> None:
            self.mode, self.buckets = mode, buckets
            self.shapes: dict[str, set] = {"train": set(), "val": set(), "test": set()}
            self.graphs = {"train": 0, "val": 0, "test": 0}  # graphs compiled in each stage's first batches of a shape
            self._graphs0 = self._skips0 = self._stage_graphs0 = 0
            self._limit: tuple[int, bool] | None = None
            self.first: dict[str, list[float]] = {"train": [], "val": [], "test": []}  # first batch of each shape
            self.steady: dict[str, list[float]] = {"train": [], "val": [], "test": []}  # the next few of known shapes
            self._t0 = 0.0
            self._timing: list[float] | None = None
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
                kwargs = {**COMPILE_MODE_KWARGS[self.mode], **COMPILE_KWARGS}
                if "backend" in COMPILE_KWARGS:
                    kwargs.pop("mode", None)
                torch._dynamo.reset()  # no graph of an earlier cell in this process counts against the limit
                self._limit = torch._dynamo.config.recompile_limit, torch._dynamo.config.allow_rnn
                # per code object: K training shapes, up to 2K (a short last batch per bucket) for
                # validation and for test, each with its own graph, and room to spare
                torch._dynamo.config.recompile_limit = max(self._limit[0], 5 * self.buckets + 8)
                # the RNNs run their layers through torch._VF calls (tasks/common/rnn.py), which trace
                torch._dynamo.config.allow_rnn = True
                self._graphs0 = counters["stats"]["unique_graphs"]
                self._skips0 = counters["inductor"]["cudagraph_skips"]
                net.compile(**kwargs)
                self.compiled = True

        def restore(self) -> None:
            """Put back the torch.compile settings changed at setup (after the cell: fit and test)."""
            if self._limit is not None:
                (torch._dynamo.config.recompile_limit, torch._dynamo.config.allow_rnn), self._limit = self._limit, None

        def _begin(self, trainer, stage: str, batch: Any) -> None:
            shape = batch_shape(batch)
            new = shape not in self.shapes[stage]
            self.shapes[stage].add(shape)
            if self.mode == "reduce-overhead":
                torch.compiler.cudagraph_mark_step_begin()  # a new step: earlier graph outputs are done
            self._in_first = stage if new else None
            self._stage_graphs0 = counters["stats"]["unique_graphs"]
            self._timing = (self.first[stage] if new else self.steady[stage]
                            if len(self.steady[stage]) < COMPILE_PROBE_BATCHES - 1 else None)
            if self._timing is not None:
                self._t0 = time.perf_counter()

        def _end(self, trainer, stage: str) -> None:
            if self._timing is not None:
                if trainer.strategy.root_device.type == "cuda":
                    torch.cuda.synchronize()
                self._timing.append(time.perf_counter() - self._t0)
            if self._in_first is not None:
                self.graphs[stage] += counters["stats"]["unique_graphs"] - self._stage_graphs0
            self._in_first = self._timing = None

        def on_train_batch_start(self, trainer, pl_module, batch, batch_idx) -> None:
            self._begin(trainer, "train", batch)

        def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx) -> None:
            self._end(trainer, "train")

        def on_validation_batch_start(self, trainer, pl_module, batch, batch_idx, dataloader_idx=0) -> None:
            if not trainer.sanity_checking:
                self._begin(trainer, "val", batch)

        def on_validation_batch_end(self, trainer, pl_module, outputs, batch, batch_idx, dataloader_idx=0) -> None:
            if not trainer.sanity_checking:
                self._end(trainer, "val")

        def on_test_batch_start(self, trainer, pl_module, batch, batch_idx, dataloader_idx=0) -> None:
            self._begin(trainer, "test", batch)

        def on_test_batch_end(self, trainer, pl_module, outputs, batch, batch_idx, dataloader_idx=0) -> None:
            self._end(trainer, "test")

        def on_exception(self, trainer, pl_module, exception: BaseException) -> None:
            self.failed_compiling = self._in_first is not None
            inner = getattr(exception, "inner_exception", None) or exception  # a backend's own error
            lines = [ln for ln in str(inner).strip().splitlines() if ln.strip()]
            self.error = f"{type(inner).__name__}: {lines[0][:300] if lines else repr(inner)}"

        def summary(self) -> dict[str, Any]:
            """``{"method", "mode", "compile_s", "shapes": {train, val}, "graphs", "cudagraph_skips",
            "train": {first_batch_s, steady_batch_s, compile_s, new_shapes}, "val": ..., "test": ...}``
            (``compile_s``: training's and validation's, the fit's part; a stage
            without repeated shapes: its compile_s is its first batches whole, ``steady_batch_s`` None).
            ``graphs``: forward graphs torch.compile made (each with its backward in training), per
            stage and in all (``total``: fit and test)."""
            out: dict[str, Any] = {"method": COMPILE_METHOD, "mode": self.mode, "compile_s": 0.0,
                                   "shapes": {k: len(v) for k, v in self.shapes.items()},
                                   "graphs": {**self.graphs, "total": counters["stats"]["unique_graphs"] - self._graphs0},
                                   "cudagraph_skips": counters["inductor"]["cudagraph_skips"] - self._skips0}
            for stage, firsts in self.first.items():
                if not firsts:
                    continue
                steady = statistics.median(self.steady[stage]) if self.steady[stage] else None
                c = sum(max(t - (steady or 0.0), 0.0) for t in firsts)
                out[stage] = {"first_batch_s": round(firsts[0], 4), "steady_batch_s": None if steady is None
                              else round(steady, 4), "compile_s": round(c, 4), "new_shapes": len(firsts)}
                out["compile_s"] += c if stage != "test" else 0.0  # what the fit's time holds
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


