"""attnbench benchmarks: the ``attnbench`` command line, configs, measurement helpers
(:mod:`benchmarks.run.measure`) and micro-benchmarks (``attnbench bench NAME``).

Kept import-light on purpose: importing this package does not import torch, so the
CLI answers ``--help`` and ``list`` quickly and measurement workers start clean.
"""
