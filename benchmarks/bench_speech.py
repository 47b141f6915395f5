"""The speech micro-benchmark's old name: it lives in :mod:`tasks.speech.bench` (the domain's own folder)."""
from tasks.speech.bench import *  # noqa: F401,F403 - MICRO_BENCHMARKS and `python -m benchmarks.bench_speech`
from tasks.speech.bench import main

if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
