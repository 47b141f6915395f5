"""``python -m benchmarks ...`` is the same as the ``attnbench`` command."""

from benchmarks.cli import main

if __name__ == "__main__":
    raise SystemExit(main())
