"""``AgentStateHistoryProvider``: Microsoft Agent Framework's ``HistoryProvider`` on agentstate.

    from agent_framework import Agent
    from agentstate.agent_framework import AgentStateHistoryProvider

    history = AgentStateHistoryProvider(url="redis://127.0.0.1:6379", max_messages=200)
    agent = Agent(client=chat_client, context_providers=[history])

A conversation (one provider ``source_id``, one MAF session id) is one agentstate session,
``<id_prefix><source>@<session>`` (a digest when that is no agentstate id); each ``Message``
is one agentstate message (role the message's role, content its exact JSON, as
``Message.to_dict()``), so the history is live in Redis, flushed to the durable tier by the
spill daemon and restored from it after Redis lost it; every write refreshes the idle TTL of
all the session's keys (``session_ttl``, else the namespace's default).

``max_messages`` bounds both what a read returns and what stays active: when a save leaves
more, the oldest are marked compacted out by the core's ``compact`` (one script: a
compaction mark and a note), not deleted, so ``get_messages(..., include_compacted=True)``,
the CLI and the durable tier still have them. Reads are one round trip for the newest
``max_messages`` (reading at most ``2 * max_messages + 1``: compaction notes sit among them;
all messages without it); a save reads at most ``len(messages)`` more than that (to skip a
replayed transcript, as the framework's providers do), then appends in one script.
"""

from __future__ import annotations

import json
import re
from typing import Any, Dict, List, Optional, Sequence, Set

from agent_framework import Message
from agent_framework._sessions import HistoryProvider, filter_new_messages

from . import _check, _ids
from ._agentstate import AlreadyExists, Store, UnknownSession, resolved
from ._shared import ashared_store

__all__ = ["AgentStateHistoryProvider", "ID_PREFIX"]

#: The default ``id_prefix``: Agent Framework histories in an id space of their own.
ID_PREFIX = "maf."

_ID = re.compile(r"[A-Za-z0-9._@+-]{1,128}\Z")
_PART = re.compile(r"[A-Za-z0-9._+-]{1,60}\Z")
#: The content of our compaction notes (a JSON object, so a load stays one parse); a stored
#: item carrying this key is a note, not a message.
_NOTE = "agentstate_compaction"


def _part(raw: str) -> str:
    if _PART.match(raw) and not raw.startswith("h."):
        return raw
    return _ids.part("\x00" + raw)  # never fits: always the digest


def _encode(index: int, message: Any) -> Dict[str, Any]:
    if not isinstance(message, Message):
        raise _check.type_error(f"messages[{index}]", "an agent_framework Message", message)
    content = json.dumps(message.to_dict(), ensure_ascii=False, separators=(",", ":"))
    return {"role": _ids.role(str(message.role), "message"), "content": content}


def _is_note(item: Any) -> bool:
    return isinstance(item, dict) and _NOTE in item


