"""Observe the real cell path: :class:`StepProbe`, a Lightning callback attached to a cell's own
trainer (:func:`benchmarks.run.worker.train_cell` with ``callbacks=``), splits the training
batches into phases, in this order:

* ``warmup``: not measured (allocator, caches, lazy compile); with a ``target_s``, each warm-up
  step's duration sets how many steps the timed phase gets (:func:`fitted_steps`);
* ``timed``: wall time of the steps (contiguous runs within an epoch, synchronised at both ends
  on CUDA; a run ends at the epoch's last batch, so validation is never timed, and the next
  run starts at a batch start, so the data loading before it is left out, a bias of at most
  one batch load per epoch in the cell's favour); ``steps_per_s`` = steps / their time;
* ``syncs``: host-device synchronisations counted (:class:`~.syncs.SyncCounter`) from a
  batch's start (loaded and on the device) to its end: the training step, the module's and
  the callbacks' batch hooks; not the data loading (on the host: a data set's per-sample
  ``int(label)`` is no device sync); on CUDA only ops on device tensors count;
* ``profile``: ``torch.profiler`` (CPU, and CUDA where there is one), paused outside the
  training steps as above; gives the top ops, a Chrome trace and the GPU busy fraction
  (measured inside :data:`WINDOW` ranges around the steps: :func:`busy_fraction`).

It keeps the cell's task module and data module (``module``, ``datamodule``) and the batches
of the timed steps as the trainer handed them over (on the device; ``batches``), so that the
bare loop (:mod:`.bare`) can run the same network over the same batches without Lightning.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import statistics
import sys
import time
from typing import Any

import lightning as L
import torch

from benchmarks.micro.train.syncs import SyncCounter

__all__ = ["StepProbe", "fitted_steps", "probed_cell", "busy_fraction", "covered", "profiled_window", "top_ops",
           "WINDOW"]

PHASES = ("warmup", "timed", "syncs", "profile")


@contextlib.contextmanager
def _native_stderr_muted():
    """Silence file descriptor 2 inside the ``with``: on a CUDA build of torch without a GPU the
    profiler's native code logs at every start/stop (``profiler_start``, ``gpuGetDeviceCount failed``)
    and pause/resume ("Toggling CPU activity with GPU activity on ..."; one per step where an epoch
    is one batch: graphs); Python's ``warnings`` cannot catch them."""
    sys.stderr.flush()
    saved = os.dup(2)
    try:
        with open(os.devnull, "w") as null:
            os.dup2(null.fileno(), 2)
        yield
    finally:
        os.dup2(saved, 2)
        os.close(saved)


def _toggle(prof: Any, on: bool) -> None:
    """Resume (``on``) or pause ``prof``'s collection, without its native warning."""
    with _native_stderr_muted():
        prof.toggle_collection_dynamic(on, prof.activities)


#: The profiler range around each profiled run of training steps (entered and left with the
#: device synchronised): what :func:`busy_fraction` measures the GPU's busy time against.
WINDOW = "attnbench::profiled_steps"


def _union(spans: list[tuple[float, float]]) -> list[tuple[float, float]]:
    """``spans`` merged into disjoint, sorted intervals."""
    out: list[list[float]] = []
    for a, b in sorted(spans):
        if out and a <= out[-1][1]:
            out[-1][1] = max(out[-1][1], b)
        else:
            out.append([a, b])
    return [(a, b) for a, b in out]


def covered(spans: list[tuple[float, float]], windows: list[tuple[float, float]]) -> float:
    """Length of the union of ``spans`` inside the union of ``windows``: each moment counts once,
    however many events cover it (a kernel recorded twice, or by two streams) and nothing outside
    the windows counts (work between them: validation, epoch ends)."""
    total, w = 0.0, _union(windows)
    for a, b in _union(spans):
        for lo, hi in w:
            total += max(0.0, min(b, hi) - max(a, lo))
    return total


def busy_fraction(prof: Any) -> float | None:
    """Share of the profiled steps' time (the :data:`WINDOW` ranges) in which the GPU ran a kernel
    or a copy: the union of the profiler's CUDA events inside the windows over the windows' total
    time. ``None`` without windows or without CUDA activity (a CPU run). A ``record_function``
    range also has a CUDA event (Kineto's ``gpu_user_annotation``, from its first kernel to its
    last): that is no GPU work and is left out; counted, it made every loop read ~0.95 busy (H100,
    2026-11-27, call 1 of the third session).

    Summing the events' self times instead (the profiler table's "Self CUDA time total") counted
    whatever the profiler recorded while paused between the windows: on an H100 (2026-11-27) the
    cell side read 0.64-0.89 busy where the bare loop over the same batches read 0.09-0.11."""
    from torch.autograd import DeviceType

    events = prof.events()
    windows = [(e.time_range.start, e.time_range.end) for e in events
               if e.name == WINDOW and e.device_type == DeviceType.CPU]
    kernels = [(e.time_range.start, e.time_range.end) for e in events
               if e.device_type == DeviceType.CUDA and not getattr(e, "is_user_annotation", False)]
    wall = sum(b - a for a, b in _union(windows))
    if not wall or not kernels:
        return None
    return covered(kernels, windows) / wall


