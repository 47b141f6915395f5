"""``attnbench buckets CONFIG [--counts 1,2,4,8] [--data-dir DIR] [--out FILE]``: what fixed length
buckets (``trainer.length_buckets``, implied by ``trainer.compile: reduce-overhead``) would cost each
sequence dataset of a config, before any training: per bucket count, the padded lengths, the
distinct batch shapes of a training epoch and of validation + test (under ``reduce-overhead``
one compiled graph each), and the padding against batches padded to their own longest item.
Reads the data only (no model is built); writes the figures as JSON with ``--out``. ``--capture``
also tries each of the config's models on one bucketed training batch as ``reduce-overhead``
compiles it (the whole network one graph, forward and backward traced; no CUDA graphs, no
Inductor): captured, or the one-line reason, before a GPU hour is spent on it."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from benchmarks.cli.options import add_data_options, check_data_dir, load_cells
from benchmarks.config.schema import CliError

__all__ = ["add_buckets", "cmd_buckets", "bucket_table"]

DEFAULT_COUNTS = (1, 2, 4, 8)


def add_buckets(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("buckets", help="what length buckets cost each sequence dataset of a config",
                       description="For every sequence dataset of a suite config: the padded lengths, the distinct "
                       "batch shapes (one compiled graph each under trainer.compile: reduce-overhead) and the "
                       "padding of K length buckets, against batches padded to their own longest item. Reads data "
                       "only; no training.")
    p.add_argument("config", metavar="CONFIG", help="a suite YAML, or the name of a shipped one (e.g. quick)")
    p.add_argument("--counts", default=",".join(map(str, DEFAULT_COUNTS)), metavar="K,K,...",
                   help=f"bucket counts to try (default {','.join(map(str, DEFAULT_COUNTS))})")
    p.add_argument("--set", dest="sets", action="append", default=[], metavar="KEY=VALUE",
                   help="override a config key as with attnbench run; repeatable")
    p.add_argument("--out", metavar="FILE", help="also write the figures to this JSON file")
    p.add_argument("--capture", action="store_true", help="also check that each model of the config's sequence "
                   "cells captures as one graph (forward and backward) on a bucketed training batch, on this "
                   "machine's CPU")
    add_data_options(p)
    p.set_defaults(handler=cmd_buckets)


def _counts(text: str) -> list[int]:
    try:
        counts = [int(t) for t in text.split(",") if t.strip()]
    except ValueError:
        counts = []
    if not counts or min(counts) < 1:
        raise CliError(f"--counts {text!r}: expected comma-separated integers >= 1, e.g. 1,2,4,8")
    return sorted(set(counts))


def _out_file(value: str | None) -> Path | None:
    """``--out``: a file path whose nearest existing folder is writable; checked before any work."""
    import os

    if value is None:
        return None
    out = Path(value).expanduser()
    if out.is_dir():
        raise CliError(f"--out {value}: is a folder; expected a JSON file path, e.g. {out / 'buckets.json'}")
    probe = out.parent
    while not probe.exists():
        probe = probe.parent
    if not probe.is_dir() or not os.access(probe, os.W_OK | os.X_OK):
        raise CliError(f"--out {value}: {probe} is not a writable folder")
    return out


def _shapes(dm: Any, split: str, train: bool) -> set[tuple[int, int]]:
    """(items, padded length) of every batch of ``split``'s loader (one epoch, from the sampler)."""
    sampler = dm._loader(split, train).batch_sampler
    return dm.buckets.batch_shapes(sampler.all_batches(0), sampler.lengths)


def capture(cell, dm: Any) -> str | None:
    """:func:`capture_here` in a forked child where the platform forks, so that a trace that
    crashes the interpreter (a 5000-step LSTM unrolled: the stack overflows) costs its own line."""
    import multiprocessing as mp

    if "fork" not in mp.get_all_start_methods():
        return capture_here(cell, dm)
    from benchmarks.run.worker import describe_exit

    ctx = mp.get_context("fork")
    recv, send = ctx.Pipe(duplex=False)
    child = ctx.Process(target=lambda: send.send(capture_here(cell, dm)), daemon=True)
    child.start()
    send.close()
    try:
        return recv.recv()
    except EOFError:  # the child died before it answered
        child.join()
        return f"the tracing process crashed ({describe_exit(child.exitcode)})"
    finally:
        child.join()


def capture_here(cell, dm: Any) -> str | None:
    """None when ``cell``'s network compiles whole (``fullgraph``, one shape) through a training
    step's forward and backward on a training batch of ``dm`` (of two items: cheap on a CPU at
    any length); else the one-line reason."""
    import torch
    from torch._dynamo.backends.common import aot_autograd
    from functorch.compile import make_boxed_func

    from benchmarks.run.callbacks import COMPILE_MODE_KWARGS
    from tasks.common.registry import get_task

    task = get_task(cell.task)
    torch.manual_seed(cell.seed)
    net = task.models.get(cell.model).build(dm.info, **cell.config["model_params"])
    module = task.make_module(net, dm.info, **cell.config["module_params"])
    kwargs = {k: v for k, v in COMPILE_MODE_KWARGS["reduce-overhead"].items() if k != "mode"}
    keep = torch._dynamo.config.allow_rnn
    torch._dynamo.reset()
    try:
        torch._dynamo.config.allow_rnn = True  # as the compile callback sets it
        net.compile(backend=aot_autograd(fw_compiler=lambda gm, _: make_boxed_func(gm.forward)), **kwargs)
        module.train()
        sizes = dm.batch_size, dm.max_tokens
        dm.batch_size, dm.max_tokens = 2, None  # what is captured does not depend on the batch size
        try:
            batch = next(iter(dm.train_dataloader()))
        finally:
            dm.batch_size, dm.max_tokens = sizes
        module.step(batch, "train").loss.backward()
        return None
    except Exception as err:  # noqa: BLE001 - the reason is the result
        inner = getattr(err, "inner_exception", None) or err
        lines = [ln for ln in str(inner).strip().splitlines() if ln.strip()]
        return f"{type(inner).__name__}: {lines[0][:200] if lines else repr(inner)}"
    finally:
        torch._dynamo.config.allow_rnn = keep
        torch._dynamo.reset()


