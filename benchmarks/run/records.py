"""The one result schema: a JSON record per cell, written atomically, plus the environment
block stored with every result.

A record (``results/<suite>/runs/<task>/<dataset>/<model>/seed<k>-<cell_id>.json``)::

    {
      "schema": 1,
      "suite": "quick", "cell_id": "3f2a9c0d1e7b", "task": "graphs", "dataset": "sbm",
      "model": "graph_attention", "family": "attention", "pattern": "graph", "seed": 0,
      "status": "ok" | "failed", "reason": null | "NaN loss at epoch 3" | "out of memory: ..." | "...",
      "metric": {"name": "acc", "mode": "max"},
      "test": {"acc": 0.83, "loss": 0.61, ...},        # at the best-validation checkpoint
      "best_val": {"value": 0.81, "epoch": 57},
      "epochs_run": 157,
      "cost": {"params": 92231, "flops_per_sample": 1.2e6, "train_time_s": 12.3,
               "train_samples_per_s": 1.1e4, "train_tokens_per_s": null,
               "infer_samples_per_s": 3.0e4, "infer_tokens_per_s": null,
               "peak_mem_bytes": 123456789, "peak_mem_kind": "cuda_allocated" | "cpu_rss_growth"},
      "curve": [{"epoch": 0, "train_loss": 1.9, "val_loss": 1.8, "val_metric": 0.31, "time_s": 0.4}, ...],
      "data": {"name": "sbm", "synthetic": true, "checksum": "sha256:..."},
      "extras": {...},                                 # task-specific artefacts (tables, maps)
      "config": {...the resolved cell config...},    # with "tuning": {"file", "sha256", "values"} when a
                                                     # tuning file (attnbench tune) chose its module_params
      "reused": {"from": "../trials/runs/...json", "suite": "quick.tuning", "copied": "..."},  # only when
                                                     # copied from another folder (run --reuse)
      "env": {...environment()...},
      "started": "2026-11-20T22:41:28+00:00", "finished": "..."
    }

A suite also writes ``results/<suite>/suite.json`` (the manifest: suite name, resolved
config, and the list of expected cells with their ids) so a report can tell missing cells.
"""

from __future__ import annotations

import contextlib
import datetime as _dt
import json
import math
import os
import platform
import subprocess
import sys
import warnings
from pathlib import Path
from typing import Any, Iterable

from tasks.common.io import write_atomic

SCHEMA_VERSION = 1
STATUSES = ("ok", "failed")
#: Why a cell failed: ``cell`` (its own code: an exception, NaN, its time limit, a crash) or
#: ``external`` (a cause outside it: data missing, disk full, interrupted, killed by a signal
#: such as the kernel's out-of-memory killer, a lost node). The next run retries an external
#: failure by itself; a cell failure only with ``--retry-failed``.
FAILURE_KINDS = ("cell", "external")
#: errno values of a full disk (ENOSPC) or an exhausted quota (EDQUOT)
DISK_FULL_ERRNOS = {28, 122}
_EXTERNAL_ERRNOS = DISK_FULL_ERRNOS | {5}  # and EIO
_EXTERNAL_SIGNALS = {1, 2, 9, 15}  # SIGHUP, SIGINT, SIGKILL (OOM killer), SIGTERM


def failure_kind(err: BaseException) -> str:
    """The :data:`FAILURE_KINDS` entry of an exception a cell raised (its causes included)."""
    seen: set[int] = set()
    e: BaseException | None = err
    while e is not None and id(e) not in seen:
        seen.add(id(e))
        if any(c.__name__ == "DataMissing" for c in type(e).__mro__):  # tasks.common.data (not imported here)
            return "external"
        if isinstance(e, OSError) and e.errno in _EXTERNAL_ERRNOS:
            return "external"
        if isinstance(e, KeyboardInterrupt):
            return "external"
        e = e.__cause__ or e.__context__
    return "cell"


def exit_failure_kind(code: int | None) -> str:
    """The :data:`FAILURE_KINDS` entry of a cell process that ended without its record:
    ``external`` when a signal from outside ended it (also as exit code 128 + signal)."""
    if code is None:
        return "cell"  # its own time limit
    sig = -code if code < 0 else code - 128 if code > 128 else None
    return "external" if sig in _EXTERNAL_SIGNALS else "cell"


def retried_by_default(rec: dict[str, Any]) -> bool:
    """Whether a rerun retries this record without ``--retry-failed``: a failure from outside
    the cell (a record from before the ``failure`` field counts when its reason is missing data)."""
    if rec.get("status") == "ok":
        return False
    kind = rec.get("failure") or ("external" if str(rec.get("reason") or "").startswith("DataMissing") else "cell")
    return kind == "external"


