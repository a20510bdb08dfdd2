"""``AgentStateSaver`` under real LangGraph graphs: a graph with a subgraph and an interrupt
survives Redis losing everything while a spill daemon runs and resumes from its last
checkpoint exactly; sync and async use; time travel (a fork from an older checkpoint keeps
both branches' values); thread ids that are not agentstate ids.

Every run is compared with LangGraph's own ``InMemorySaver`` running the same graph: the
values, the interrupts and the shape of the history must be the same."""

from __future__ import annotations

import asyncio
import operator
import subprocess
import uuid
from typing import Annotated, Any, Dict, List, Tuple, TypedDict

import pytest

from support import RedisCluster, RedisServer, SpillDaemon, prepare_namespace, sqlite_rows, wait_until

langgraph = pytest.importorskip("langgraph")

from langgraph.checkpoint.memory import InMemorySaver  # noqa: E402
from langgraph.graph import END, START, StateGraph  # noqa: E402
from langgraph.types import Command, interrupt  # noqa: E402


class Trip(TypedDict):
    steps: Annotated[List[str], operator.add]
    city: str


def _trip_graph(checkpointer: Any):
    """plan -> trip (a subgraph: research -> ask, which interrupts for the city) -> book."""

    def research(s: Trip) -> Dict[str, Any]:
        return {"steps": ["research"]}

    def ask(s: Trip) -> Dict[str, Any]:
        city = interrupt({"question": "Which city?", "seen": list(s["steps"])})
        return {"steps": [f"ask:{city}"], "city": city}

    sub = StateGraph(Trip)
    sub.add_node("research", research)
    sub.add_node("ask", ask)
    sub.add_edge(START, "research")
    sub.add_edge("research", "ask")
    sub.add_edge("ask", END)

    def plan(s: Trip) -> Dict[str, Any]:
        return {"steps": ["plan"]}

    def book(s: Trip) -> Dict[str, Any]:
        return {"steps": [f"book:{s['city']}"]}

    g = StateGraph(Trip)
    g.add_node("plan", plan)
    g.add_node("trip", sub.compile())
    g.add_node("book", book)
    g.add_edge(START, "plan")
    g.add_edge("plan", "trip")
    g.add_edge("trip", "book")
    g.add_edge("book", END)
    return g.compile(checkpointer=checkpointer)


# What the trip graph does, as LangGraph's InMemorySaver runs it (the subgraph returns its
# whole `steps`, which the parent's reducer appends to its own: "plan" twice).
QUESTION = {"question": "Which city?", "seen": ["plan", "research"]}
FINAL = {"steps": ["plan", "plan", "research", "ask:Lisbon", "book:Lisbon"], "city": "Lisbon"}


def _interrupted(snapshot: Any) -> Tuple[Any, ...]:
    """(next, values, [interrupt values], subgraph next, subgraph values) of a state."""
    (task,) = snapshot.tasks
    return (
        snapshot.next,
        snapshot.values,
        [i.value for i in task.interrupts],
        task.state.next,
        task.state.values,
    )


def _history(graph: Any, config: Dict[str, Any]) -> List[Tuple[Any, ...]]:
    """The root namespace's history: (step, source, next, values), newest first."""
    return [(s.metadata["step"], s.metadata["source"], s.next, s.values) for s in graph.get_state_history(config)]


@pytest.fixture
def world(tmp_path):
    server = RedisServer()
    try:
        prefix = "g" + uuid.uuid4().hex[:8]
        db = tmp_path / "spill.db"
        prepare_namespace(server.url, prefix, db)
        daemon = SpillDaemon(server.url, db, prefix).wait_started()
        try:
            yield server, prefix, db
        finally:
            assert daemon.stop() == 0
    finally:
        server.close()


def _flushed_fields(db, sid: str) -> int:
    try:
        return sqlite_rows(db, "SELECT count(*) FROM graph_log WHERE session_id = ?", sid)[0][0]
    except Exception:  # the daemon has not created the file yet
        return -1


def _live_fields(server, prefix: str, sid: str) -> int:
    """How many fields the thread's graph log has in Redis (checkpoints, blobs, writes),
    as ``redis-cli`` sees them."""
    cli = ["redis-cli", "-p", str(server.port)]
    keys = subprocess.run(cli + ["--scan", "--pattern", f"{prefix}:*:s:{sid}:graph"],
                          check=True, capture_output=True, text=True).stdout.split()
    assert len(keys) == 1, keys
    return int(subprocess.run(cli + ["HLEN", keys[0]], check=True, capture_output=True, text=True).stdout)


