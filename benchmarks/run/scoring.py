"""More test sets than a cell's own, and trained weights that outlive their cell.

* A cell may name extra test sets (``test_sets: {name: {dataset param: value}}`` in its
  config): each is the cell's dataset with those parameters changed, scored at the best
  checkpoint right after the cell's own test, and stored in the record under ``test_sets``.
* With ``keep_checkpoints`` a cell keeps its best weights beside its record (``<record>.pt``,
  a plain dict of tensors loaded with ``torch.load(weights_only=True)``: no code runs on load).
* ``attnbench eval`` (:func:`evaluate`) scores kept weights on a new test set without training
  and adds it to each record's ``test_sets``.

A test set may change the **test split only**: the model was built from the training data's
vocabulary, classes and normalisation, so a test set whose data info differs in anything but
its test side is refused (:func:`check_same_training_data`) instead of scored wrongly.
"""

from __future__ import annotations

import hashlib
import re
from pathlib import Path
from typing import Any, Callable, Iterable

__all__ = ["WEIGHTS_FORMAT", "TestSetError", "comparable_info", "check_same_training_data", "weights_path",
           "save_weights", "load_weights", "score", "score_test_sets", "default_name", "eval_trainer"]

WEIGHTS_FORMAT = "attnbench-weights-1"
#: data info keys that describe the test side (or every split's lengths) and may differ
_TEST_SIDE = ("max_frames", "mean_frames")


class TestSetError(ValueError):
    """A test set that cannot be scored (one line naming it and why)."""

    __test__ = False  # not a pytest test class


def comparable_info(info: dict[str, Any]) -> dict[str, Any]:
    """The plain values of a data module's ``info`` that the model was built from: everything
    JSON-like except the test side (``num_test``, lengths over all splits). Stored in the
    record (``data.info``) so that ``attnbench eval`` can check a new test set against it."""
    plain = (int, float, str, bool, list, tuple, type(None))
    return {k: list(v) if isinstance(v, tuple) else v for k, v in info.items()
            if isinstance(v, plain) and "test" not in k and k not in _TEST_SIDE}


def check_same_training_data(name: str, trained: dict[str, Any], new: dict[str, Any]) -> None:
    """Refuse a test set whose data differs from the training data in more than its test side."""
    a, b = comparable_info(trained), comparable_info(new)
    diff = sorted(k for k in set(a) | set(b) if a.get(k) != b.get(k))
    if diff:
        shown = ", ".join(f"{k} ({a.get(k)!r} -> {b.get(k)!r})" for k in diff[:4])
        raise TestSetError(f"test set {name!r} changes the data the model was trained on ({shown}); "
                           "a test set may change the test split only")


# --------------------------------------------------------------------------- weights
def weights_path(record_path: Path) -> Path:
    """Where a cell keeps its best weights: beside its record, same stem."""
    return Path(record_path).with_suffix(".pt")


def save_weights(path: Path, module: Any, meta: dict[str, Any]) -> dict[str, Any]:
    """Write ``module``'s weights (CPU tensors) and ``meta`` atomically; returns the record's
    ``checkpoint`` block (file name relative to the record, size, sha256)."""
    import torch

    from tasks.common.data import write_atomic

    state = {k: v.detach().cpu() for k, v in module.state_dict().items()}
    write_atomic(Path(path), lambda tmp: torch.save({"format": WEIGHTS_FORMAT, **meta, "state_dict": state}, tmp))
    digest = hashlib.sha256(Path(path).read_bytes()).hexdigest()
    return {"file": Path(path).name, "bytes": Path(path).stat().st_size, "sha256": digest, "format": WEIGHTS_FORMAT}


def load_weights(path: Path, expect_sha256: str | None = None) -> dict[str, Any]:
    """Load kept weights with ``weights_only=True``; a wrong format or checksum is one line."""
    import torch

    path = Path(path)
    if not path.is_file():
        raise TestSetError(f"{path}: no kept weights (run the suite with --keep-checkpoints)")
    if expect_sha256 and hashlib.sha256(path.read_bytes()).hexdigest() != expect_sha256:
        raise TestSetError(f"{path}: its sha256 differs from the one its record stored (changed or corrupt)")
    try:
        obj = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as err:  # noqa: BLE001 - any unreadable file is one line
        raise TestSetError(f"{path}: not loadable as weights only: {type(err).__name__}: {str(err)[:200]}") from None
    if not isinstance(obj, dict) or obj.get("format") != WEIGHTS_FORMAT or not isinstance(obj.get("state_dict"), dict):
        raise TestSetError(f"{path}: not an attnbench weights file (format {WEIGHTS_FORMAT})")
    return obj


