"""A pytest plugin for your own tests, against the real thing: load it with ``pytest -p
agentstate.testing`` (or ``pytest_plugins = ["agentstate.testing"]`` in a conftest.py).

Fixtures, each torn down after its test:

- ``agentstate_redis``: the URL of a private ``redis-server`` on a free loopback port (no
  persistence; ``redis-server`` must be on PATH). ``AGENTSTATE_REDIS_URL`` points at it for
  the test, so code that builds its own ``Store()`` or adapter finds it.
- ``agentstate_store``: a connected :class:`~agentstate.Store` on that Redis, with a spill
  daemon running in this process on a SQLite file in the test's ``tmp_path``
  (``AGENTSTATE_DB`` points at it). The daemon itself is the fixture ``agentstate_daemon``.
"""

from __future__ import annotations

from typing import Iterator

import pytest

from ._agentstate import RedisServer, SpillDaemon, Store


@pytest.fixture
def agentstate_redis(monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """The URL of a private redis-server, killed after the test."""
    server = RedisServer()
    monkeypatch.setenv("AGENTSTATE_REDIS_URL", server.url)
    try:
        yield server.url
    finally:
        server.stop()


@pytest.fixture
def agentstate_daemon(
    agentstate_redis: str, tmp_path, monkeypatch: pytest.MonkeyPatch
) -> Iterator[SpillDaemon]:
    """A spill daemon in this process on ``tmp_path / "agentstate.db"``, started (the
    namespace is checked, so creates are allowed) and stopped after the test."""
    db = tmp_path / "agentstate.db"
    monkeypatch.setenv("AGENTSTATE_DB", str(db))
    daemon = SpillDaemon(agentstate_redis, db).start()
    try:
        yield daemon
    finally:
        daemon.stop()


@pytest.fixture
def agentstate_store(agentstate_redis: str, agentstate_daemon: SpillDaemon) -> Store:
    """A store connected to ``agentstate_redis``, with ``agentstate_daemon`` running."""
    return Store(agentstate_redis)