def test_graph_with_subgraph_and_interrupt_resumes_exactly_after_redis_loss(world):
    from agentstate import Store
    from agentstate.langgraph import AgentStateSaver

    server, prefix, db = world
    saver = AgentStateSaver(store=Store(server.url, prefix=prefix))
    graph = _trip_graph(saver)
    config = {"configurable": {"thread_id": "trip-1"}}

    first = graph.invoke({"steps": [], "city": ""}, config)
    assert first["steps"] == ["plan"] and first["city"] == ""
    assert [i.value for i in first["__interrupt__"]] == [QUESTION]
    before = graph.get_state(config, subgraphs=True)
    assert _interrupted(before) == (
        ("trip",), {"steps": ["plan"], "city": ""}, [QUESTION], ("ask",),
        {"steps": ["plan", "research"], "city": ""},
    )
    history_before = _history(graph, config)
    assert [h[:3] for h in history_before] == [(1, "loop", ("trip",)), (0, "loop", ("plan",)), (-1, "input", ("__start__",))]
    last_id = before.config["configurable"]["checkpoint_id"]
    sub_config = before.tasks[0].state.config["configurable"]
    assert sub_config["checkpoint_ns"].startswith("trip:")
    # Both namespaces hold 3 checkpoints; the subgraph's interrupt is a pending write.
    sub_tuple = saver.get_tuple({"configurable": {"thread_id": "trip-1", "checkpoint_ns": sub_config["checkpoint_ns"]}})
    assert sub_tuple.config["configurable"]["checkpoint_id"] == sub_config["checkpoint_id"]
    assert [(w[1], [i.value for i in w[2]]) for w in sub_tuple.pending_writes] == [("__interrupt__", [QUESTION])]
    assert len(list(saver.list({"configurable": {"thread_id": "trip-1"}}))) == 6

    # Everything the graph wrote reaches SQLite: as many graph-log rows as Redis holds.
    sid = saver.agentstate_id("trip-1")
    assert sid == "lg.trip-1"  # the saver's own id space
    live = _live_fields(server, prefix, sid)
    assert live > 6  # 6 checkpoints, their blobs and writes
    wait_until(lambda: _flushed_fields(db, sid) == live, what="the flush of the thread's graph log")

    server.restart_empty()

    after = graph.get_state(config, subgraphs=True)
    assert after.config["configurable"]["checkpoint_id"] == last_id
    assert _interrupted(after) == _interrupted(before)
    assert after.tasks[0].state.config["configurable"]["checkpoint_id"] == sub_config["checkpoint_id"]
    assert _history(graph, config) == history_before

    final = graph.invoke(Command(resume="Lisbon"), config)
    assert final == FINAL
    done = graph.get_state(config)
    assert done.next == () and done.values == FINAL
    # The resumed run continued the pre-loss history: its first checkpoint's parent is the
    # last checkpoint written before Redis lost everything.
    history = list(graph.get_state_history(config))
    assert [s.metadata["step"] for s in history] == [3, 2, 1, 0, -1]
    assert history[2].config["configurable"]["checkpoint_id"] == last_id
    assert history[1].parent_config["configurable"]["checkpoint_id"] == last_id

    # The same graph on LangGraph's own saver, no loss: the same values and history shape.
    reference = _trip_graph(InMemorySaver())
    reference.invoke({"steps": [], "city": ""}, config)
    assert reference.invoke(Command(resume="Lisbon"), config) == final
    assert [h[:3] for h in _history(reference, config)] == [h[:3] for h in _history(graph, config)]
    assert [h[3] for h in _history(reference, config)] == [h[3] for h in _history(graph, config)]