@contextlib.contextmanager
def profiled_window(sync: Any):
    """The :data:`WINDOW` range around a run of profiled steps, with ``sync()`` at both ends so that
    every kernel the steps launch runs inside it."""
    sync()
    with torch.profiler.record_function(WINDOW):
        yield
        sync()


def top_ops(prof: Any, *, cuda: bool, rows: int = 15) -> dict[str, str]:
    """The profiler's tables of the ops with the most self time: ``cpu`` (and ``cuda``)."""
    ka = prof.key_averages()
    out = {"cpu": ka.table(sort_by="self_cpu_time_total", row_limit=rows)}
    if cuda:
        out["cuda"] = ka.table(sort_by="self_device_time_total", row_limit=rows)
    return out


def fitted_steps(durations: list[float], *, target_s: float, lo: int, hi: int) -> int:
    """Timed steps that fit ``target_s`` at the median of the warm-up ``durations`` (the first left
    out where there are more: allocator, caches, lazy compile), between ``lo`` and ``hi``."""
    if not durations:
        return hi
    t = statistics.median(durations[1:] if len(durations) > 1 else durations)
    n = int(target_s / t) if t > 0 else hi
    return min(hi, max(lo, n))  # never above hi, even where lo > hi


class StepProbe(L.Callback):
    """Phases of ``warmup``, ``steps``, ``sync_steps`` and ``profile_steps`` training batches
    (see the module docstring); :meth:`summary` is the measurement. With ``target_s``, the
    timed phase is cut to the steps that take about ``target_s`` at the warm-up steps' pace
    (:func:`fitted_steps`, at least ``min_steps``), decided when the warm-up ends."""

    def __init__(self, *, warmup: int, steps: int, sync_steps: int, profile_steps: int = 0,
                 target_s: float | None = None, min_steps: int = 1) -> None:
        self.plan = [("warmup", warmup), ("timed", steps), ("syncs", sync_steps), ("profile", profile_steps)]
        self.total = warmup + steps + sync_steps + profile_steps
        self.target_s, self.min_steps = target_s, min_steps
        self._warm: list[float] = []  # durations of the warm-up steps (with target_s only)
        self._wt0: float | None = None
        self.i = 0  # training batches seen
        self.segments: list[tuple[int, float]] = []  # (steps, seconds) of each timed run
        self._seg: list[float] | None = None  # [t0, steps] of the open run
        self.syncs = SyncCounter()
        self.sync_steps = 0
        self._counting = False
        self.prof: Any = None
        self._prof_running = False
        self.prof_steps = 0
        self.prof_wall_s = 0.0
        self._pt0: float | None = None
        self._window: Any = None  # the open profiled_window
        self.cuda = False
        self.module: Any = None
        self.datamodule: Any = None
        self.batches: list = []

    def phase(self, i: int) -> str | None:
        for name, n in self.plan:
            if i < n:
                return name
            i -= n
        return None

    def _sync(self) -> None:
        if self.cuda:
            torch.cuda.synchronize()

    # -- Lightning hooks -------------------------------------------------------------
    def setup(self, trainer, pl_module, stage: str) -> None:
        if stage == "fit":
            self.module, self.datamodule = pl_module, trainer.datamodule

    def on_fit_start(self, trainer, pl_module) -> None:
        self.cuda = trainer.strategy.root_device.type == "cuda"

    @property
    def steps(self) -> int:
        """The timed steps planned (after a ``target_s`` fit: the fitted count)."""
        return self.plan[1][1]

    def _fit(self) -> None:
        """End of the warm-up: cut the timed phase to ``target_s`` (the plan and the total)."""
        n = fitted_steps(self._warm, target_s=self.target_s, lo=self.min_steps, hi=self.steps)
        self.total -= self.steps - n
        self.plan[1] = ("timed", n)
        self.target_s = None  # decided once

    def on_train_batch_start(self, trainer, pl_module, batch, batch_idx) -> None:
        ph = self.phase(self.i)
        if ph == "warmup" and self.target_s is not None:
            self._sync()
            self._wt0 = time.perf_counter()
        if ph == "timed":
            self.batches.append(batch)
        if ph == "timed" and self._seg is None:
            self._sync()
            self._seg = [time.perf_counter(), 0]
        elif ph == "syncs" and not self._counting:
            self.syncs.host_ops = not self.cuda
            self.syncs.__enter__()
            self._counting = True
        elif ph == "profile":
            self._sync()
            if self.prof is None:
                acts = [torch.profiler.ProfilerActivity.CPU] + ([torch.profiler.ProfilerActivity.CUDA] if self.cuda else [])
                self.prof = torch.profiler.profile(activities=acts)
                with _native_stderr_muted():
                    self.prof.start()
                self._prof_running = True
            elif self._pt0 is None:
                _toggle(self.prof, True)
            if self._pt0 is None:
                self._window = profiled_window(self._sync)
                self._window.__enter__()
                self._pt0 = time.perf_counter()

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx) -> None:
        ph = self.phase(self.i)
        if ph == "warmup" and self._wt0 is not None:
            self._sync()
            self._warm.append(time.perf_counter() - self._wt0)
            self._wt0 = None
        self.i += 1
        if ph == "warmup" and self.target_s is not None and self.phase(self.i) != "warmup":
            self._fit()
        nxt = self.phase(self.i)
        last = batch_idx + 1 >= trainer.num_training_batches  # validation may come next: close the runs
        if ph == "timed" and self._seg is not None:
            self._seg[1] += 1
            if last or nxt != "timed":
                self._close_segment()
        elif ph == "syncs":
            self.sync_steps += 1
            self._stop_counting()
        elif ph == "profile":
            self.prof_steps += 1
            if last or nxt != "profile":
                self._pause_profile(final=nxt != "profile")
        if self.i >= self.total:
            trainer.should_stop = True

    def on_train_epoch_end(self, trainer, pl_module) -> None:
        self._close_all()

    def on_fit_end(self, trainer, pl_module) -> None:
        self._close_all()
        if self._prof_running:  # training ended inside the profiled steps, between two epochs
            with _native_stderr_muted():
                self.prof.stop()
            self._prof_running = False

    def on_exception(self, trainer, pl_module, exception: BaseException) -> None:
        self._close_all()

    # -- closing ---------------------------------------------------------------------
    def _close_segment(self) -> None:
        self._sync()
        t0, n = self._seg
        self.segments.append((int(n), time.perf_counter() - t0))
        self._seg = None

    def _stop_counting(self) -> None:
        if self._counting:
            self.syncs.__exit__(None, None, None)
            self._counting = False

    def _pause_profile(self, *, final: bool) -> None:
        if self.prof is None or self._pt0 is None:
            return
        self._window.__exit__(None, None, None)  # synchronises, then closes the range
        self.prof_wall_s += time.perf_counter() - self._pt0
        self._pt0 = self._window = None
        if final:
            with _native_stderr_muted():
                self.prof.stop()
            self._prof_running = False
        else:
            _toggle(self.prof, False)

    def _close_all(self) -> None:
        if self._seg is not None:
            self._close_segment()
        self._stop_counting()
        if self._pt0 is not None:
            self._pause_profile(final=True)

    # -- result ----------------------------------------------------------------------
    def summary(self) -> dict[str, Any]:
        """``steps``, ``time_s``, ``steps_per_s``, ``segments``, ``sync_steps``, ``syncs_per_step``,
        ``syncs_by_op``, ``ops_per_step`` (aten ops dispatched in the counted steps, hooks
        included) and, after a profile on CUDA, ``gpu_busy_fraction``."""
        steps = sum(n for n, _ in self.segments)
        secs = sum(t for _, t in self.segments)
        out: dict[str, Any] = {
            "steps": steps, "time_s": secs, "steps_per_s": steps / secs if secs else None,
            "segments": [[n, round(t, 6)] for n, t in self.segments],
            "sync_steps": self.sync_steps,
            "syncs_per_step": self.syncs.total / self.sync_steps if self.sync_steps else None,
            "syncs_by_op": dict(self.syncs.by_op),
            "ops_per_step": self.syncs.ops / self.sync_steps if self.sync_steps else None,
        }
        if self.prof is not None:
            out["profile_steps"], out["profile_wall_s"] = self.prof_steps, self.prof_wall_s
            out["gpu_busy_fraction"] = busy_fraction(self.prof) if self.cuda else None
        return out


def probed_cell(cell: Any, suite: str, opts: Any, probe: StepProbe) -> dict[str, Any]:
    """Run ``cell`` through the worker's real path (:func:`benchmarks.run.worker.train_cell`:
    the runner's Trainer, task module and callbacks, ``trainer.compile`` included) with ``probe``
    attached, for ``probe.total`` training steps at most (no early stop, no time budget), then no
    test (``RunOptions.fit_only``: the probe measures training steps only); returns the cell's
    record (its status says whether training went through)."""
    from benchmarks.run.worker import train_cell

    t = dict(cell.config["trainer"])
    t.update(max_steps=probe.total, max_epochs=max(probe.total, 1), min_epochs=0, early_stopping_patience=None,
             max_time_s=None)
    short = dataclasses.replace(cell, config={**cell.config, "trainer": t})
    return train_cell(short, suite, dataclasses.replace(opts, fit_only=True), callbacks=(probe,))
