"""Fixtures shared by the attn_core tests."""

from __future__ import annotations

import pytest

from attn_core import patterns as registry


@pytest.fixture
def restore_registry():
    """Whatever a test registers or removes in the pattern registry is undone afterwards."""
    saved = dict(registry._REGISTRY)
    yield
    registry._REGISTRY.clear()
    registry._REGISTRY.update(saved)
