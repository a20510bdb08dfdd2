"""Each adapter's session survives Redis losing everything while a spill daemon runs: the
framework reads back exactly what it wrote (none of the frameworks' own Redis backends can).

The daemon is the real ``agentstate spill`` binary writing a real SQLite file; "Redis loses
everything" is the server killed and started empty on the same port while the agent process
(this one) keeps its objects."""

from __future__ import annotations

import asyncio
import json
import uuid

import pytest

from support import RedisServer, SpillDaemon, prepare_namespace, sqlite_rows, wait_until


@pytest.fixture
def world(tmp_path):
    server = RedisServer()
    prefix = "l" + uuid.uuid4().hex[:8]
    db = tmp_path / "spill.db"
    daemon = SpillDaemon(server.url, db, prefix)
    yield server, prefix, db
    assert daemon.stop() == 0
    server.close()


def _flushed(db, sql, *params):
    """Waits until the daemon committed what ``sql`` counts (the wal applied to SQLite)."""

    def count():
        try:
            return sqlite_rows(db, sql, *params)[0][0]
        except Exception:  # the daemon has not created the file yet
            return None

    return count


def test_openai_agents_session_survives_redis_loss(world):
    from agentstate import Store
    from agentstate.openai_agents import AgentStateSession

    server, prefix, db = world
    store = Store(server.url, prefix=prefix)
    session = AgentStateSession("conv-loss", store=store, session_settings={"limit": 50})
    items = [
        {"role": "user", "content": "What is the weather in Paris?"},
        {"type": "function_call", "call_id": "c1", "name": "weather", "arguments": "{\"city\": \"Paris\"}"},
        {"type": "function_call_output", "call_id": "c1", "output": "18°C, cloudy"},
        {"role": "assistant", "content": [{"type": "output_text", "text": "18°C and cloudy.", "annotations": []}]},
        {"role": "user", "content": "and tomorrow? (to be popped)"},
    ]

    async def write():
        await session.add_items(items[:1])
        await session.add_items(items[1:])
        assert await session.pop_item() == items[-1]
        return await session.get_items()

    before = asyncio.run(write())
    assert before == items[:-1]
    wait_until(lambda: _flushed(db, "SELECT count(*) FROM messages WHERE session_id = ?", session.agentstate_id)() == 4,
               what="the flush of 4 items")

    server.restart_empty()

    after = asyncio.run(session.get_items())
    assert after == before
    assert asyncio.run(session.get_items(limit=2)) == before[-2:]
    # The restored session goes on: the next item gets the next seq.
    asyncio.run(session.add_items([{"role": "user", "content": "thanks"}]))
    assert [m["seq"] for m in store.messages(session.agentstate_id)] == [1, 2, 3, 4, 5]


def test_strands_session_survives_redis_loss(world, monkeypatch):
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
    from strands.agent.agent import Agent
    from strands.session.repository_session_manager import RepositorySessionManager

    from agentstate import Store
    from agentstate.strands import AgentStateSessionRepository

    server, prefix, db = world
    repo = AgentStateSessionRepository(store=Store(server.url, prefix=prefix))
    manager = RepositorySessionManager(session_id="trip", session_repository=repo)
    agent = Agent(
        agent_id="planner",
        messages=[{"role": "user", "content": [{"text": "Plan a trip to Lisbon"}]}],
        state={"budget": 1200, "days": ["fri", "sat"]},
    )
    manager.initialize(agent)
    reply = {"role": "assistant", "content": [{"text": "Day 1: Alfama. Card 4111-1111."}]}
    agent.messages.append(reply)
    manager.append_message(reply, agent)
    manager.redact_latest_message({"role": "assistant", "content": [{"text": "[redacted]"}]}, agent)
    agent.state.set("booked", True)
    manager.sync_agent(agent)
    stored = repo.list_messages("trip", "planner")
    assert [m.message_id for m in stored] == [0, 1]
    assert stored[1].redact_message == {"role": "assistant", "content": [{"text": "[redacted]"}]}
    agent_before = repo.read_agent("trip", "planner")

    # Session, agent sub-session, 2 messages, and the agent checkpoint reached SQLite.
    wait_until(
        lambda: _flushed(db, "SELECT count(*) FROM checkpoints WHERE session_id = ?", "strands.trip@planner")()
        and _flushed(
            db,
            "SELECT count(*) FROM messages WHERE session_id = ? AND"
            " json_extract(json_extract(element, '$.content'), '$.redact_message') IS NOT NULL",
            "strands.trip@planner",
        )() == 1,
        what="the flush of the agent's state and redaction",
    )

    server.restart_empty()

    assert repo.read_session("trip").session_id == "trip"
    assert repo.read_agent("trip", "planner") == agent_before
    assert repo.list_messages("trip", "planner") == stored
    restored = Agent(agent_id="planner")
    RepositorySessionManager(session_id="trip", session_repository=repo).initialize(restored)
    assert restored.messages == [
        {"role": "user", "content": [{"text": "Plan a trip to Lisbon"}]},
        {"role": "assistant", "content": [{"text": "[redacted]"}]},
    ]
    assert restored.state.get() == {"budget": 1200, "days": ["fri", "sat"], "booked": True}
    # SQLite holds the redacted element, not only the original.
    (element,) = sqlite_rows(db, "SELECT element FROM messages WHERE session_id = ? AND seq = 2", "strands.trip@planner")[0]
    assert json.loads(json.loads(element)["content"])["redact_message"]["content"][0]["text"] == "[redacted]"


def test_durable_writes_return_once_sqlite_has_them(world):
    from agentstate import DurabilityTimeout, Store

    server, prefix, db = world
    durable = Store(server.url, prefix=prefix, durable=True)
    assert durable.durable and not durable.with_durability(False).durable
    sid = durable.create_session("d-1")
    seq = durable.append(sid, "user", "kept")
    # No waiting here: the call returned only after the daemon's commit.
    assert sqlite_rows(db, "SELECT seq FROM messages WHERE session_id = ?", sid) == [(seq,)]
    assert durable.put_checkpoint(sid, "agent", {"k": 1}).startswith("ckpt_")
    assert sqlite_rows(db, "SELECT count(*) FROM checkpoints WHERE session_id = ?", sid) == [(1,)]


def test_durable_write_without_a_daemon_times_out(tmp_path):
    from agentstate import DurabilityTimeout, Store

    server = RedisServer()
    try:
        prepare_namespace(server.url, "nodaemon", tmp_path / "once.db")  # then no daemon runs
        store = Store(server.url, prefix="nodaemon", durable=True, daemon_wait=0.3)
        sid = store.with_durability(False).create_session("x")
        with pytest.raises(DurabilityTimeout):
            store.append(sid, "user", "no daemon to confirm this")
        assert len(store.messages(sid)) == 1  # live in Redis all the same
    finally:
        server.close()