# --------------------------------------------------------------------------- scoring
def score(trainer: Any, module: Any, datamodule: Any) -> dict[str, float]:
    """The ``test/*`` metrics of ``module`` as it is (no checkpoint is loaded) on ``datamodule``."""
    out = trainer.test(module, datamodule=datamodule, verbose=False)
    return {k.split("/", 1)[1]: float(v) for k, v in (out[0] if out else {}).items() if k.startswith("test/")}


def build_test_set(task: Any, config: dict[str, Any], name: str, override: dict[str, Any], data_dir: Any,
                   cache_dir: Any, seed: int, trained_info: dict[str, Any]) -> Any:
    """The data module of test set ``name``: the cell's dataset with ``override`` applied,
    checked to share the training data the model was built from."""
    ds = task.datasets.get(config["dataset"])
    dm = ds.build(data_dir, cache_dir, seed, **{**config["dataset_params"], **override})
    dm.prepare_data()
    dm.setup("test")
    check_same_training_data(name, trained_info, dm.info)
    return dm


def score_test_sets(trainer: Any, module: Any, task: Any, config: dict[str, Any], seed: int,
                    trained_info: dict[str, Any], data_dir: Any, cache_dir: Any, log: Callable[[str], None],
                    *, by: str = "run", only: Iterable[str] | None = None) -> dict[str, dict[str, Any]]:
    """Score every extra test set of ``config`` (or those in ``only``). A test set that fails
    (missing file, changed training data) is stored with its ``error`` and costs nothing else."""
    from benchmarks.run.records import now_iso

    results: dict[str, dict[str, Any]] = {}
    wanted = set(only) if only is not None else None
    for name, override in (config.get("test_sets") or {}).items():
        if wanted is not None and name not in wanted:
            continue
        entry: dict[str, Any] = {"params": dict(override), "by": by, "scored": now_iso()}
        try:
            dm = build_test_set(task, config, name, override, data_dir, cache_dir, seed, trained_info)
            entry["metrics"] = score(trainer, module, dm)
            entry["data"] = {"checksum": dm.checksum(), "num_test": dm.info.get("num_test")}
            if task.metric not in entry["metrics"]:
                raise TestSetError(f"test set {name!r}: no test metric {task.metric!r} was logged")
        except Exception as err:  # noqa: BLE001 - one test set's failure is stored, the cell stands
            entry["error"] = f"{type(err).__name__}: {str(err).strip().splitlines()[0][:300] if str(err).strip() else repr(err)}"
            log(f"    test set {name!r}: {entry['error']}")
        results[name] = entry
    return results


def default_name(override: dict[str, Any]) -> str:
    """A test set name from its parameters: ``{test_set: test_2017_flickr}`` -> ``test_2017_flickr``."""
    raw = "_".join(str(v) for v in override.values()) or "extra"
    name = re.sub(r"[^A-Za-z0-9._-]+", "_", raw).strip("._-") or "extra"
    return name[:60]


def eval_trainer(precision: str, accelerator: str, root: Path) -> Any:
    """A quiet one-device trainer that only tests (no logger, no checkpoints)."""
    import lightning as L

    return L.Trainer(accelerator=accelerator, devices=1, precision=precision, logger=False,
                     enable_progress_bar=False, enable_model_summary=False, enable_checkpointing=False,
                     default_root_dir=str(root))


# --------------------------------------------------------------------------- attnbench eval
def _trained_info(task: Any, rec: dict[str, Any], data_dir: Any, cache_dir: Any) -> dict[str, Any]:
    """The training data info a record stored; older records did not store it: rebuild it."""
    info = (rec.get("data") or {}).get("info")
    if isinstance(info, dict):
        return info
    cfg = rec["config"]
    dm = task.datasets.get(cfg["dataset"]).build(data_dir, cache_dir, rec["seed"], **cfg["dataset_params"])
    dm.prepare_data()
    dm.setup("fit")
    return dm.info


