"""One cell, in the process that trains it: the Trainer and its callbacks, the best-on-validation
checkpoint tested, costs measured, the record built (the suite driver, :mod:`benchmarks.run.runner`,
and the worker, :mod:`benchmarks.run.worker`, both call :func:`run_cell`)."""

from __future__ import annotations

import contextlib
import gc
import math
import os
import shutil
import time
import traceback
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from benchmarks.run import budget as B
from benchmarks.run import fingerprint as F
from benchmarks.run import items as I
from benchmarks.run.flops import FLOPS_RULE, flops_per_sample
from benchmarks.run import records as R
from benchmarks.run import scoring as S
from benchmarks.run.callbacks import CellFailure, callbacks_module, null_profiler, quiet_lightning
from benchmarks.run.measure import PeakMemory, is_oom_error
from benchmarks.config.suite import Cell
from benchmarks.config.trainer import bucket_spec

DEFAULT_CACHE = Path(os.environ.get("ATTNBENCH_CACHE", Path.home() / ".cache" / "attnbench"))


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
    cell_timeout: float | None = None  # wall limit per cell process (default: cell_timeout(config))
    progress_every_s: float = 10.0
    log: Any = print
    #: Run only the cells of these tasks (``--tasks``): a slice. The manifest still lists every
    #: cell of the suite, so the report counts the other slices' cells as still to run.
    only_tasks: tuple[str, ...] | None = None
    #: ... and of these models (``--models``), the same way.
    only_models: tuple[str, ...] | None = None
    #: Train only: the fit as configured (its validation and checkpoints included), then no
    #: test (``bench train`` and ``attnbench profile``, which measure training steps; on real
    #: data the beam-search test of a translation cell took 98 of a round's 180 s). The record
    #: says so (``fit_only``) and has no test metrics.
    fit_only: bool = False
    #: Results folders whose finished records of this run's cells (same cell ids) are copied
    #: instead of trained (``--reuse``; :mod:`benchmarks.run.reuse`).
    reuse: tuple[Path, ...] = ()


# ----------------------------------------------------------------------------- one cell
def _trainer_kwargs(cell: Cell, opts: RunOptions, ckpt_dir: Path, time_cap_s: float | None = None) -> dict[str, Any]:
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
        logger=_loggers(cell, opts.out),
        enable_progress_bar=False,
        enable_model_summary=False,
        profiler=null_profiler(),
        num_sanity_val_steps=0,
        # our samplers shard themselves by rank (tasks/common/sampling.py); Lightning's
        # DistributedSampler wrapping would throw their length buckets away
        use_distributed_sampler=False,
        default_root_dir=str(ckpt_dir),
    )
    from benchmarks.run import distributed as D
    kw.update(D.strategy_kwargs(kw["accelerator"], kw["devices"]))  # DDP for a multi-device cell; {} for one device
    if time_cap_s:  # max_time_s in seconds on this machine (B.cell_budget)
        kw["max_time"] = dt.timedelta(seconds=time_cap_s)
    return kw


#: ``attnbench run --logger NAME``: experiment trackers attached to every cell (the JSON records
#: stay the source of truth). Passed to workers in ``$ATTNBENCH_LOGGER``.
LOGGERS = ("csv", "tensorboard", "wandb", "mlflow")
LOGGER_ENV = "ATTNBENCH_LOGGER"


def _loggers(cell: Cell, out: Path) -> Any:
    """Lightning loggers named suite / cell id, writing under ``OUT/logs`` (offline by default:
    wandb in offline mode unless ``WANDB_MODE`` says otherwise, mlflow to a local file store)."""
    names = [n for n in os.environ.get(LOGGER_ENV, "").split(",") if n]
    if not names:
        return False
    from lightning.pytorch import loggers as PL

    suite, save = str(cell.config.get("suite", "") or out.name), str(out / "logs")
    made = []
    for name in names:
        if name == "csv":
            made.append(PL.CSVLogger(save, name=suite, version=cell.cell_id))
        elif name == "tensorboard":
            made.append(PL.TensorBoardLogger(save, name=suite, version=cell.cell_id))
        elif name == "wandb":
            os.environ.setdefault("WANDB_MODE", "offline")
            made.append(PL.WandbLogger(project=suite, name=cell.label, id=cell.cell_id, save_dir=save))
        elif name == "mlflow":
            made.append(PL.MLFlowLogger(experiment_name=suite, run_name=cell.cell_id,
                                        tracking_uri=os.environ.get("MLFLOW_TRACKING_URI") or (out / "mlruns").resolve().as_uri()))
    return made


def new_record(cell: Cell, suite: str) -> dict[str, Any]:
    """The record skeleton of ``cell`` (status ``failed`` until the cell finishes)."""
    from tasks.common.registry import get_task

    task = get_task(cell.task)
    return {
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
        "failure": None,  # failed: R.FAILURE_KINDS
        "metric": {"name": task.metric, "mode": task.mode},
        "test": {},
        "best_val": None,
        "epochs_run": 0,
        "cost": {},
        "curve": [],
        "stop": None,  # what ended training (B.stop_block)
        "data": None,
        "extras": {},
        "config": cell.config,
        "env": None,
        "resources": _resources(),
        "started": R.now_iso(),
        "finished": None,
    }


