"""Old home of the domains' report renderers, which now live in ``tasks/<domain>/report.py``
(the report imports them, see :func:`benchmarks.report.sections.load_sections`). Only the
:mod:`benchmarks.extras.vision` alias is left, for an import in ``tests/tasks/vision``."""
