"""The adapters in their own id spaces, and their writes safe to repeat.

Ids: the same id given to every adapter names as many agentstate sessions (clearing one
touches no other); ``id_prefix=""`` shares one on purpose and reads data written before
adapters had prefixes.

Retries: a write whose reply is lost after Redis applied it (the caller sees
``RedisUnavailable`` and cannot know) is repeated by the caller, and the data holds it once.
The loss is real: the adapter talks to a private redis-server through :class:`ReplyLoser`, a
TCP proxy that lets the request carrying a marker reach Redis, throws Redis's reply away,
cuts every connection and refuses new ones until healed, so the call fails however the core
retries; then the test repeats the call and counts what is stored, exactly."""

from __future__ import annotations

import asyncio
import socket
import threading
import time
import uuid
from typing import List, Optional

import pytest

from agentstate import InvalidInput, RedisUnavailable, Store

from support import RedisServer, SpillDaemon, prepare_namespace, sqlite_rows, wait_until


class ReplyLoser:
    """A TCP proxy to ``127.0.0.1:port``. ``arm(marker)``: the first request holding
    ``marker`` is forwarded (Redis applies it), its reply dropped, and every connection cut;
    until ``heal()`` new connections are closed at once, as a Redis that went away."""

    def __init__(self, port: int) -> None:
        self.target = ("127.0.0.1", port)
        self.listener = socket.socket()
        self.listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.listener.bind(("127.0.0.1", 0))
        self.listener.listen(64)
        self.url = f"redis://127.0.0.1:{self.listener.getsockname()[1]}"
        self.marker: Optional[bytes] = None
        self.blocked = False
        self.lost = threading.Event()
        self.lock = threading.Lock()
        self.pairs: List[list] = []
        threading.Thread(target=self._accept, daemon=True).start()

    def arm(self, marker: str) -> None:
        self.lost.clear()
        self.marker = marker.encode()

    def heal(self) -> None:
        self.blocked = False

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self.listener.accept()
            except OSError:
                return
            if self.blocked:
                client.close()
                continue
            upstream = socket.create_connection(self.target)
            pair = [client, upstream, False]  # False: replies pass
            with self.lock:
                self.pairs.append(pair)
            threading.Thread(target=self._up, args=(pair,), daemon=True).start()
            threading.Thread(target=self._down, args=(pair,), daemon=True).start()

    def _up(self, pair: list) -> None:
        client, upstream = pair[0], pair[1]
        tail = b""
        try:
            while True:
                data = client.recv(65536)
                if not data:
                    break
                marker = self.marker
                if marker is not None and marker in tail + data:
                    self.marker = None
                    self.blocked = True
                    pair[2] = True  # this connection's replies are lost from now on
                    upstream.sendall(data)
                    self.lost.set()
                    time.sleep(0.3)  # Redis runs the script and answers (into the void)
                    self._cut_all()
                    return
                upstream.sendall(data)
                tail = data[-64:]
        except OSError:
            pass
        finally:
            self._close(pair)

    def _down(self, pair: list) -> None:
        client, upstream = pair[0], pair[1]
        try:
            while True:
                data = upstream.recv(65536)
                if not data:
                    break
                if not pair[2]:
                    client.sendall(data)
        except OSError:
            pass
        finally:
            self._close(pair)

    @staticmethod
    def _close(pair: list) -> None:
        for s in pair[:2]:
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            s.close()

    def _cut_all(self) -> None:
        with self.lock:
            pairs, self.pairs = self.pairs, []
        for pair in pairs:
            pair[2] = True
            self._close(pair)

    def close(self) -> None:
        self.listener.close()
        self._cut_all()


@pytest.fixture
def lossy(redis_server, prefix, tmp_path):
    """``(store through the proxy, proxy, direct store)`` on a checked namespace."""
    prepare_namespace(redis_server.url, prefix, tmp_path / "prepare.db")
    proxy = ReplyLoser(redis_server.port)
    try:
        yield Store(proxy.url, prefix=prefix), proxy, Store(redis_server.url, prefix=prefix)
    finally:
        proxy.close()


