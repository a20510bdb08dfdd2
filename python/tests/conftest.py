"""Fixtures for agentstate's own Python tests: each test module gets a private redis-server,
each test its own namespace prefix."""

from __future__ import annotations

import sys
import uuid
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))

from support import RedisServer  # noqa: E402


@pytest.fixture(scope="module")
def redis_server():
    server = RedisServer()
    yield server
    server.close()


@pytest.fixture
def prefix() -> str:
    return "t" + uuid.uuid4().hex[:10]


@pytest.fixture
def store(redis_server, prefix):
    import agentstate

    return agentstate.Store(redis_server.url, prefix=prefix)
