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
    assert plain.agentstate_id == "oai.chat-7"  # the adapter's own id space

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
    assert [m["role"] for m in store.messages(s.agentstate_id)] == ["user", "function_call", "function_call_output"]
    store.compact(s.agentstate_id, 1, 2, "the user asked; f was called")
    got = asyncio.run(s.get_items())
    assert got == [items[2], {"role": "system", "content": "the user asked; f was called"}]
    assert asyncio.run(s.get_items(limit=0)) == [] and asyncio.run(s.get_items(limit=1)) == got[1:]
    # The newest message is the compaction note: the core refuses to pop it (the compaction's
    # record points at it), and nothing is lost.
    with pytest.raises(InvalidInput, match="is the note of the latest compaction"):
        asyncio.run(s.pop_item())
    assert asyncio.run(s.get_items()) == got


# Items whose JSON text has what a join of texts or a parser could get wrong: nesting, escapes,
# separators inside strings, unicode, ints past 64 bits, floats that must stay floats.
EXACT_ITEMS = [
    {"role": "user", "content": "plain"},
    {"role": "assistant", "content": [{"type": "output_text", "text": "a \"quoted\" ], {, \\ and \n\t\u0000\u001f"}]},
    {"type": "function_call", "call_id": "é日本😀", "arguments": "{\"x\": [1, 2]}", "name": "f"},
    {"type": "x", "ints": [0, -1, 2**63 - 1, -(2**63), 2**64, -(10**40)], "floats": [0.1, -0.0, 1.0, 1e16, 1e-7, 1.5e300]},
    {"type": "x", "empty": [{}, [], "", None, True, False], "deep": {"a": [[[{"b": {"c": [[]]}}]]]}},
    {"type": "x", "keys": {"": 1, "\"]": 2, "é": 3, "a,b": 4}},
]


def test_openai_items_read_back_exactly_type_for_type(store: Store):
    """Every item comes back as added (``repr``: 1 stays 1, not 1.0 or True; -0.0 stays
    -0.0), through the one-parse path and through the per-message path a non-JSON message
    (a compaction note) or an item ``json`` alone can read (NaN) sends a load to; popped,
    replaced and content-less messages read as before."""
    from agentstate.openai_agents import AgentStateSession

    s = AgentStateSession("exact", store=store)
    nan = {"type": "x", "nan": float("nan"), "inf": [float("inf"), float("-inf")]}

    async def main():
        await s.add_items(EXACT_ITEMS)
        assert repr(await s.get_items()) == repr(EXACT_ITEMS)
        assert repr(await s.get_items(limit=2)) == repr(EXACT_ITEMS[-2:])
        await s.add_items([{"role": "user", "content": "to be popped"}])
        assert await s.pop_item() == {"role": "user", "content": "to be popped"}
        assert repr(await s.get_items()) == repr(EXACT_ITEMS)
        store.append(s.agentstate_id, "assistant", tool_calls=[{"id": "t1"}])  # another tool's message without content
        store.replace_message(s.agentstate_id, 1, {"role": "user", "content": '{"role":"user","content":"redacted"}'})
        expected = [{"role": "user", "content": "redacted"}] + EXACT_ITEMS[1:]
        assert repr(await s.get_items()) == repr(expected)
        await s.add_items([nan])
        assert repr(await s.get_items()) == repr(expected + [nan])
        store.compact(s.agentstate_id, 1, 2, "a note, no JSON")
        return await s.get_items()

    got = asyncio.run(main())
    assert repr(got) == repr(EXACT_ITEMS[2:] + [nan, {"role": "system", "content": "a note, no JSON"}])


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
    sid = repo._sid("s1")
    assert sid == "strands.s1" and store.children(sid) == [store.children(sid)[0]]
    assert store.children(sid)[0].startswith("strands.s1@h.")
