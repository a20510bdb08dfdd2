"""A full live tier: a private Redis at ``maxmemory`` with ``noeviction`` refuses every write
with ``agentstate.Backpressure`` (one wording: what is full, what to do), from one call or
from many threads sharing a round trip, and nothing is half-written."""

from __future__ import annotations

import subprocess
from concurrent.futures import ThreadPoolExecutor

import pytest

import agentstate
from support import RedisServer, prepare_namespace


def redis_cli(server: RedisServer, *args: str) -> str:
    return subprocess.run(
        ["redis-cli", "-u", server.url, *args], capture_output=True, text=True, check=True
    ).stdout.strip()


def test_a_full_redis_raises_backpressure_and_writes_nothing(tmp_path):
    server = RedisServer()
    try:
        prepare_namespace(server.url, "bp", tmp_path / "prepare.db")
        store = agentstate.Store(server.url, prefix="bp")
        sid = store.create_session("full")
        assert store.append(sid, "user", "before") == 1
        wal_before = [redis_cli(server, "XLEN", f"bp:{{{p}}}:wal") for p in range(16)]
        redis_cli(server, "CONFIG", "SET", "maxmemory", "1")

        with pytest.raises(agentstate.Backpressure) as raised:
            store.append(sid, "user", "refused")
        text = str(raised.value)
        assert text.startswith(f"backpressure: Redis at 127.0.0.1:{server.port} is full"), text
        assert "nothing was written" in text
        assert "agentstate spill" in text, "says what to do"
        assert isinstance(raised.value, agentstate.AgentStateError)
        with pytest.raises(agentstate.Backpressure):
            store.create_session("other")

        # Threads sharing round trips (group commit): each caller gets the same type.
        with ThreadPoolExecutor(8) as pool:
            futures = [pool.submit(store.append, sid, "user", f"c{i}") for i in range(32)]
        for f in futures:
            assert isinstance(f.exception(), agentstate.Backpressure), f.exception()

        assert [redis_cli(server, "XLEN", f"bp:{{{p}}}:wal") for p in range(16)] == wal_before
        assert [m["seq"] for m in store.messages(sid)] == [1], "nothing was half-written"
        redis_cli(server, "CONFIG", "SET", "maxmemory", "0")
        assert store.append(sid, "user", "after") == 2, "the next seq: nothing half-allocated"
    finally:
        server.close()