def evaluate_record(path: Path, rec: dict[str, Any], name: str, override: dict[str, Any], *, data_dir: Any,
                    cache_dir: Any, accelerator: str | None, root: Path) -> dict[str, Any]:
    """Score one record's kept weights on test set ``name``; returns its ``test_sets`` entry."""
    import lightning as L

    from benchmarks.run.records import now_iso
    from tasks.common.registry import get_task

    cfg, seed = rec["config"], int(rec["seed"])
    ck = rec.get("checkpoint") or {}
    weights = load_weights(path.parent / str(ck.get("file", weights_path(path).name)), ck.get("sha256"))
    task = get_task(cfg["task"])
    dm = build_test_set(task, cfg, name, override, data_dir, cache_dir, seed,
                        _trained_info(task, rec, data_dir, cache_dir))
    L.seed_everything(seed, workers=True, verbose=False)
    net = task.models.get(cfg["model"]).build(dm.info, **cfg["model_params"])
    module = task.make_module(net, dm.info, **cfg["module_params"])
    try:
        module.load_state_dict(weights["state_dict"])
    except RuntimeError as err:
        raise TestSetError(f"{path}: kept weights do not fit model {cfg['model']!r}: {str(err).splitlines()[0]}") from None
    device = accelerator or ("gpu" if cfg.get("device") == "cuda" else "cpu")
    trainer = eval_trainer(cfg["trainer"].get("precision", "32-true"), device, root)
    metrics = score(trainer, module, dm)
    if task.metric not in metrics:
        raise TestSetError(f"{path}: test set {name!r}: no test metric {task.metric!r} was logged")
    return {"params": dict(override), "by": "eval", "scored": now_iso(), "metrics": metrics,
            "data": {"checksum": dm.checksum(), "num_test": dm.info.get("num_test")}}


def evaluate(out: Path, name: str, override: dict[str, Any], *, select: Callable[[dict[str, Any]], bool],
             data_dir: Any = None, cache_dir: Any = None, accelerator: str | None = None, force: bool = False,
             log: Callable[[str], None] = print) -> tuple[int, int, list[str]]:
    """Score every selected ``ok`` record under ``out`` that kept its weights on test set
    ``name`` and store it in the record (atomically, under the cell's claim). Returns
    ``(scored, skipped, failures)``; a failing record costs only itself."""
    import json
    import shutil
    import tempfile

    from benchmarks.run import claims as C
    from benchmarks.run.callbacks import quiet_lightning
    from benchmarks.run.records import iter_record_files, write_json_atomic

    scored, skipped, failures = 0, 0, []
    root = Path(tempfile.mkdtemp(prefix="attnbench-eval-"))
    try:
        for path in iter_record_files(out):
            try:
                rec = json.loads(path.read_text(encoding="utf-8"))
            except (OSError, ValueError):
                continue
            if not isinstance(rec, dict) or rec.get("status") != "ok" or not rec.get("checkpoint") or not select(rec):
                continue
            label = f"{rec.get('task')}/{rec.get('dataset')}/{rec.get('model')}/seed{rec.get('seed')}"
            if name in (rec.get("test_sets") or {}) and not force:
                skipped += 1
                continue
            held = C.claim(C.claim_path(path))
            if held is None:
                log(f"  {label}: held by a running worker, skipped")
                skipped += 1
                continue
            with held:
                try:
                    with quiet_lightning():
                        entry = evaluate_record(path, rec, name, override, data_dir=data_dir, cache_dir=cache_dir,
                                                accelerator=accelerator, root=root)
                except Exception as err:  # noqa: BLE001 - one record's failure is one line
                    msg = str(err).strip().splitlines()[0] if str(err).strip() else repr(err)
                    failures.append(f"{label}: {msg if isinstance(err, TestSetError) else f'{type(err).__name__}: {msg}'}")
                    log(f"  {label}: FAILED: {failures[-1].split(': ', 1)[1]}")
                    continue
                now = json.loads(path.read_text(encoding="utf-8"))  # as on disk now, under the claim
                now.setdefault("test_sets", {})[name] = entry
                write_json_atomic(path, now)
                scored += 1
                log(f"  {label}: {name} " + ", ".join(f"{k}={v:.4g}" for k, v in entry["metrics"].items()))
    finally:
        shutil.rmtree(root, ignore_errors=True)
    return scored, skipped, failures
