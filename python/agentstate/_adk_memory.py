"""``AgentStateMemoryService``: Google ADK's ``BaseMemoryService`` on agentstate's long-term
memory, re-exported by :mod:`agentstate.adk`.

    from agentstate.adk import AgentStateMemoryService

    memory = AgentStateMemoryService("redis://127.0.0.1:6379")           # keywords
    memory = AgentStateMemoryService(embed=lambda text: model.embed(text))  # similarity
    runner = Runner(app_name="shop", agent=agent, session_service=sessions,
                    memory_service=memory)

Every event with text is one memory item (``Store.put_memory``) in the namespace
``("adk", <user>, <app>, "events")``, keyed by a digest of (session id, event id), holding the
event's content, author, timestamp and text; an event deleted by ``delete_memory`` leaves a
marker in ``("adk", <user>, <app>, "deleted")`` so a later ``add_session_to_memory`` does not
bring it back. ``<user>`` and ``<app>`` are the ADK ids when they are valid labels without
``.`` or ``@`` (``[A-Za-z0-9_+-]``, 1 to 128 characters), else a digest (``h-`` + 40 hex);
``memory_user(user_id)`` gives it. The user is the namespace's second label, so
``Store.forget_user(service.memory_user(user_id))`` erases the user's memories in Redis and in
the durable tier.

``search_memory`` answers as ``InMemoryMemoryService`` does, by the number of query words an
event shares (at most ten, most words first), or, with ``embed`` (a callable text -> vector,
sync or async), by cosine similarity of the query's vector with each event's (computed at
ingestion), best ten first.
"""

from __future__ import annotations

import hashlib
import inspect
import json
import re
import unicodedata
from collections.abc import Mapping, Sequence
from typing import Any, Callable, Dict, List, Optional

from google.adk.memory import _utils
from google.adk.memory.base_memory_service import BaseMemoryService, SearchMemoryResponse
from google.adk.memory.in_memory_memory_service import (
    _extract_searchable_words,
    _extract_words_lower,
)
from google.adk.memory.memory_entry import MemoryEntry
from google.genai import types

from . import _check
from ._agentstate import Store, resolved
from ._shared import ashared_store

__all__ = ["AgentStateMemoryService"]

_LABEL = re.compile(r"[A-Za-z0-9_+-]{1,128}\Z")
_MAX_RESULTS = 10
_ALL = 2**63 - 1


def _label(raw: str) -> str:
    """The namespace label of an ADK id: itself when it is a plain label, else a digest."""
    if _LABEL.match(raw) and not raw.startswith("h-"):
        return raw
    return "h-" + hashlib.sha256(raw.encode("utf-8")).hexdigest()[:40]


def _key(*parts: str) -> str:
    return hashlib.sha256(json.dumps(parts).encode("utf-8")).hexdigest()[:40]


def _text(content: Optional[types.Content]) -> str:
    return " ".join(p.text for p in (content.parts or []) if p.text) if content else ""


