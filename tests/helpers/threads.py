"""One torch thread for a test module: tiny models gain nothing from threads, and on a shared
2-core machine OpenMP barriers of descheduled threads can slow each step by orders of magnitude.
Use it as ``from tests.helpers.threads import one_thread  # noqa: F401`` (an autouse fixture)."""

from __future__ import annotations

import pytest
import torch


@pytest.fixture(autouse=True, scope="module")
def one_thread():
    n = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(n)
