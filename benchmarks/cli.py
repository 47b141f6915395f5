"""The ``attnbench`` command line (also ``python -m benchmarks``).

Subcommands (more, ``run``, ``report`` and ``data``, plug in the same way: a function that
adds the subparser and a handler that returns an exit code):

* ``attnbench bench NAME [--config PATH] [--out DIR] [--device ...] [--dtype ...] [--set K=V]``:
  run a micro-benchmark from :data:`MICRO_BENCHMARKS`;
* ``attnbench list``: what can be run, and the shipped configs;
* ``attnbench run CONFIG``, ``attnbench report [DIR]``, ``attnbench data [CONFIG]``: the suite
  commands, in :mod:`benchmarks.commands`.

Exit codes: 0 success, 1 failed cells in a run or an unexpected error, 2 usage, config or
input error (a one-line message, never a traceback), 130 interrupted (Ctrl-C), 143 SIGTERM.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

__all__ = ["main", "build_parser", "MICRO_BENCHMARKS", "MicroBenchmark", "CliError"]

CONFIG_DIR = Path(__file__).resolve().parent / "configs"


class CliError(Exception):
    """A usage error: printed as ``attnbench: error: ...`` with exit code 2."""


@dataclass(frozen=True)
class MicroBenchmark:
    name: str
    module: str  # has main(config=, out=, device=, dtype=, sets=) -> int
    summary: str
    default_config: str
    configs: tuple[str, ...]

    def run(self, **kwargs) -> int:
        return importlib.import_module(self.module).main(**kwargs)


#: ``attnbench bench NAME``: the registry of micro-benchmarks.
MICRO_BENCHMARKS: dict[str, MicroBenchmark] = {
    "attention": MicroBenchmark(
        name="attention",
        module="benchmarks.bench_attention",
        summary="attention scaling: fwd+bwd time and peak memory vs sequence length and graph size "
                "(and every registered attention pattern vs full SDPA: bench_attention_variants.yaml)",
        default_config="bench_attention.yaml",
        configs=("bench_attention.yaml", "bench_attention_full.yaml", "bench_attention_variants.yaml"),
    ),
    "complexity": MicroBenchmark(
        name="complexity",
        module="benchmarks.bench_complexity",
        summary="'Why Self-Attention' (Transformer paper, Table 1) measured: time/memory exponents in n and d, "
                "sequential operations and maximum path length per layer type",
        default_config="bench_complexity.yaml",
        configs=("bench_complexity.yaml",),
    ),
    "speech": MicroBenchmark(
        name="speech",
        module="tasks.speech.bench",
        summary="speech models: train-step time and peak memory per sequence vs length (500-4000 frames), "
                "full vs truncated attention vs LSTM vs CNN",
        default_config="bench_speech.yaml",
        configs=("bench_speech.yaml",),
    ),
}


# --------------------------------------------------------------------------- subcommands
def _add_bench(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "bench",
        help="run a micro-benchmark",
        description="Run a micro-benchmark. Names: " + ", ".join(MICRO_BENCHMARKS),
    )
    p.add_argument("name", metavar="NAME", help="micro-benchmark: " + ", ".join(MICRO_BENCHMARKS))
    p.add_argument("--config", metavar="PATH", help="YAML config (default: the quick one shipped for NAME)")
    p.add_argument("--out", metavar="DIR", help="output folder (default: results/bench/NAME)")
    p.add_argument("--device", choices=("auto", "cpu", "cuda"), help="override the config's device")
    p.add_argument(
        "--dtype", choices=("auto", "float32", "bfloat16", "float16", "float64"), help="override the config's dtype"
    )
    p.add_argument(
        "--set", dest="sets", action="append", default=[], metavar="KEY=VALUE",
        help="override a config key (dotted, value as YAML), e.g. --set sequence.lengths=[256,512]; repeatable",
    )
    p.set_defaults(handler=_cmd_bench)


def _cmd_bench(args: argparse.Namespace) -> int:
    bench = MICRO_BENCHMARKS.get(args.name)
    if bench is None:
        raise CliError(
            f"unknown micro-benchmark {args.name!r}; valid names: {', '.join(sorted(MICRO_BENCHMARKS))}"
        )
    config = args.config if args.config is not None else CONFIG_DIR / bench.default_config
    out = args.out if args.out is not None else Path("results") / "bench" / bench.name
    return bench.run(config=config, out=out, device=args.device, dtype=args.dtype, sets=args.sets)


def _add_list(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("list", help="list micro-benchmarks and shipped configs")
    p.set_defaults(handler=_cmd_list)


def _cmd_list(args: argparse.Namespace) -> int:
    from benchmarks.commands import print_tasks

    print_tasks()
    w = max(len(n) for n in MICRO_BENCHMARKS)
    print("micro-benchmarks (attnbench bench NAME):")
    for b in MICRO_BENCHMARKS.values():
        print(f"  {b.name:<{w}}  {b.summary}")
        print(f"  {'':<{w}}  configs: {', '.join(b.configs)} (default {b.default_config})")
    print(f"configs ({CONFIG_DIR}):")
    for path in sorted(CONFIG_DIR.glob("*.yaml")):
        print(f"  {path.name}")
    return 0


def _add_run(sub):
    from benchmarks.commands import add_run

    add_run(sub)


def _add_report(sub):
    from benchmarks.commands import add_report

    add_report(sub)


def _add_data(sub):
    from benchmarks.commands import add_data

    add_data(sub)


def _add_cell(sub):
    from benchmarks.commands_cells import add_cell

    add_cell(sub)


def _add_status(sub):
    from benchmarks.commands_cells import add_status

    add_status(sub)


def _add_eval(sub):
    from benchmarks.commands_eval import add_eval

    add_eval(sub)


def _add_env(sub):
    from benchmarks.commands_env import add_env

    add_env(sub)


#: Subcommand builders, in help order.
SUBCOMMANDS: tuple[Callable[[argparse._SubParsersAction], None], ...] = (
    _add_run, _add_report, _add_eval, _add_bench, _add_list, _add_data, _add_cell, _add_status, _add_env,
)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="attnbench",
        description="attnbench: when does self-attention beat recurrence and convolution, and at what cost?",
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for add in SUBCOMMANDS:
        add(sub)
    return parser


class _Interrupted:
    """SIGINT/SIGTERM seen: Lightning turns a KeyboardInterrupt inside ``fit`` into a plain
    ``sys.exit(1)``, so the signal itself is remembered to report it truthfully."""

    signum: int | None = None

    @classmethod
    def handler(cls, signum, frame) -> None:
        cls.signum = signum
        raise KeyboardInterrupt


def _install_signal_handlers() -> list[tuple[int, Any]]:
    import signal

    old = []
    for sig in (signal.SIGINT, signal.SIGTERM):
        try:
            old.append((sig, signal.signal(sig, _Interrupted.handler)))
        except ValueError:  # not the main thread (e.g. called from a test worker thread)
            pass
    return old


def main(argv: list[str] | None = None) -> int:
    """Exit codes: 0 success, 1 a run with failed cells or an unexpected error (one line; set
    ``ATTNBENCH_DEBUG=1`` for the traceback), 2 a usage, config or input error, 130 interrupted
    (Ctrl-C), 143 terminated (SIGTERM)."""
    import os
    import signal

    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:  # argparse: --help (0) or a usage error (2), already printed
        return int(exc.code or 0) if not isinstance(exc.code, str) else 2
    from benchmarks.schema import ConfigError

    _Interrupted.signum = None
    old = _install_signal_handlers()
    try:
        from benchmarks.worker import load_plugins

        try:  # $ATTNBENCH_PLUGINS and --plugin: models, datasets, tasks registered from outside
            load_plugins(getattr(args, "plugin", None) or [])
        except RuntimeError as err:
            raise CliError(str(err)) from None
        return int(args.handler(args) or 0)
    except (CliError, ConfigError) as exc:
        print(f"attnbench: error: {exc}", file=sys.stderr)
        return 2
    except (KeyboardInterrupt, SystemExit) as exc:
        if isinstance(exc, SystemExit) and _Interrupted.signum is None:
            raise
        term = _Interrupted.signum == signal.SIGTERM
        print(f"attnbench: {'terminated' if term else 'interrupted'}", file=sys.stderr)
        return 143 if term else 130
    except Exception as exc:  # noqa: BLE001 - one line, never a raw traceback
        if os.environ.get("ATTNBENCH_DEBUG"):
            raise
        where = f" ({exc.filename})" if isinstance(exc, OSError) and getattr(exc, "filename", None) else ""
        msg = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
        print(f"attnbench: error: {type(exc).__name__}{where}: {msg} (ATTNBENCH_DEBUG=1 shows the traceback)",
              file=sys.stderr)
        return 1
    finally:
        for sig, handler in old:
            signal.signal(sig, handler)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
