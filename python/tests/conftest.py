"""Fixtures for agentstate's own Python tests: each test module gets a private redis-server,
each test its own namespace prefix (checked by one spill-daemon pass, so it takes creates)."""

from __future__ import annotations

import sys
import uuid
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))

from support import RedisServer, prepare_namespace  # noqa: E402


@pytest.fixture(scope="module")
def redis_server():
    server = RedisServer()
    yield server
    server.close()


@pytest.fixture
def prefix() -> str:
    return "t" + uuid.uuid4().hex[:10]


@pytest.fixture
def store(redis_server, prefix, tmp_path):
    """A store on a namespace a spill-daemon pass has checked (creates are allowed)."""
    import agentstate

    prepare_namespace(redis_server.url, prefix, tmp_path / "prepare.db")
    return agentstate.Store(redis_server.url, prefix=prefix)