class AgentStateHistoryProvider(HistoryProvider):
    """A Microsoft Agent Framework history provider stored in agentstate.

    Args:
        source_id: the provider's id in the agent's context (also a part of the session ids,
            so two providers of one agent keep apart histories).
        url: Redis URL; default ``$AGENTSTATE_REDIS_URL``, else ``redis://127.0.0.1:6379``;
            ``prefix`` likewise ``$AGENTSTATE_PREFIX``, else ``as``.
        prefix: agentstate namespace prefix.
        store: an already connected :class:`agentstate.Store` to use instead of ``url``.
        partitions: the namespace's partition count.
        id_prefix: prepended to every agentstate id, so several applications (or test cases)
            share one namespace; at most 40 characters of ``[A-Za-z0-9._+-]``;
            the agentstate ids this provider makes start with it. The default, ``'maf.'``,
            keeps this framework's ids apart from every other adapter's (an OpenAI Agents
            session "X" and a LangGraph thread "X" are two sessions); give two adapters the
            same ``id_prefix`` to share one agentstate session on purpose, and ``""`` to
            read data written under the bare id (before adapters had prefixes).
        session_ttl: idle seconds before a conversation leaves Redis (it stays in the durable
            tier and comes back on its next read); None: the namespace's default.
        max_messages: the newest messages a read returns and a save keeps active (older ones
            are compacted out, not deleted); None: all; 0: saves store nothing.
        load_messages, store_inputs, store_context_messages, store_context_from,
        store_outputs: as every ``HistoryProvider``'s.

    The namespace needs a spill daemon (``agentstate spill``), as for every adapter.
    """

    DEFAULT_SOURCE_ID = "agentstate"

    def __init__(
        self,
        source_id: str = DEFAULT_SOURCE_ID,
        url: Optional[str] = None,
        *,
        prefix: Optional[str] = None,
        store: Optional[Store] = None,
        partitions: int = 16,
        id_prefix: str = ID_PREFIX,
        session_ttl: Optional[float] = None,
        max_messages: Optional[int] = None,
        load_messages: bool = True,
        store_inputs: bool = True,
        store_context_messages: bool = False,
        store_context_from: Optional[Set[str]] = None,
        store_outputs: bool = True,
    ) -> None:
        _check.string("source_id", source_id)
        if not source_id:
            raise ValueError("source_id must be a non-empty str")
        _check.connection(url, prefix, partitions, store)
        _check.string("id_prefix", id_prefix)
        if id_prefix and not re.match(r"[A-Za-z0-9._+-]{1,40}\Z", id_prefix):
            raise ValueError(f"id_prefix {id_prefix!r}: at most 40 characters of [A-Za-z0-9._+-]")
        _check.limit("max_messages", max_messages)
        if session_ttl is not None and (
            isinstance(session_ttl, bool) or not isinstance(session_ttl, (int, float))
        ):
            raise _check.type_error("session_ttl", "a number of seconds or None", session_ttl)
        if session_ttl is not None and session_ttl <= 0:
            raise ValueError(f"session_ttl must be > 0 seconds, got {session_ttl}")
        super().__init__(
            source_id,
            load_messages=load_messages,
            store_inputs=store_inputs,
            store_context_messages=store_context_messages,
            store_context_from=store_context_from,
            store_outputs=store_outputs,
        )
        self.max_messages = max_messages
        self.session_ttl = session_ttl
        self._id_prefix = id_prefix
        self._url, self._prefix = resolved(url, prefix)
        self._partitions = partitions
        self._store = store
        #: The key of a failed save of messages without ids, for its repeat.
        self._retry = _ids.RetryKeys()

    # -- ids and storage ---------------------------------------------------------------

    def session_key(self, session_id: Optional[str]) -> str:
        """The agentstate session holding ``session_id``'s history for this provider."""
        if not isinstance(session_id, str) or not session_id:
            raise _check.type_error("session_id", "a non-empty str", session_id)
        whole = f"{self._id_prefix}{_part(self.source_id)}@{_part(session_id)}"
        if _ID.match(whole):
            return whole
        return self._id_prefix + _ids.part("\x00" + self.source_id + "\x00" + session_id)

    async def _open(self) -> Store:
        store = self._store
        if store is None:
            store = self._store = await ashared_store(self._url, self._prefix, self._partitions)
        return store

    @staticmethod
    def _decode(items: Sequence[Any]) -> List[Message]:
        return [Message.from_dict(item) for item in items if not _is_note(item)]

    async def _items(self, store: Store, sid: str, last: Optional[int], all: bool = False) -> List[Any]:
        """The stored items (parsed contents), notes included; [] for an unknown session."""
        try:
            array = await store.acontents_array(sid, last=last, all=all)
            if array is not None:  # every content is JSON: one parse of them all
                return json.loads(array)
            # A message another agentstate tool wrote (e.g. the CLI's compaction note) is no
            # JSON: parse each, leaving those out.
            messages = await store.amessages(sid, last=last, all=all)
        except UnknownSession:
            return []
        items = []
        for m in messages:
            if m.get("name") == "compact_note" or m.get("content") is None:
                continue
            try:
                items.append(json.loads(m["content"]))
            except ValueError:
                continue
        return items

    # -- HistoryProvider ---------------------------------------------------------------

    async def get_messages(
        self,
        session_id: Optional[str],
        *,
        state: Optional[Dict[str, Any]] = None,
        include_compacted: bool = False,
        **kwargs: Any,
    ) -> List[Message]:
        """The conversation's messages, oldest first: the newest ``max_messages`` (all when
        None), or with ``include_compacted=True`` every message ever saved, compacted-out
        ones included. One round trip; an unknown conversation has none."""
        sid = self.session_key(session_id)
        store = await self._open()
        if include_compacted:
            return self._decode(await self._items(store, sid, None, all=True))
        if self.max_messages == 0:
            return []
        # The newest max_messages sit among at most as many of our notes (see save_messages).
        last = None if self.max_messages is None else 2 * self.max_messages + 1
        messages = self._decode(await self._items(store, sid, last))
        if self.max_messages is not None:
            messages = messages[-self.max_messages :]
        return messages

    async def save_messages(
        self,
        session_id: Optional[str],
        messages: Sequence[Message],
        *,
        state: Optional[Dict[str, Any]] = None,
        **kwargs: Any,
    ) -> None:
        """Appends the messages the stored history does not already end with (a replayed
        transcript is not stored twice: the framework's ``filter_new_messages``), in one
        script; then, past ``max_messages``, compacts the oldest out. Safe to repeat after
        it raised (``RedisUnavailable``, ``WriteLost``, a timeout): the append carries an
        idempotency key (from the messages' ``message_id`` when they have one, else the
        failed call's, kept by this provider for its repeat)."""
        sid = self.session_key(session_id)
        messages = _check.sequence("messages", messages, "Messages")
        encoded = [_encode(i, m) for i, m in enumerate(messages)]
        if not encoded or self.max_messages == 0:
            return
        store = await self._open()
        # Every active message the bounded history can hold: each save adds at most one note
        # among its messages, so max_messages real ones sit among at most as many notes.
        window = len(messages) + (0 if self.max_messages is None else 2 * self.max_messages + 1)
        try:
            stored = await store.amessages(sid, last=window)
        except UnknownSession:
            stored = []
        existing = []
        for m in stored:
            item = _item(m)
            if item is not None:
                existing.append((m["seq"], item))
        # The history the framework compares against: the stored tail, oldest first.
        tail = [Message.from_dict(item) for _, item in existing[-len(messages) :]]
        fresh = filter_new_messages(tail, list(messages))
        if not fresh:
            return
        keep = {id(m) for m in fresh}
        to_write = [e for m, e in zip(messages, encoded) if id(m) in keep]
        # The comparison above keeps a repeated id-less user message (the framework's rule:
        # a user may say the same thing twice), so a save repeated after it raised is made
        # safe by a key: from the messages' own ids, else the failed call's.
        key = _ids.batch_key("maf.", [m.message_id for m in fresh], to_write) or self._retry.key(to_write)
        try:
            try:
                seqs = await store.aappend_many(sid, to_write, idempotency_key=key)
            except UnknownSession:
                await self._create(store, sid, session_id)
                seqs = await store.aappend_many(sid, to_write, idempotency_key=key)
        except BaseException:
            self._retry.failed(to_write, key)
            raise
        self._retry.succeeded()
        if self.max_messages is None:
            return
        reals = [seq for seq, _ in existing] + list(seqs)
        excess = len(reals) - self.max_messages
        if excess > 0:
            # From the oldest active seq (earlier notes included) to just before the oldest
            # message kept: nothing but the kept ones and the new note stays active.
            first = stored[0]["seq"] if stored else reals[0]
            last = reals[excess] - 1
            note = json.dumps({_NOTE: {"from_seq": first, "to_seq": last}})
            await store.acompact(sid, first, last, note)

    async def _create(self, store: Store, sid: str, session_id: str) -> None:
        try:
            await store.acreate_session(
                sid,
                ttl=self.session_ttl,
                metadata={
                    "framework": "agent-framework",
                    "source_id": self.source_id,
                    "session_id": session_id,
                },
            )
        except AlreadyExists:
            pass  # another writer created it first

    async def clear(self, session_id: Optional[str]) -> None:
        """Deletes the conversation's history everywhere (Redis and the durable tier)."""
        sid = self.session_key(session_id)
        store = await self._open()
        try:
            await store.aclose_session(sid, True)
        except UnknownSession:
            pass

    async def aclose(self) -> None:
        """Nothing to close: the connection pool is shared by the process (as
        ``RedisHistoryProvider.aclose`` leaves a borrowed client open)."""

    def __repr__(self) -> str:
        return f"AgentStateHistoryProvider({self.source_id!r}, prefix={self._prefix!r})"


def _item(message: Dict[str, Any]) -> Optional[Any]:
    """A stored message's item when it is one of ours (not a compaction note)."""
    if message.get("name") == "compact_note" or message.get("content") is None:
        return None
    try:
        item = json.loads(message["content"])
    except ValueError:
        return None
    return None if _is_note(item) else item
