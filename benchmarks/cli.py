"""The ``attnbench`` command line (also ``python -m benchmarks``).

Subcommands (more, ``run``, ``report`` and ``data``, plug in the same way: a function that
adds the subparser and a handler that returns an exit code):

* ``attnbench bench NAME [--config PATH] [--out DIR] [--device ...] [--dtype ...] [--set K=V]``:
  run a micro-benchmark from :data:`MICRO_BENCHMARKS`;
* ``attnbench list``: what can be run, and the shipped configs;
* ``attnbench run CONFIG``, ``attnbench report [DIR]``, ``attnbench data [CONFIG]``: the suite
  commands, in :mod:`benchmarks.commands`.

Exit codes: 0 success, 2 usage or config error (a one-line message, no traceback),
130 interrupted.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

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
        summary="attention scaling: fwd+bwd time and peak memory vs sequence length and graph size",
        default_config="bench_attention.yaml",
        configs=("bench_attention.yaml", "bench_attention_full.yaml"),
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
        module="benchmarks.bench_speech",
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


#: Subcommand builders, in help order.
SUBCOMMANDS: tuple[Callable[[argparse._SubParsersAction], None], ...] = (
    _add_run, _add_report, _add_bench, _add_list, _add_data,
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


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:  # argparse: --help (0) or a usage error (2), already printed
        return int(exc.code or 0) if not isinstance(exc.code, str) else 2
    from benchmarks.schema import ConfigError

    try:
        return int(args.handler(args) or 0)
    except (CliError, ConfigError) as exc:
        print(f"attnbench: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("attnbench: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
