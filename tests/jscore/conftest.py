"""Fixtures of the in-process JetStream core tier (see harness.py)."""

from __future__ import annotations

import pytest

from .harness import JsHarness


@pytest.fixture
def js() -> JsHarness:
    return JsHarness()
