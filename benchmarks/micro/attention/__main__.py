"""``python -m benchmarks.micro.attention``: the benchmark with its default config."""

import sys

from benchmarks.micro.attention import main

sys.exit(main())