def _resources() -> dict[str, Any]:
    """What this cell's process had: threads, launcher, node, GPU slot and sharing (the
    launcher passes its part in ``$ATTNBENCH_RESOURCES``)."""
    import json
    import socket

    import torch

    res: dict[str, Any] = {"launcher": "inline", "node": socket.gethostname(), "cpu_threads": torch.get_num_threads(),
                           "cuda_visible_devices": os.environ.get("CUDA_VISIBLE_DEVICES"), "cells_sharing_device": 1}
    try:
        res.update(json.loads(os.environ.get("ATTNBENCH_RESOURCES") or "{}"))
    except ValueError:
        pass
    res["cpu_threads"] = torch.get_num_threads()  # what torch actually uses
    return res


def _suite_option(out: Path, key: str) -> Any:
    """A suite-level option (not part of any cell id) from the manifest the driver wrote."""
    import json

    try:
        return (json.loads((Path(out) / R.MANIFEST).read_text(encoding="utf-8")).get("config") or {}).get(key)
    except (OSError, ValueError, AttributeError):
        return None


def _set_float32_mode(tf32: bool) -> None:
    """One switch for float32 arithmetic on CUDA: TF32 for matmuls *and* cuDNN convolutions, or
    for neither (PyTorch's defaults differ: convolutions use TF32, matmuls do not, which would
    give CNNs a faster float32 than attention and RNNs)."""
    import torch

    torch.backends.cuda.matmul.allow_tf32 = tf32
    torch.backends.cudnn.allow_tf32 = tf32
    torch.set_float32_matmul_precision("high" if tf32 else "highest")


def cheap_cuda_probe() -> None:
    """Make ``torch.cuda.is_available()`` cheap where there is no GPU. Lightning sets
    ``PYTORCH_NVML_BASED_CUDA_CHECK=1`` when imported (so that the check does not initialise CUDA
    before a fork), and with it torch loads NVML through ctypes at *every* call without caching
    the answer; Adam and AdamW ask at every step (``_accelerator_graph_capture_health_check``):
    ~0.13-0.3 ms a step on a 2-core CPU with torch's CUDA wheel, 1.8 us without the variable.
    Where NVML finds no GPU there is no CUDA to protect from a fork, so the variable goes and
    torch's runtime check (cached) answers; with a GPU nothing changes."""
    import torch

    if os.environ.get("PYTORCH_NVML_BASED_CUDA_CHECK") == "1" and not torch.cuda.is_available():
        del os.environ["PYTORCH_NVML_BASED_CUDA_CHECK"]


