"""The ``attnbench`` command line (also ``python -m benchmarks``).

Argument parsing only: each subcommand is a function that adds its subparser and a handler
that returns an exit code, one module per concern:

* :mod:`benchmarks.cli.suite`: ``run CONFIG``, ``report [DIR]``, ``data [CONFIG]``;
* :mod:`benchmarks.cli.listing`: ``list`` (tasks, models, patterns, micro-benchmarks, configs);
* :mod:`benchmarks.cli.bench`: ``bench NAME`` (a micro-benchmark from
  :data:`benchmarks.micro.MICRO_BENCHMARKS`);
* :mod:`benchmarks.cli.profile`: ``profile CONFIG --cell ID|INDEX`` (where one cell's training time goes);
* :mod:`benchmarks.cli.tune`: ``tune CONFIG`` (each model's learning rate over one grid, a tuning file);
* :mod:`benchmarks.cli.evaluate`: ``eval OUT``; :mod:`benchmarks.cli.cells`: ``cell``, ``status``
  and the launcher options of ``run``; :mod:`benchmarks.cli.env`: ``env``.

Exit codes: 0 success, 1 failed cells in a run or an unexpected error, 2 usage, config or
input error (a one-line message, never a traceback), 130 interrupted (Ctrl-C), 143 SIGTERM,
141 the reader of a pipe stopped reading (``attnbench list | head``: quiet, as Unix tools end).
"""

from __future__ import annotations

import argparse
import importlib
import sys
from typing import Any, Callable

from benchmarks.config.schema import CliError

__all__ = ["main", "build_parser", "version", "CliError"]


def _lazy(module: str, name: str) -> Callable[[argparse._SubParsersAction], None]:
    """A subcommand builder imported only when the parser is built (keeps ``import benchmarks.cli`` light)."""

    def add(sub: argparse._SubParsersAction) -> None:
        importlib.import_module(module).__dict__[name](sub)

    add.__name__ = f"{module}.{name}"
    return add


#: Subcommand builders, in help order.
SUBCOMMANDS: tuple[Callable[[argparse._SubParsersAction], None], ...] = (
    _lazy("benchmarks.cli.suite", "add_run"),
    _lazy("benchmarks.cli.tune", "add_tune"),
    _lazy("benchmarks.cli.suite", "add_report"),
    _lazy("benchmarks.cli.suite", "add_page"),
    _lazy("benchmarks.cli.evaluate", "add_eval"),
    _lazy("benchmarks.cli.bench", "add_bench"),
    _lazy("benchmarks.cli.profile", "add_profile"),
    _lazy("benchmarks.cli.buckets", "add_buckets"),
    _lazy("benchmarks.cli.listing", "add_list"),
    _lazy("benchmarks.cli.suite", "add_data"),
    _lazy("benchmarks.cli.cells", "add_cell"),
    _lazy("benchmarks.cli.cells", "add_status"),
    _lazy("benchmarks.cli.env", "add_env"),
)


def version() -> str:
    """The installed package's version (:mod:`importlib.metadata`), else the ``version`` of the
    ``[project]`` table of the checkout's ``pyproject.toml``, else ``unknown``."""
    import importlib.metadata
    import re
    from pathlib import Path

    try:
        return importlib.metadata.version("attnbench")
    except importlib.metadata.PackageNotFoundError:
        pass
    try:
        text = (Path(__file__).resolve().parents[2] / "pyproject.toml").read_text(encoding="utf-8")
    except OSError:
        return "unknown"
    project = re.search(r"^\[project\]\s*$(.*?)(?=^\[|\Z)", text, re.MULTILINE | re.DOTALL)
    found = re.search(r"^version\s*=\s*[\"']([^\"']+)[\"']", project.group(1), re.MULTILINE) if project else None
    return found.group(1) if found else "unknown"


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="attnbench",
        description="attnbench: when does self-attention beat recurrence and convolution, and at what cost?",
    )
    parser.add_argument("--version", action="version", version=f"attnbench {version()}",
                        help="print the installed version and exit")
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


#: exit code when the reader of stdout went away (128 + SIGPIPE, what a shell reports for ``yes | head``)
EXIT_PIPE = 141


def _pipe_closed() -> int:
    """stdout's reader stopped reading: end quietly. stdout is pointed at devnull so that the
    interpreter's final flush does not raise again (the Python docs' recipe, ``signal`` module)."""
    import os

    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    except (OSError, ValueError, AttributeError):  # stdout replaced (e.g. captured in a test)
        pass
    return EXIT_PIPE


def _quiet_third_party() -> None:
    """Warnings of libraries at import that a user can do nothing about: torch_geometric
    scripts a class with ``torch.jit.script``, which torch deprecates."""
    import warnings

    warnings.filterwarnings("ignore", message=r".*`torch\.jit\.script` is deprecated.*", category=FutureWarning)


def main(argv: list[str] | None = None) -> int:
    """Exit codes: 0 success, 1 a run with failed cells or an unexpected error (one line; set
    ``ATTNBENCH_DEBUG=1`` for the traceback), 2 a usage, config or input error, 130 interrupted
    (Ctrl-C), 143 terminated (SIGTERM), 141 stdout's reader went away (quietly)."""
    import os
    import signal

    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:  # argparse: --help (0) or a usage error (2), already printed
        return int(exc.code or 0) if not isinstance(exc.code, str) else 2
    from benchmarks.config.schema import ConfigError

    _quiet_third_party()
    _Interrupted.signum = None
    old = _install_signal_handlers()
    try:
        from benchmarks.run.worker import load_plugins

        try:  # $ATTNBENCH_PLUGINS and --plugin: models, datasets, tasks registered from outside
            load_plugins(getattr(args, "plugin", None) or [])
        except RuntimeError as err:
            raise CliError(str(err)) from None
        code = int(args.handler(args) or 0)
        sys.stdout.flush()  # a closed pipe surfaces here, not in the interpreter's last flush
        return code
    except BrokenPipeError:
        return _pipe_closed()
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
        from benchmarks.run.records import DISK_FULL_ERRNOS

        if isinstance(exc, OSError) and exc.errno in DISK_FULL_ERRNOS:  # what was written stays (atomic writes)
            print(f"attnbench: error: {exc.filename or 'writing'}: {os.strerror(exc.errno)}; the records already "
                  "written are kept (free space, then rerun: finished cells are skipped)", file=sys.stderr)
            return 1
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
