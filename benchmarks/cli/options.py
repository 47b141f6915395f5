"""Option checks and builders shared by several subcommands (``run``, ``data``, ``cell``,
``profile``, ``evaluate``): config look-up, ``--out``, ``--data-dir`` / ``--cache-dir``.
Kept apart from the subcommand modules so that none of them imports another."""

from __future__ import annotations

import argparse
import os
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
            shipped = ", ".join(sorted(q.stem for q in CONFIG_DIR.glob("*.yaml")))
            raise CliError(f"config file not found: {name} (shipped configs: {shipped})")
    try:
        p.read_bytes().decode("utf-8")
    except OSError as err:
        raise CliError(f"config {p}: cannot read it: {err.strerror or err}") from None
    except UnicodeDecodeError as err:
        raise CliError(f"config {p}: not UTF-8 text (byte {err.start}: {err.object[err.start:err.start + 1]!r}); "
                         "save it as UTF-8") from None
    return p


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
