"""Fixtures of the client tests; the reference-backend fixtures come from ``tests/conftest.py``."""

from __future__ import annotations

import pytest


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"