def run_cell(cell: Cell, suite: str, opts: RunOptions) -> dict[str, Any]:
    """Train, select, test and measure one cell; returns its record (ok or failed)."""
    import lightning as L
    import torch
    from lightning.pytorch.callbacks import EarlyStopping, ModelCheckpoint

    from tasks.common.registry import get_task

    task = get_task(cell.task)
    rec = new_record(cell, suite)
    # A folder of this process's own: a concurrent run on the same --out never touches it.
    ckpt_dir = opts.out / ".checkpoints" / f"{cell.cell_id}-{os.getpid()}-{id(rec):x}"
    monitor = None
    device = "cpu"
    fingerprint = F.manifest_fingerprint(opts.out)
    try:
        with quiet_lightning():
            import attn_core

            attn_core.clear_caches()  # no block mask or compiled graph leaks in from an earlier cell
            _set_float32_mode(bool(cell.config["trainer"].get("tf32", False)))
            cheap_cuda_probe()
            L.seed_everything(cell.seed, workers=True, verbose=False)
            ds = task.datasets.get(cell.dataset)
            dm = ds.build(opts.data_dir, opts.cache_dir, cell.seed, **cell.config["dataset_params"])
            dm.prepare_data()
            dm.setup("fit")
            # The checksum is of the full data; a train_fraction subset is fixed by (fraction, seed).
            rec["data"] = {"name": cell.dataset, "synthetic": ds.synthetic, "checksum": dm.checksum(),
                           "info": S.comparable_info(dm.info)}  # what attnbench eval checks a new test set against
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
            buckets = bucket_spec(cell.config["trainer"])
            if buckets is not None and callable(getattr(dm, "use_length_buckets", None)):
                if dm.use_length_buckets(buckets) is not None:  # None: items without lengths (one shape already)
                    rec["cost"]["padding"] = dm.padding_report()
            longest = getattr(dm, "longest_input", None)  # in sequence positions: a window >= it is full
            if callable(longest) and longest() is not None:
                rec["data"]["max_len"] = int(longest())
            spec = task.models.get(cell.model)
            if spec.kind is not None:
                rec["kind"] = spec.kind  # e.g. rnn: classic | modern
            L.seed_everything(cell.seed, workers=True, verbose=False)  # same init whatever the data did
            net = spec.build(dm.info, **cell.config["model_params"])
            module = task.make_module(net, dm.info, **cell.config["module_params"])
            rec["cost"]["params"] = sum(p.numel() for p in module.parameters() if p.requires_grad)

            metric_key = f"val/{task.metric}"
            CellMonitor = callbacks_module()
            monitor = CellMonitor(task.metric, task.mode, cell.label, opts.log, opts.progress_every_s)
            ckpt = ModelCheckpoint(dirpath=ckpt_dir, monitor=metric_key, mode=task.mode, save_top_k=1, filename="best")
            callbacks = [monitor, ckpt]
            patience = cell.config["trainer"]["early_stopping_patience"]
            if patience:
                callbacks.append(EarlyStopping(monitor=metric_key, mode=task.mode, patience=patience))
            time_cap_s, calibration = B.cell_budget(cell.config["trainer"].get("max_time_s"), fingerprint)
            trainer = L.Trainer(callbacks=callbacks, **_trainer_kwargs(cell, opts, ckpt_dir, time_cap_s))
            device = str(trainer.strategy.root_device)

            peak = PeakMemory(device)
            peak.start()
            t0 = time.perf_counter()
            trainer.fit(module, datamodule=dm)
            fit_time = time.perf_counter() - t0
            rec["stop"] = B.stop_block(trainer, time_cap_s, calibration)
            if opts.fit_only:
                rec["epochs_run"], rec["fit_only"], rec["status"] = trainer.current_epoch, True, "ok"
                return _stamped(rec, device, fingerprint)  # the finally below still runs (curve, clean-up)
            if not ckpt.best_model_path:
                raise CellFailure(f"no validation metric {metric_key!r} was logged, so no best checkpoint exists")
            test_out = trainer.test(module, datamodule=dm, ckpt_path=ckpt.best_model_path, verbose=False)
            peak_bytes = peak.stop()
            test_items = getattr(module, "test_items", None)  # per-item outcomes (before any other test set)

            rec["test"] = {k.split("/", 1)[1]: float(v) for k, v in (test_out[0] if test_out else {}).items() if k.startswith("test/")}
            if task.metric not in rec["test"] or not math.isfinite(rec["test"][task.metric]):
                raise CellFailure(f"test metric {task.metric!r} missing or not finite: {rec['test']}")
            best_score = float(ckpt.best_model_score) if ckpt.best_model_score is not None else None
            rec["best_val"] = {"value": best_score, "epoch": monitor.best_epoch}
            rec["epochs_run"] = trainer.current_epoch
            counts = module.counts
            rec["cost"].update(
                {
                    "flops_per_sample": flops_per_sample(module, dm),
                    "flops_rule": FLOPS_RULE,
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
                    "optimizer_impl": getattr(module, "optimizer_impl", None),  # fused / foreach / for-loop
                }
            )
            extras = getattr(module, "report_extras", None)
            if callable(extras):
                rec["extras"] = extras(trainer, dm) or {}
            if cell.config.get("test_sets"):  # the module holds the best weights since trainer.test
                rec["test_sets"] = S.score_test_sets(trainer, module, task, cell.config, cell.seed, dm.info,
                                                     opts.data_dir, opts.cache_dir, opts.log)
            if trainer.is_global_zero and (opts.keep_checkpoints or _suite_option(opts.out, "keep_checkpoints")):
                rec["checkpoint"] = S.save_weights(S.weights_path(R.record_path(opts.out, rec)), module, {
                    "cell_id": cell.cell_id, "task": cell.task, "dataset": cell.dataset, "model": cell.model,
                    "best_epoch": monitor.best_epoch})
            if test_items is not None and trainer.is_global_zero:  # beside the record, last: the cell is ok now
                rec["items"] = I.write_items(R.record_path(opts.out, rec), test_items, cell_id=cell.cell_id,
                                             metric=task.metric)
            rec["status"] = "ok"
    except KeyboardInterrupt:
        raise
    except Exception as err:  # noqa: BLE001 - any failure of one cell is recorded, the matrix goes on
        kind = "out of memory" if is_oom_error(err) else type(err).__name__
        rec["reason"] = f"{kind}: {str(err).strip().splitlines()[0][:500] if str(err).strip() else repr(err)}"
        rec["failure"] = R.failure_kind(err)
        rec["traceback"] = traceback.format_exc(limit=-10)[-4000:]
        with contextlib.suppress(Exception):
            if torch.cuda.is_available():
                torch.cuda.empty_cache()  # an OOM cell must not starve the next one
    finally:
        if monitor is not None:
            rec["curve"] = monitor.curve
            if rec["epochs_run"] == 0 and monitor.curve:
                rec["epochs_run"] = monitor.curve[-1]["epoch"] + 1
        shutil.rmtree(ckpt_dir, ignore_errors=True)  # Lightning's full checkpoint; kept weights are beside the record
        gc.collect()
    return _stamped(rec, device, fingerprint)


def _stamped(rec: dict[str, Any], device: str, fingerprint: Any) -> dict[str, Any]:
    """``rec`` with the environment it ran in and its finishing time."""
    rec["env"] = R.environment(device, fingerprint=fingerprint)
    rec["finished"] = R.now_iso()
    return rec
