"""Suite configs: the schema, validation and expansion into cells, the shipped configs, plug-ins.

:data:`CONFIG_DIR` is the one place that says where the shipped configs live."""

from __future__ import annotations

from pathlib import Path

__all__ = ["CONFIG_DIR"]

#: The shipped configs (``attnbench run quick`` finds ``quick.yaml`` here).
CONFIG_DIR = Path(__file__).resolve().parent.parent / "configs"
