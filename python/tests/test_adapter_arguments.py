"""Every public method of the adapters refuses arguments of the wrong type (or a refused
value) with ``TypeError``/``ValueError`` naming the argument, before anything is written.

Each case seeds a fresh namespace through the adapter, takes a snapshot of it (every key and
its ``DUMP``), makes the call, and checks that it raised the named error and that
the snapshot is byte for byte the same, and that the adapter still reads back the seed. The
seeds are chosen so that the wrong reading of each argument would have written something:
``add_items`` of a dict stores its keys as items, ``delete_for_runs("run")`` deletes the runs
``r``, ``u`` and ``n`` (one is seeded), ``delete_thread(None)`` deletes a thread ``"None"``
(seeded), ``prune("t1")`` prunes threads ``t`` and ``1`` (``t`` is seeded with two
checkpoints), a bad second item of a batch must not let the first land.
"""

from __future__ import annotations

import asyncio
import socket
import uuid
from typing import Any, Callable, Dict, List, NamedTuple, Optional

import pytest

from agentstate import Store


# ---- a namespace, exactly ------------------------------------------------------------------


def _commands(port: int, commands: List[List[str]]) -> List[Any]:
    """Commands pipelined over one connection (RESP2; enough for KEYS and DUMP)."""
    out = b"".join(
        b"*%d\r\n" % len(args)
        + b"".join(b"$%d\r\n%s\r\n" % (len(a.encode()), a.encode()) for a in args)
        for args in commands
    )
    with socket.create_connection(("127.0.0.1", port), timeout=10) as s:
        s.sendall(out)
        reader = s.makefile("rb")
        return [_reply(reader) for _ in commands]


def _reply(reader: Any) -> Any:
    line = reader.readline()
    kind, rest = line[:1], line[1:-2]
    if kind == b"+":
        return rest.decode()
    if kind == b"-":
        raise RuntimeError(rest.decode())
    if kind == b":":
        return int(rest)
    if kind == b"$":
        n = int(rest)
        return None if n < 0 else reader.read(n + 2)[:-2]
    if kind == b"*":
        n = int(rest)
        return None if n < 0 else [_reply(reader) for _ in range(n)]
    raise RuntimeError(f"unexpected reply {line!r}")


def snapshot(server: Any, prefix: str) -> Dict[bytes, bytes]:
    """Every key of the namespace with its serialized value (``DUMP``: type and content)."""
    (keys,) = _commands(server.port, [["KEYS", f"{prefix}:*"]])
    dumps = _commands(server.port, [["DUMP", k.decode()] for k in keys])
    return dict(zip(keys, dumps))


def _changed(before: Dict[bytes, bytes], after: Dict[bytes, bytes]) -> List[str]:
    """The keys a call added, removed or changed, for the failure message."""
    return sorted(
        ("added " if k not in before else "removed " if k not in after else "changed ") + k.decode()
        for k in set(before) | set(after)
        if before.get(k) != after.get(k)
    )


class Case(NamedTuple):
    call: Callable[[Any], Any]
    error: type
    name: str  # how the message names the argument (its start)


def _refused(server: Any, world: Store, case: Case, read_back: Callable[[], Any], seed: Any) -> None:
    before = snapshot(server, world.prefix)
    assert before, "the seed wrote nothing: the snapshot would prove nothing"
    with pytest.raises(case.error) as raised:
        result = case.call(world)
        if asyncio.iscoroutine(result):
            asyncio.run(result)
    assert str(raised.value).startswith(case.name), str(raised.value)
    after = snapshot(server, world.prefix)
    assert _changed(before, after) == [] and after == before
    assert read_back() == seed


def _cases(table: Dict[str, Case]) -> Any:
    return pytest.mark.parametrize("case", list(table.values()), ids=list(table))


# ---- openai-agents: AgentStateSession -------------------------------------------------------