def lose_reply(proxy: ReplyLoser, marker: str, call) -> None:
    """Runs ``call()`` with the reply to the request holding ``marker`` lost: it must fail
    (the caller cannot know the write happened), and Redis must have seen the request."""
    proxy.arm(marker)
    try:
        with pytest.raises(RedisUnavailable):
            call()
        assert proxy.lost.wait(5), "the request never reached Redis"
    finally:
        proxy.heal()


def repeat(call):
    """Repeats ``call()`` as a caller does until it succeeds: a pooled connection the loss
    cut may fail the first repeat of a call the core does not repeat itself (its request was
    not sent: "broken pipe"), and every repeat must be as safe as the first."""
    for _ in range(4):
        try:
            return call()
        except RedisUnavailable:
            time.sleep(0.1)
    return call()


def run(coro):
    return asyncio.run(coro)


# -- id spaces ---------------------------------------------------------------------------


def test_one_id_in_every_adapter_is_as_many_sessions(store: Store):
    from agentstate.adk import AgentStateSessionService
    from agentstate.agent_framework import AgentStateHistoryProvider
    from agentstate.langgraph import AgentStateSaver
    from agentstate.openai_agents import AgentStateSession
    from agentstate.pydantic_ai import AgentStateMessageHistory, AgentStateStepStore
    from agentstate.strands import AgentStateSessionRepository

    ids = {
        AgentStateSession("X", store=store).agentstate_id,
        AgentStateSaver(store=store).agentstate_id("X"),
        AgentStateSessionRepository(store=store)._sid("X"),
        AgentStateMessageHistory("X", store=store).agentstate_id,
        AgentStateStepStore(store=store).run_key("X"),
        AgentStateHistoryProvider(store=store).session_key("X"),
        AgentStateSessionService(store=store).session_key("X", "X", "X"),
    }
    assert len(ids) == 7 and "X" not in ids


def test_clearing_an_openai_session_leaves_the_langgraph_thread_and_strands_session_of_its_id(store: Store):
    from langgraph.checkpoint.base import empty_checkpoint
    from strands.types.session import Session, SessionType

    from agentstate.langgraph import AgentStateSaver
    from agentstate.openai_agents import AgentStateSession
    from agentstate.strands import AgentStateSessionRepository

    session = AgentStateSession("X", store=store)
    run(session.add_items([{"role": "user", "content": "hi"}]))
    saver = AgentStateSaver(store=store)
    config = saver.put({"configurable": {"thread_id": "X", "checkpoint_ns": ""}}, empty_checkpoint(), {}, {})
    repo = AgentStateSessionRepository(store=store)
    repo.create_session(Session(session_id="X", session_type=SessionType.AGENT))  # no "already exists"

    run(session.clear_session())
    assert run(session.get_items()) == []
    assert saver.get_tuple(config) is not None
    assert repo.read_session("X") is not None


def test_id_prefix_empty_shares_one_timeline_and_reads_what_was_written_under_the_bare_id(store: Store):
    from agentstate.openai_agents import AgentStateSession
    from agentstate.pydantic_ai import AgentStateMessageHistory

    # Written before adapters had prefixes: the bare id.
    store.create_session("chat-1")
    store.append("chat-1", "user", '{"role":"user","content":"old"}')
    old = AgentStateSession("chat-1", store=store, id_prefix="")
    assert old.agentstate_id == "chat-1"
    assert run(old.get_items()) == [{"role": "user", "content": "old"}]
    assert run(AgentStateSession("chat-1", store=store).get_items()) == []  # the new default
    # The same id_prefix in two adapters: one agentstate session on purpose.
    assert AgentStateMessageHistory("chat-1", store=store, id_prefix="").agentstate_id == "chat-1"
    assert (AgentStateSession("c", store=store, id_prefix="app.").agentstate_id
            == AgentStateMessageHistory("c", store=store, id_prefix="app.").agentstate_id == "app.c")


