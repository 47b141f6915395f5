"""Isolated measurement worker: ``python -m benchmarks.run._worker SPEC.json RESULT.json``.

Started by :func:`benchmarks.run.measure.run_isolated`, one fresh process per measurement
point; see there for the protocol."""

import sys

from benchmarks.run.measure import worker_main

if __name__ == "__main__":
    sys.exit(worker_main())
