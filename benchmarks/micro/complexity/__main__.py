"""``python -m benchmarks.micro.complexity``: the benchmark with its default config."""

import sys

from benchmarks.micro.complexity import main

sys.exit(main())