# -- the core: append_many's key -----------------------------------------------------------


def test_append_many_with_a_key_writes_once_and_a_pop_of_its_first_message_forgets_it(store: Store):
    store.create_session("k")
    batch = [{"role": "user", "content": "a"}, {"role": "assistant", "content": "b"}]
    assert store.append_many("k", batch, idempotency_key="b1") == [1, 2]
    assert store.append_many("k", batch, idempotency_key="b1") == [1, 2]
    assert store.append_many("k", batch, idempotency_key="b1", expect_seq=9) == [1, 2]  # a repeat wins
    assert [m["seq"] for m in store.messages("k")] == [1, 2]
    assert store.append_many("k", batch[:1], idempotency_key="one") == [3]
    assert store.append_many("k", batch[:1], idempotency_key="one") == [3]
    store.pop_message("k")
    store.pop_message("k")
    store.pop_message("k")
    assert store.append_many("k", batch, idempotency_key="b1") == [1, 2]  # forgotten with seq 1
    with pytest.raises(InvalidInput, match="idempotency key"):
        store.append_many("k", batch, idempotency_key="no spaces")


# -- retries: each adapter, its reply lost, repeated ------------------------------------------


def test_openai_add_items_repeated_after_a_lost_reply_stores_each_item_once(lossy):
    from agentstate.openai_agents import AgentStateSession

    store, proxy, direct = lossy
    session = AgentStateSession("conv", store=store)
    run(session.add_items([{"role": "user", "content": "hello"}]))
    output = [
        {"type": "function_call", "id": "fc_1", "call_id": "call_1", "name": "f", "arguments": "{}"},
        {"type": "function_call_output", "call_id": "call_1", "output": "out"},
        {"type": "message", "id": "msg_1", "role": "assistant",
         "content": [{"type": "output_text", "text": "marker-oai-1", "annotations": []}]},
    ]
    lose_reply(proxy, "marker-oai-1", lambda: run(session.add_items(output)))
    # Another object (another process, say) repeats it: the item ids make the same key.
    repeat(lambda: run(AgentStateSession("conv", store=store).add_items(output)))
    # Items without ids (the user's input): this object repeats its failed call.
    user = [{"role": "user", "content": "marker-oai-2"}]
    lose_reply(proxy, "marker-oai-2", lambda: run(session.add_items(user)))
    repeat(lambda: run(session.add_items(user)))
    # A caller's key, from a fresh object.
    again = [{"role": "user", "content": "marker-oai-3"}]
    lose_reply(proxy, "marker-oai-3",
               lambda: run(AgentStateSession("conv", store=store).add_items(again, idempotency_key="turn-3")))
    repeat(lambda: run(AgentStateSession("conv", store=store).add_items(again, idempotency_key="turn-3")))
    # Equal items that did not fail are two writes (a user saying the same thing twice).
    run(session.add_items(user))
    stored = run(session.get_items())
    assert stored == [{"role": "user", "content": "hello"}, *output, *user, *again, *user]
    assert len(direct.messages(session.agentstate_id)) == 7


