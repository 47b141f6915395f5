"""Alias of :mod:`tasks.vision.report` for an old import (``tests/tasks/vision/test_vision.py``)."""
from tasks.vision.report import decode_image  # noqa: F401
