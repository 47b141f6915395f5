"""The flow every micro-benchmark shares, so a benchmark declares only what is its own (its
schema, its points, its checks, its plot):

* :func:`load_config` / :func:`config_loader`: read a YAML config, apply ``--set key=value``
  overrides and ``--device``/``--dtype``, validate against the benchmark's schema, then the
  benchmark's own cross-field checks;
* :class:`Sweep`: resolve the device, memory cap and time limit, open the results document,
  run the points one by one (an oom/timeout skips the larger sizes of its group; the JSON is
  rewritten atomically after every point), then close it (checks, wall time, plot, JSON) and
  print the PASS/FAIL table;
* :func:`entry_point`: ``main(config=, out=, device=, dtype=, sets=) -> int``, the body of
  ``attnbench bench NAME``.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any, Callable, Iterable, Sequence

from benchmarks.config.schema import apply_overrides, load_yaml, validate
from benchmarks.micro.common import (
    attn_core_fingerprint,
    busy_warning,
    point_record,
    resolve_device,
    resolve_mem_cap,
    run_point,
)
from benchmarks.run import measure

__all__ = ["load_config", "config_loader", "entry_point", "Sweep", "finish_sweep"]

Log = Callable[[str], None]


# --------------------------------------------------------------------------- configs
def load_config(path: str | Path | None, *, schema: dict, default: Path, overrides: Sequence[str] = (),
                device: str | None = None, dtype: str | None = None,
                complete: Callable[[dict, str], None] | None = None, auto_dtype: str | None = None) -> dict:
    """Read ``path`` (``default`` when ``None``), apply the ``key.sub=value`` ``overrides`` and
    ``device``/``dtype`` (``auto_dtype``: what ``--dtype auto`` means where the schema has no
    ``auto``), validate against ``schema``, run ``complete(cfg, source)`` (the benchmark's own
    checks; raises :class:`~benchmarks.config.schema.ConfigError`) and record ``config_path``."""
    path = Path(path) if path is not None else default
    raw = apply_overrides(load_yaml(path), list(overrides))
    if device is not None:
        raw["device"] = device
    if dtype is not None:
        raw["dtype"] = auto_dtype if auto_dtype is not None and dtype == "auto" else dtype
    src = str(path)
    cfg = validate(raw, schema, source=src)
    if complete is not None:
        complete(cfg, src)
    cfg["config_path"] = src
    return cfg


def config_loader(schema: dict, default: Path, *, complete: Callable[[dict, str], None] | None = None,
                  auto_dtype: str | None = None) -> Callable[..., dict]:
    """A benchmark's ``load_config(path=None, *, overrides=(), device=None, dtype=None)``."""

    def load(path: str | Path | None = None, *, overrides: Sequence[str] = (), device: str | None = None,
             dtype: str | None = None) -> dict:
        """Read, override (``key.sub=value``), validate and complete a config."""
        return load_config(path, schema=schema, default=default, overrides=overrides, device=device, dtype=dtype,
                           complete=complete, auto_dtype=auto_dtype)

    load.__name__ = load.__qualname__ = "load_config"
    return load


# --------------------------------------------------------------------------- entry point
def entry_point(name: str, load: Callable[..., dict], run_sweep: Callable[..., Any]) -> Callable[..., int]:
    """``main(*, config=None, out=None, device=None, dtype=None, sets=(), log=None) -> int`` of
    ``attnbench bench <name>``: load and validate the config (with ``--set`` overrides), run the
    sweep into ``out`` (default ``results/bench/<name>``). The exit code is 0 when the sweep ran:
    failed points and failed checks are results, not errors (a bad config raises)."""

    def main(*, config: str | Path | None = None, out: str | Path | None = None, device: str | None = None,
             dtype: str | None = None, sets: Sequence[str] = (), log: Log | None = None) -> int:
        log = log or (lambda s: print(s, flush=True))
        cfg = load(config, overrides=sets, device=device, dtype=dtype)
        run_sweep(cfg, Path(out) if out is not None else Path("results") / "bench" / name, log=log)
        return 0

    main.__doc__ = (f"``attnbench bench {name}``: returns the exit code (0 when the sweep ran; failed points "
                    "and failed checks are results, not errors).")
    return main


# --------------------------------------------------------------------------- closing
def finish_sweep(doc: dict, *, checks: list[dict], t_start: float, plot: bool, plot_fn: Callable[[dict, Path], None],
                 json_path: Path, png_path: Path, log: Log) -> None:
    """Store the checks, mark the sweep done with its wall time, draw the plot (a plot failure
    is recorded, never loses the data) and write the JSON atomically."""
    doc["checks"] = checks
    doc["status"] = "done"
    doc["wall_time_s"] = time.perf_counter() - t_start
    if plot:
        try:
            plot_fn(doc, png_path)
            doc["plot"] = png_path.name
        except Exception as exc:  # noqa: BLE001 - a plot failure must not lose the data
            doc["plot_error"] = f"{type(exc).__name__}: {exc}"
            log(f"plot failed: {doc['plot_error']}")
    measure.atomic_write_json(json_path, doc)