def test_async_graph_and_odd_thread_ids(world):
    from agentstate import Store
    from agentstate.langgraph import AgentStateSaver

    server, prefix, _ = world
    store = Store(server.url, prefix=prefix)
    saver = AgentStateSaver(store=store, id_prefix="app1/")
    graph = _trip_graph(saver)
    odd = ["user:42|chat,1~x", "user:42|chat,1~y", "ünïcode thread"]

    async def run(tid: str) -> Tuple[Any, Any, Any]:
        config = {"configurable": {"thread_id": tid}}
        first = await graph.ainvoke({"steps": [], "city": ""}, config)
        state = await graph.aget_state(config, subgraphs=True)
        final = await graph.ainvoke(Command(resume=tid), config)
        return first, state, final

    async def all_threads():
        return await asyncio.gather(*(run(t) for t in odd))

    results = asyncio.run(all_threads())
    for tid, (first, state, final) in zip(odd, results):
        assert [i.value for i in first["__interrupt__"]] == [QUESTION]
        assert _interrupted(state)[2] == [QUESTION]
        assert final == {"steps": ["plan", "plan", "research", f"ask:{tid}", f"book:{tid}"], "city": tid}
    # Each thread is an agentstate session of its own, named by a digest of the prefixed id.
    sids = [saver.agentstate_id(t) for t in odd]
    assert len(set(sids)) == 3 and all(s.startswith("h.") for s in sids)
    for tid, sid in zip(odd, sids):
        latest = store.graph_get(sid, "", None)
        assert latest["metadata"]["step"] == 3
        tup = saver.get_tuple({"configurable": {"thread_id": tid}})
        assert tup.config["configurable"]["thread_id"] == tid
        assert tup.checkpoint["channel_values"]["city"] == tid
    # Sync reads see what the async writes stored, thread by thread.
    assert [len(list(saver.list({"configurable": {"thread_id": t}}))) for t in odd] == [9, 9, 9]
    # The same thread id under another id_prefix is another thread.
    other = AgentStateSaver(store=store, id_prefix="app2/")
    assert other.get_tuple({"configurable": {"thread_id": odd[0]}}) is None

    async def async_api():
        config = {"configurable": {"thread_id": odd[0], "checkpoint_ns": ""}}
        listed = [t async for t in saver.alist(config, limit=2)]
        assert [t.metadata["step"] for t in listed] == [3, 2]
        older = [t async for t in saver.alist(config, before=listed[1].config)]
        assert [t.metadata["step"] for t in older] == [1, 0, -1]
        await saver.adelete_thread(odd[0])
        assert await saver.aget_tuple(config) is None

    asyncio.run(async_api())
    assert saver.get_tuple({"configurable": {"thread_id": odd[1]}}) is not None


class Counter(TypedDict):
    n: int
    log: Annotated[List[str], operator.add]


def _counter_graph(checkpointer: Any):
    def inc(s: Counter) -> Dict[str, Any]:
        return {"n": s["n"] + 1, "log": [f"inc->{s['n'] + 1}"]}

    g = StateGraph(Counter)
    g.add_node("inc", inc)
    g.add_edge(START, "inc")
    g.add_edge("inc", END)
    return g.compile(checkpointer=checkpointer)


@pytest.mark.parametrize("kind", ["agentstate", "memory"])
def test_time_travel_fork_keeps_both_branches(world, kind):
    """A fork from an older checkpoint counts channel versions up from that checkpoint's,
    the same counters the newer branch used: the versions must still differ, or the fork's
    values would overwrite (or read) the newer branch's (integer versions break this)."""
    from agentstate import Store
    from agentstate.langgraph import AgentStateSaver

    server, prefix, _ = world
    saver = AgentStateSaver(store=Store(server.url, prefix=prefix)) if kind == "agentstate" else InMemorySaver()
    graph = _counter_graph(saver)
    config = {"configurable": {"thread_id": "tt"}}
    graph.invoke({"n": 0, "log": []}, config)
    graph.invoke({"log": ["again"]}, config)
    graph.invoke({"log": ["third"]}, config)
    assert graph.get_state(config).values == {"n": 3, "log": ["inc->1", "again", "inc->2", "third", "inc->3"]}
    history = list(graph.get_state_history(config))
    original = [(s.config, s.values) for s in history]
    after_first = next(s for s in history if s.values.get("n") == 1 and s.next == ())

    # Two updates on the fork: the second counts up to the versions the original branch's
    # second run wrote its channels at.
    fork = graph.update_state(after_first.config, {"n": 100, "log": ["forked"]})
    fork = graph.update_state(fork, {"n": 200, "log": ["again on fork"]})
    assert graph.get_state(fork).values == {"n": 200, "log": ["inc->1", "forked", "again on fork"]}
    resumed = graph.invoke({"log": ["on fork"]}, fork)
    assert resumed == {"n": 201, "log": ["inc->1", "forked", "again on fork", "on fork", "inc->201"]}
    # Every checkpoint of the original branch still holds what it held.
    assert [(c, graph.get_state(c).values) for c, _ in original] == original
    assert len(list(graph.get_state_history(config))) == len(original) + 5  # as InMemorySaver


