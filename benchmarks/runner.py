"""Run a suite: each cell trains with ``lightning.Trainer``, keeps the best-on-validation
checkpoint, tests that checkpoint, is measured, and becomes one JSON record written
atomically. Finished cells are skipped on re-run, a failing cell (exception, NaN, out of
memory) is recorded as ``failed`` and the matrix goes on.

Several runs may share one output folder (two terminals, two GPUs): a run claims a cell
(:mod:`benchmarks.claims`) before training it and skips cells another live run holds; each run
keeps its checkpoints in a folder of its own; and a ``failed`` record never replaces an ``ok``
one that another run wrote meanwhile."""

from __future__ import annotations

import contextlib
import gc
import logging
import math
import os
import shutil
import time
import traceback
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from benchmarks import claims as C
from benchmarks import records as R
from benchmarks.measure import PeakMemory, is_oom_error
from benchmarks.suite import Cell, expand

DEFAULT_CACHE = Path(os.environ.get("ATTNBENCH_CACHE", Path.home() / ".cache" / "attnbench"))


class CellFailure(RuntimeError):
    """A cell could not finish (NaN loss, no validation metric, ...): recorded as failed."""


@dataclass
class RunOptions:
    out: Path
    data_dir: Path | None = None
    cache_dir: Path = DEFAULT_CACHE
    force: bool = False
    retry_failed: bool = False
    accelerator: str | None = None
    devices: Any = None
    keep_checkpoints: bool = False
    progress_every_s: float = 10.0
    log: Any = print


@dataclass
class RunSummary:
    ran: int = 0
    skipped: int = 0
    failed: list[str] = field(default_factory=list)
    records: list[Path] = field(default_factory=list)
    elsewhere: int = 0  # cells another live run was training: left to it