# --------------------------------------------------------------------------- the sweep
class Sweep:
    """One run of micro-benchmark ``name`` over a validated ``cfg`` into ``out_dir``
    (``bench_<name>.json`` and ``.png``): the device, memory cap (``cap``) and per-point time
    limit (``timeout``) resolved from the config keys of :func:`~benchmarks.micro.common.sweep_fields`."""

    def __init__(self, name: str, cfg: dict, out_dir: str | Path, *, log: Log = print) -> None:
        self.t_start = time.perf_counter()
        self.name, self.cfg, self.log = name, cfg, log
        self.device = resolve_device(cfg["device"])
        self.cap = resolve_mem_cap(cfg, self.device)
        self.timeout = cfg["point_timeout_s"][self.device]
        out_dir = Path(out_dir)
        self.json_path, self.png_path = out_dir / f"bench_{name}.json", out_dir / f"bench_{name}.png"

    def limits(self) -> dict:
        """The setup fields every benchmark records: memory cap, time limit, isolation."""
        return {"mem_cap_bytes": self.cap, "point_timeout_s": self.timeout, "isolate": self.cfg["isolate"]}

    def new_doc(self, setup: dict, *, head: dict | None = None, tail: dict | None = None) -> dict:
        """The results document, ``status: running``: ``head`` goes before the environment,
        ``tail`` after the (empty) points."""
        return {
            "benchmark": self.name, "schema_version": 1, "config": self.cfg, "setup": setup, **(head or {}),
            "environment": {**measure.collect_environment(self.device), "attn_core_sha1": attn_core_fingerprint()},
            "points": [], **(tail or {}), "status": "running",
        }

    def write(self, doc: dict) -> None:
        measure.atomic_write_json(self.json_path, doc)

    def open(self, doc: dict, n_points: int, *, dtype: str, detail: str = "", noun: str = "points",
             busy_hint: str = "") -> None:
        """Print the headline, warn when the machine is busy (recorded in ``warnings``), write the JSON."""
        cap = self.cap
        self.log(f"attnbench bench {self.name}: {n_points} {noun} on {doc['environment']['device_name']}, {dtype}; "
                 + (f"{detail}; " if detail else "") + f"per-point limit {self.timeout:g} s"
                 + (f", memory cap {cap / (1 << 30):.1f} GiB" if cap else ""))
        self.log(f"results -> {self.json_path}")
        busy = busy_warning(doc["environment"], self.device)
        if busy:
            doc["warnings"] = [busy]
            self.log(f"warning: the {busy}: CPU timings will be noisy{busy_hint}")
        self.write(doc)

    def run(self, doc: dict, points: list[dict], *, keep: Iterable[str], line: Callable[[int, int, dict, dict], str],
            where: Callable[[dict], str], group: Callable[[dict], str] = lambda p: p["method"],
            skip_on: Callable[[dict], tuple[str, ...]] = lambda p: ("oom", "timeout"),
            pre: Callable[[dict], dict | None] | None = None,
            post: Callable[[dict, dict], None] | None = None) -> None:
        """Run ``points`` in order (:func:`~benchmarks.micro.common.run_point`): ``pre(point)`` may
        return a result that replaces the run (a skip); ``post(point, record)`` completes the
        stored record; each record is appended to ``doc["points"]``, printed and saved."""
        failed: dict[str, tuple[str, str]] = {}
        keep = tuple(keep)
        for k, p in enumerate(points, 1):
            rec = pre(p) if pre is not None else None
            if rec is None:
                rec = run_point(p, group=group(p), where=where(p), failed=failed, skip_on=skip_on(p),
                                skip_after_failure=self.cfg["skip_larger_after_failure"], isolate=self.cfg["isolate"],
                                timeout_s=self.timeout, mem_cap_bytes=self.cap)
            record = point_record(p, rec, keep)
            if post is not None:
                post(p, record)
            doc["points"].append(record)
            self.log(line(k, len(points), p, record))
            self.write(doc)

    def warn_code_changed(self, doc: dict, *, log: bool = True) -> None:
        """Add a warning when the points measured more than one version of attn_core."""
        shas = sorted({r["attn_core_sha1"] for r in doc["points"] if r.get("attn_core_sha1")})
        if len(shas) > 1:
            doc.setdefault("warnings", []).append(
                f"attn_core changed during the sweep: points measured {len(shas)} versions ({', '.join(shas)})")
            if log:
                self.log(f"warning: {doc['warnings'][-1]}")

    def close(self, doc: dict, checks: list[dict], *, plot_fn: Callable[[dict, Path], None],
              format_checks: Callable[[list[dict]], str], summary: Sequence[str] = ()) -> dict:
        """:func:`finish_sweep`, then print ``summary`` lines, the checks and where it all went."""
        finish_sweep(doc, checks=checks, t_start=self.t_start, plot=self.cfg["plot"], plot_fn=plot_fn,
                     json_path=self.json_path, png_path=self.png_path, log=self.log)
        for s in summary:
            self.log(s)
        self.log(format_checks(doc["checks"]))
        self.log(f"done in {doc['wall_time_s']:.1f} s: {self.json_path}"
                 + (f", {self.png_path}" if "plot" in doc else ""))
        return doc