def test_get_next_version_follows_the_in_memory_scheme():
    from agentstate.langgraph import AgentStateSaver

    saver = AgentStateSaver("redis://127.0.0.1:1")  # never connects: versions are local
    v1 = saver.get_next_version(None, None)
    v2 = saver.get_next_version(v1, None)
    again = saver.get_next_version(v1, None)
    assert v1.split(".")[0] == f"{1:032}" and v2.split(".")[0] == f"{2:032}"
    assert v1 < v2 and again.split(".")[0] == v2.split(".")[0] and again != v2
    assert saver.get_next_version(7, None).split(".")[0] == f"{8:032}"  # an int from an old saver
    memory = InMemorySaver().get_next_version(None, None)
    assert len(v1.split(".")[0]) == len(memory.split(".")[0]) == 32


def test_graph_on_the_cluster(tmp_path):
    """The trip graph on the 3-master cluster fixture (with its spill daemon): every key of
    the thread is in one hash slot, and the run matches LangGraph's in-memory saver."""
    from agentstate import Store
    from agentstate.langgraph import AgentStateSaver

    cluster = RedisCluster()
    prefix = "gc" + uuid.uuid4().hex[:8]
    db = tmp_path / "spill.db"
    try:
        prepare_namespace(cluster.url, prefix, db)
        daemon = SpillDaemon(cluster.url, db, prefix).wait_started()
        try:
            saver = AgentStateSaver(store=Store(cluster.url, prefix=prefix))
            graph = _trip_graph(saver)
            config = {"configurable": {"thread_id": "trip-c"}}
            first = graph.invoke({"steps": [], "city": ""}, config)
            assert [i.value for i in first["__interrupt__"]] == [QUESTION]
            assert graph.invoke(Command(resume="Lisbon"), config) == FINAL
            reference = _trip_graph(InMemorySaver())
            reference.invoke({"steps": [], "city": ""}, config)
            reference.invoke(Command(resume="Lisbon"), config)
            assert _history(graph, config) == _history(reference, config)

            slots = set()
            for node in cluster.nodes:
                cli = ["redis-cli", "-p", str(node.port)]
                keys = subprocess.run(cli + ["--scan", "--pattern", f"{prefix}:*:s:lg.trip-c:*"],
                                      check=True, capture_output=True, text=True).stdout.split()
                for key in keys:
                    slots.add((node.port, int(subprocess.run(cli + ["CLUSTER", "KEYSLOT", key], check=True,
                                                             capture_output=True, text=True).stdout)))
            assert len(slots) == 1, slots
            wait_until(lambda: _flushed_fields(db, "lg.trip-c") > 9, what="the flush of the thread's graph log")
        finally:
            assert daemon.stop() == 0
    finally:
        cluster.close()


def test_stored_values_are_json_when_plain_else_typed(world):
    """What ``redis-cli`` and SQLite show: plain JSON values as ``json:<text>``, others as the
    serializer's type and base64 bytes, ``empty:`` for a versioned channel without a value;
    a serializer of the user's own (e.g. encryption) sees every value."""
    from langgraph.checkpoint.base import empty_checkpoint
    from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer

    from agentstate import Store
    from agentstate.langgraph import AgentStateSaver

    class OwnSerde(JsonPlusSerializer):
        pass

    server, prefix, _ = world
    store = Store(server.url, prefix=prefix)
    values = {"plain": {"x": [1, 2.5, None, True, "é"]}, "raw": b"\x00\xff", "tuple": (1, 2), "nan": float("nan")}
    for serde, expected in [
        (None, {"plain": 'json:{"x":[1,2.5,null,true,"é"]}', "raw": "bytes:AP8=", "tuple": "msgpack:", "nan": "msgpack:"}),
        (OwnSerde(), {"plain": "msgpack:", "raw": "bytes:AP8=", "tuple": "msgpack:", "nan": "msgpack:"}),
    ]:
        saver = AgentStateSaver(store=store, serde=serde, id_prefix=f"{serde is None}-")
        cp = empty_checkpoint()
        cp["channel_values"] = dict(values)
        versions = {ch: saver.get_next_version(None, None) for ch in [*values, "gone"]}
        cp["channel_versions"] = versions
        config = saver.put({"configurable": {"thread_id": "v", "checkpoint_ns": ""}}, cp, {"source": "input", "step": -1}, versions)
        raw = store.graph_get(saver.agentstate_id("v"), "", None)["values"]
        assert raw["gone"] == "empty:"
        for ch, prefix_or_value in expected.items():
            assert raw[ch] == prefix_or_value if prefix_or_value.endswith(("}", "=")) else raw[ch].startswith(prefix_or_value), (ch, raw[ch])
        loaded = saver.get_tuple(config).checkpoint["channel_values"]
        assert set(loaded) == set(values)  # "gone" has no value: absent, as in InMemorySaver
        assert loaded["plain"] == values["plain"] and loaded["raw"] == values["raw"]
        assert tuple(loaded["tuple"]) == (1, 2) and loaded["nan"] != loaded["nan"]


