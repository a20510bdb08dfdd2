"""agentstate's contract for Pydantic AI (``agentstate.pydantic_ai``), in our words: what the
harness's own step-persistence tests check of a ``StepStore`` (they also run against
``AgentStateStepStore`` through ``frameworks/agentstate_harness_swap.py``), and what only
agentstate promises: two processes appending to one run share one gapless order and lose
nothing; a run continued or forked from another process; a run killed mid-tool leaves an
unresolved effect the next process sees; a stale conversation writer gets the harness's
``ConversationConflict`` and writes nothing; everything comes back after Redis lost it, from
SQLite or PostgreSQL; the message history round-trips ``ModelMessage``s exactly.

Every test runs on a private redis-server, in its own namespace checked by a daemon pass;
the durability tests run a real spill daemon writing a real SQLite file or PostgreSQL
database."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import textwrap
import uuid
from dataclasses import replace
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest

pytest.importorskip("pydantic_ai_harness")

from pydantic_ai import Agent  # noqa: E402
from pydantic_ai.messages import (  # noqa: E402
    BinaryContent,
    ModelMessagesTypeAdapter,
    ModelRequest,
    ModelResponse,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
    UserPromptPart,
)
from pydantic_ai.models.test import TestModel  # noqa: E402
from pydantic_ai_harness.step_persistence import (  # noqa: E402
    ContinuableSnapshot,
    RunRecord,
    StepEvent,
    StepPersistence,
    StepStore,
    ToolEffectRecord,
    continue_run,
    fork_run,
    is_provider_valid,
)
from pydantic_ai_harness.step_persistence.conversations import (  # noqa: E402
    ConversationConflict,
    ConversationSummary,
)

from agentstate import Store  # noqa: E402
from agentstate.pydantic_ai import (  # noqa: E402
    AgentStateConversationStore,
    AgentStateMessageHistory,
    AgentStateStepStore,
)
from support import RedisServer, SpillDaemon, wait_until  # noqa: E402

T0 = datetime(2026, 5, 24, 10, 0, 0, 123456, tzinfo=timezone.utc)


def run(coro):
    return asyncio.run(coro)


@pytest.fixture
def steps(store):
    return AgentStateStepStore(store=store)


@pytest.fixture
def spilled(tmp_path):
    """A private redis-server (a test may empty it) with a running spill daemon flushing a
    fresh namespace to ``tmp_path/spill.db``: ``(server, store)``, the store durable (a write
    returns once SQLite has it)."""
    server = RedisServer()
    prefix = "l" + uuid.uuid4().hex[:8]
    daemon = SpillDaemon(server.url, tmp_path / "spill.db", prefix).wait_started()
    try:
        yield server, Store(server.url, prefix=prefix).with_durability(True)
    finally:
        daemon.stop()
        server.close()


def adder(capabilities, model=None):
    agent = Agent(model or TestModel(), capabilities=capabilities)

    @agent.tool_plain
    def add(a: int, b: int) -> int:
        return a + b

    return agent


# -- the StepStore protocol ----------------------------------------------------------------


def test_it_is_a_step_store_and_runs_read_back_exactly(steps):
    async def go():
        assert isinstance(steps, StepStore)
        record = RunRecord(run_id="r1", conversation_id="c1", parent_run_id="p", agent_name="a",
                           metadata={"k": "v"}, started_at=T0, registration_id="reg-1")
        await steps.register_run(record)
        assert await steps.get_run(run_id="r1") == record
        assert await steps.get_run(run_id="missing") is None

    run(go())


def test_list_runs_is_chronological_and_filters_combine(steps):
    async def go():
        await steps.register_run(RunRecord(run_id="z", conversation_id="a", parent_run_id="p", started_at=T0 + timedelta(seconds=3)))
        await steps.register_run(RunRecord(run_id="y", conversation_id="a", parent_run_id="q", started_at=T0 + timedelta(seconds=1)))
        await steps.register_run(RunRecord(run_id="x", conversation_id="b", parent_run_id="p", started_at=T0 + timedelta(seconds=2)))
        await steps.append_event(StepEvent(run_id="unregistered", kind="run_started", step_index=0))
        assert [r.run_id for r in await steps.list_runs()] == ["y", "x", "z"]
        assert [r.run_id for r in await steps.list_runs(conversation_id="a")] == ["y", "z"]
        assert [r.run_id for r in await steps.list_runs(parent_run_id="p")] == ["x", "z"]
        assert [r.run_id for r in await steps.list_runs(parent_run_id="p", conversation_id="a")] == ["z"]

    run(go())


def test_events_keep_append_order_every_field_and_a_retried_key_writes_nothing(steps, store):
    async def go():
        first = StepEvent(run_id="r1", kind="run_started", step_index=0, timestamp=T0, idempotency_key="0:0:run_started:")
        second = StepEvent(run_id="r1", kind="tool_call_started", step_index=1, timestamp=T0 - timedelta(days=1),
                           conversation_id="c", parent_run_id="p", agent_name="a", tool_call_id="t1",
                           tool_name="add", error=None, metadata={"k": "v"})
        await steps.append_event(first)
        await steps.append_event(second)
        await steps.append_event(first)  # a retry: the same key
        assert await steps.list_events(run_id="r1") == [first, second]
        assert await steps.list_events(run_id="missing") == []
        assert [m["seq"] for m in store.messages(steps.run_key("r1"))] == [1, 2]

    run(go())


def _snapshot(step, text, state="complete", key=None):
    messages = [ModelRequest(parts=[UserPromptPart(content="hi", timestamp=T0)]),
                ModelResponse(parts=[TextPart(content=text)], timestamp=T0)]
    if state == "interrupted":
        messages[-1] = ModelResponse(parts=[TextPart(content=text), ToolCallPart("add", {}, tool_call_id="open")], timestamp=T0)
    return ContinuableSnapshot(run_id="r1", step_index=step, messages=messages, state=state,
                               timestamp=T0, idempotency_key=key)


def test_the_latest_snapshot_is_the_last_written_complete_one_unless_asked(steps):
    async def go():
        assert await steps.latest_snapshot(run_id="r1") is None
        a, b, c = _snapshot(5, "a"), _snapshot(2, "b"), _snapshot(9, "c", "interrupted")
        for s in (a, b, c):
            await steps.save_snapshot(s)
        assert await steps.latest_snapshot(run_id="r1") == b  # write order, not step_index
        assert await steps.latest_snapshot(run_id="r1", include_interrupted=True) == c
        assert await steps.list_snapshots(run_id="r1") == [a, b]
        assert await steps.list_snapshots(run_id="r1", include_interrupted=True) == [a, b, c]
        assert await continue_run(steps, run_id="r1") == b.messages
        assert await fork_run(steps, run_id="r1", include_interrupted=True) == c.messages

    run(go())


def test_the_latest_complete_snapshot_is_found_behind_many_interrupted_ones(steps):
    async def go():
        await steps.save_snapshot(_snapshot(0, "settled"))
        for i in range(40):
            await steps.save_snapshot(_snapshot(i + 1, f"frontier {i}", "interrupted"))
        latest = await steps.latest_snapshot(run_id="r1")
        assert latest.messages[-1].parts[0].content == "settled"

    run(go())


def test_a_retried_snapshot_key_writes_nothing(steps):
    async def go():
        older, newer = _snapshot(1, "older", key="0:1:complete"), _snapshot(2, "newer", key="1:2:complete")
        for s in (older, newer, older):
            await steps.save_snapshot(s)
        assert await steps.list_snapshots(run_id="r1") == [older, newer]
        assert await steps.latest_snapshot(run_id="r1") == newer

    run(go())


def test_the_tool_effect_ledger_is_the_cores(steps, store):
    async def go():
        started = ToolEffectRecord(tool_call_id="t1", tool_name="add", run_id="r1", status="started", started_at=T0)
        await steps.record_tool_effect(started)
        assert await steps.list_unresolved_tool_effects(run_id="r1") == [started]
        annotated = replace(started, idempotency_key="label::x", effect_summary="set label")
        await steps.record_tool_effect(annotated)
        assert await steps.get_tool_effect(run_id="r1", tool_call_id="t1") == annotated
        # The core's ledger holds it: one intent, running.
        effect = store.effect(steps.run_key("r1"), "t1")
        assert effect["state"] == "running"
        assert [e["call_id"] for e in store.unresolved_effects(steps.run_key("r1"))] == ["t1"]
        done = replace(annotated, status="completed", ended_at=T0 + timedelta(seconds=1))
        await steps.record_tool_effect(done)
        assert await steps.get_tool_effect(run_id="r1", tool_call_id="t1") == done
        assert await steps.list_unresolved_tool_effects(run_id="r1") == []
        assert store.effect(steps.run_key("r1"), "t1")["state"] == "done"
        # A result with no intent first (a failure recorded directly) begins it, then finishes.
        failed = ToolEffectRecord(tool_call_id="t2", tool_name="mul", run_id="r2", status="failed", effect_summary="boom")
        await steps.record_tool_effect(failed)
        assert await steps.get_tool_effect(run_id="r2", tool_call_id="t2") == failed
        assert await steps.get_tool_effect(run_id="r1", tool_call_id="t2") is None
        assert await steps.get_tool_effect(run_id="nope", tool_call_id="x") is None
        assert await steps.list_unresolved_tool_effects(run_id="nope") == []
        # A call the Store (or the CLI) recorded in the run's ledger reads as what it knows.
        sid = steps.run_key("r1")
        assert store.effect_begin(sid, "raw", {"amount": 42})["state"] == "started"
        [raw] = await steps.list_unresolved_tool_effects(run_id="r1")
        assert (raw.tool_call_id, raw.tool_name, raw.status) == ("raw", "", "started")
        store.effect_finish(sid, "raw", {"charged": True})
        raw = await steps.get_tool_effect(run_id="r1", tool_call_id="raw")
        assert (raw.status, raw.effect_summary) == ("completed", '{"charged": true}')

    run(go())


def test_bad_arguments_are_refused_naming_them_before_anything_is_written(steps, store):
    async def go():
        with pytest.raises(TypeError, match="event must be a StepEvent"):
            await steps.append_event({"run_id": "r1"})
        with pytest.raises(TypeError, match="record must be a RunRecord"):
            await steps.register_run("r1")
        with pytest.raises(TypeError, match="run_id must be a str"):
            await steps.list_events(run_id=5)
        with pytest.raises(TypeError, match="snapshot must be a ContinuableSnapshot"):
            await steps.save_snapshot(None)
        with pytest.raises(TypeError, match="conversation_id must be a str or None"):
            await steps.list_runs(conversation_id=3)
        assert await steps.list_runs() == []

    run(go())
    with pytest.raises(ValueError, match="id_prefix"):
        AgentStateStepStore(store=store, id_prefix="no spaces")
    with pytest.raises(TypeError, match="url must be a str or None"):
        AgentStateStepStore(5)
    with pytest.raises(TypeError, match="messages must be a list of ModelMessages"):
        AgentStateMessageHistory("h", store=store).append("not a list")


def test_odd_run_ids_map_to_valid_agentstate_ids_and_come_back_exactly(steps):
    async def go():
        for rid in ("tenant/run 1", "x" * 200, "h.looks-like-a-digest", "ünï"):
            await steps.register_run(RunRecord(run_id=rid, started_at=T0))
            await steps.append_event(StepEvent(run_id=rid, kind="run_started", step_index=0, timestamp=T0))
            assert (await steps.get_run(run_id=rid)).run_id == rid
            assert [e.run_id for e in await steps.list_events(run_id=rid)] == [rid]
        assert len(await steps.list_runs()) == 4

    run(go())


# -- the harness's capability on our store -------------------------------------------------


def test_a_step_persistence_run_records_its_lifecycle_and_continues_elsewhere(steps):
    async def go():
        result = await adder([StepPersistence(store=steps, agent_name="librarian", run_id="lib-1")]).run("add 1 and 2")
        kinds = [e.kind for e in await steps.list_events(run_id="lib-1")]
        assert kinds[0] == "run_started" and kinds[-1] == "run_completed"
        assert "tool_call_started" in kinds and "tool_call_completed" in kinds
        assert (await steps.get_run(run_id="lib-1")).agent_name == "librarian"
        effect = await steps.get_tool_effect(run_id="lib-1", tool_call_id="pyd_ai_tool_call_id__add")
        assert effect.status == "completed" and effect.tool_name == "add"
        history = await continue_run(steps, run_id="lib-1")
        assert history == result.all_messages() and is_provider_valid(history)
        # A fresh capability in a fresh store object (as another process has) goes on from it.
        other = AgentStateStepStore(store=steps._store)
        again = await adder([StepPersistence(store=other, run_id="lib-2")]).run("add 3 and 4", message_history=await fork_run(other, run_id="lib-1"))
        assert again.all_messages()[: len(history)] == history
        with pytest.raises(ValueError, match="already in the store"):
            await adder([StepPersistence(store=steps, run_id="lib-1")]).run("again")

    run(go())


_CHILD = textwrap.dedent(
    """
    import asyncio, os, sys, time
    from pathlib import Path
    from agentstate import Store
    from agentstate.pydantic_ai import AgentStateStepStore
    from pydantic_ai_harness.step_persistence import StepEvent

    url, prefix, mode, name, start = sys.argv[1:6]

    async def main():
        steps = AgentStateStepStore(store=await Store.aconnect(url, prefix=prefix))
        if mode == "append":
            Path(start, name).touch()
            while len(list(Path(start).iterdir())) < 2:
                time.sleep(0.001)
            for i in range(100):
                await steps.append_event(StepEvent(run_id="shared", kind="model_request_started",
                                                   step_index=i, agent_name=name))
        elif mode == "crash":
            from pydantic_ai import Agent
            from pydantic_ai.models.test import TestModel
            from pydantic_ai_harness.step_persistence import StepPersistence
            agent = Agent(TestModel(), capabilities=[StepPersistence(store=steps, run_id="crashy")])

            @agent.tool_plain
            def charge(amount: int) -> str:
                os._exit(9)  # killed mid-tool: no result, no later event

            await agent.run("charge 5")
        elif mode == "continue":
            from pydantic_ai import Agent
            from pydantic_ai.models.test import TestModel
            from pydantic_ai_harness.step_persistence import StepPersistence, continue_run
            history = await continue_run(steps, run_id="first")
            agent = Agent(TestModel(custom_output_text="continued"), capabilities=[StepPersistence(store=steps, run_id="second")])
            result = await agent.run("and then?", message_history=history)
            print(len(history), result.output)
        elif mode == "conversation":  # another process moves conversation `name` on a revision
            from agentstate.pydantic_ai import AgentStateConversationStore
            heads = AgentStateConversationStore(store=steps._store)
            saved = await heads.get(conversation_id=name)
            moved = await heads.save(summary=saved.summary, messages=saved.messages + saved.messages[-1:])
            print(moved.revision)

    asyncio.run(main())
    """
)


def _child(url, prefix, mode, name="x", start="."):
    return subprocess.Popen([sys.executable, "-c", _CHILD, url, prefix, mode, name, str(start)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def test_two_processes_appending_to_one_run_lose_nothing_and_agree_on_one_order(redis_server, prefix, steps, store, tmp_path):
    start = tmp_path / "start"
    start.mkdir()
    procs = [_child(redis_server.url, prefix, "append", name, start) for name in ("a", "b")]
    for p in procs:
        out, err = p.communicate(timeout=120)
        assert p.returncode == 0, err
    events = run(steps.list_events(run_id="shared"))
    assert len(events) == 200
    for name in "ab":  # each writer's events in its own order, none lost
        assert [e.step_index for e in events if e.agent_name == name] == list(range(100))
    assert [m["seq"] for m in store.messages(steps.run_key("shared"))] == list(range(1, 201))
    assert run(steps.list_events(run_id="shared")) == events  # one order for every reader


def test_a_run_killed_mid_tool_leaves_an_unresolved_effect_the_next_process_sees(redis_server, prefix, steps):
    p = _child(redis_server.url, prefix, "crash")
    p.communicate(timeout=120)
    assert p.returncode == 9
    unresolved = run(steps.list_unresolved_tool_effects(run_id="crashy"))
    assert [(e.tool_name, e.status) for e in unresolved] == [("charge", "started")]
    events = run(steps.list_events(run_id="crashy"))
    assert events[-1].kind == "tool_call_started" and events[-1].tool_name == "charge"
    # The default resume point never holds the open call.
    latest = run(steps.latest_snapshot(run_id="crashy"))
    assert latest is None or is_provider_valid(latest.messages)


def test_a_run_is_continued_from_another_process(redis_server, prefix, steps):
    first = run(adder([StepPersistence(store=steps, run_id="first")]).run("add 1 and 2"))
    p = _child(redis_server.url, prefix, "continue")
    out, err = p.communicate(timeout=120)
    assert p.returncode == 0, err
    assert out.split() == [str(len(first.all_messages())), "continued"]
    snap = run(steps.latest_snapshot(run_id="second"))
    assert snap.messages[: len(first.all_messages())] == first.all_messages()


# -- conversation heads ---------------------------------------------------------------------


def test_a_stale_conversation_writer_gets_conversation_conflict_and_writes_nothing(redis_server, prefix, store):
    heads = AgentStateConversationStore(store=store)
    msgs = [ModelRequest(parts=[UserPromptPart(content="one", timestamp=T0)])]

    async def go():
        fresh = ConversationSummary(id="conv-1", workspace="/w")
        mine = await heads.save(summary=fresh, messages=msgs)
        assert mine.revision == 1
        # Another process resumes the conversation and saves on top of it: ours is stale now.
        p = _child(redis_server.url, prefix, "conversation", "conv-1")
        out, err = p.communicate(timeout=120)
        assert (p.returncode, out.strip()) == (0, "2"), err
        theirs = (await heads.get(conversation_id="conv-1")).summary
        assert theirs.revision == 2
        with pytest.raises(ConversationConflict, match="changed in another process"):
            await heads.save(summary=mine, messages=[ModelRequest(parts=[UserPromptPart(content="stale", timestamp=T0)])])
        with pytest.raises(ConversationConflict):  # a second creator of one id
            await heads.save(summary=fresh, messages=msgs)
        saved = await heads.get(conversation_id="conv-1")
        assert saved.summary == theirs and len(saved.messages) == 2
        assert [m["seq"] for m in store.messages(heads.conversation_key("conv-1"))] == [1, 2]
        with pytest.raises(ConversationConflict):
            await heads.delete(source=mine)
        await heads.delete(source=theirs)
        with pytest.raises(LookupError):
            await heads.get(conversation_id="conv-1")
        with pytest.raises(ConversationConflict, match="deleted"):
            await heads.save(summary=theirs, messages=msgs)

    run(go())


# -- message history --------------------------------------------------------------------------


def test_model_messages_round_trip_exactly_and_agents_go_on_from_them(store):
    history = AgentStateMessageHistory("chat-1", store=store)
    tricky = [
        ModelRequest(parts=[UserPromptPart(content=["look", BinaryContent(data=b"\x00\xff" * 40, media_type="image/png")], timestamp=T0)], instructions="be brief"),
        ModelResponse(parts=[TextPart("calling"), ToolCallPart("add", {"a": 1, "b": 2}, tool_call_id="c1")], model_name="m", timestamp=T0),
        ModelRequest(parts=[ToolReturnPart("add", {"sum": 3}, tool_call_id="c1", timestamp=T0)]),
        ModelResponse(parts=[TextPart("3")], timestamp=T0),
    ]
    assert history.append(tricky) == [1, 2, 3, 4]
    loaded = history.load()
    # Exact: the same JSON as the originals, byte for byte (pydantic-ai itself reads an image's
    # BinaryContent back as its BinaryImage subclass, so compare what it serializes) ...
    assert ModelMessagesTypeAdapter.dump_json(loaded) == ModelMessagesTypeAdapter.dump_json(tricky)
    assert loaded[0].parts[0].content[1].data == b"\x00\xff" * 40
    assert loaded[0].parts[0].timestamp == T0 and loaded[1].parts[1].args == {"a": 1, "b": 2}
    # ... and equal to what pydantic-ai's own round trip of them gives.
    assert loaded == ModelMessagesTypeAdapter.validate_json(ModelMessagesTypeAdapter.dump_json(tricky))
    tricky = loaded
    assert history.load(last=1) == tricky[-1:]
    assert history.load(last=0) == []

    async def go():
        agent = adder([])
        first = await agent.run("add 1 and 2", message_history=await history.aload())
        await history.aappend(first.new_messages())
        loaded = await history.aload()
        assert loaded == tricky + first.new_messages()
        second = await agent.run("again", message_history=loaded)
        assert second.all_messages()[: len(loaded)] == loaded
        await history.aclear()
        assert await history.aload() == []

    run(go())
    assert AgentStateMessageHistory("never", store=store).load() == []


# -- durability ----------------------------------------------------------------------------------


async def _write_everything(steps, heads, history):
    await steps.register_run(RunRecord(run_id="d1", conversation_id="c", started_at=T0))
    for i in range(3):
        await steps.append_event(StepEvent(run_id="d1", kind="model_request_started", step_index=i, timestamp=T0))
    await steps.save_snapshot(_snapshot(1, "kept"))
    await steps.record_tool_effect(ToolEffectRecord(tool_call_id="t1", tool_name="charge", run_id="d1", status="started", started_at=T0))
    await heads.save(summary=ConversationSummary(id="conv", workspace="/w"), messages=_snapshot(0, "x").messages)
    await history.aappend(_snapshot(0, "h").messages)


async def _read_everything(steps, heads, history):
    return (
        await steps.get_run(run_id="d1"),
        await steps.list_events(run_id="d1"),
        await steps.latest_snapshot(run_id="r1"),
        await steps.list_unresolved_tool_effects(run_id="d1"),
        [r.run_id for r in await steps.list_runs()],
        (await heads.get(conversation_id="conv")).summary.revision,
        await history.aload(),
    )


def test_runs_snapshots_effects_and_histories_come_back_after_redis_loses_everything(spilled):
    server, store = spilled
    steps, heads, history = (AgentStateStepStore(store=store), AgentStateConversationStore(store=store),
                             AgentStateMessageHistory("h", store=store))
    run(_write_everything(steps, heads, history))
    before = run(_read_everything(steps, heads, history))
    server.restart_empty()
    after = wait_until(lambda: _restored(steps, heads, history), timeout=20, what="the restore")
    assert after == before
    # The restored run goes on where it stopped.
    run(steps.append_event(StepEvent(run_id="d1", kind="run_completed", step_index=9, timestamp=T0)))
    assert [m["seq"] for m in store.messages(steps.run_key("d1"))] == [1, 2, 3, 4]


def _restored(steps, heads, history):
    try:
        return run(_read_everything(steps, heads, history))
    except Exception:  # NotLive until the daemon restored it
        return None


def test_the_postgresql_tier_keeps_a_run_redis_lost(redis_server, prefix):
    from agentstate import SpillDaemon as InProcessDaemon
    from test_postgres import psql

    admin = os.environ.get("AGENTSTATE_TEST_PG")
    if not admin:
        pytest.skip("AGENTSTATE_TEST_PG is unset: run through scripts/test-python.sh")
    name = "agentstate_pyai_" + uuid.uuid4().hex[:12]
    psql(admin, f"CREATE DATABASE {name}")
    pg_url = admin.rsplit("/", 1)[0] + "/" + name
    try:
        with InProcessDaemon(redis_server.url, pg_url, prefix=prefix):
            store = Store(redis_server.url, prefix=prefix).with_durability(True)
            steps, heads, history = (AgentStateStepStore(store=store), AgentStateConversationStore(store=store),
                                     AgentStateMessageHistory("h", store=store))
            run(_write_everything(steps, heads, history))
            before = run(_read_everything(steps, heads, history))
            subprocess.run(["redis-cli", "-u", redis_server.url, "FLUSHALL"], check=True, capture_output=True)
            after = wait_until(lambda: _restored(steps, heads, history), timeout=20, what="the restore from PostgreSQL")
            assert after == before
    finally:
        psql(admin, f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")


# -- the README example -----------------------------------------------------------------------------


def test_the_readme_example_runs_twice_and_the_second_run_continues_the_first(tmp_path):
    server = RedisServer()
    try:
        example = Path(__file__).resolve().parents[1] / "examples" / "pydantic_ai_steps.py"
        env = {**os.environ, "AGENTSTATE_REDIS_URL": server.url}
        outputs = [
            subprocess.run([sys.executable, str(example)], cwd=tmp_path, env=env,
                           capture_output=True, text=True, timeout=120, check=True).stdout
            for _ in range(2)
        ]
        assert "run 1: 2 earlier messages" not in outputs[0]
        assert "run 1: 0 earlier messages" in outputs[0]
        assert "run 2: 4 earlier messages" in outputs[1]
        assert "unresolved tool calls: []" in outputs[1]
    finally:
        server.close()
