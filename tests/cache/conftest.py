from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest
from lionctx.testing._redis_server import LocalRedisServer

from tests.providers.http_server import LoopbackServer


@pytest.fixture(scope="session")
def redis_server() -> Iterator[LocalRedisServer]:
    """One real redis-server per session, on a Unix socket in a temp dir, no persistence."""
    with LocalRedisServer() as server:
        yield server


@pytest.fixture
def namespace() -> str:
    """A namespace of this test's own, so tests sharing the server never share keys."""
    return f"t{uuid.uuid4().hex[:12]}"


@pytest.fixture
def srv() -> Iterator[LoopbackServer]:
    with LoopbackServer() as server:
        yield server