def test_openai_add_items_repeated_after_redis_lost_everything_stores_once(tmp_path):
    """The durable tier keeps the key: a write applied, its reply lost, spilled, then Redis
    restarted empty; the repeat restores the session (with its keys) and writes nothing."""
    from agentstate.openai_agents import AgentStateSession

    server = RedisServer()
    prefix = "r" + uuid.uuid4().hex[:8]
    db = tmp_path / "spill.db"
    daemon = SpillDaemon(server.url, db, prefix).wait_started()
    proxy = ReplyLoser(server.port)
    try:
        session = AgentStateSession("conv", store=Store(proxy.url, prefix=prefix))
        first = [{"role": "user", "content": "hi"}]
        run(session.add_items(first))
        items = [{"type": "message", "id": "msg_9", "role": "assistant", "content": "marker-durable"},
                 {"type": "message", "id": "msg_10", "role": "assistant", "content": "second"}]
        lose_reply(proxy, "marker-durable", lambda: run(session.add_items(items)))
        sql = "SELECT count(*) FROM messages WHERE session_id = ?"
        wait_until(lambda: sqlite_rows(db, sql, session.agentstate_id)[0][0] == 3, what="the flush")
        server.restart_empty()
        proxy._cut_all()  # the old connections went with the old server
        repeat(lambda: run(session.add_items(items)))
        assert run(session.get_items()) == [*first, *items]
        wait_until(lambda: sqlite_rows(db, sql, session.agentstate_id)[0][0] == 3, what="the flush")
        time.sleep(0.3)
        assert sqlite_rows(db, sql, session.agentstate_id)[0][0] == 3
    finally:
        proxy.close()
        daemon.stop()
        server.close()


def test_strands_create_message_repeated_after_a_lost_reply_stores_it_once(lossy):
    from strands.types.session import Session, SessionAgent, SessionMessage, SessionType
    from strands.types.exceptions import SessionException

    from agentstate.strands import AgentStateSessionRepository

    store, proxy, direct = lossy
    repo = AgentStateSessionRepository(store=store)
    repo.create_session(Session(session_id="s", session_type=SessionType.AGENT))
    repo.create_agent("s", SessionAgent(agent_id="a", state={}, conversation_manager_state={}))
    m0 = SessionMessage(message={"role": "user", "content": [{"text": "marker-strands"}]}, message_id=0)
    lose_reply(proxy, "marker-strands", lambda: repo.create_message("s", "a", m0))
    repeat(lambda: repo.create_message("s", "a", m0))  # the repeat succeeds
    other = SessionMessage(message={"role": "user", "content": [{"text": "not the same"}]}, message_id=0)
    with pytest.raises(SessionException, match="already exists"):
        repo.create_message("s", "a", other)
    assert [m.message_id for m in repo.list_messages("s", "a")] == [0]
    assert len(direct.messages(repo._aid("s", "a"))) == 1


def test_adk_append_event_repeated_after_a_lost_reply_stores_it_once(lossy):
    from google.adk.events.event import Event
    from google.genai import types

    from agentstate.adk import AgentStateSessionService

    store, proxy, direct = lossy
    service = AgentStateSessionService(store=store)

    async def go():
        session = await service.create_session(app_name="app", user_id="u", session_id="s")
        event = Event(invocation_id="i", author="user",
                      content=types.Content(role="user", parts=[types.Part(text="marker-adk")]))
        proxy.arm("marker-adk")
        with pytest.raises(RedisUnavailable):
            await service.append_event(session, event)
        assert proxy.lost.wait(5)
        proxy.heal()
        for attempt in range(5):  # repeated as a caller does, until it succeeds
            try:
                await service.append_event(session, event)  # no StaleSessionError
                break
            except RedisUnavailable:
                if attempt == 4:
                    raise
                await asyncio.sleep(0.1)
        await service.append_event(session, Event(invocation_id="i", author="model"))  # goes on
        return session

    session = run(go())
    stored = run(service.get_session(app_name="app", user_id="u", session_id="s"))
    assert [e.author for e in stored.events] == ["user", "model"]
    assert [e.id for e in stored.events] == [e.id for e in session.events]
    assert len(direct.messages(service.session_key("app", "u", "s"))) == 2


