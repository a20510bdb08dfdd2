"""Pydantic AI on agentstate: the harness's ``StepStore``, its revision-checked conversation
heads, and a message history for plain ``agent.run(..., message_history=...)``.

``AgentStateStepStore`` is a ``pydantic_ai_harness.step_persistence.StepStore``::

    from pydantic_ai import Agent
    from pydantic_ai_harness.step_persistence import StepPersistence, continue_run
    from agentstate.pydantic_ai import AgentStateStepStore

    store = AgentStateStepStore("redis://127.0.0.1:6379")   # the namespace's daemon runs
    agent = Agent(model, capabilities=[StepPersistence(store=store, run_id="triage-7")])
    await agent.run("...")
    history = await continue_run(store, run_id="triage-7")  # from any process

How a run is kept (``<r>`` is ``<id_prefix>r.<run_id>``, or ``<id_prefix>r.h.<digest>`` for a
run id that is no agentstate id or is longer than 80 characters):

* session ``<r>``: its messages are the run's events (role ``event``, content the event's
  JSON), so every process appending to one run shares one gapless seq order, and an event's
  ``idempotency_key`` is the append's (a retried append writes nothing); its checkpoint
  ``run`` is the ``RunRecord``; its effect ledger is the tool-effect ledger (the core's
  ``effect_begin`` / ``effect_finish``), with checkpoint ``e.<call>`` holding the details of a
  call still running (tool name, annotations), since the ledger keeps only a digest of the
  arguments of an intent;
* session ``<r>@snap``: one small message per snapshot (role ``snapshot``: its label, state,
  step) in save order, each snapshot's history in a checkpoint of that label; so
  ``latest_snapshot`` reads the newest markers and one checkpoint, never the whole run.

Everything is flushed to the durable tier by the spill daemon and restored from it after
Redis lost it. Snapshots are not pruned (``max_snapshots_per_run`` is the harness's own
stores' option) and histories are stored inline: a checkpoint larger than the store's
``max_state_bytes`` is ``agentstate.TooLarge`` (raise it with ``Store(max_state_bytes=...)``).

``AgentStateConversationStore`` is the harness's ``SqliteConversationStore`` contract
(``save`` / ``get`` / ``delete``) on agentstate: a conversation's revision is the seq of its
latest head, so a writer holding a stale revision gets the harness's own
``ConversationConflict`` from the core's expected-seq check, and writes nothing.

``AgentStateMessageHistory`` keeps plain Pydantic AI ``ModelMessage`` lists, one agentstate
message per ``ModelMessage`` (its exact JSON through ``ModelMessagesTypeAdapter``).
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import re
from dataclasses import replace
from datetime import datetime, timezone
from typing import Any, Dict, List, Optional, Sequence

from pydantic_ai.messages import ModelMessage, ModelMessagesTypeAdapter, ModelRequest, ModelResponse

from . import _check, _ids
from ._agentstate import AlreadyExists, Conflict, InvalidInput, Store, UnknownSession, resolved
from ._shared import ashared_store, shared_store

__all__ = ["AgentStateStepStore", "AgentStateConversationStore", "AgentStateMessageHistory", "ID_PREFIX"]

#: The default ``id_prefix``: Pydantic AI runs, conversations and histories in an id space of
#: their own (a history "X" is not another adapter's session "X").
ID_PREFIX = "pai."

_ID_PREFIX = re.compile(r"[A-Za-z0-9._+-]{0,40}\Z")
_RUN_PART = re.compile(r"[A-Za-z0-9._+-]{1,80}\Z")
_LABEL_PART = re.compile(r"[A-Za-z0-9._+-]{1,100}\Z")
#: Snapshot markers read per step backwards while looking for the latest one.
_STEP = 16
#: Ids listed per page while collecting ``list_runs``.
_PAGE = 1000
#: The datetime fields of the harness's records, stored as ISO 8601 text.
_TIMES = ("timestamp", "started_at", "ended_at", "updated_at", "archived_at")


def _digest(text: str) -> str:
    return "h." + hashlib.sha256(text.encode("utf-8")).hexdigest()[:40]


def _fit(text: str, pattern: "re.Pattern[str]") -> str:
    """``text`` when it matches ``pattern`` (and is not digest-like), else its digest."""
    if pattern.match(text) and not text.startswith("h."):
        return text
    return _digest(text)


def _id_prefix(id_prefix: Any) -> str:
    _check.string("id_prefix", id_prefix)
    if not _ID_PREFIX.match(id_prefix):
        raise ValueError(f"id_prefix {id_prefix!r}: at most 40 characters of [A-Za-z0-9._+-]")
    return id_prefix


def _record_json(record: Any) -> str:
    """A harness dataclass as JSON text, its datetimes as ISO 8601 (exact round trip)."""
    out: Dict[str, Any] = {}
    for field in dataclasses.fields(record):
        value = getattr(record, field.name)
        if isinstance(value, datetime):
            value = value.isoformat()
        elif isinstance(value, tuple):
            value = list(value)
        elif dataclasses.is_dataclass(value):
            value = json.loads(_record_json(value))
        out[field.name] = value
    return json.dumps(out, ensure_ascii=False, separators=(",", ":"))


def _record(cls: Any, data: Dict[str, Any]) -> Any:
    """The harness dataclass ``cls`` from :func:`_record_json`'s fields (unknown ones, from a
    newer harness, are left out)."""
    names = {f.name for f in dataclasses.fields(cls)}
    kwargs = {k: v for k, v in data.items() if k in names}
    for key in _TIMES:
        if isinstance(kwargs.get(key), str):
            kwargs[key] = datetime.fromisoformat(kwargs[key])
    return cls(**kwargs)


def _messages_json(messages: Sequence[ModelMessage]) -> str:
    return ModelMessagesTypeAdapter.dump_json(list(messages)).decode("utf-8")


def _check_record(name: str, value: Any, cls: Any) -> Any:
    if not isinstance(value, cls):
        raise _check.type_error(name, f"a {cls.__name__}", value)
    return value


class _Base:
    """Connection handling every class of this module shares (as the other adapters')."""

    def __init__(
        self,
        url: Optional[str],
        prefix: Optional[str],
        store: Optional[Store],
        partitions: int,
        id_prefix: str,
    ) -> None:
        _check.connection(url, prefix, partitions, store)
        self._id_prefix = _id_prefix(id_prefix)
        self._url, self._prefix = resolved(url, prefix)
        self._partitions = partitions
        self._store = store

    async def _open(self) -> Store:
        store = self._store
        if store is None:
            store = self._store = await ashared_store(self._url, self._prefix, self._partitions)
        return store

    def _open_sync(self) -> Store:
        store = self._store
        if store is None:
            store = self._store = shared_store(self._url, self._prefix, self._partitions)
        return store

    @staticmethod
    async def _create(store: Store, sid: str, metadata: Dict[str, Any]) -> None:
        try:
            await store.acreate_session(sid, metadata=metadata)
        except AlreadyExists:
            pass  # another writer created it first

    async def _write(self, store: Store, sid: str, metadata: Dict[str, Any], call: Any) -> Any:
        """``await call()``, creating the session first when it does not exist yet (its
        first write): the common write is one round trip."""
        try:
            return await call()
        except UnknownSession:
            await self._create(store, sid, metadata)
            return await call()


class AgentStateStepStore(_Base):
    """A Pydantic AI harness ``StepStore`` on agentstate (see the module docstring).

    Args:
        url: Redis URL; default ``$AGENTSTATE_REDIS_URL``, else ``redis://127.0.0.1:6379``;
            ``prefix`` likewise ``$AGENTSTATE_PREFIX``, else ``as``.
        prefix: agentstate namespace prefix.
        store: an already connected :class:`agentstate.Store` to use instead of ``url``.
        partitions: the namespace's partition count.
        id_prefix: prepended to every agentstate id this store makes, so several applications
            (or test cases) share one namespace without sharing runs; at most 40 characters
            of ``[A-Za-z0-9._+-]``; the agentstate ids this store makes start with it. The default, ``'pai.'``,
            keeps this framework's ids apart from every other adapter's (an OpenAI Agents
            session "X" and a LangGraph thread "X" are two sessions); give two adapters the
            same ``id_prefix`` to share one agentstate session on purpose, and ``""`` to
            read data written under the bare id (before adapters had prefixes).

    The namespace needs a spill daemon (``agentstate spill``), as for every adapter.
    """

    def __init__(
        self,
        url: Optional[str] = None,
        *,
        prefix: Optional[str] = None,
        store: Optional[Store] = None,
        partitions: int = 16,
        id_prefix: str = ID_PREFIX,
    ) -> None:
        super().__init__(url, prefix, store, partitions, id_prefix)

    # -- ids ---------------------------------------------------------------------------

    def run_key(self, run_id: str) -> str:
        """The agentstate session holding run ``run_id``'s events, record and ledger."""
        _check.string("run_id", run_id)
        return f"{self._id_prefix}r.{_fit(run_id, _RUN_PART)}"

    def _snap_key(self, run_id: str) -> str:
        return self.run_key(run_id) + "@snap"

    @staticmethod
    def _effect_key(tool_call_id: str) -> str:
        return _fit(tool_call_id, _LABEL_PART)

    @staticmethod
    def _meta(run_id: str) -> Dict[str, Any]:
        return {"framework": "pydantic-ai-harness", "run_id": run_id}

    # -- runs --------------------------------------------------------------------------

    async def register_run(self, record: Any) -> None:
        """Stores ``record`` as the run's ``run`` checkpoint (a second registration of the
        same run id replaces it, as the harness's in-memory store does)."""
        from pydantic_ai_harness.step_persistence import RunRecord

        _check_record("record", record, RunRecord)
        store = await self._open()
        sid = self.run_key(record.run_id)
        payload = {"record": _record_json(record)}
        await self._write(
            store, sid, self._meta(record.run_id), lambda: store.aput_checkpoint(sid, "run", payload)
        )

    async def get_run(self, *, run_id: str) -> Any:
        """The run's ``RunRecord``, or None when it was never registered."""
        from pydantic_ai_harness.step_persistence import RunRecord

        store = await self._open()
        try:
            checkpoint = await store.acheckpoint_latest(self.run_key(run_id), "run")
        except UnknownSession:
            return None
        if checkpoint is None:
            return None
        return _record(RunRecord, json.loads(checkpoint["payload"]["record"]))

    async def list_runs(
        self, *, parent_run_id: Optional[str] = None, conversation_id: Optional[str] = None
    ) -> List[Any]:
        """The registered runs matching both filters, oldest ``started_at`` first. Reads the
        session index's pages of this store's runs and their records (one round trip per
        page of 1000), never a key scan."""
        from pydantic_ai_harness.step_persistence import RunRecord

        _check.optional_string("parent_run_id", parent_run_id)
        _check.optional_string("conversation_id", conversation_id)
        store = await self._open()
        head = f"{self._id_prefix}r."
        records = []
        after: Optional[str] = None
        while True:
            sids, after = await store.alist_sessions_page(_PAGE, after=after, prefix=head)
            sids = [s for s in sids if "@" not in s]  # a run's snapshot session
            for checkpoint in await store.acheckpoints_latest_of(sids, "run"):
                if checkpoint is None:
                    continue  # events or snapshots of a run never registered
                record = _record(RunRecord, json.loads(checkpoint["payload"]["record"]))
                if parent_run_id is not None and record.parent_run_id != parent_run_id:
                    continue
                if conversation_id is not None and record.conversation_id != conversation_id:
                    continue
                records.append(record)
            if after is None:
                break
        return sorted(records, key=lambda r: r.started_at)

    # -- events ------------------------------------------------------------------------

    async def append_event(self, event: Any) -> None:
        """Appends ``event`` to its run: one message, its seq allocated by the script (one
        order for every process). An event whose ``idempotency_key`` the run has seen
        writes nothing."""
        from pydantic_ai_harness.step_persistence import StepEvent

        _check_record("event", event, StepEvent)
        store = await self._open()
        sid = self.run_key(event.run_id)
        key = event.idempotency_key
        key = None if key is None else _fit(key, _LABEL_PART)
        content = _record_json(event)
        await self._write(
            store,
            sid,
            self._meta(event.run_id),
            lambda: store.aappend(sid, "event", content, idempotency_key=key),
        )

    async def list_events(self, *, run_id: str) -> List[Any]:
        """The run's events in append (seq) order; one round trip, one JSON parse."""
        from pydantic_ai_harness.step_persistence import StepEvent

        store = await self._open()
        try:
            array = await store.acontents_array(self.run_key(run_id))
        except UnknownSession:
            return []
        if array is None:  # a message another agentstate tool wrote is no event's JSON
            messages = await store.amessages(self.run_key(run_id))
            items = [json.loads(m["content"]) for m in messages if m["role"] == "event"]
        else:
            items = json.loads(array)
        return [_record(StepEvent, item) for item in items]

    # -- snapshots ---------------------------------------------------------------------

    async def save_snapshot(self, snapshot: Any) -> None:
        """Stores the snapshot's history as a checkpoint of the run's snapshot session, then
        its marker message. A snapshot whose ``idempotency_key`` the run has seen writes
        nothing new (its checkpoint's label and its marker's key derive from the key)."""
        from pydantic_ai_harness.step_persistence import ContinuableSnapshot

        _check_record("snapshot", snapshot, ContinuableSnapshot)
        store = await self._open()
        sid = self._snap_key(snapshot.run_id)
        key = snapshot.idempotency_key
        if key is not None:
            key = _fit(key, _LABEL_PART)
            label = "s." + _digest(snapshot.idempotency_key)[2:26]
        else:
            import uuid

            label = "s." + uuid.uuid4().hex[:24]
        fields = json.loads(_record_json(replace(snapshot, messages=[])))
        fields["messages"] = _messages_json(snapshot.messages)
        payload = {"snapshot": json.dumps(fields, ensure_ascii=False, separators=(",", ":"))}
        marker = json.dumps(
            {"label": label, "state": snapshot.state, "step_index": snapshot.step_index},
            separators=(",", ":"),
        )
        meta = self._meta(snapshot.run_id)
        # The checkpoint first: a marker never points at a history that is not there; a save
        # cut between the two leaves an unreferenced checkpoint its retry overwrites.
        await self._write(store, sid, meta, lambda: store.aput_checkpoint(sid, label, payload))
        await store.aappend(sid, "snapshot", marker, idempotency_key=key)

    @staticmethod
    def _snapshot(checkpoint: Optional[Dict[str, Any]]) -> Any:
        from pydantic_ai_harness.step_persistence import ContinuableSnapshot

        if checkpoint is None:
            return None
        fields = json.loads(checkpoint["payload"]["snapshot"])
        messages = ModelMessagesTypeAdapter.validate_json(fields.pop("messages"))
        fields["messages"] = []
        return replace(_record(ContinuableSnapshot, fields), messages=messages)

    async def latest_snapshot(self, *, run_id: str, include_interrupted: bool = False) -> Any:
        """The newest snapshot saved (``complete`` ones only unless ``include_interrupted``),
        or None: reads the newest markers (16, 32, ... until one fits) and one checkpoint."""
        store = await self._open()
        sid = self._snap_key(run_id)
        last = _STEP
        while True:
            try:
                markers = await store.amessages(sid, last=last)
            except UnknownSession:
                return None
            for m in reversed(markers):
                if m["role"] != "snapshot":
                    continue
                info = json.loads(m["content"])
                if include_interrupted or info["state"] == "complete":
                    return self._snapshot(await store.acheckpoint_latest(sid, info["label"]))
            if len(markers) < last:
                return None
            last *= 2

    async def list_snapshots(self, *, run_id: str, include_interrupted: bool = False) -> List[Any]:
        """Every snapshot of the run in save order (``complete`` ones only unless
        ``include_interrupted``): two round trips."""
        store = await self._open()
        sid = self._snap_key(run_id)
        try:
            markers = await store.amessages(sid)
            checkpoints = {c["label"]: c for c in await store.acheckpoints(sid)}
        except UnknownSession:
            return []
        out = []
        for m in markers:
            if m["role"] != "snapshot":
                continue
            info = json.loads(m["content"])
            if include_interrupted or info["state"] == "complete":
                out.append(self._snapshot(checkpoints.get(info["label"])))
        return [s for s in out if s is not None]

    # -- the tool-effect ledger --------------------------------------------------------

    async def record_tool_effect(self, record: Any) -> None:
        """``started``: the details go to checkpoint ``e.<call>``, then the core ledger
        records the intent (``effect_begin``, once). ``completed`` / ``failed``: the ledger
        records the result (``effect_finish``: the first result stays, as the core ledger
        keeps it), beginning the intent first when none was recorded."""
        from pydantic_ai_harness.step_persistence import ToolEffectRecord

        _check_record("record", record, ToolEffectRecord)
        store = await self._open()
        sid = self.run_key(record.run_id)
        call = self._effect_key(record.tool_call_id)
        args = {"tool_name": record.tool_name}
        meta = self._meta(record.run_id)
        if record.status == "started":
            payload = {"record": _record_json(record)}
            await self._write(store, sid, meta, lambda: store.aput_checkpoint(sid, "e." + call, payload))
            await store.aeffect_begin(sid, call, args)
            return
        result = {"record": _record_json(record)}
        try:
            await store.aeffect_finish(sid, call, result)
        except (InvalidInput, UnknownSession):  # no intent recorded for it: begin it first
            await self._write(store, sid, meta, lambda: store.aeffect_begin(sid, call, args))
            await store.aeffect_finish(sid, call, result)

    async def _effect_record(
        self, store: Store, sid: str, effect: Dict[str, Any], details: Optional[Dict[str, Any]], run_id: str
    ) -> Any:
        from pydantic_ai_harness.step_persistence import ToolEffectRecord

        result = effect.get("result")
        if effect["state"] == "done" and isinstance(result, dict) and "record" in result:
            return _record(ToolEffectRecord, json.loads(result["record"]))
        if effect["state"] != "done" and details is not None:
            return _record(ToolEffectRecord, json.loads(details["payload"]["record"]))
        # A call another agentstate tool (the CLI's `effects`, the Store) recorded, without
        # our details: what the ledger knows.
        finished = effect.get("finished_at")
        return ToolEffectRecord(
            tool_call_id=effect["call_id"],
            tool_name="",
            run_id=run_id,
            status="completed" if effect["state"] == "done" else "started",
            started_at=datetime.fromtimestamp(effect["started_at"] / 1000, timezone.utc),
            ended_at=None if finished is None else datetime.fromtimestamp(finished / 1000, timezone.utc),
            effect_summary=None if result is None else json.dumps(result, ensure_ascii=False),
        )

    async def get_tool_effect(self, *, run_id: str, tool_call_id: str) -> Any:
        """The call's latest record, or None when the ledger has none."""
        store = await self._open()
        sid = self.run_key(run_id)
        call = self._effect_key(tool_call_id)
        try:
            effect = await store.aeffect(sid, call)
        except UnknownSession:
            return None
        if effect is None:
            return None
        details = None
        if effect["state"] != "done":
            details = await store.acheckpoint_latest(sid, "e." + call)
        return await self._effect_record(store, sid, effect, details, run_id)

    async def list_unresolved_tool_effects(self, *, run_id: str) -> List[Any]:
        """The calls whose intent has no result (the core's ``unresolved_effects``: running,
        or their process died mid-tool), oldest first."""
        store = await self._open()
        sid = self.run_key(run_id)
        try:
            effects = await store.aunresolved_effects(sid)
            if not effects:
                return []
            details = {c["label"]: c for c in await store.acheckpoints(sid)}
        except UnknownSession:
            return []
        return [
            await self._effect_record(store, sid, e, details.get("e." + e["call_id"]), run_id)
            for e in effects
        ]

    def __repr__(self) -> str:
        return f"AgentStateStepStore(prefix={self._prefix!r}, id_prefix={self._id_prefix!r})"


class AgentStateConversationStore(_Base):
    """Revision-checked conversation heads (the harness's ``SqliteConversationStore``
    contract: ``save``, ``get``, ``delete``) on agentstate. A conversation is session
    ``<id_prefix>c.<id>``; each save appends one message (role ``revision``) and writes the
    head checkpoint in one script, only if that message gets seq ``revision + 1``: the
    revision is the head's seq, and a stale writer gets ``ConversationConflict`` and writes
    nothing. Arguments as :class:`AgentStateStepStore`'s."""

    def __init__(
        self,
        url: Optional[str] = None,
        *,
        prefix: Optional[str] = None,
        store: Optional[Store] = None,
        partitions: int = 16,
        id_prefix: str = ID_PREFIX,
    ) -> None:
        super().__init__(url, prefix, store, partitions, id_prefix)

    def conversation_key(self, conversation_id: str) -> str:
        """The agentstate session holding conversation ``conversation_id``."""
        _check.string("conversation_id", conversation_id)
        return f"{self._id_prefix}c.{_fit(conversation_id, _RUN_PART)}"

    async def _put_head(self, store: Store, sid: str, expected: int, role: str, payload: Dict[str, Any]) -> None:
        from pydantic_ai_harness.step_persistence.conversations import ConversationConflict

        try:
            await store.aappend_checkpointed(
                sid, {"role": role, "content": str(expected + 1)}, "head", payload, expect_seq=expected + 1
            )
        except Conflict:
            raise ConversationConflict(
                "Session changed in another process. Resume it again before continuing."
            ) from None

    async def save(self, *, summary: Any, messages: Sequence[ModelMessage]) -> Any:
        """Commits ``messages`` as the conversation's content only if ``summary.revision`` is
        still current; returns the new summary (revision + 1)."""
        from pydantic_ai_harness.step_persistence.conversations import (
            ConversationConflict,
            ConversationSummary,
        )

        _check_record("summary", summary, ConversationSummary)
        messages = _check.sequence("messages", messages, "ModelMessages")
        updated = replace(
            summary,
            revision=summary.revision + 1,
            updated_at=datetime.now(timezone.utc),
            message_count=len(messages),
            total_tokens=sum(m.usage.total_tokens for m in messages if isinstance(m, ModelResponse)),
            archived_at=None,
        )
        payload = {"summary": _record_json(updated), "messages": _messages_json(messages)}
        store = await self._open()
        sid = self.conversation_key(summary.id)
        try:
            await self._put_head(store, sid, summary.revision, "revision", payload)
        except UnknownSession:
            if summary.revision != 0:
                raise ConversationConflict("Session was deleted. Start a new session before saving.") from None
            await self._create(store, sid, {"framework": "pydantic-ai-harness", "conversation_id": summary.id})
            await self._put_head(store, sid, 0, "revision", payload)
        return updated

    async def get(self, *, conversation_id: str) -> Any:
        """The conversation's summary and messages; ``LookupError`` when there is none."""
        from pydantic_ai_harness.step_persistence.conversations import (
            ConversationSummary,
            GitCheckout,
            SavedConversation,
        )

        store = await self._open()
        try:
            head = await store.acheckpoint_latest(self.conversation_key(conversation_id), "head")
        except UnknownSession:
            head = None
        if head is None or "summary" not in head["payload"]:
            raise LookupError(f"No saved session: {conversation_id}")
        fields = json.loads(head["payload"]["summary"])
        if fields.get("checkout") is not None:
            fields["checkout"] = GitCheckout(**fields["checkout"])
        fields["tags"] = tuple(fields.get("tags") or ())
        summary = _record(ConversationSummary, fields)
        messages = ModelMessagesTypeAdapter.validate_json(head["payload"]["messages"])
        return SavedConversation(summary=summary, messages=messages)

    async def delete(self, *, source: Any) -> None:
        """Deletes the conversation only at ``source.revision``: a tombstone head claims the
        next revision (``ConversationConflict`` when another writer moved it), then the
        session is closed everywhere (Redis and the durable tier)."""
        from pydantic_ai_harness.step_persistence.conversations import (
            ConversationConflict,
            ConversationSummary,
            ensure_inactive,
        )

        _check_record("source", source, ConversationSummary)
        ensure_inactive(source)
        store = await self._open()
        sid = self.conversation_key(source.id)
        try:
            await self._put_head(store, sid, source.revision, "deleted", {"deleted": True})
        except UnknownSession:
            raise ConversationConflict("Session changed or was deleted. Refresh the browser.") from None
        await store.aclose_session(sid, True)


class AgentStateMessageHistory(_Base):
    """A Pydantic AI message history kept in agentstate, for ``agent.run(...,
    message_history=...)``::

        history = AgentStateMessageHistory("chat-42")
        result = await agent.run("hi", message_history=await history.aload())
        await history.aappend(result.new_messages())

    Each ``ModelMessage`` is one agentstate message (role ``request`` or ``response``,
    content its exact JSON through ``ModelMessagesTypeAdapter``: parts, tool calls,
    timestamps come back equal). ``aappend`` is the core's ``append_many``: one turn's
    messages get consecutive seqs, no other writer's lands between them. Sync twins:
    ``load``, ``append``.

    Args:
        session_id: the conversation's id (an agentstate session ``<id_prefix><id>``, or a
            digest for an id that is no agentstate id).
        url, prefix, store, partitions, id_prefix: as :class:`AgentStateStepStore`'s.
    """

    def __init__(
        self,
        session_id: str,
        *,
        url: Optional[str] = None,
        prefix: Optional[str] = None,
        store: Optional[Store] = None,
        partitions: int = 16,
        id_prefix: str = ID_PREFIX,
    ) -> None:
        _check.string("session_id", session_id)
        super().__init__(url, prefix, store, partitions, id_prefix)
        self.session_id = session_id
        self._sid = self._id_prefix + _fit(session_id, _LABEL_PART)
        #: The key of a failed append of messages without provider ids, for its repeat.
        self._retry = _ids.RetryKeys()

    @property
    def agentstate_id(self) -> str:
        """The agentstate session holding this history."""
        return self._sid

    @staticmethod
    def _decode(array: Optional[str]) -> List[ModelMessage]:
        return [] if array is None else ModelMessagesTypeAdapter.validate_json(array)

    @staticmethod
    def _limit(last: Optional[int]) -> Optional[int]:
        return _check.limit("last", last)

    async def aload(self, *, last: Optional[int] = None) -> List[ModelMessage]:
        """The stored messages (the newest ``last`` when given), oldest first: one round
        trip, one validation of them all. An unknown conversation is empty."""
        self._limit(last)
        if last == 0:
            return []
        store = await self._open()
        try:
            return self._decode(await store.acontents_array(self._sid, last=last))
        except UnknownSession:
            return []

    def load(self, *, last: Optional[int] = None) -> List[ModelMessage]:
        """Sync twin of :meth:`aload`."""
        self._limit(last)
        if last == 0:
            return []
        store = self._open_sync()
        try:
            return self._decode(store.contents_array(self._sid, last=last))
        except UnknownSession:
            return []

    def _encode(self, messages: Any) -> List[Dict[str, Any]]:
        messages = _check.sequence("messages", messages, "ModelMessages")
        for i, m in enumerate(messages):
            # pydantic would serialize a foreign object with a warning, not refuse it.
            if not isinstance(m, (ModelRequest, ModelResponse)):
                raise _check.type_error(f"messages[{i}]", "a ModelRequest or ModelResponse", m)
        try:
            texts = json.loads(ModelMessagesTypeAdapter.dump_json(messages))
        except Exception as e:  # pydantic's serialization error names the bad item
            raise TypeError(f"messages must be a list of ModelMessages: {e}") from None
        return [
            {
                "role": "response" if m.get("kind") == "response" else "request",
                "content": json.dumps(m, ensure_ascii=False, separators=(",", ":")),
            }
            for m in texts
        ]

    def _key(self, messages: Sequence[ModelMessage], encoded: List[Dict[str, Any]], key: Optional[str]) -> str:
        """The append's idempotency key: the caller's, else one derived from the responses'
        ``provider_response_id`` (the provider's id of that response), else the failed
        call's key kept for its repeat (see :class:`agentstate._ids.RetryKeys`)."""
        if key is not None:
            return _check.string("idempotency_key", key)
        ids = [getattr(m, "provider_response_id", None) for m in messages]
        return _ids.batch_key("pai.", ids, encoded) or self._retry.key(encoded)

    async def aappend(
        self, messages: Sequence[ModelMessage], *, idempotency_key: Optional[str] = None
    ) -> List[int]:
        """Appends ``messages`` in order (the session is created on first use); their seqs.

        Safe to repeat after it raised (``RedisUnavailable``, ``WriteLost``, a timeout): the
        append carries an idempotency key (``idempotency_key`` when given, else derived from
        the responses' ``provider_response_id``, else the failed call's key, kept by this
        object for its repeat), so a repeat returns the first call's seqs and stores
        nothing twice."""
        encoded = self._encode(messages)
        if not encoded:
            return []
        key = self._key(messages, encoded, idempotency_key)
        store = await self._open()
        meta = {"framework": "pydantic-ai", "session_id": self.session_id}
        try:
            seqs = await self._write(
                store, self._sid, meta, lambda: store.aappend_many(self._sid, encoded, idempotency_key=key)
            )
        except BaseException:
            self._retry.failed(encoded, key)
            raise
        self._retry.succeeded()
        return seqs

    def append(self, messages: Sequence[ModelMessage], *, idempotency_key: Optional[str] = None) -> List[int]:
        """Sync twin of :meth:`aappend`."""
        encoded = self._encode(messages)
        if not encoded:
            return []
        key = self._key(messages, encoded, idempotency_key)
        store = self._open_sync()
        try:
            try:
                seqs = store.append_many(self._sid, encoded, idempotency_key=key)
            except UnknownSession:
                try:
                    store.create_session(self._sid, metadata={"framework": "pydantic-ai", "session_id": self.session_id})
                except AlreadyExists:
                    pass
                seqs = store.append_many(self._sid, encoded, idempotency_key=key)
        except BaseException:
            self._retry.failed(encoded, key)
            raise
        self._retry.succeeded()
        return seqs

    async def aclear(self) -> None:
        """Deletes the history everywhere (Redis and the durable tier)."""
        store = await self._open()
        try:
            await store.aclose_session(self._sid, True)
        except UnknownSession:
            pass

    def __repr__(self) -> str:
        return f"AgentStateMessageHistory({self.session_id!r}, prefix={self._prefix!r})"
