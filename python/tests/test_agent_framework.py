"""agentstate's contract for Microsoft Agent Framework (``agentstate.agent_framework``).

agent-framework-redis ships no tests in its wheel or sdist, and its repository's
history-provider tests (python/packages/redis/tests/test_providers.py) drive a mocked Redis
client (they seed ``lrange`` and assert ``rpush`` / ``ltrim`` / ``delete`` calls), so they
cannot be pointed at a store: these tests cover every behaviour they check, on a real Redis
(``TestRedisHistoryProvider*`` -> the tests marked "redis suite:" below), plus what only
agentstate promises: a sliding TTL on every key, bounded reads, compaction that marks instead
of dropping, and a history that comes back after Redis lost it (SQLite and PostgreSQL).

Every test runs on a private redis-server, in its own namespace checked by a daemon pass."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

pytest.importorskip("agent_framework")

from agent_framework import AgentResponse, Message  # noqa: E402
from agent_framework._sessions import AgentSession, HistoryProvider, SessionContext  # noqa: E402

from agentstate import Store  # noqa: E402
from agentstate.agent_framework import AgentStateHistoryProvider  # noqa: E402
from support import RedisServer, SpillDaemon, wait_until  # noqa: E402


def run(coro):
    return asyncio.run(coro)


def texts(messages):
    return [m.text for m in messages]


@pytest.fixture
def provider(store):
    return AgentStateHistoryProvider("mem", store=store)


def cli(*args: str) -> str:
    command = Path(sys.executable).parent / "agentstate"
    return subprocess.run([str(command), *args], check=True, capture_output=True, text=True).stdout


# -- what the redis suite checks --------------------------------------------------------------


def test_construction_defaults_and_custom_flags(store):
    """redis suite: TestRedisHistoryProviderInit."""
    p = AgentStateHistoryProvider(store=store)
    assert isinstance(p, HistoryProvider)
    assert p.source_id == "agentstate"
    assert (p.max_messages, p.load_messages, p.store_inputs, p.store_outputs) == (None, True, True, True)
    q = AgentStateHistoryProvider("mem", store=store, max_messages=50, load_messages=False,
                                  store_outputs=False, store_inputs=False)
    assert (q.source_id, q.max_messages, q.load_messages, q.store_inputs, q.store_outputs) == ("mem", 50, False, False, False)


def test_bad_arguments_are_refused_naming_them(store, provider):
    with pytest.raises(TypeError, match="url must be a str or None"):
        AgentStateHistoryProvider("mem", 6379)
    with pytest.raises(ValueError, match="max_messages must be >= 0"):
        AgentStateHistoryProvider(store=store, max_messages=-1)
    with pytest.raises(TypeError, match="session_ttl must be a number"):
        AgentStateHistoryProvider(store=store, session_ttl="1h")
    with pytest.raises(ValueError, match="source_id must be a non-empty str"):
        AgentStateHistoryProvider("", store=store)
    with pytest.raises(TypeError, match="session_id must be a non-empty str"):
        run(provider.get_messages(None))
    with pytest.raises(TypeError, match=r"messages\[1\] must be an agent_framework Message"):
        run(provider.save_messages("s1", [Message(role="user", contents=["ok"]), {"role": "user"}]))
    with pytest.raises(TypeError, match="messages must be a list of Messages"):
        run(provider.save_messages("s1", "hello"))
    assert run(provider.get_messages("s1")) == []  # nothing was written


def test_messages_round_trip_and_an_unknown_session_is_empty(provider):
    """redis suite: TestRedisHistoryProviderGetMessages, TestRedisHistoryProviderSaveMessages."""
    async def go():
        assert await provider.get_messages("s1") == []
        sent = [Message(role="user", contents=["Hello"]), Message(role="assistant", contents=["Hi!"], author_name="bot")]
        await provider.save_messages("s1", sent)
        got = await provider.get_messages("s1")
        assert [m.to_dict() for m in got] == [m.to_dict() for m in sent]
        assert texts(got) == ["Hello", "Hi!"] and [m.role for m in got] == ["user", "assistant"]
        await provider.save_messages("s1", [])  # nothing to write
        assert len(await provider.get_messages("s1")) == 2
        assert await provider.get_messages("s2") == []

    run(go())


def test_an_empty_save_creates_nothing(provider, store):
    run(provider.save_messages("never", []))
    assert store.session(provider.session_key("never")) is None


def test_a_replayed_transcript_is_not_stored_twice(provider):
    async def go():
        first = [Message(role="user", contents=["a"], message_id="1"), Message(role="assistant", contents=["b"], message_id="2")]
        await provider.save_messages("s1", first)
        await provider.save_messages("s1", first + [Message(role="user", contents=["c"], message_id="3")])
        assert texts(await provider.get_messages("s1")) == ["a", "b", "c"]

    run(go())


def test_max_messages_bounds_reads_and_compacts_instead_of_dropping(store):
    """redis suite: test_max_messages_trimming, test_no_trim_when_under_limit (the Redis
    provider trims with LTRIM; ours marks the oldest compacted out and keeps them)."""
    p = AgentStateHistoryProvider("mem", store=store, max_messages=3)

    async def go():
        await p.save_messages("s1", [Message(role="user", contents=[f"m{i}"]) for i in range(2)])
        assert texts(await p.get_messages("s1")) == ["m0", "m1"]  # under the limit: untouched
        assert store.compactions(p.session_key("s1")) == []
        for i in range(2, 7):
            await p.save_messages("s1", [Message(role="user", contents=[f"m{i}"])])
        assert texts(await p.get_messages("s1")) == ["m4", "m5", "m6"]
        assert texts(await p.get_messages("s1", include_compacted=True)) == [f"m{i}" for i in range(7)]
        sid = p.session_key("s1")
        assert len([m for m in store.messages(sid) if m.get("name") != "compact_note"]) == 3
        assert store.compactions(sid)  # the marks, with their ranges
        assert len([m for m in store.messages(sid, all=True) if m.get("name") != "compact_note"]) == 7

    run(go())
    zero = AgentStateHistoryProvider("z", store=store, max_messages=0)
    run(zero.save_messages("s1", [Message(role="user", contents=["x"])]))
    assert run(zero.get_messages("s1")) == [] and store.session(zero.session_key("s1")) is None


def test_clear_deletes_the_history(provider, store):
    """redis suite: TestRedisHistoryProviderClear."""
    async def go():
        await provider.save_messages("session-1", [Message(role="user", contents=["x"])])
        await provider.clear("session-1")
        assert await provider.get_messages("session-1") == []
        assert store.session(provider.session_key("session-1")) is None
        await provider.clear("session-1")  # clearing nothing is fine
        await provider.aclose()

    run(go())


def test_before_run_loads_history_and_after_run_stores_input_and_response(provider):
    """redis suite: TestRedisHistoryProviderBeforeAfterRun."""
    async def go():
        await provider.save_messages("s1", [Message(role="user", contents=["old msg"])])
        session = AgentSession(session_id="test")
        ctx = SessionContext(input_messages=[Message(role="user", contents=["new msg"])], session_id="s1")
        await provider.before_run(agent=None, session=session, context=ctx, state=session.state.setdefault("mem", {}))
        assert texts(ctx.context_messages["mem"]) == ["old msg"]

        ctx = SessionContext(input_messages=[Message(role="user", contents=["hi"])], session_id="s2")
        ctx._response = AgentResponse(messages=[Message(role="assistant", contents=["hello"])])
        await provider.after_run(agent=None, session=session, context=ctx, state={})
        assert texts(await provider.get_messages("s2")) == ["hi", "hello"]

    run(go())


def test_after_run_stores_nothing_when_inputs_and_outputs_are_off(store):
    p = AgentStateHistoryProvider("mem", store=store, store_inputs=False, store_outputs=False)

    async def go():
        ctx = SessionContext(input_messages=[Message(role="user", contents=["hi"])], session_id="s1")
        ctx._response = AgentResponse(messages=[Message(role="assistant", contents=["hello"])])
        await p.after_run(agent=None, session=AgentSession(), context=ctx, state={})
        assert store.session(p.session_key("s1")) is None

    run(go())


# -- what only agentstate promises -----------------------------------------------------------------


def test_two_sources_and_odd_ids_keep_apart_histories(store):
    a, b = AgentStateHistoryProvider("a", store=store), AgentStateHistoryProvider("b", store=store)

    async def go():
        for sid in ("s 1/ü", "x" * 300):
            await a.save_messages(sid, [Message(role="user", contents=["for a"])])
            await b.save_messages(sid, [Message(role="user", contents=["for b"])])
            assert texts(await a.get_messages(sid)) == ["for a"]
            assert texts(await b.get_messages(sid)) == ["for b"]
            assert len(a.session_key(sid)) <= 128

    run(go())


def test_every_key_has_the_sliding_ttl(redis_server, prefix, store):
    """The core's rule: a write refreshes every key of the session to the full TTL once a
    tenth of it has run down since the last refresh (1 s of 10 here)."""
    p = AgentStateHistoryProvider("mem", store=store, session_ttl=10)
    run(p.save_messages("s1", [Message(role="user", contents=["x"])]))
    keys = cli("--redis", redis_server.url, "--prefix", prefix, "keys", p.session_key("s1")).split()

    def ttls():  # of the keys that exist (PTTL -2: none)
        out = [int(subprocess.run(["redis-cli", "-u", redis_server.url, "PTTL", k], capture_output=True,
                                  text=True, check=True).stdout) for k in keys]
        return [t for t in out if t != -2]

    assert len(ttls()) >= 2 and all(9_000 < t <= 10_000 for t in ttls())
    time.sleep(1.5)
    assert all(t <= 8_600 for t in ttls())
    run(p.save_messages("s1", [Message(role="user", contents=["y"])]))  # a write slides them all back
    assert all(t > 9_500 for t in ttls())


def test_the_history_comes_back_after_redis_loses_everything(tmp_path):
    server = RedisServer()
    prefix = "l" + uuid.uuid4().hex[:8]
    daemon = SpillDaemon(server.url, tmp_path / "spill.db", prefix).wait_started()
    try:
        store = Store(server.url, prefix=prefix).with_durability(True)
        p = AgentStateHistoryProvider("mem", store=store, max_messages=4)
        run(p.save_messages("s1", [Message(role="user", contents=[f"m{i}"]) for i in range(6)]))
        before = [m.to_dict() for m in run(p.get_messages("s1", include_compacted=True))]
        server.restart_empty()

        def restored():
            try:
                return run(p.get_messages("s1"))
            except Exception:  # NotLive until the daemon restored it
                return None

        assert texts(wait_until(restored, timeout=20, what="the restore")) == ["m2", "m3", "m4", "m5"]
        assert [m.to_dict() for m in run(p.get_messages("s1", include_compacted=True))] == before
    finally:
        daemon.stop()
        server.close()


def test_the_postgresql_tier_keeps_a_history_redis_lost(redis_server, prefix):
    from agentstate import SpillDaemon as InProcessDaemon
    from test_postgres import psql

    admin = os.environ.get("AGENTSTATE_TEST_PG")
    if not admin:
        pytest.skip("AGENTSTATE_TEST_PG is unset: run through scripts/test-python.sh")
    name = "agentstate_maf_" + uuid.uuid4().hex[:12]
    psql(admin, f"CREATE DATABASE {name}")
    pg_url = admin.rsplit("/", 1)[0] + "/" + name
    try:
        with InProcessDaemon(redis_server.url, pg_url, prefix=prefix):
            store = Store(redis_server.url, prefix=prefix).with_durability(True)
            p = AgentStateHistoryProvider("mem", store=store)
            run(p.save_messages("s1", [Message(role="user", contents=["kept in PostgreSQL"])]))
            subprocess.run(["redis-cli", "-u", redis_server.url, "FLUSHALL"], check=True, capture_output=True)

            def restored():
                try:
                    return run(p.get_messages("s1"))
                except Exception:
                    return None

            assert texts(wait_until(restored, timeout=20, what="the restore from PostgreSQL")) == ["kept in PostgreSQL"]
    finally:
        psql(admin, f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")


def test_the_readme_example_runs_twice_and_the_history_goes_on(tmp_path):
    server = RedisServer()
    try:
        example = Path(__file__).resolve().parents[1] / "examples" / "agent_framework_chat.py"
        env = {**os.environ, "AGENTSTATE_REDIS_URL": server.url}
        outputs = [
            subprocess.run([sys.executable, str(example)], cwd=tmp_path, env=env,
                           capture_output=True, text=True, timeout=120, check=True).stdout
            for _ in range(2)
        ]
        assert "user: hello | assistant: heard 1 messages" in outputs[0]
        assert "4 messages stored" in outputs[0]
        assert "user: hello | assistant: heard 5 messages" in outputs[1]
        assert "8 messages stored" in outputs[1]
    finally:
        server.close()
