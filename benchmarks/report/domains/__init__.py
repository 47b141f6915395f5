"""The domains' report sections: ``benchmarks/report/domains/<task>.py`` registers the renderers of
what task ``<task>`` stores in ``rec["extras"]`` (and of its micro-benchmark's output) in
:data:`benchmarks.report.EXTRA_RENDERERS` / :data:`~benchmarks.report.BENCH_RENDERERS` when the report
imports it (:func:`benchmarks.report.sections.load_sections`, only for the tasks a report shows: a
section imports its domain for the record key, and a domain brings torch with it).

The record keys are the domain's (``tasks/<domain>/module.py`` writes them); the renderers are report
code, so they live here and imports flow one way: benchmarks -> tasks -> attn_core."""