def test_binding_tuples_hold_what_a_checkpoint_tuple_is_made_of(world):
    """The binding's tuple of a checkpoint: its document and metadata decoded from the stored
    JSON (floats exactly, nested values as they were put), its stored values, and its
    pending writes as ``(task_id, channel, value)`` tuples in (task_path, task_id, idx)
    order; nothing the saver does not use (no channel list, no per-write dict)."""
    from langgraph.checkpoint.base import empty_checkpoint

    from agentstate import Store
    from agentstate.langgraph import AgentStateSaver

    server, prefix, _db = world
    store = Store(server.url, prefix=prefix)
    saver = AgentStateSaver(store=store)
    cp = empty_checkpoint()
    cp["channel_values"] = {"a": 1}
    cp["channel_versions"] = {"a": saver.get_next_version(None, None)}
    floats = [0.1, 1e-320, 2.5e300, -0.0, 1 / 3]
    metadata = {"source": "loop", "step": 7, "floats": floats, "nested": {"k": ["é", None]}}
    config = saver.put({"configurable": {"thread_id": "b", "checkpoint_ns": ""}}, cp, metadata, cp["channel_versions"])
    saver.put_writes(config, [("x", "later"), ("y", 2)], "task-2", "~b")
    saver.put_writes(config, [("x", "first")], "task-1", "~a")
    for record in [store.graph_get(saver.agentstate_id("b"), "", None), *store.graph_list(saver.agentstate_id("b"))]:
        assert set(record) == {"ns", "id", "parent", "checkpoint", "metadata", "created_at", "values", "writes"}
        assert record["checkpoint"]["id"] == cp["id"] and "channel_values" not in record["checkpoint"]
        assert record["metadata"]["floats"] == floats and record["metadata"]["nested"] == metadata["nested"]
        assert record["values"] == {"a": "json:1"}
        assert record["writes"] == [("task-1", "x", 'json:"first"'), ("task-2", "x", 'json:"later"'), ("task-2", "y", "json:2")]
    assert saver.get_tuple(config).pending_writes == [("task-1", "x", "first"), ("task-2", "x", "later"), ("task-2", "y", 2)]


def test_plain_json_is_json_dumps_for_exact_json_types_only():
    """The binding's ``plain_json`` (the saver's ``json:`` test and text, one pass) writes
    what ``json.dumps(ensure_ascii=False, separators=(",", ":"))`` writes, and refuses
    every value that would not read back as itself."""
    import enum
    import json
    from collections import OrderedDict

    from agentstate import _agentstate

    plain_json = _agentstate.plain_json
    plain = [
        None, True, False, 0, -1, 2**63 - 1, -(2**63), 2**64, -(10**40), 0.1, -0.0, 1e16, 1e-7,
        1.5e300, 5e-324, "", "é\u2028\U0001f600", "\"\\/\b\f\n\r\t\x00\x1f\x7f", [], {},
        {"k": [1, {"n": None, "x": [2.5, "s"]}], "é": {"": []}},
    ]
    for value in plain:
        assert plain_json(value) == json.dumps(value, ensure_ascii=False, separators=(",", ":")), value
        assert json.loads(plain_json(value)) == value
    class Color(enum.IntEnum):
        RED = 1

    class Text(str):
        pass

    deep: Any = []
    for _ in range(600):
        deep = [deep]
    for value in [
        (1, 2), [1, (2,)], {1: "int key"}, {"k": b"bytes"}, float("nan"), [float("inf")],
        Color.RED, Text("x"), OrderedDict(a=1), {"s": "\ud800"}, {"x": object()}, deep,
    ]:
        assert plain_json(value) is None, value
