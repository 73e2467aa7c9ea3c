"""Fixtures for the reliability suite (helpers live in helpers.py)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from .helpers import ServerProc


@pytest.fixture
def procs() -> Iterator[list[ServerProc]]:
    """Every ServerProc appended here is killed at teardown."""
    started: list[ServerProc] = []
    yield started
    for p in started:
        p.stop()
