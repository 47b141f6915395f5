"""``python -m benchmarks.micro.recurrence``: the benchmark with its default config."""

import sys

from benchmarks.micro.recurrence import main

sys.exit(main())
