"""Micro-benchmarks (``attnbench bench NAME``; the registry is :mod:`benchmarks.config.micro`):
attention scaling and variants (:mod:`.attention`), "Why Self-Attention" complexity
(:mod:`.complexity`), portable budgets, the local pool. Each declares only its own parts (schema,
points, checks, plot) over the shared machinery: :mod:`.sweep` (config loading with overrides,
the sweep's open/run/close flow, the ``main`` entry point), :mod:`.checks` (check records, shared
comparisons, the PASS/FAIL table) and :mod:`.common` (device, memory cap, per-point helpers)."""