# ----------------------------------------------------------------------------- callbacks
def _callbacks_module():
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
            bad = ~torch.isfinite(loss.detach()).all()
            if self._cuda(trainer):
                self._bad_loss = bad if self._bad_loss is None else (self._bad_loss | bad)
            elif bool(bad):
                raise CellFailure(f"non-finite training loss ({loss.item()}) at epoch {trainer.current_epoch}, batch {batch_idx}")

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
            if val is not None and (
                self.best is None or (val > self.best if self.mode == "max" else val < self.best)
            ):
                self.best, self.best_epoch = val, trainer.current_epoch
            self.curve.append(
                {
                    "epoch": trainer.current_epoch,
                    "train_loss": get("train/loss"),
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


@contextlib.contextmanager
def _quiet_lightning():
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
        try:
            yield
        finally:
            for lg, lvl in zip(loggers, levels):
                lg.setLevel(lvl)


# ----------------------------------------------------------------------------- one cell
def _flops_per_sample(module, datamodule) -> float | None:
    """FLOPs of one evaluation step (forward + loss) on a validation batch, per sample."""
    import torch
    from torch.utils.flop_counter import FlopCounterMode

    try:
        batch = next(iter(datamodule.val_dataloader()))
        batch = module.transfer_batch_to_device(batch, module.device, 0)
        was_training = module.training
        module.eval()
        with torch.no_grad(), FlopCounterMode(display=False) as counter:
            out = module.step(batch, "val")
        module.train(was_training)
        return counter.get_total_flops() / max(int(out.samples), 1)
    except Exception as err:  # noqa: BLE001 - a measurement must never sink a finished cell
        warnings.warn(f"FLOP count failed: {err}")
        return None


def _trainer_kwargs(cell: Cell, opts: RunOptions, ckpt_dir: Path) -> dict[str, Any]:
    import datetime as dt

    t = cell.config["trainer"]
    kw: dict[str, Any] = dict(
        max_epochs=t["max_epochs"],
        max_steps=t["max_steps"],
        min_epochs=t["min_epochs"],
        precision=t["precision"],
        accelerator=opts.accelerator or t["accelerator"],
        devices=opts.devices if opts.devices is not None else t["devices"],
        gradient_clip_val=t["gradient_clip_val"],
        check_val_every_n_epoch=t["check_val_every_n_epoch"],
        deterministic=t["deterministic"],
        logger=False,
        enable_progress_bar=False,
        enable_model_summary=False,
        num_sanity_val_steps=0,
        default_root_dir=str(ckpt_dir),
    )
    if t["max_time_s"]:
        kw["max_time"] = dt.timedelta(seconds=float(t["max_time_s"]))
    return kw


def _set_float32_mode(tf32: bool) -> None:
    """One switch for float32 arithmetic on CUDA: TF32 for matmuls *and* cuDNN convolutions, or
    for neither (PyTorch's defaults differ: convolutions use TF32, matmuls do not, which would
    give CNNs a faster float32 than attention and RNNs)."""
    import torch

    torch.backends.cuda.matmul.allow_tf32 = tf32
    torch.backends.cudnn.allow_tf32 = tf32
    torch.set_float32_matmul_precision("high" if tf32 else "highest")


def run_cell(cell: Cell, suite: str, opts: RunOptions) -> dict[str, Any]:
    """Train, select, test and measure one cell; returns its record (ok or failed)."""
    import lightning as L
    import torch
    from lightning.pytorch.callbacks import EarlyStopping, ModelCheckpoint

    from tasks.common.registry import get_task

    task = get_task(cell.task)
    started = R.now_iso()
    rec: dict[str, Any] = {
        "schema": R.SCHEMA_VERSION,
        "suite": suite,
        "cell_id": cell.cell_id,
        "task": cell.task,
        "dataset": cell.dataset,
        "model": cell.model,
        "family": cell.family,
        "pattern": cell.pattern,
        "seed": cell.seed,
        "status": "failed",
        "reason": None,
        "metric": {"name": task.metric, "mode": task.mode},
        "test": {},
        "best_val": None,
        "epochs_run": 0,
        "cost": {},
        "curve": [],
        "data": None,
        "extras": {},
        "config": cell.config,
        "env": None,
        "started": started,
        "finished": None,
    }
    # A folder of this process's own: a concurrent run on the same --out never touches it.
    ckpt_dir = opts.out / ".checkpoints" / f"{cell.cell_id}-{os.getpid()}-{id(rec):x}"
    monitor = None
    device = "cpu"
    try:
        with _quiet_lightning():
            _set_float32_mode(bool(cell.config["trainer"].get("tf32", False)))
            L.seed_everything(cell.seed, workers=True, verbose=False)
            ds = task.datasets.get(cell.dataset)
            dm = ds.build(opts.data_dir, opts.cache_dir, cell.seed, **cell.config["dataset_params"])
            dm.prepare_data()
            dm.setup("fit")
            # The checksum is of the full data; a train_fraction subset is fixed by (fraction, seed).
            rec["data"] = {"name": cell.dataset, "synthetic": ds.synthetic, "checksum": dm.checksum()}
            if cell.train_fraction < 1:
                limit = getattr(dm, "limit_train", None)
                if not callable(limit):
                    raise CellFailure(f"train_fraction={cell.train_fraction}: dataset {cell.dataset!r} of task "
                                      f"{cell.task!r} has no limit_train(fraction, seed)")
                # The run seed draws the subset: every model with this seed sees the same examples.
                rec["data"]["train_fraction"] = cell.train_fraction
                rec["data"]["train_size"] = int(limit(cell.train_fraction, cell.seed))
            elif isinstance(dm.info.get("num_train"), int):
                rec["data"]["train_size"] = dm.info["num_train"]
            spec = task.models.get(cell.model)
            L.seed_everything(cell.seed, workers=True, verbose=False)  # same init whatever the data did
            net = spec.build(dm.info, **cell.config["model_params"])
            module = task.make_module(net, dm.info, **cell.config["module_params"])
            rec["cost"]["params"] = sum(p.numel() for p in module.parameters() if p.requires_grad)

            metric_key = f"val/{task.metric}"
            CellMonitor = _callbacks_module()
            monitor = CellMonitor(task.metric, task.mode, cell.label, opts.log, opts.progress_every_s)
            ckpt = ModelCheckpoint(dirpath=ckpt_dir, monitor=metric_key, mode=task.mode, save_top_k=1, filename="best")
            callbacks = [monitor, ckpt]
            patience = cell.config["trainer"]["early_stopping_patience"]
            if patience:
                callbacks.append(EarlyStopping(monitor=metric_key, mode=task.mode, patience=patience))
            trainer = L.Trainer(callbacks=callbacks, **_trainer_kwargs(cell, opts, ckpt_dir))
            device = str(trainer.strategy.root_device)

            peak = PeakMemory(device)
            peak.start()
            t0 = time.perf_counter()
            trainer.fit(module, datamodule=dm)
            fit_time = time.perf_counter() - t0
            if not ckpt.best_model_path:
                raise CellFailure(f"no validation metric {metric_key!r} was logged, so no best checkpoint exists")
            test_out = trainer.test(module, datamodule=dm, ckpt_path=ckpt.best_model_path, verbose=False)
            peak_bytes = peak.stop()

            rec["test"] = {k.split("/", 1)[1]: float(v) for k, v in (test_out[0] if test_out else {}).items() if k.startswith("test/")}
            if task.metric not in rec["test"] or not math.isfinite(rec["test"][task.metric]):
                raise CellFailure(f"test metric {task.metric!r} missing or not finite: {rec['test']}")
            best_score = float(ckpt.best_model_score) if ckpt.best_model_score is not None else None
            rec["best_val"] = {"value": best_score, "epoch": monitor.best_epoch}
            rec["epochs_run"] = trainer.current_epoch
            counts = module.counts
            rec["cost"].update(
                {
                    "flops_per_sample": _flops_per_sample(module, dm),
                    "train_time_s": round(fit_time, 3),
                    "train_compute_s": round(monitor.train_time, 3),
                    "train_samples_per_s": counts["train"]["samples"] / monitor.train_time if monitor.train_time else None,
                    "train_tokens_per_s": counts["train"]["tokens"] / monitor.train_time
                    if monitor.train_time and counts["train"]["tokens"]
                    else None,
                    "infer_samples_per_s": counts["test"]["samples"] / monitor.test_time if monitor.test_time else None,
                    "infer_tokens_per_s": counts["test"]["tokens"] / monitor.test_time
                    if monitor.test_time and counts["test"]["tokens"]
                    else None,
                    "peak_mem_bytes": peak_bytes,
                    "peak_mem_kind": "cuda_allocated" if peak.cuda else "cpu_rss_growth",
                }
            )
            extras = getattr(module, "report_extras", None)
            if callable(extras):
                rec["extras"] = extras(trainer, dm) or {}
            rec["status"] = "ok"
    except KeyboardInterrupt:
        raise
    except Exception as err:  # noqa: BLE001 - any failure of one cell is recorded, the matrix goes on
        kind = "out of memory" if is_oom_error(err) else type(err).__name__
        rec["reason"] = f"{kind}: {str(err).strip().splitlines()[0][:500] if str(err).strip() else repr(err)}"
        rec["traceback"] = traceback.format_exc(limit=-10)[-4000:]
        with contextlib.suppress(Exception):
            if torch.cuda.is_available():
                torch.cuda.empty_cache()  # an OOM cell must not starve the next one
    finally:
        if monitor is not None:
            rec["curve"] = monitor.curve
            if rec["epochs_run"] == 0 and monitor.curve:
                rec["epochs_run"] = monitor.curve[-1]["epoch"] + 1
        if not opts.keep_checkpoints:
            shutil.rmtree(ckpt_dir, ignore_errors=True)
        gc.collect()
    rec["env"] = R.environment(device)
    rec["finished"] = R.now_iso()
    return rec


# ----------------------------------------------------------------------------- the suite
def _existing(out: Path) -> dict[str, dict[str, Any]]:
    """cell_id -> record already on disk (the newest when several)."""
    return {r["cell_id"]: r for r in R.load_records(out)} if (out / R.RUNS_DIR).exists() else {}


def run_suite(cfg: dict[str, Any], opts: RunOptions, source: str = "") -> RunSummary:
    """Run every cell of a validated suite config that is not finished yet."""
    cells = expand(cfg)
    suite = cfg["suite"]
    opts.out.mkdir(parents=True, exist_ok=True)
    R.write_json_atomic(
        opts.out / R.MANIFEST,
        {
            "suite": suite,
            "source": source,
            "written": R.now_iso(),
            "config": cfg,
            "cells": [
                {"cell_id": c.cell_id, "task": c.task, "dataset": c.dataset, "model": c.model, "family": c.family, "seed": c.seed,
                 **({"train_fraction": c.train_fraction} if c.train_fraction < 1 else {})}
                for c in cells
            ],
        },
    )
    done = _existing(opts.out)
    todo = []
    summary = RunSummary()
    for c in cells:
        prev = done.get(c.cell_id)
        rerun = opts.force or prev is None or (prev.get("status") != "ok" and opts.retry_failed)
        if rerun:
            todo.append(c)
        else:
            summary.skipped += 1
    n_failed_prev = sum(1 for c in cells if c not in todo and done[c.cell_id].get("status") != "ok")
    log = opts.log
    log(f"suite {suite!r}: {len(cells)} cells, {summary.skipped} already finished, {len(todo)} to run -> {opts.out}")
    if n_failed_prev:
        log(f"  ({n_failed_prev} finished cells had failed; --retry-failed reruns them)")
    t_start = time.perf_counter()
    for k, cell in enumerate(todo, 1):
        elapsed = time.perf_counter() - t_start
        eta = "" if k == 1 else f", ETA {elapsed / (k - 1) * (len(todo) - k + 1) / 60:.1f} min"
        target = R.record_path(opts.out, {"task": cell.task, "dataset": cell.dataset, "model": cell.model,
                                          "seed": cell.seed, "cell_id": cell.cell_id})
        held = C.claim(C.claim_path(target))
        if held is None:
            summary.elsewhere += 1
            log(f"[{k}/{len(todo)}] {cell.label}: another run is training it, left to that run")
            continue
        with held:
            prev = _on_disk(target)
            seen = done.get(cell.cell_id)
            if prev is not None and not _should_run(prev, opts, seen):
                summary.skipped += 1
                log(f"[{k}/{len(todo)}] {cell.label}: finished by another run meanwhile, skipped")
                continue
            log(f"[{k}/{len(todo)}] {cell.label} ({cell.family}){eta}")
            rec = run_cell(cell, suite, opts)
            summary.ran += 1
            path = _store(target, rec, opts, seen, log)
        old = done.get(cell.cell_id)
        if path is not None and old and old.get("_path") and Path(old["_path"]) != path:
            Path(old["_path"]).unlink(missing_ok=True)
        if path is not None:
            summary.records.append(path)
        if rec["status"] == "ok":
            m = rec["metric"]["name"]
            log(
                f"    -> test/{m}={rec['test'][m]:.4f} (best val {rec['best_val']['value']:.4f} at epoch "
                f"{rec['best_val']['epoch']}), {rec['cost']['train_time_s']:.1f}s"
            )
        else:
            summary.failed.append(cell.label)
            log(f"    -> FAILED: {rec['reason']}")
    with contextlib.suppress(OSError):  # only when empty: another run may still be using it
        (opts.out / ".checkpoints").rmdir()
    return summary


def _on_disk(path: Path) -> dict[str, Any] | None:
    """The record at ``path`` as it is now (another run may have written it), or ``None``."""
    import json

    try:
        rec = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return rec if isinstance(rec, dict) else None


def _same_record(a: dict[str, Any] | None, b: dict[str, Any] | None) -> bool:
    """Whether two loaded records are the same write (another run has not replaced it)."""
    if a is None or b is None:
        return a is b
    return all(a.get(k) == b.get(k) for k in ("status", "started", "finished"))


def _should_run(prev: dict[str, Any], opts: RunOptions, seen: dict[str, Any] | None) -> bool:
    """Whether a cell whose record ``prev`` is on disk now still needs this run to train it;
    ``seen`` is the record this run found when it started (another run may have written since)."""
    if not _same_record(prev, seen):
        return False  # written by another run while this one was going: it is fresh
    if prev.get("status") == "ok":
        return opts.force
    return opts.force or opts.retry_failed


def _store(path: Path, rec: dict[str, Any], opts: RunOptions, seen: dict[str, Any] | None, log) -> Path | None:
    """Write ``rec`` atomically, unless it is a failure and an ``ok`` record is there that this
    run did not mean to replace (written by another run since this one started, or kept
    because the user did not ask for ``--force``)."""
    prev = _on_disk(path)
    if rec["status"] != "ok" and prev is not None and prev.get("status") == "ok":
        if not opts.force or not _same_record(prev, seen):
            log(f"    (kept the ok record at {path}; this attempt failed: {rec['reason']})")
            return None
    return R.write_json_atomic(path, rec)


def run_micro_benchmarks(cfg: dict[str, Any], opts: RunOptions) -> list[str]:
    """The suite's ``micro_benchmarks`` (default configs) into ``<out>/bench/<name>``; a finished
    one is skipped unless ``force``; a failure is reported and the rest goes on. Returns the
    names of those that failed (an exception or a non-zero exit code)."""
    from benchmarks.cli import CONFIG_DIR, MICRO_BENCHMARKS

    failed: list[str] = []
    for name in cfg.get("micro_benchmarks", []):
        bench = MICRO_BENCHMARKS[name]
        out = opts.out / "bench" / name
        if (out / f"bench_{name}.json").exists() and not opts.force:
            opts.log(f"micro-benchmark {name!r}: already done ({out}), skipped")
            continue
        opts.log(f"micro-benchmark {name!r} -> {out}")
        try:
            code = bench.run(config=CONFIG_DIR / bench.default_config, out=out, device=None, dtype=None, sets=[])
            if code:
                opts.log(f"micro-benchmark {name!r} exited with code {code}")
                failed.append(name)
        except Exception as err:  # noqa: BLE001 - the suite's results stand without it
            opts.log(f"micro-benchmark {name!r} FAILED: {type(err).__name__}: {err}")
            failed.append(name)
    return failed
