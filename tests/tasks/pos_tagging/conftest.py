"""Fixtures shared by the POS tagging tests: the task and one small synthetic data module."""

from __future__ import annotations

import pytest

from tasks.common.registry import get_task
from tasks.pos_tagging.data import build_synthetic
from tests.helpers.domains import POS_DATA


@pytest.fixture(scope="module")
def task():
    return get_task("pos_tagging")


@pytest.fixture(scope="module")
def syn():
    dm = build_synthetic(None, None, 0, **POS_DATA)
    _ = dm.splits
    return dm
