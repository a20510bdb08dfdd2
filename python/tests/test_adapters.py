"""Adapter behaviour the frameworks' suites do not pin down: id mapping, what other
agentstate tools see, and cancellation of a mutation in flight."""

from __future__ import annotations

import asyncio

import pytest

from agentstate import InvalidInput, Store


def test_openai_session_ids_that_are_not_agentstate_ids_map_to_stable_digests(store: Store):
    from agentstate.openai_agents import AgentStateSession

    odd = AgentStateSession("user 42 / chat #7", store=store)
    same = AgentStateSession("user 42 / chat #7", store=store)
    plain = AgentStateSession("chat-7", store=store)
    assert odd.agentstate_id == same.agentstate_id and odd.agentstate_id.startswith("h.")
    assert plain.agentstate_id == "chat-7"

    async def main():
        await odd.add_items([{"role": "user", "content": "x"}])
        assert await same.get_items() == [{"role": "user", "content": "x"}]
        assert await plain.get_items() == []

    asyncio.run(main())
    meta = store.session(odd.agentstate_id)
    assert meta["metadata"] == {"framework": "openai-agents", "session_id": "user 42 / chat #7"}


def test_openai_items_are_agentstate_messages_and_compaction_notes_read_back(store: Store):
    from agentstate.openai_agents import AgentStateSession

    s = AgentStateSession("c1", store=store)
    items = [
        {"role": "user", "content": "a"},
        {"type": "function_call", "call_id": "1", "name": "f", "arguments": "{}"},
        {"type": "function_call_output", "call_id": "1", "output": "ok"},
    ]
    asyncio.run(s.add_items(items))
    assert [m["role"] for m in store.messages("c1")] == ["user", "function_call", "function_call_output"]
    store.compact("c1", 1, 2, "the user asked; f was called")
    got = asyncio.run(s.get_items())
    assert got == [items[2], {"role": "system", "content": "the user asked; f was called"}]
    assert asyncio.run(s.get_items(limit=0)) == [] and asyncio.run(s.get_items(limit=1)) == got[1:]
    # The newest message is the compaction note: the core refuses to pop it (the compaction's
    # record points at it), and nothing is lost.
    with pytest.raises(InvalidInput, match="is the note of the latest compaction"):
        asyncio.run(s.pop_item())
    assert asyncio.run(s.get_items()) == got


def test_a_cancelled_add_items_still_lands_and_the_caller_sees_the_cancellation(store: Store):
    from agentstate.openai_agents import AgentStateSession

    s = AgentStateSession("cancel-me", store=store)

    async def main():
        await s.add_items([{"role": "user", "content": "first"}])  # the session exists
        task = asyncio.ensure_future(s.add_items([{"role": "user", "content": f"i{i}"} for i in range(200)]))
        await asyncio.sleep(0)  # the append is in flight
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        return await s.get_items()

    items = asyncio.run(main())
    assert len(items) == 201  # all or nothing, and here: all (one script)


def test_strands_ids_share_one_namespace_without_collisions(store: Store):
    from strands.types.exceptions import SessionException
    from strands.types.session import Session, SessionAgent, SessionType

    from agentstate.strands import AgentStateSessionRepository

    repo = AgentStateSessionRepository(store=store)
    repo.create_session(Session(session_id="s1", session_type=SessionType.AGENT))
    with pytest.raises(SessionException):
        repo.create_session(Session(session_id="s1", session_type=SessionType.AGENT))
    with pytest.raises(SessionException):
        repo.create_agent("missing", SessionAgent(agent_id="a", state={}, conversation_manager_state={}))
    repo.create_agent("s1", SessionAgent(agent_id="a@b", state={"x": 1}, conversation_manager_state={}))
    assert repo.read_agent("s1", "a@b").state == {"x": 1}
    assert repo.read_agent("s1", "a") is None and repo.read_message("s1", "a@b", 0) is None
    assert store.children("s1") == [store.children("s1")[0]] and store.children("s1")[0].startswith("s1@h.")
