"""Option checks and builders shared by several subcommands (``run``, ``data``, ``cell``,
``profile``, ``evaluate``): config look-up, ``--out``, ``--data-dir`` / ``--cache-dir``.
Kept apart from the subcommand modules so that none of them imports another."""

from __future__ import annotations

import argparse
import os
import re
from pathlib import Path

from benchmarks.config import CONFIG_DIR
from benchmarks.config.schema import CliError


def resolve_config(name: str) -> Path:
    """A path, or the name of a shipped config (``quick`` or ``quick.yaml``); the file must be
    readable UTF-8 text (checked here so that YAML parsing never meets bytes it cannot decode)."""
    p = Path(name)
    if not p.is_file():
        for cand in (CONFIG_DIR / name, CONFIG_DIR / f"{name}.yaml"):
            if cand.is_file():
                p = cand
                break
        else:
            if p.is_dir():
                raise CliError(f"config {name}: is a folder, expected a YAML file")
            from tasks.common.suggest import did_you_mean

            shipped = sorted(q.stem for q in CONFIG_DIR.glob("*.yaml"))
            hint = did_you_mean(Path(name).name.removesuffix(".yaml"), shipped)
            raise CliError(f"config file not found: {name}{'; ' + hint + ' ' if hint else ' '}"
                           f"(shipped configs: {', '.join(shipped)})")
    try:
        text = p.read_bytes().decode("utf-8")
    except OSError as err:
        raise CliError(f"config {p}: cannot read it: {err.strerror or err}") from None
    except UnicodeDecodeError as err:
        raise CliError(f"config {p}: not UTF-8 text (byte {err.start}: {err.object[err.start:err.start + 1]!r}); "
                         "save it as UTF-8") from None
    refuse_micro_config(p, text, shown=name)
    return p


def load_cells(name: str, sets: list[str]) -> tuple[Path, dict, list]:
    """``(path, resolved config, cells)`` of a config named on the command line with its ``--set``
    overrides; a bad config is one :class:`CliError` line; the override notices are printed."""
    from benchmarks.config.schema import ConfigError
    from benchmarks.config.suite import expand, load_suite_with_notices

    path = resolve_config(name)
    try:
        cfg, notices = load_suite_with_notices(path, list(sets))
        cells = expand(cfg)
    except ConfigError as err:
        raise CliError(str(err)) from None
    for line in notices:
        print(f"note: {line}")
    return path, cfg, cells


#: a `benchmark:` key anywhere (block or flow style, quoted or not)
_BENCHMARK_KEY = re.compile(r"(?:^|[\s{,])['\"]?benchmark['\"]?\s*:")


def micro_benchmark_of(path: Path, text: str) -> str | None:
    """The micro-benchmark a config is for (its top-level ``benchmark:`` key, or a shipped micro
    config's file name), or ``None`` for a suite config. YAML the strict parser refuses is left to
    the suite's loader, which reports it."""
    import yaml

    from benchmarks.config.micro import MICRO_BENCHMARKS
    from benchmarks.config.schema import parse_yaml

    data = None
    if _BENCHMARK_KEY.search(text):  # only a config naming `benchmark:` is parsed twice
        try:
            data = parse_yaml(text)
        except yaml.YAMLError:  # not valid or refused YAML: load_suite says which, in one line
            data = None
    named = data.get("benchmark") if isinstance(data, dict) else None
    if isinstance(named, str) and named in MICRO_BENCHMARKS and "cells" not in data:
        return named
    return next((b.name for b in MICRO_BENCHMARKS.values()
                 if path.name in b.configs and path.resolve() == (CONFIG_DIR / path.name).resolve()), None)


def refuse_micro_config(path: Path, text: str, shown: str | None = None) -> None:
    """A micro-benchmark config given where a suite config is expected (``run``, ``data``,
    ``profile``): one line naming the command that runs it, instead of its keys refused one by one."""
    name = micro_benchmark_of(path, text)
    if name is None:
        return
    raise CliError(f"config {shown or path}: a micro-benchmark config (benchmark: {name}), not a suite; "
                   f"run it with: {bench_command(name, path)}")


def bench_command(name: str, path: Path) -> str:
    """The command that runs micro-benchmark ``name`` with the config at ``path``: ``attnbench
    bench NAME``, plus ``--config PATH`` when it is not the benchmark's default config (the path
    relative to here when it lies below, else absolute)."""
    from benchmarks.config.micro import MICRO_BENCHMARKS

    if (CONFIG_DIR / MICRO_BENCHMARKS[name].default_config).resolve() == path.resolve():
        return f"attnbench bench {name}"
    rel = os.path.relpath(path.resolve())
    return f"attnbench bench {name} --config {path.resolve() if rel.startswith('..') else rel}"


def check_out_dir(value: str | None, suite: str) -> Path:
    """The output folder: must be a folder (or not exist yet) that this process can write."""
    out = Path(value).expanduser() if value else Path("results") / suite
    if out.exists() and not out.is_dir():
        raise CliError(f"--out {out}: exists and is not a folder")
    probe = out
    while not probe.exists():
        probe = probe.parent
    if not probe.is_dir() or not os.access(probe, os.W_OK | os.X_OK):
        raise CliError(f"--out {out}: {probe} is not a writable folder")
    return out


def check_data_dir(value: str | None) -> Path | None:
    """``--data-dir`` (or ``$ATTNBENCH_DATA``) checked: an existing folder, or ``None``."""
    value = value or os.environ.get("ATTNBENCH_DATA")
    if not value:
        return None
    p = Path(value).expanduser()
    if not p.is_dir():
        raise CliError(f"--data-dir {value}: no such directory")
    return p


def add_data_options(p: argparse.ArgumentParser) -> None:
    """``--data-dir`` and ``--cache-dir``, shared by ``run``, ``data``, ``cell``, ``profile``."""
    p.add_argument("--data-dir", metavar="DIR", help="read-only folder with datasets in the layouts of shared/data "
                   "(default: $ATTNBENCH_DATA; without one, datasets download into the cache)")
    p.add_argument("--cache-dir", metavar="DIR", help="writable cache for copied/processed/downloaded data "
                   "(default: $ATTNBENCH_CACHE or ~/.cache/attnbench)")