def finished_records(out: str | os.PathLike) -> dict[str, dict[str, Any]]:
    """cell_id -> the record already in the results folder ``out`` (the newest when several)."""
    return {r["cell_id"]: r for r in load_records(out)} if (Path(out) / RUNS_DIR).exists() else {}


def to_run(cells: list[Any], done: dict[str, dict[str, Any]], *, force: bool = False,
           retry_failed: bool = False) -> list[Any]:
    """The cells a run trains, given ``done`` (:func:`finished_records`): those without a record,
    a failed one with ``retry_failed`` or when it failed for a cause outside it, every one with
    ``force``. The runner and the plan of ``--dry-run`` both decide by this."""
    return [c for c in cells if force or c.cell_id not in done
            or (done[c.cell_id].get("status") != "ok" and retry_failed) or retried_by_default(done[c.cell_id])]

RUNS_DIR = "runs"
MANIFEST = "suite.json"


def now_iso() -> str:
    return _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")


def _default(obj: Any) -> Any:
    if hasattr(obj, "item") and getattr(obj, "ndim", 0) == 0:  # numpy / torch scalars
        return _finite(obj.item())
    if hasattr(obj, "tolist"):
        return _finite(obj.tolist())
    if isinstance(obj, (Path, _dt.date)):
        return str(obj)
    raise TypeError(f"not JSON serialisable: {type(obj).__name__}")