def test_langgraph_put_and_put_writes_repeated_after_a_lost_reply_store_once(lossy):
    from langgraph.checkpoint.base import empty_checkpoint

    from agentstate.langgraph import AgentStateSaver

    store, proxy, direct = lossy
    saver = AgentStateSaver(store=store)
    cp = empty_checkpoint()
    cp["channel_values"] = {"a": "marker-lg-put"}
    cp["channel_versions"] = {"a": saver.get_next_version(None, None)}
    base = {"configurable": {"thread_id": "t", "checkpoint_ns": ""}}
    saver.put(base, empty_checkpoint(), {"step": 0}, {})  # the thread exists
    lose_reply(proxy, "marker-lg-put", lambda: saver.put(base, cp, {"step": 1}, cp["channel_versions"]))
    config = repeat(lambda: saver.put(base, cp, {"step": 1}, cp["channel_versions"]))
    writes = [("x", "marker-lg-writes"), ("y", 2)]
    lose_reply(proxy, "marker-lg-writes", lambda: saver.put_writes(config, writes, "task-1", "~a"))
    repeat(lambda: saver.put_writes(config, writes, "task-1", "~a"))
    listed = {t.checkpoint["id"]: t for t in saver.list(base)}
    assert len(listed) == 2 and listed[cp["id"]].checkpoint["channel_values"] == {"a": "marker-lg-put"}
    assert listed[cp["id"]].pending_writes == [("task-1", "x", "marker-lg-writes"), ("task-1", "y", 2)]


def test_pydantic_ai_history_append_repeated_after_a_lost_reply_stores_once(lossy):
    from pydantic_ai.messages import ModelRequest, ModelResponse, TextPart, UserPromptPart

    from agentstate.pydantic_ai import AgentStateMessageHistory

    store, proxy, direct = lossy
    history = AgentStateMessageHistory("chat", store=store)
    history.append([ModelRequest(parts=[UserPromptPart(content="first")])])  # the session exists
    turn = [ModelRequest(parts=[UserPromptPart(content="marker-pai")]),
            ModelResponse(parts=[TextPart(content="hi")])]
    lose_reply(proxy, "marker-pai", lambda: history.append(turn))
    assert repeat(lambda: history.append(turn)) == [2, 3]  # the repeat returns the first call's seqs
    with_id = [ModelResponse(parts=[TextPart(content="marker-pai-2")], provider_response_id="resp_1")]
    lose_reply(proxy, "marker-pai-2", lambda: run(history.aappend(with_id)))
    assert repeat(lambda: run(AgentStateMessageHistory("chat", store=store).aappend(with_id))) == [4]
    assert len(history.load()) == 4 and len(direct.messages(history.agentstate_id)) == 4


def test_agent_framework_save_messages_repeated_after_a_lost_reply_stores_once(lossy):
    from agent_framework import Message

    from agentstate.agent_framework import AgentStateHistoryProvider

    store, proxy, direct = lossy
    provider = AgentStateHistoryProvider(store=store)
    run(provider.save_messages("s", [Message(role="user", contents=["first"])]))
    turn = [Message(role="user", contents=["marker-maf"]), Message(role="assistant", contents=["ok"])]
    lose_reply(proxy, "marker-maf", lambda: run(provider.save_messages("s", turn)))
    repeat(lambda: run(provider.save_messages("s", turn)))
    # One id-less user message: the framework's own comparison would keep it twice.
    alone = [Message(role="user", contents=["marker-maf-2"])]
    lose_reply(proxy, "marker-maf-2", lambda: run(provider.save_messages("s", alone)))
    repeat(lambda: run(provider.save_messages("s", alone)))
    with_ids = [Message(role="assistant", contents=["marker-maf-3"], message_id="m-3")]
    lose_reply(proxy, "marker-maf-3", lambda: run(provider.save_messages("s", with_ids)))
    repeat(lambda: run(AgentStateHistoryProvider(store=store).save_messages("s", with_ids)))
    texts = ["first", "marker-maf", "ok", "marker-maf-2", "marker-maf-3"]
    assert [m.text for m in run(provider.get_messages("s"))] == texts
    assert len(direct.messages(provider.session_key("s"))) == 5
