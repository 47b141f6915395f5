"""Report renderers for task artefacts (``rec["extras"][key]``): confusion tables, alignment
heatmaps, attention-rollout maps, ... One module per domain registers its renderers in
:data:`benchmarks.report.EXTRA_RENDERERS` on import; :func:`load_all` imports every module that
exists. Renderers read result records only (never a task package or a checkpoint).
"""

from __future__ import annotations

import importlib

__all__ = ["EXTRA_MODULES", "load_all"]

#: One module per domain, imported by the report before rendering.
EXTRA_MODULES = (
    "benchmarks.extras.pos_tagging",
    "benchmarks.extras.translation",
    "benchmarks.extras.speech",
    "benchmarks.extras.vision",
)


def load_all() -> None:
    for name in EXTRA_MODULES:
        try:
            importlib.import_module(name)
        except ModuleNotFoundError as err:
            if err.name != name:  # the module exists but one of its imports is missing: say so
                raise