def _finite(obj: Any) -> Any:
    """Strict JSON: NaN and infinities become null (a NaN metric is a failed cell anyway)."""
    if isinstance(obj, float) and not math.isfinite(obj):
        return None
    if isinstance(obj, dict):
        return {k: _finite(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_finite(v) for v in obj]
    return obj


def write_json_atomic(path: str | os.PathLike, obj: Any) -> Path:
    """Write JSON so that a reader sees either the old file or the whole new one, never a
    partial file: write to a temp file in the same folder, fsync, then ``os.replace``."""
    text = json.dumps(_finite(obj), indent=2, default=_default, allow_nan=False) + "\n"
    try:
        return write_atomic(path, lambda tmp: tmp.write_text(text, encoding="utf-8"), fsync=True)
    except OSError as err:  # name the record, not its temporary (a full disk: ENOSPC)
        if err.errno is None:
            raise
        raise OSError(err.errno, err.strerror or os.strerror(err.errno), str(path)) from err


def record_path(suite_dir: str | os.PathLike, rec: dict[str, Any]) -> Path:
    return (
        Path(suite_dir) / RUNS_DIR / rec["task"] / rec["dataset"] / rec["model"] / f"seed{rec['seed']}-{rec['cell_id']}.json"
    )


def iter_record_files(results_dir: str | os.PathLike) -> Iterable[Path]:
    """Every record under ``results_dir`` (a suite folder or a folder of suites)."""
    root = Path(results_dir).resolve()
    for p in sorted(root.rglob("*.json")):
        inside = p.relative_to(root).parts[:-1]
        if not p.name.startswith(".") and (RUNS_DIR in inside or root.name == RUNS_DIR):
            yield p


def load_records(results_dir: str | os.PathLike) -> list[dict[str, Any]]:
    """Load every readable record; unreadable or foreign files are skipped with a warning."""
    out = []
    for p in iter_record_files(results_dir):
        try:
            rec = json.loads(p.read_text(encoding="utf-8"))
        except (OSError, json.JSONDecodeError) as err:
            warnings.warn(f"skipping unreadable result file {p}: {err}")
            continue
        if not isinstance(rec, dict) or rec.get("schema") != SCHEMA_VERSION or "cell_id" not in rec:
            warnings.warn(f"skipping {p}: not an attnbench result record (schema {SCHEMA_VERSION})")
            continue
        rec["_path"] = str(p)
        out.append(rec)
    return out


def load_manifests(results_dir: str | os.PathLike) -> list[dict[str, Any]]:
    out = []
    for p in sorted(Path(results_dir).rglob(MANIFEST)):
        try:
            out.append(json.loads(p.read_text(encoding="utf-8")))
        except (OSError, json.JSONDecodeError) as err:
            warnings.warn(f"skipping unreadable manifest {p}: {err}")
    return out


# ----------------------------------------------------------------------------- environment
REPO_ROOT = Path(__file__).resolve().parents[2]


def _git(*args: str, root: Path = REPO_ROOT) -> str | None:
    try:
        res = subprocess.run(["git", *args], cwd=root, capture_output=True, text=True, timeout=10)
        return res.stdout.strip() if res.returncode == 0 else None
    except (OSError, subprocess.TimeoutExpired):
        return None


def git_state(root: Path = REPO_ROOT) -> tuple[str | None, bool | None]:
    """``(commit, dirty)`` of the checkout at ``root`` (``None``s outside git). Dirty: tracked
    code or configs differ from the commit. ``results/`` is left out: a run into a committed
    reference folder rewrites that folder's manifest and report as it goes."""
    commit = _git("rev-parse", "HEAD", root=root)
    if commit is None:
        return None, None
    status = _git("status", "--porcelain", "--untracked-files=no", "--", ":/", ":(top,exclude)results", root=root)
    return commit, None if status is None else bool(status)


def _cpu_name() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


#: /proc/cpuinfo flags that decide kernel speed (x86 vector and matrix units, ARM SIMD)
VECTOR_FLAGS = ("sse4_2", "avx", "avx2", "fma", "avx512f", "avx512_vnni", "avx512_bf16", "avx512_fp16",
                "amx_tile", "amx_bf16", "amx_int8", "asimd", "sve")


def _cpuinfo() -> dict[str, Any]:
    """What the kernel reports about the CPU: vector extensions, current and maximum MHz,
    physical cores (empty values where /proc or /sys do not say)."""
    info: dict[str, Any] = {"cpu_vector": None, "cpu_mhz": None, "cpu_max_mhz": None, "cpu_physical_cores": None}
    try:
        text = Path("/proc/cpuinfo").read_text()
    except OSError:
        return info
    flags: set[str] = set()
    cores: set[tuple[str, str]] = set()
    phys = core = ""
    for line in text.splitlines():
        key, _, value = (part.strip() for part in line.partition(":"))
        if key in ("flags", "Features"):
            flags.update(value.split())
        elif key == "cpu MHz" and info["cpu_mhz"] is None:
            info["cpu_mhz"] = round(float(value)) if value.replace(".", "", 1).isdigit() else None
        elif key == "physical id":
            phys = value
        elif key == "core id":
            core = value
            cores.add((phys, core))
    info["cpu_vector"] = [f for f in VECTOR_FLAGS if f in flags]
    info["cpu_physical_cores"] = len(cores) or None
    with contextlib.suppress(OSError, ValueError):
        info["cpu_max_mhz"] = round(int(Path("/sys/devices/system/cpu/cpu0/cpufreq/cpuinfo_max_freq").read_text()) / 1000)
    return info


def _gpu_driver() -> str | None:
    """The NVIDIA driver version (``nvidia-smi``), or ``None`` without one."""
    try:
        res = subprocess.run(["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
                             capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.TimeoutExpired):
        return None
    lines = res.stdout.strip().splitlines() if res.returncode == 0 else []
    return lines[0].strip() if lines else None


def _mem_total() -> int | None:
    try:
        with open("/proc/meminfo") as f:
            return int(f.readline().split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        return None


def _version(mod: str) -> str | None:
    try:
        from importlib.metadata import version

        return version(mod)
    except Exception:  # noqa: BLE001 - not installed
        return None


#: JSON ``[commit, dirty]`` of the code a forked cell runs, set by the local pool when its
#: forkserver imports the code (the checkout may move on while the run goes)
CODE_GIT_ENV = "ATTNBENCH_CODE_GIT"


def code_git_state() -> tuple[tuple[str | None, bool | None], str | None]:
    """``((commit, dirty), checkout)``: the git state of the code this process runs (the local
    pool's, from :data:`CODE_GIT_ENV`, else the checkout's now) and, where the checkout has
    moved on since that code was imported, the checkout's commit now, ``-dirty`` appended where
    its code differs from that commit (else ``None``)."""
    now = git_state()
    imported = os.environ.get(CODE_GIT_ENV)
    if not imported:
        return now, None
    try:
        commit, dirty = json.loads(imported)
    except (ValueError, TypeError):
        return now, None
    return (commit, dirty), (f"{now[0]}{'-dirty' if now[1] else ''}" if (commit, dirty) != now else None)


def machine_fields(dev: str, props: Any = None) -> dict[str, Any]:
    """The fields of :func:`environment` that name the machine a cell ran on (what
    :func:`benchmarks.run.plan.device_key` reads): the device, its name (``props``: the CUDA
    device's properties), the CPU model, its vector units and its cores. No git or version calls."""
    return {"device": dev, "device_name": props.name if props else _cpu_name(), "cpu_model": _cpu_name(), **_cpuinfo(),
            "cpu_count": os.cpu_count(),
            "cpu_affinity": len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else None}


def environment(device: str | None = None, fingerprint: dict[str, Any] | None = None) -> dict[str, Any]:
    """What a result needs to be reproduced: versions, hardware (CPU model, vector extensions,
    MHz, cores; GPU, memory, driver), the run's speed ``fingerprint``
    (:mod:`benchmarks.run.fingerprint`), git commit and dirty flag (changes outside ``results/``) of
    the code that runs, and ``git_checkout_at_start`` where the checkout had moved on from it."""
    import torch

    cuda = torch.cuda.is_available()
    dev = str(device) if device is not None else ("cuda" if cuda else "cpu")
    (commit, dirty), checkout = code_git_state()
    on_gpu = dev.startswith("cuda") and cuda
    props = torch.cuda.get_device_properties(torch.device(dev)) if on_gpu else None
    return {
        "date": now_iso(),
        "python": platform.python_version(),
        "platform": platform.platform(),
        "torch": torch.__version__,
        "lightning": _version("lightning"),
        "torch_geometric": _version("torch-geometric"),
        "torchvision": _version("torchvision"),
        "torchaudio": _version("torchaudio"),
        "cuda": torch.version.cuda if cuda else None,
        **machine_fields(dev, props),
        "device_memory_bytes": props.total_memory if props else None,
        "cudnn": torch.backends.cudnn.version() if on_gpu else None,
        "gpu_driver": _gpu_driver() if on_gpu else None,
        "cpu_capability": _cpu_capability(torch),
        "memory_total_bytes": _mem_total(),
        "load_average": list(os.getloadavg()) if hasattr(os, "getloadavg") else None,
        "torch_threads": torch.get_num_threads(),
        # float32 arithmetic as configured for the cell (TF32 is switched the same way for
        # matmuls and cuDNN convolutions, so no model family gets a faster float32 than another)
        "float32_matmul_precision": torch.get_float32_matmul_precision(),
        "cudnn_allow_tf32": bool(torch.backends.cudnn.allow_tf32) if on_gpu else None,
        "git_commit": commit,
        "git_dirty": dirty,
        **({"git_checkout_at_start": checkout} if checkout else {}),
        "argv": sys.argv,
        "fingerprint": fingerprint,
    }


def _cpu_capability(torch: Any) -> str | None:
    """The CPU kernels torch dispatches to (``AVX2``, ``AVX512``, ...)."""
    try:
        return str(torch.backends.cpu.get_cpu_capability())
    except (AttributeError, RuntimeError):
        return None


# Record look-ups shared by the runner, the worker, the launchers and the CLI; ``opts`` is a
# ``runner.RunOptions`` (only ``force`` and ``retry_failed`` are read).
def on_disk(path: Path) -> dict[str, Any] | None:
    """The record at ``path`` as it is now (another run may have written it), or ``None``."""
    try:
        rec = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return rec if isinstance(rec, dict) else None


def same_record(a: dict[str, Any] | None, b: dict[str, Any] | None) -> bool:
    """Whether two loaded records are the same write (another run has not replaced it)."""
    if a is None or b is None:
        return a is b
    return all(a.get(k) == b.get(k) for k in ("status", "started", "finished"))


def should_run(prev: dict[str, Any], opts: Any, seen: dict[str, Any] | None) -> bool:
    """Whether a cell whose record ``prev`` is on disk now still needs this run to train it;
    ``seen`` is the record this run found when it started (another run may have written since)."""
    if not same_record(prev, seen):
        return False  # written by another run while this one was going: it is fresh
    if prev.get("status") == "ok":
        return opts.force
    return opts.force or opts.retry_failed or retried_by_default(prev)


def store(path: Path, rec: dict[str, Any], opts: Any, seen: dict[str, Any] | None, log) -> Path | None:
    """Write ``rec`` atomically, unless it is a failure and an ``ok`` record is there that this
    run did not mean to replace (written by another run since this one started, or kept
    because the user did not ask for ``--force``)."""
    prev = on_disk(path)
    if rec["status"] != "ok" and prev is not None and prev.get("status") == "ok":
        if not opts.force or not same_record(prev, seen):
            log(f"    (kept the ok record at {path}; this attempt failed: {rec['reason']})")
            return None
    return write_json_atomic(path, rec)
