"""``attnbench bench NAME [--config PATH] [--out DIR] [--device ...] [--dtype ...] [--set K=V]``:
run a micro-benchmark from :data:`benchmarks.micro.MICRO_BENCHMARKS`."""

from __future__ import annotations

import argparse
from pathlib import Path

from benchmarks.config import CONFIG_DIR
from benchmarks.config.schema import CliError
from benchmarks.config.micro import MICRO_BENCHMARKS

__all__ = ["add_bench", "cmd_bench"]


def add_bench(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "bench",
        help="run a micro-benchmark",
        description="Run a micro-benchmark. Names: " + ", ".join(MICRO_BENCHMARKS) + ". Exit code 0 when the "
                    "sweep ran: failed points and missed targets (FAIL checks) are results, printed in its "
                    "checks table; a time check that its interval cannot decide reads INCONCLUSIVE.",
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
    p.add_argument("--data-dir", metavar="DIR", help="bench train: measure the cells of the real-data suites, "
                   "datasets read from DIR (default: synthetic data, offline)")
    p.add_argument("--cache-dir", metavar="DIR", help="bench train: writable data cache (default: $ATTNBENCH_CACHE "
                   "or ~/.cache/attnbench)")
    p.set_defaults(handler=cmd_bench)


def cmd_bench(args: argparse.Namespace) -> int:
    bench = MICRO_BENCHMARKS.get(args.name)
    if bench is None:
        raise CliError(
            f"unknown micro-benchmark {args.name!r}; valid names: {', '.join(sorted(MICRO_BENCHMARKS))}"
        )
    config = args.config if args.config is not None else CONFIG_DIR / bench.default_config
    out = args.out if args.out is not None else Path("results") / "bench" / bench.name
    extra = {}
    for opt, value in (("--data-dir", args.data_dir), ("--cache-dir", args.cache_dir)):
        if value is None:
            continue
        if bench.name != "train":
            raise CliError(f"{opt} applies to bench train only, not to bench {bench.name}")
        path = Path(value).expanduser()
        if opt == "--data-dir" and not path.is_dir():
            raise CliError(f"--data-dir {value}: no such directory")
        extra[opt[2:].replace("-", "_")] = path
    return bench.run(config=config, out=out, device=args.device, dtype=args.dtype, sets=args.sets, **extra)