def bucket_table(cells: list, counts: list[int], data_dir: Path | None, cache_dir: Path,
                 log=print, check_capture: bool = False) -> list[dict[str, Any]]:
    """One row per (sequence dataset of ``cells``, bucket count); with ``check_capture`` one
    more row per model of those cells (``capture``: None or the reason)."""
    from tasks.common.registry import get_task

    rows: list[dict[str, Any]] = []
    seen: set[str] = set()
    for cell in cells:
        key = f"{cell.task}/{cell.dataset} {cell.config['dataset_params']} {cell.train_fraction}"
        if key in seen:
            continue
        seen.add(key)
        ds = get_task(cell.task).datasets.get(cell.dataset)
        dm = ds.build(data_dir, cache_dir, cell.seed, **cell.config["dataset_params"])
        dm.setup("fit")
        if cell.train_fraction < 1:
            dm.limit_train(cell.train_fraction, cell.seed)
        if not callable(getattr(dm, "use_length_buckets", None)) or dm.use_length_buckets(1) is None:
            continue  # fixed shapes already (images, full-batch graphs)
        tag = cell.config.get("diagnostic")
        name = f"{cell.task}/{cell.dataset}" + (f" ({tag})" if tag else "")
        for k in counts:
            dm.use_length_buckets(k)
            rep = dm.padding_report()
            evals = _shapes(dm, "val", False) | _shapes(dm, "test", False)
            rows.append({"dataset": name, "params": cell.config["dataset_params"], "count": k, "kind": "buckets",
                         "lengths": rep["buckets"], "train_shapes": rep["shapes_per_epoch"],
                         "eval_shapes": len(evals), "positions": rep["positions"], "padded": rep["padded"],
                         "repeated": rep["repeated"], "overhead": rep["overhead"],
                         "batch_longest_overhead": rep["batch_longest"]["overhead"]})
            log(_line(rows[-1]))
        if check_capture:
            from benchmarks.config.trainer import bucket_spec

            dm.use_length_buckets(bucket_spec(cell.config["trainer"]))  # the config's, else the default count
            done: set[str] = set()
            for other in cells:
                same = (other.task, other.dataset, other.config["dataset_params"]) == (
                    cell.task, cell.dataset, cell.config["dataset_params"])
                mkey = f"{other.model} {other.config['model_params']}"
                if same and mkey not in done:
                    done.add(mkey)
                    why = capture(other, dm)
                    rows.append({"dataset": name, "model": other.model, "kind": "capture", "capture": why})
                    log(f"  capture {name} / {other.model}: " + ("one graph (forward and backward)" if why is None
                                                                  else f"NOT captured: {why}"))
    return rows


HEADER = (f"{'dataset':<34} {'K':>2}  {'padded lengths':<34} {'train':>5} {'eval':>4}  "
          f"{'padding':>8} {'repeats':>7}  {'longest-item batches':>20}")


def _line(r: dict[str, Any]) -> str:
    lengths = ",".join(map(str, r["lengths"]))
    lengths = lengths if len(lengths) <= 34 else lengths[:31] + "..."
    return (f"{r['dataset'][:34]:<34} {r['count']:>2}  {lengths:<34} {r['train_shapes']:>5} {r['eval_shapes']:>4}  "
            f"{r['overhead']:>+8.1%} {r['repeated'] / max(r['positions'], 1):>7.1%}  "
            f"{r['batch_longest_overhead']:>+20.1%}")


def cmd_buckets(args: argparse.Namespace) -> int:
    """Exit codes: 0 printed, 2 usage or config error (a dataset that cannot load: its one line)."""
    from benchmarks.run import records as R
    from benchmarks.run.cell import DEFAULT_CACHE

    counts = _counts(args.counts)
    out = _out_file(args.out)
    path, cfg, cells = load_cells(args.config, args.sets)
    data_dir = check_data_dir(args.data_dir)
    cache_dir = Path(args.cache_dir).expanduser() if args.cache_dir else DEFAULT_CACHE
    print(f"length buckets of {cfg['suite']}'s sequence datasets: per count K, the padded lengths, distinct batch "
          "shapes of one training epoch and of validation + test, and the positions padding and repeated items add "
          "to the data's own (a training epoch), against batches padded to their longest item")
    print(HEADER)
    try:
        rows = bucket_table(cells, counts, data_dir, cache_dir, check_capture=args.capture)
    except (OSError, ValueError) as err:
        raise CliError(f"{args.config}: {type(err).__name__}: {str(err).splitlines()[0] if str(err) else ''}") from None
    if not rows:
        print("(no sequence dataset in this config: images and full-batch graphs have one batch shape already)")
    print("under trainer.compile: reduce-overhead each distinct shape is one compiled graph per stage "
          "(tests/benchmarks/run/test_compile.py counts them)")
    if out is not None:
        R.write_json_atomic(out, {"suite": cfg["suite"], "config": str(path), "counts": counts,
                                             "rows": rows, "env": R.environment("cpu")})
        print(f"written: {args.out}")
    return 0