ITEMS = [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"}]


def _session(st: Store, sid: str = "conv", **kw: Any) -> Any:
    from agentstate.openai_agents import AgentStateSession

    kw.setdefault("store", st)
    return AgentStateSession(sid, **kw)


def _circular() -> Dict[str, Any]:
    item: Dict[str, Any] = {"role": "user"}
    item["content"] = [item]
    return item


OPENAI = {
    "session_id None": Case(lambda w: _session(w, None), TypeError, "session_id must be a str"),
    "session_id int": Case(lambda w: _session(w, 42), TypeError, "session_id must be a str"),
    "id_prefix None": Case(lambda w: _session(w, id_prefix=None), TypeError, "id_prefix must be a str"),
    "url int": Case(lambda w: _session(w, url=6379), TypeError, "url must be a str or None"),
    "prefix int": Case(lambda w: _session(w, prefix=7), TypeError, "prefix must be a str or None"),
    "partitions str": Case(lambda w: _session(w, partitions="16"), TypeError, "partitions must be an int"),
    "partitions 0": Case(lambda w: _session(w, partitions=0), ValueError, "partitions must be >= 1"),
    "store str": Case(lambda w: _session(None, store="redis://127.0.0.1"), TypeError, "store must be"),
    "settings limit -1": Case(
        lambda w: _session(w, session_settings={"limit": -1}), ValueError, "session_settings.limit must be >= 0"
    ),
    "add_items dict": Case(
        lambda w: _session(w).add_items({"role": "user", "content": "x"}), TypeError, "items must be a list"
    ),
    "add_items str": Case(lambda w: _session(w).add_items("hello"), TypeError, "items must be a list"),
    "add_items None": Case(lambda w: _session(w).add_items(None), TypeError, "items must be a list"),
    "add_items generator": Case(
        lambda w: _session(w).add_items(i for i in ITEMS), TypeError, "items must be a list"
    ),
    "add_items set": Case(lambda w: _session(w).add_items({"a", "b"}), TypeError, "items must be a list"),
    "a str item after a good one": Case(
        lambda w: _session(w).add_items([{"role": "user", "content": "ok"}, "oops"]),
        TypeError,
        "items[1] must be a dict",
    ),
    "an item that is no JSON": Case(
        lambda w: _session(w).add_items([{"role": "user", "content": "ok"}, {"role": "user", "content": object()}]),
        TypeError,
        "items[1] is not JSON-serializable",
    ),
    "a circular item": Case(
        lambda w: _session(w).add_items([{"role": "user", "content": "ok"}, _circular()]),
        ValueError,
        "items[1] is not JSON-serializable",
    ),
    "get_items limit str": Case(lambda w: _session(w).get_items(limit="x"), TypeError, "limit must be an int"),
    "get_items limit -1": Case(lambda w: _session(w).get_items(limit=-1), ValueError, "limit must be >= 0"),
    "get_items limit True": Case(lambda w: _session(w).get_items(limit=True), TypeError, "limit must be an int"),
    "get_items limit float": Case(lambda w: _session(w).get_items(limit=1.0), TypeError, "limit must be an int"),
    "settings limit set to -1 later": Case(
        lambda w: _settings_reassigned(_session(w)).get_items(), ValueError, "session_settings.limit must be >= 0"
    ),
}


def _settings_reassigned(session: Any) -> Any:
    session.session_settings.limit = -1  # the SDK's SessionSettings is a mutable dataclass
    return session


@_cases(OPENAI)
def test_openai_session_refuses_wrong_arguments_before_writing(store: Store, redis_server, case: Case):
    seeded = _session(store)
    asyncio.run(seeded.add_items(ITEMS))
    _refused(redis_server, store, case, lambda: asyncio.run(_session(store).get_items()), ITEMS)


def test_openai_session_takes_the_limits_the_sdk_allows(store: Store):
    """What the refusals must not catch: limit None (all), 0 (none), n; a tuple of items."""
    s = _session(store, session_settings={"limit": 1})
    asyncio.run(s.add_items(tuple(ITEMS)))
    assert asyncio.run(s.get_items()) == ITEMS[1:]  # session_settings.limit
    assert asyncio.run(s.get_items(limit=0)) == []
    assert asyncio.run(s.get_items(limit=5)) == ITEMS
    assert asyncio.run(_session(store).get_items(limit=None)) == ITEMS
    asyncio.run(s.add_items([]))
    assert asyncio.run(_session(store).get_items()) == ITEMS
    odd = {"role": "user", "content": "a lone surrogate \ud800 and é"}  # a valid str, no UTF-8
    asyncio.run(s.add_items([odd]))
    assert asyncio.run(_session(store).get_items()) == ITEMS + [odd]


# ---- strands-agents: AgentStateSessionRepository ---------------------------------------------


class _Multi:
    """A stand-in MultiAgentBase (an ``id`` and ``serialize_state()``)."""

    def __init__(self, id: Any, state: Any = None) -> None:
        self.id = id
        self._state = {"step": 1} if state is None else state

    def serialize_state(self) -> Any:
        return self._state


def _repo(st: Store, **kw: Any) -> Any:
    from agentstate.strands import AgentStateSessionRepository

    kw.setdefault("store", st)
    return AgentStateSessionRepository(**kw)


def _msg(message_id: Any = 2, message: Any = None) -> Any:
    from strands.types.session import SessionMessage

    return SessionMessage(message={"role": "user", "content": [{"text": "new"}]} if message is None else message,
                          message_id=message_id)


def _agent(agent_id: Any = "a2") -> Any:
    from strands.types.session import SessionAgent

    return SessionAgent(agent_id=agent_id, state={}, conversation_manager_state={})


def _strands_session(session_id: Any) -> Any:
    from strands.types.session import Session, SessionType

    return Session(session_id=session_id, session_type=SessionType.AGENT)


def _seed_strands(store: Store) -> None:
    repo = _repo(store)
    repo.create_session(_strands_session("s1"))
    repo.create_agent("s1", _agent("a1"))
    for i in range(2):
        repo.create_message("s1", "a1", _msg(i, {"role": "user", "content": [{"text": f"m{i}"}]}))
    repo.create_multi_agent("s1", _Multi("m1"))


def _strands_view(store: Store) -> Any:
    repo = _repo(store)
    return (
        repo.read_session("s1").session_id,
        repo.read_agent("s1", "a1").agent_id,
        [m.message["content"][0]["text"] for m in repo.list_messages("s1", "a1")],
        repo.read_multi_agent("s1", "m1"),
    )


STRANDS_SEED = ("s1", "a1", ["m0", "m1"], {"step": 1})

STRANDS = {
    "store str": Case(lambda w: _repo(None, store="redis://x"), TypeError, "store must be"),
    "id_prefix None": Case(lambda w: _repo(w, id_prefix=None), TypeError, "id_prefix must be a str"),
    "partitions -1": Case(lambda w: _repo(w, partitions=-1), ValueError, "partitions must be >= 1"),
    "create_session dict": Case(
        lambda w: _repo(w).create_session({"session_id": "s2"}), TypeError, "session must be a strands Session"
    ),
    "create_session id None": Case(
        lambda w: _repo(w).create_session(_strands_session(None)), TypeError, "session.session_id must be a str"
    ),
    "read_session None": Case(lambda w: _repo(w).read_session(None), TypeError, "session_id must be a str"),
    "create_agent dict": Case(
        lambda w: _repo(w).create_agent("s1", {"agent_id": "a2"}), TypeError, "session_agent must be a strands SessionAgent"
    ),
    "create_agent session_id None": Case(
        lambda w: _repo(w).create_agent(None, _agent()), TypeError, "session_id must be a str"
    ),
    "create_agent agent_id int": Case(
        lambda w: _repo(w).create_agent("s1", _agent(5)), TypeError, "session_agent.agent_id must be a str"
    ),
    "read_agent agent_id None": Case(lambda w: _repo(w).read_agent("s1", None), TypeError, "agent_id must be a str"),
    "update_agent dict": Case(
        lambda w: _repo(w).update_agent("s1", {"agent_id": "a1"}), TypeError, "session_agent must be"
    ),
    "create_message dict": Case(
        lambda w: _repo(w).create_message("s1", "a1", {"message_id": 2}), TypeError, "session_message must be"
    ),
    "create_message agent_id None": Case(
        lambda w: _repo(w).create_message("s1", None, _msg()), TypeError, "agent_id must be a str"
    ),
    "create_message id str": Case(
        lambda w: _repo(w).create_message("s1", "a1", _msg("2")), TypeError, "session_message.message_id must be an int"
    ),
    "create_message id True": Case(
        lambda w: _repo(w).create_message("s1", "a1", _msg(True)), TypeError, "session_message.message_id must be an int"
    ),
    "create_message id -1": Case(
        lambda w: _repo(w).create_message("s1", "a1", _msg(-1)), ValueError, "session_message.message_id must be >= 0"
    ),
    "create_message message str": Case(
        lambda w: _repo(w).create_message("s1", "a1", _msg(2, "hello")), TypeError, "session_message.message must be a dict"
    ),
    "update_message id str": Case(
        lambda w: _repo(w).update_message("s1", "a1", _msg("0")), TypeError, "session_message.message_id must be an int"
    ),
    "update_message no JSON": Case(
        lambda w: _repo(w).update_message("s1", "a1", _msg(0, {"role": "user", "content": object()})),
        TypeError,
        "session_message is not JSON-serializable",
    ),
    "read_message id str": Case(lambda w: _repo(w).read_message("s1", "a1", "0"), TypeError, "message_id must be an int"),
    "read_message id -1": Case(lambda w: _repo(w).read_message("s1", "a1", -1), ValueError, "message_id must be >= 0"),
    "list_messages limit str": Case(
        lambda w: _repo(w).list_messages("s1", "a1", limit="2"), TypeError, "limit must be an int"
    ),
    "list_messages limit -1": Case(
        lambda w: _repo(w).list_messages("s1", "a1", limit=-1), ValueError, "limit must be >= 0"
    ),
    "list_messages offset -1": Case(
        lambda w: _repo(w).list_messages("s1", "a1", offset=-1), ValueError, "offset must be >= 0"
    ),
    "list_messages offset None": Case(
        lambda w: _repo(w).list_messages("s1", "a1", offset=None), TypeError, "offset must be an int"
    ),
    "create_multi_agent object": Case(
        lambda w: _repo(w).create_multi_agent("s1", object()), TypeError, "multi_agent.id must be a str"
    ),
    "create_multi_agent state list": Case(
        lambda w: _repo(w).create_multi_agent("s1", _Multi("m2", [1, 2])), TypeError,
        "multi_agent.serialize_state() must be a dict",
    ),
    "update_multi_agent session_id None": Case(
        lambda w: _repo(w).update_multi_agent(None, _Multi("m1")), TypeError, "session_id must be a str"
    ),
    "read_multi_agent id None": Case(
        lambda w: _repo(w).read_multi_agent("s1", None), TypeError, "multi_agent_id must be a str"
    ),
}


@_cases(STRANDS)
def test_strands_repository_refuses_wrong_arguments_before_writing(store: Store, redis_server, case: Case):
    _seed_strands(store)
    _refused(redis_server, store, case, lambda: _strands_view(store), STRANDS_SEED)


def test_strands_repository_takes_the_pages_the_contract_allows(store: Store):
    _seed_strands(store)
    repo = _repo(store)
    texts = lambda **kw: [m.message["content"][0]["text"] for m in repo.list_messages("s1", "a1", **kw)]  # noqa: E731
    assert texts(limit=None) == ["m0", "m1"] and texts(limit=0) == [] and texts(limit=1) == ["m0"]
    assert texts(offset=1) == ["m1"] and texts(offset=5) == []
    assert repo.read_message("s1", "a1", 0).message_id == 0 and repo.read_message("s1", "a1", 7) is None


# ---- LangGraph: AgentStateSaver --------------------------------------------------------------


def _saver(st: Store, **kw: Any) -> Any:
    from agentstate.langgraph import AgentStateSaver

    kw.setdefault("store", st)
    return AgentStateSaver(**kw)


def _config(thread_id: Any, checkpoint_id: Optional[str] = None) -> Dict[str, Any]:
    conf: Dict[str, Any] = {"thread_id": thread_id, "checkpoint_ns": ""}
    if checkpoint_id is not None:
        conf["checkpoint_id"] = checkpoint_id
    return {"configurable": conf}


def _checkpoint(n: int) -> Dict[str, Any]:
    from langgraph.checkpoint.base import empty_checkpoint

    c = empty_checkpoint()
    c["id"] = f"1ef{n:05d}-0000-6000-8000-000000000000"
    c["channel_values"] = {"steps": [n]}
    c["channel_versions"] = {"steps": f"{n:032}.0"}
    return c


THREADS = ["t1", "t", "None"]
"""``t1`` the thread the calls name; ``t`` and ``None`` what a str or None taken as ids would
reach (each with two checkpoints, so a prune or a delete would show)."""


def _seed_graph(store: Store) -> Dict[str, List[str]]:
    saver = _saver(store)
    for thread in THREADS:
        parent = None
        for n in range(2):
            ckpt = _checkpoint(n)
            md = {"source": "loop", "step": n, "run_id": "r" if thread == "t1" and n == 0 else "None"}
            saver.put(_config(thread, parent), ckpt, md, {"steps": ckpt["channel_versions"]["steps"]})
            parent = ckpt["id"]
        saver.put_writes(_config(thread, parent), [("steps", [9])], "task-1")
    return _graph_view(store)


def _graph_view(store: Store) -> Dict[str, Any]:
    saver = _saver(store)
    return {
        thread: [(t.checkpoint["id"], t.checkpoint["channel_values"], t.pending_writes) for t in saver.list(_config(thread))]
        for thread in THREADS
    }


def _drain(agen: Any) -> Any:
    async def run() -> List[Any]:
        return [x async for x in agen]

    return run()


CKPT = _checkpoint(5)
NEW = {"steps": CKPT["channel_versions"]["steps"]}
LAST = _checkpoint(1)["id"]

LANGGRAPH = {
    "store str": Case(lambda w: _saver(None, store="redis://x"), TypeError, "store must be"),
    "id_prefix None": Case(lambda w: _saver(w, id_prefix=None), TypeError, "id_prefix must be a str"),
    "url bytes": Case(lambda w: _saver(w, url=b"redis://x"), TypeError, "url must be a str or None"),
    "put config without configurable": Case(
        lambda w: _saver(w).put({"thread_id": "t1"}, CKPT, {}, NEW), ValueError, 'config["configurable"] is missing'
    ),
    "put thread_id None": Case(
        lambda w: _saver(w).put(_config(None), CKPT, {}, NEW), ValueError, 'config["configurable"]["thread_id"] is missing'
    ),
    "put thread_id dict": Case(
        lambda w: _saver(w).put(_config({"a": 1}), CKPT, {}, NEW), TypeError,
        'config["configurable"]["thread_id"] must be a str, int or UUID',
    ),
    "put checkpoint_ns int": Case(
        lambda w: _saver(w).put({"configurable": {"thread_id": "t1", "checkpoint_ns": 0}}, CKPT, {}, NEW), TypeError,
        'config["configurable"]["checkpoint_ns"] must be a str or None',
    ),
    "put checkpoint str": Case(lambda w: _saver(w).put(_config("t1"), "ckpt", {}, NEW), TypeError, "checkpoint must be a dict"),
    "put checkpoint id int": Case(
        lambda w: _saver(w).put(_config("t1"), {**CKPT, "id": 5}, {}, NEW), TypeError, 'checkpoint["id"] must be a str'
    ),
    "put metadata list": Case(lambda w: _saver(w).put(_config("t1"), CKPT, [], NEW), TypeError, "metadata must be a dict"),
    "put new_versions list": Case(
        lambda w: _saver(w).put(_config("t1"), CKPT, {}, list(NEW.items())), TypeError, "new_versions must be a dict"
    ),
    "aput thread_id None": Case(
        lambda w: _saver(w).aput(_config(None), CKPT, {}, NEW), ValueError, 'config["configurable"]["thread_id"] is missing'
    ),
    "put_writes dict": Case(
        lambda w: _saver(w).put_writes(_config("t1", LAST), {"ab": 1}, "task-2"), TypeError, "writes must be a list"
    ),
    "put_writes a str pair after a good one": Case(
        lambda w: _saver(w).put_writes(_config("t1", LAST), [("steps", [1]), "xy"], "task-2"), TypeError,
        "writes[1] must be a (channel, value) pair",
    ),
    "put_writes channel int": Case(
        lambda w: _saver(w).put_writes(_config("t1", LAST), [(1, "v")], "task-2"), TypeError, "writes[0][0] (the channel) must be a str"
    ),
    "put_writes task_id None": Case(
        lambda w: _saver(w).put_writes(_config("t1", LAST), [("steps", [1])], None), TypeError, "task_id must be a str"
    ),
    "put_writes no checkpoint_id": Case(
        lambda w: _saver(w).put_writes(_config("t1"), [("steps", [1])], "task-2"), ValueError,
        'config["configurable"]["checkpoint_id"] is missing',
    ),
    "aput_writes dict": Case(
        lambda w: _saver(w).aput_writes(_config("t1", LAST), {"ab": 1}, "task-2"), TypeError, "writes must be a list"
    ),
    "get_tuple config None": Case(lambda w: _saver(w).get_tuple(None), TypeError, "config must be a dict"),
    "aget_tuple thread_id list": Case(
        lambda w: _saver(w).aget_tuple(_config(["t1"])), TypeError, 'config["configurable"]["thread_id"] must be'
    ),
    "list limit str": Case(lambda w: list(_saver(w).list(_config("t1"), limit="x")), TypeError, "limit must be an int"),
    "list limit -1": Case(lambda w: list(_saver(w).list(_config("t1"), limit=-1)), ValueError, "limit must be >= 0"),
    "list filter list": Case(lambda w: list(_saver(w).list(_config("t1"), filter=[("step", 1)])), TypeError, "filter must be a dict"),
    "list before str": Case(lambda w: list(_saver(w).list(_config("t1"), before=LAST)), TypeError, "before must be a dict"),
    "alist limit -1": Case(lambda w: _drain(_saver(w).alist(_config("t1"), limit=-1)), ValueError, "limit must be >= 0"),
    "delete_thread None": Case(lambda w: _saver(w).delete_thread(None), TypeError, "thread_id must be a str, int or UUID"),
    "adelete_thread None": Case(lambda w: _saver(w).adelete_thread(None), TypeError, "thread_id must be a str, int or UUID"),
    "delete_for_runs str": Case(lambda w: _saver(w).delete_for_runs("run"), TypeError, "run_ids must be a list"),
    "delete_for_runs None in the list": Case(
        lambda w: _saver(w).delete_for_runs(["r", None]), TypeError, "run_ids[1] must be a str or UUID"
    ),
    "adelete_for_runs str": Case(lambda w: _saver(w).adelete_for_runs("run"), TypeError, "run_ids must be a list"),
    "copy_thread target None": Case(
        lambda w: _saver(w).copy_thread("t1", None), TypeError, "target_thread_id must be a str, int or UUID"
    ),
    "acopy_thread source None": Case(
        lambda w: _saver(w).acopy_thread(None, "t9"), TypeError, "source_thread_id must be a str, int or UUID"
    ),
    "prune str": Case(lambda w: _saver(w).prune("t1"), TypeError, "thread_ids must be a list"),
    "prune None after a good id": Case(
        lambda w: _saver(w).prune(["t1", None]), TypeError, "thread_ids[1] must be a str, int or UUID"
    ),
    "aprune str": Case(lambda w: _saver(w).aprune("t1"), TypeError, "thread_ids must be a list"),
    "prune strategy": Case(lambda w: _saver(w).prune(["t1"], strategy="all"), ValueError, "unknown prune strategy"),
}


@_cases(LANGGRAPH)
def test_langgraph_saver_refuses_wrong_arguments_before_writing(store: Store, redis_server, case: Case):
    seed = _seed_graph(store)
    assert [len(v) for v in seed.values()] == [2, 2, 2]
    _refused(redis_server, store, case, lambda: _graph_view(store), seed)


def test_langgraph_saver_takes_the_ids_and_limits_langgraph_uses(store: Store):
    seed = _seed_graph(store)
    saver = _saver(store)
    assert [t.checkpoint["id"] for t in saver.list(_config("t1"), limit=1)] == [seed["t1"][0][0]]
    assert list(saver.list(_config("t1"), limit=0)) == []
    thread = uuid.uuid4()
    saver.put(_config(thread), CKPT, {}, NEW)
    saver.put(_config(7), CKPT, {}, NEW)
    assert saver.get_tuple(_config(thread)).checkpoint["id"] == CKPT["id"]
    assert saver.get_tuple(_config("7")).checkpoint["id"] == CKPT["id"]  # an int thread is its str
    saver.delete_for_runs(("r",))
    assert [t.checkpoint["id"] for t in saver.list(_config("t1"))] == [LAST]


# ---- Pydantic AI: AgentStateStepStore, AgentStateConversationStore, AgentStateMessageHistory --


def _steps(st: Any, **kw: Any) -> Any:
    from agentstate.pydantic_ai import AgentStateStepStore

    kw.setdefault("store", st)
    return AgentStateStepStore(**kw)


def _heads(st: Any) -> Any:
    from agentstate.pydantic_ai import AgentStateConversationStore

    return AgentStateConversationStore(store=st)


def _history(st: Any, sid: Any = "chat") -> Any:
    from agentstate.pydantic_ai import AgentStateMessageHistory

    return AgentStateMessageHistory(sid, store=st)


def _event() -> Any:
    from pydantic_ai_harness.step_persistence import StepEvent

    return StepEvent(run_id="r1", kind="run_started", step_index=0)


def _request(text: str = "hi") -> Any:
    from pydantic_ai.messages import ModelRequest, UserPromptPart

    return ModelRequest(parts=[UserPromptPart(content=text)])


PYDANTIC_AI = {
    "url int": Case(lambda w: _steps(None, store=None, url=6379), TypeError, "url must be a str or None"),
    "prefix int": Case(lambda w: _steps(w, prefix=7), TypeError, "prefix must be a str or None"),
    "partitions 0": Case(lambda w: _steps(w, partitions=0), ValueError, "partitions must be >= 1"),
    "store str": Case(lambda w: _steps("redis://127.0.0.1"), TypeError, "store must be"),
    "id_prefix with a space": Case(lambda w: _steps(w, id_prefix="a b"), ValueError, "id_prefix"),
    "register_run dict": Case(lambda w: _steps(w).register_run({"run_id": "r1"}), TypeError, "record must be a RunRecord"),
    "append_event None": Case(lambda w: _steps(w).append_event(None), TypeError, "event must be a StepEvent"),
    "append_event dict": Case(lambda w: _steps(w).append_event({"run_id": "r1"}), TypeError, "event must be a StepEvent"),
    "save_snapshot event": Case(lambda w: _steps(w).save_snapshot(_event()), TypeError, "snapshot must be a ContinuableSnapshot"),
    "record_tool_effect event": Case(lambda w: _steps(w).record_tool_effect(_event()), TypeError, "record must be a ToolEffectRecord"),
    "list_events run_id int": Case(lambda w: _steps(w).list_events(run_id=1), TypeError, "run_id must be a str"),
    "get_run run_id None": Case(lambda w: _steps(w).get_run(run_id=None), TypeError, "run_id must be a str"),
    "latest_snapshot run_id None": Case(lambda w: _steps(w).latest_snapshot(run_id=None), TypeError, "run_id must be a str"),
    "list_runs parent int": Case(lambda w: _steps(w).list_runs(parent_run_id=3), TypeError, "parent_run_id must be a str or None"),
    "heads save summary dict": Case(lambda w: _heads(w).save(summary={"id": "c"}, messages=[]), TypeError, "summary must be a ConversationSummary"),
    "heads delete None": Case(lambda w: _heads(w).delete(source=None), TypeError, "source must be a ConversationSummary"),
    "heads get id None": Case(lambda w: _heads(w).get(conversation_id=None), TypeError, "conversation_id must be a str"),
    "history session_id None": Case(lambda w: _history(w, None), TypeError, "session_id must be a str"),
    "history append str": Case(lambda w: _history(w).append("hello"), TypeError, "messages must be a list of ModelMessages"),
    "history append a dict after a good one": Case(
        lambda w: _history(w).append([_request(), {"kind": "request"}]), TypeError, "messages[1] must be a ModelRequest"
    ),
    "history aappend None": Case(lambda w: _history(w).aappend(None), TypeError, "messages must be a list of ModelMessages"),
    "history load last -1": Case(lambda w: _history(w).load(last=-1), ValueError, "last must be >= 0"),
}


@_cases(PYDANTIC_AI)
def test_pydantic_ai_classes_refuse_wrong_arguments_before_writing(store: Store, redis_server, case: Case):
    pytest.importorskip("pydantic_ai_harness")
    seeded = _steps(store)
    asyncio.run(seeded.append_event(_event()))
    _history(store).append([_request("seed")])

    def read_back() -> Any:
        return asyncio.run(_steps(store).list_events(run_id="r1")), _history(store).load()

    _refused(redis_server, store, case, read_back, read_back())


# ---- Microsoft Agent Framework: AgentStateHistoryProvider -------------------------------------


def _provider(st: Any, source: Any = "mem", **kw: Any) -> Any:
    from agentstate.agent_framework import AgentStateHistoryProvider

    kw.setdefault("store", st)
    return AgentStateHistoryProvider(source, **kw)


def _message(text: str) -> Any:
    from agent_framework import Message

    return Message(role="user", contents=[text])


AGENT_FRAMEWORK = {
    "source_id None": Case(lambda w: _provider(w, None), TypeError, "source_id must be a str"),
    "source_id empty": Case(lambda w: _provider(w, ""), ValueError, "source_id must be a non-empty str"),
    "url int": Case(lambda w: _provider(None, store=None, url=6379), TypeError, "url must be a str or None"),
    "store str": Case(lambda w: _provider("redis://127.0.0.1"), TypeError, "store must be"),
    "max_messages -1": Case(lambda w: _provider(w, max_messages=-1), ValueError, "max_messages must be >= 0"),
    "max_messages str": Case(lambda w: _provider(w, max_messages="5"), TypeError, "max_messages must be an int"),
    "session_ttl str": Case(lambda w: _provider(w, session_ttl="1h"), TypeError, "session_ttl must be a number"),
    "session_ttl 0": Case(lambda w: _provider(w, session_ttl=0), ValueError, "session_ttl must be > 0"),
    "save session_id None": Case(lambda w: _provider(w).save_messages(None, [_message("x")]), TypeError, "session_id must be a non-empty str"),
    "save messages str": Case(lambda w: _provider(w).save_messages("s1", "hello"), TypeError, "messages must be a list of Messages"),
    "save messages generator": Case(
        lambda w: _provider(w).save_messages("s1", (m for m in [_message("x")])), TypeError, "messages must be a list of Messages"
    ),
    "save a dict after a good message": Case(
        lambda w: _provider(w).save_messages("s1", [_message("ok"), {"role": "user"}]), TypeError, "messages[1] must be an agent_framework Message"
    ),
    "get session_id int": Case(lambda w: _provider(w).get_messages(5), TypeError, "session_id must be a non-empty str"),
    "clear session_id empty": Case(lambda w: _provider(w).clear(""), TypeError, "session_id must be a non-empty str"),
}


@_cases(AGENT_FRAMEWORK)
def test_agent_framework_provider_refuses_wrong_arguments_before_writing(store: Store, redis_server, case: Case):
    pytest.importorskip("agent_framework")
    asyncio.run(_provider(store).save_messages("s1", [_message("seed")]))

    def read_back() -> Any:
        return [m.to_dict() for m in asyncio.run(_provider(store).get_messages("s1"))]

    _refused(redis_server, store, case, read_back, read_back())