class AgentStateMemoryService(BaseMemoryService):
    """ADK's ``BaseMemoryService`` on agentstate (module docs above).

    Args:
        url: the Redis URL (default ``AGENTSTATE_REDIS_URL``, else redis://127.0.0.1:6379).
        prefix: the agentstate key prefix (default ``AGENTSTATE_PREFIX``, else ``as``).
        embed: a callable (sync or async) from a text to its vector; when given, events are
            embedded on ingestion and searches rank by similarity instead of keywords.
        partitions: the namespace's partition count (16).
        store: an already connected :class:`agentstate.Store` to use instead of ``url``.
    """

    def __init__(
        self,
        url: Optional[str] = None,
        *,
        prefix: Optional[str] = None,
        embed: Optional[Callable[[str], Any]] = None,
        partitions: int = 16,
        store: Optional[Store] = None,
    ) -> None:
        _check.connection(url, prefix, partitions, store)
        if embed is not None and not callable(embed):
            raise _check.type_error("embed", "a callable text -> vector", embed)
        self._url, self._prefix = resolved(url, prefix)
        self._partitions = partitions
        self._store = store
        self._embed = embed

    @staticmethod
    def memory_user(user_id: str) -> str:
        """The namespace label of ADK user ``user_id``: ``Store.forget_user`` of it erases
        that user's memories (of every app)."""
        return _label(_check.string("user_id", user_id))

    def _namespace(self, app_name: str, user_id: str, kind: str) -> tuple:
        _check.string("app_name", app_name)
        return ("adk", self.memory_user(user_id), _label(app_name), kind)

    async def _open(self) -> Store:
        if self._store is None:
            self._store = await ashared_store(self._url, self._prefix, self._partitions)
        return self._store

    async def _vector(self, text: str) -> List[float]:
        v = self._embed(text)
        if inspect.isawaitable(v):
            v = await v
        return list(v)

    async def _deleted(self, store: Store, app_name: str, user_id: str) -> set:
        found = await store.asearch_memory(self._namespace(app_name, user_id, "deleted"), limit=_ALL)
        return {d["value"]["id"] for d in found}

    async def _events(self, store: Store, app_name: str, user_id: str, session_id: str) -> Dict[str, Dict[str, Any]]:
        """The stored events of one session, by key."""
        found = await store.asearch_memory(
            self._namespace(app_name, user_id, "events"), filter={"session_id": session_id}, limit=_ALL
        )
        return {d["key"]: d["value"] for d in found}

    async def _put(self, store: Store, ns: tuple, session_id: str, order: int, event: Any) -> None:
        text = _text(event.content)
        value = {
            "id": event.id,
            "session_id": session_id,
            "order": order,
            "author": event.author,
            "timestamp": event.timestamp,
            "text": text,
            "content": event.content.model_dump(mode="json", exclude_none=True),
        }
        vectors = {"text": await self._vector(text)} if self._embed is not None and text else None
        await store.aput_memory(ns, _key(session_id, event.id), value, vectors=vectors)

    async def add_session_to_memory(self, session: Any) -> None:
        """Makes the session's events with content the memories of its session (replacing
        what an earlier call stored for it), except those deleted."""
        store = await self._open()
        ns = self._namespace(session.app_name, session.user_id, "events")
        deleted = await self._deleted(store, session.app_name, session.user_id)
        kept = {}
        for event in session.events:
            if event.content and event.content.parts and event.id not in deleted:
                kept[_key(session.id, event.id)] = event
        for key in await self._events(store, session.app_name, session.user_id, session.id):
            if key not in kept:
                await store.adelete_memory(ns, key)
        for order, event in enumerate(kept.values()):
            await self._put(store, ns, session.id, order, event)

    async def add_events_to_memory(
        self,
        *,
        app_name: str,
        user_id: str,
        events: Sequence[Any],
        session_id: Optional[str] = None,
        custom_metadata: Optional[Mapping[str, object]] = None,
    ) -> None:
        """Adds the events with content not stored yet (by id) to the session's memories
        (``session_id`` None: one bucket for events without a session)."""
        del custom_metadata
        store = await self._open()
        ns = self._namespace(app_name, user_id, "events")
        sid = session_id or "__unknown_session_id__"
        deleted = await self._deleted(store, app_name, user_id)
        have = await self._events(store, app_name, user_id, sid)
        for event in events:
            key = _key(sid, event.id)
            if event.content and event.content.parts and key not in have and event.id not in deleted:
                await self._put(store, ns, sid, len(have), event)
                have[key] = {}

    async def search_memory(self, *, app_name: str, user_id: str, query: str) -> SearchMemoryResponse:
        """At most ten memories of the user in the app: by similarity with ``embed``, else
        those sharing the most words with ``query``."""
        _check.string("query", query)
        store = await self._open()
        ns = self._namespace(app_name, user_id, "events")
        if self._embed is not None:
            found = await store.asearch_memory(ns, query=await self._vector(query), limit=_MAX_RESULTS)
            # An event without text has no vector (score None): it matches no query.
            return SearchMemoryResponse(memories=[self._entry(d["value"]) for d in found if d["score"] is not None])
        words = _extract_words_lower(query)
        scored = []
        # In the order they were added (as InMemoryMemoryService keeps them), then by words
        # matched: a stable sort keeps that order among equal counts.
        stored = sorted(
            await store.asearch_memory(ns, limit=_ALL), key=lambda d: (d["created_at"], d["value"]["order"])
        )
        for value in (d["value"] for d in stored):
            in_event = _extract_searchable_words(value["text"])
            if not in_event:
                continue
            lower = unicodedata.normalize("NFC", value["text"]).lower()
            matched = sum(1 for w in words if w in in_event or (not w.isascii() and w in lower))
            if matched:
                scored.append((matched, value))
        scored.sort(key=lambda s: -s[0])
        return SearchMemoryResponse(memories=[self._entry(v) for _, v in scored[:_MAX_RESULTS]])

    @staticmethod
    def _entry(value: Dict[str, Any]) -> MemoryEntry:
        return MemoryEntry(
            id=value["id"],
            content=types.Content.model_validate(value["content"]),
            author=value["author"],
            timestamp=_utils.format_timestamp(value["timestamp"]),
        )

    async def delete_memory(self, *, app_name: str, user_id: str, memory_id: Optional[str] = None) -> None:
        """Deletes the memories of event ``memory_id`` (in every session) and keeps them
        from coming back with a later ingestion."""
        if not memory_id:
            return
        store = await self._open()
        ns = self._namespace(app_name, user_id, "events")
        found = await store.asearch_memory(ns, filter={"id": memory_id}, limit=_ALL)
        if not found:
            return
        for d in found:
            await store.adelete_memory(ns, d["key"])
        await store.aput_memory(self._namespace(app_name, user_id, "deleted"), _key(memory_id), {"id": memory_id})
