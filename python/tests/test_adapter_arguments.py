"""Every public method of the three adapters refuses arguments of the wrong type (or a refused
value) with ``TypeError``/``ValueError`` naming the argument, before anything is written
(issue 23).

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
