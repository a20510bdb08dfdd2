"""``AgentStateSessionService``: Google ADK's ``BaseSessionService`` on agentstate; the memory
service ``AgentStateMemoryService`` (``BaseMemoryService``) is re-exported from
:mod:`agentstate._adk_memory`.

An ADK session is an agentstate session; each event is one message of it (role ``event``,
content the event's exact JSON), so events keep agentstate's seq order for every reader,
even when their timestamps tie. The session's own state lives in a checkpoint (label
``adk``) that ``append_event`` writes **in the same script** as the event, and only if the
writer's view of the session is current: a writer holding a stale session gets ADK's
``StaleSessionError`` and writes nothing. ``user:`` state is user-attributed data of the ADK
user (``Store.forget_user(service.user_key(app, user))`` erases it with the user's other
data), ``app:`` state the user-attributed hash of a per-app id, ``temp:`` state is never
stored. Everything but ``temp:`` is flushed to SQLite by the spill daemon and comes back after
Redis lost it.

    from google.adk.runners import Runner
    from agentstate.adk import AgentStateSessionService

    service = AgentStateSessionService("redis://127.0.0.1:6379")
    runner = Runner(app_name="shop", agent=agent, session_service=service)

Ids: the agentstate session id is ``<id_prefix><app>@<session>@<user>`` when that fits
agentstate's id rules (1-128 chars of ``[A-Za-z0-9._@+-]``) and neither part holds an ``@``,
else ``<id_prefix><app>@h.<digest>``
(an app name that does not fit becomes a digest too), so one app's sessions are one range
of the session index and ``list_sessions`` reads pages of it, never a scan. The ADK ids are
kept in the state checkpoint and come back exactly.

One run per session across processes (opt-in): ADK's session service is not told where a
run starts or ends, so wrap the run in the service's run lease::

    async with service.run_lease(app_name="shop", user_id="u1", session_id="s1"):
        async for event in runner.run_async(user_id="u1", session_id="s1", new_message=msg):
            ...

A second process (or task) gets ``agentstate.Leased`` while the lease is held, or waits
``wait`` seconds for it. The events appended meanwhile go through the lease's fenced store: a
holder paused past its TTL whose lease another process took gets ``agentstate.Fenced`` from
``append_event`` and writes nothing.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
import re
import time
import uuid
from typing import Any, AsyncIterator, Dict, List, Optional, Tuple

from google.adk.errors import StaleSessionError
from google.adk.errors.already_exists_error import AlreadyExistsError
from google.adk.errors.session_not_found_error import SessionNotFoundError
from google.adk.events.event import Event
from google.adk.sessions.base_session_service import (
    BaseSessionService,
    GetSessionConfig,
    ListSessionsResponse,
)
from google.adk.sessions.session import Session
from google.adk.sessions.state import State

from . import _check
from ._adk_memory import AgentStateMemoryService
from ._agentstate import AlreadyExists, Conflict, RunLease, Store, UnknownSession, resolved
from ._shared import ashared_store

__all__ = ["AgentStateSessionService", "AgentStateMemoryService"]

#: The checkpoint label holding an ADK session's own state.
LABEL = "adk"
#: ADK's own wording for a stale writer (its database service's), so callers matching on it
#: keep working.
STALE = (
    "The session has been modified in storage since it was loaded. "
    "Please reload the session before appending more events."
)
#: Ids listed per page while collecting ``list_sessions``.
_PAGE = 1000
#: Events read per step backwards while answering ``after_timestamp``.
_STEP = 100
_ID = re.compile(r"[A-Za-z0-9._@+-]{1,128}\Z")
_PART = re.compile(r"[A-Za-z0-9._+-]{1,40}\Z")


def _digest(*parts: str) -> str:
    return "h." + hashlib.sha256("\x00".join(parts).encode("utf-8")).hexdigest()[:40]


def _app_part(app: str) -> str:
    """The app's part of every id: the name itself when short and plain, else a digest."""
    if _PART.match(app) and not app.startswith("h."):
        return app
    return _digest("app", app)


def _fit(prefix: str, text: str, *raw: str) -> str:
    """``prefix + text`` when it is a valid agentstate id and no part of ``raw`` (the ids
    ``text`` joins with ``@``) holds an ``@`` (which would make two joins alike), else
    ``prefix`` + a digest of ``raw``."""
    whole = prefix + text
    if _ID.match(whole) and not text.startswith("h.") and not any("@" in r for r in raw):
        return whole
    return prefix + _digest(*raw)


def _json_text(value: Any) -> str:
    """The JSON text of a state value; a value JSON cannot hold is stored as its ``str``
    (as ADK's database services do), so one odd value does not lose the event."""
    try:
        return json.dumps(value, ensure_ascii=False, allow_nan=False)
    except (TypeError, ValueError):
        return json.dumps(str(value), ensure_ascii=False)


def _split(delta: Dict[str, Any]) -> Tuple[Dict[str, Any], Dict[str, Any], Dict[str, Any]]:
    """A state delta as (app, user, session) deltas, app and user keys without their
    prefix; ``temp:`` keys are dropped."""
    app: Dict[str, Any] = {}
    user: Dict[str, Any] = {}
    own: Dict[str, Any] = {}
    for key, value in delta.items():
        if key.startswith(State.APP_PREFIX):
            app[key[len(State.APP_PREFIX) :]] = value
        elif key.startswith(State.USER_PREFIX):
            user[key[len(State.USER_PREFIX) :]] = value
        elif not key.startswith(State.TEMP_PREFIX):
            own[key] = value
    return app, user, own


def _normalised(session_id: Optional[str]) -> Optional[str]:
    """ADK's rule for a caller's session id: surrounding whitespace is not part of it, and a
    blank one is no id."""
    if session_id is None:
        return None
    _check.string("session_id", session_id)
    return session_id.strip() or None


#: The default ``id_prefix``: ADK sessions (and users) in an id space of their own.
ID_PREFIX = "adk."


class AgentStateSessionService(BaseSessionService):
    """Google ADK sessions stored in agentstate.

    Args:
        url: Redis URL; default ``$AGENTSTATE_REDIS_URL``, else ``redis://127.0.0.1:6379``;
            ``prefix`` likewise ``$AGENTSTATE_PREFIX``, else ``as``.
        prefix: agentstate namespace prefix.
        store: an already connected :class:`agentstate.Store` to use instead of ``url``.
        partitions: the namespace's partition count.
        id_prefix: prepended to every agentstate id this service makes (sessions, users),
            so several applications (or test cases) share one namespace without sharing
            sessions or state; at most 40 characters of ``[A-Za-z0-9._+-]``;
            the agentstate ids this service makes start with it. The default, ``'adk.'``,
            keeps this framework's ids apart from every other adapter's (an OpenAI Agents
            session "X" and a LangGraph thread "X" are two sessions); give two adapters the
            same ``id_prefix`` to share one agentstate session on purpose, and ``""`` to
            read data written under the bare id (before adapters had prefixes).

    The namespace needs a spill daemon (``agentstate spill``), as for every adapter: it is what
    lets a session Redis lost come back instead of starting anew.
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
        _check.connection(url, prefix, partitions, store)
        _check.string("id_prefix", id_prefix)
        if id_prefix and not _PART.match(id_prefix):
            raise ValueError(
                f"id_prefix {id_prefix!r}: at most 40 characters of [A-Za-z0-9._+-]"
            )
        self._url, self._prefix = resolved(url, prefix)
        self._partitions = partitions
        self._store = store
        self._id_prefix = id_prefix
        #: agentstate session id -> the fenced store of the run lease held on it.
        self._fenced: Dict[str, Store] = {}

    # -- ids ---------------------------------------------------------------------------

    def _app_prefix(self, app_name: str) -> str:
        return f"{self._id_prefix}{_app_part(app_name)}@"

    def session_key(self, app_name: str, user_id: str, session_id: str) -> str:
        """The agentstate session id of an ADK session."""
        return _fit(self._app_prefix(app_name), f"{session_id}@{user_id}", user_id, session_id)

    def user_key(self, app_name: str, user_id: str) -> str:
        """The agentstate user id of an ADK user of ``app_name``: its sessions are indexed
        under it and its ``user:`` state is its user-attributed data, so
        ``Store.forget_user(user_key)`` erases that state."""
        return _fit(self._app_prefix(app_name), f"u.{user_id}", user_id)

    def _app_key(self, app_name: str) -> str:
        """The agentstate user id whose hash holds ``app_name``'s ``app:`` state."""
        return self._app_prefix(app_name) + "app"

    # -- storage -----------------------------------------------------------------------

    async def _open(self) -> Store:
        store = self._store
        if store is None:
            store = self._store = await ashared_store(self._url, self._prefix, self._partitions)
        return store

    @contextlib.asynccontextmanager
    async def run_lease(
        self,
        *,
        app_name: str,
        user_id: str,
        session_id: str,
        ttl_ms: int = 30000,
        wait: Optional[float] = None,
        owner: Optional[str] = None,
    ) -> AsyncIterator[RunLease]:
        """Holds the session's run lease while the block runs (wrap ``runner.run_async`` in
        it): renewed in the background every third of ``ttl_ms``, released at the end, so
        one run at a time works on the session across processes. ``agentstate.Leased`` when
        another owner holds it, unless ``wait`` (seconds) lets it wait that long;
        ``SessionNotFoundError`` when the session does not exist."""
        _check.string("app_name", app_name)
        _check.string("user_id", user_id)
        _check.string("session_id", session_id)
        store = await self._open()
        sid = self.session_key(app_name, user_id, session_id)
        lease = store.run_lease(sid, owner, ttl_ms, wait=wait)
        try:
            run = await lease.__aenter__()
        except UnknownSession:
            raise SessionNotFoundError(f"Session {session_id} not found.") from None
        self._fenced[sid] = run.store
        try:
            yield run
        finally:
            self._fenced.pop(sid, None)
            await lease.__aexit__(None, None, None)

    async def _scoped(self, store: Store, uid: str) -> Dict[str, Any]:
        """The app or user state kept in ``uid``'s hash: key -> value."""
        values = await store.auser_values(uid)
        return {v["key"]: json.loads(v["json"]) for v in values.values()}

    async def _write_scoped(self, store: Store, uid: str, delta: Dict[str, Any]) -> None:
        for key, value in delta.items():
            await store.aset_user_value(uid, _fit("", key, key), {"key": key, "json": _json_text(value)})

    async def _shared_state(self, store: Store, app_name: str, user_id: str) -> Dict[str, Any]:
        """The ``app:`` and ``user:`` state a session of ``user_id`` sees, prefixed."""
        app, user = await asyncio.gather(
            self._scoped(store, self._app_key(app_name)),
            self._scoped(store, self.user_key(app_name, user_id)),
        )
        merged = {State.APP_PREFIX + k: v for k, v in app.items()}
        merged.update({State.USER_PREFIX + k: v for k, v in user.items()})
        return merged

    async def _record(self, store: Store, sid: str) -> Optional[Dict[str, Any]]:
        """The state checkpoint of ``sid`` as ``{adk, seq, state, update_time}`` (the seq of
        the latest event it follows, 0 before any); None when the session is unknown."""
        try:
            checkpoint = await store.acheckpoint_latest(sid, LABEL)
        except UnknownSession:
            return None
        return await self._decoded(store, sid, checkpoint)

    async def _decoded(
        self, store: Store, sid: str, checkpoint: Optional[Dict[str, Any]]
    ) -> Optional[Dict[str, Any]]:
        """:meth:`_record` of a checkpoint already read."""
        if checkpoint is None:
            # Its creator stopped between the session and its state (create_session is two
            # scripts): an empty session, as created. A session of another tool is none.
            meta = await store.asession(sid)
            ids = (meta or {}).get("metadata") or {}
            if ids.get("framework") != "google-adk":
                return None
            return {
                "adk": {k: ids[k] for k in ("app", "user", "session")},
                "seq": 0,
                "state": {},
                "update_time": meta["created_at"] / 1000,
            }
        payload = checkpoint["payload"]
        return {
            "adk": payload["adk"],
            "seq": payload["seq"],
            "state": json.loads(payload["state"]),
            "update_time": float(payload["update_time"]),
        }

    @staticmethod
    def _payload(ids: Dict[str, str], seq: int, state: Dict[str, Any], at: float) -> Dict[str, Any]:
        # State and time as JSON text: they come back as the exact floats Python wrote.
        return {
            "adk": ids,
            "seq": seq,
            "state": json.dumps(state, ensure_ascii=False),
            "update_time": repr(float(at)),
        }

    # -- BaseSessionService ------------------------------------------------------------

    async def create_session(
        self,
        *,
        app_name: str,
        user_id: str,
        state: Optional[Dict[str, Any]] = None,
        session_id: Optional[str] = None,
    ) -> Session:
        _check.string("app_name", app_name)
        _check.string("user_id", user_id)
        session_id = _normalised(session_id) or str(uuid.uuid4())
        app, user, own = _split(dict(_check.mapping("state", state or {})))
        own = {k: json.loads(_json_text(v)) for k, v in own.items()}
        store = await self._open()
        sid = self.session_key(app_name, user_id, session_id)
        uid = self.user_key(app_name, user_id)
        ids = {"app": app_name, "user": user_id, "session": session_id}
        try:
            await store.acreate_session(
                sid, user=uid, metadata={"framework": "google-adk", **ids}
            )
        except AlreadyExists:
            raise AlreadyExistsError(f"Session with id {session_id} already exists.") from None
        now = time.time()
        await store.aput_checkpoint(sid, LABEL, self._payload(ids, 0, own, now))
        await self._write_scoped(store, self._app_key(app_name), app)
        await self._write_scoped(store, uid, user)
        merged = dict(own)
        merged.update(await self._shared_state(store, app_name, user_id))
        session = Session(
            id=session_id, app_name=app_name, user_id=user_id, state=merged, last_update_time=now
        )
        session._storage_update_marker = "1"
        return session

    async def get_session(
        self,
        *,
        app_name: str,
        user_id: str,
        session_id: str,
        config: Optional[GetSessionConfig] = None,
    ) -> Optional[Session]:
        _check.string("app_name", app_name)
        _check.string("user_id", user_id)
        session_id = _normalised(session_id)
        if session_id is None:
            return None
        store = await self._open()
        sid = self.session_key(app_name, user_id, session_id)
        for _ in range(8):
            record = await self._record(store, sid)
            if record is None:
                return None
            events = await self._events(store, sid, record["seq"], config)
            if events is not None:
                break
        else:  # pragma: no cover - eight appends landed between two reads each time
            raise StaleSessionError(STALE)
        state = dict(record["state"])
        state.update(await self._shared_state(store, app_name, user_id))
        session = Session(
            id=session_id,
            app_name=app_name,
            user_id=user_id,
            state=state,
            events=events,
            last_update_time=record["update_time"],
        )
        session._storage_update_marker = str(record["seq"] + 1)
        return session

    async def _events(
        self, store: Store, sid: str, seq: int, config: Optional[GetSessionConfig]
    ) -> Optional[List[Event]]:
        """The events up to ``seq`` that ``config`` asks for, read from the newest:
        ``num_recent_events`` reads that many; ``after_timestamp`` alone reads a page, then
        twice as many, until it reaches an older event (so about twice what it returns):
        never the whole history for a bounded request. None when an event after ``seq`` was
        appended meanwhile (the caller reads again)."""
        recent = config.num_recent_events if config else None
        after = config.after_timestamp if config else None
        if recent == 0 or seq == 0:
            return []
        last = recent if recent is not None else (_STEP if after is not None else None)
        while True:
            messages = await store.amessages(sid, last=last)
            if messages and messages[-1]["seq"] != seq:
                return None
            events = [Event.model_validate_json(m["content"]) for m in messages]
            if (
                last is None
                or recent is not None
                or len(messages) < last
                or (events and events[0].timestamp < after)
            ):
                break
            last *= 2
        if after is not None:
            events = [e for e in events if e.timestamp >= after]
        return events

    async def list_sessions(
        self, *, app_name: str, user_id: Optional[str] = None
    ) -> ListSessionsResponse:
        _check.string("app_name", app_name)
        if user_id is not None:
            _check.string("user_id", user_id)
        store = await self._open()
        user = self.user_key(app_name, user_id) if user_id is not None else None
        sids: List[str] = []
        after: Optional[str] = None
        while True:
            ids, after = await store.alist_sessions_page(
                _PAGE, user=user, after=after, prefix=self._app_prefix(app_name)
            )
            sids.extend(ids)
            if after is None:
                break
        checkpoints = await store.acheckpoints_latest_of(sids, LABEL)
        records = [await self._decoded(store, sid, c) for sid, c in zip(sids, checkpoints)]
        app_state = await self._scoped(store, self._app_key(app_name))
        users: Dict[str, Dict[str, Any]] = {}
        sessions = []
        for record in records:
            if record is None or record["adk"]["app"] != app_name:
                continue
            owner = record["adk"]["user"]
            if user_id is not None and owner != user_id:
                continue
            if owner not in users:
                users[owner] = await self._scoped(store, self.user_key(app_name, owner))
            state = dict(record["state"])
            state.update({State.APP_PREFIX + k: v for k, v in app_state.items()})
            state.update({State.USER_PREFIX + k: v for k, v in users[owner].items()})
            sessions.append(
                Session(
                    id=record["adk"]["session"],
                    app_name=app_name,
                    user_id=owner,
                    state=state,
                    last_update_time=record["update_time"],
                )
            )
        sessions.sort(key=lambda s: (s.last_update_time, s.id))
        return ListSessionsResponse(sessions=sessions)

    async def delete_session(self, *, app_name: str, user_id: str, session_id: str) -> None:
        _check.string("app_name", app_name)
        _check.string("user_id", user_id)
        session_id = _normalised(session_id)
        if session_id is None:
            return
        store = await self._open()
        try:
            await store.aclose_session(self.session_key(app_name, user_id, session_id), True)
        except UnknownSession:
            pass

    async def get_user_state(self, *, app_name: str, user_id: str) -> Dict[str, Any]:
        _check.string("app_name", app_name)
        _check.string("user_id", user_id)
        store = await self._open()
        return await self._scoped(store, self.user_key(app_name, user_id))

    async def append_event(self, session: Session, event: Event) -> Event:
        if event.partial:
            return event
        self._apply_temp_state(session, event)
        event = self._trim_temp_delta_state(event)
        store = await self._open()
        sid = self.session_key(session.app_name, session.user_id, session.id)
        app, user, own = _split(event.actions.state_delta if event.actions else {})
        marker = session._storage_update_marker
        if marker is not None and marker.isdigit():
            expected = int(marker)
            base = {k: v for k, v in session.state.items() if not k.startswith(("app:", "user:", "temp:"))}
        else:
            # A session object this service did not hand out: compare times, as ADK's own
            # services do without a revision marker.
            record = await self._record(store, sid)
            if record is None:
                raise SessionNotFoundError(f"Session {session.id} not found.")
            if record["update_time"] > session.last_update_time + 1e-3:
                raise StaleSessionError(STALE)
            expected, base = record["seq"] + 1, record["state"]
        base.update({k: json.loads(_json_text(v)) for k, v in own.items()})
        ids = {"app": session.app_name, "user": session.user_id, "session": session.id}
        message = {"role": "event", "content": event.model_dump_json(exclude_none=True)}
        payload = self._payload(ids, expected, base, event.timestamp)
        try:
            await self._fenced.get(sid, store).aappend_checkpointed(
                sid, message, LABEL, payload, expect_seq=expected
            )
        except Conflict:
            # Repeating a call that raised (RedisUnavailable, WriteLost, a timeout) after
            # its write was applied: the event sits at its seq already, so the repeat is
            # that write's success, not a stale writer (nor a second copy).
            if not await self._holds(store, sid, expected, message["content"]):
                raise StaleSessionError(STALE) from None
        except UnknownSession:
            raise SessionNotFoundError(f"Session {session.id} not found.") from None
        # app: and user: state live under other ids (other slots of a cluster): written once
        # the event is in, so a refused (stale) writer changes nothing.
        await self._write_scoped(store, self._app_key(session.app_name), app)
        await self._write_scoped(store, self.user_key(session.app_name, session.user_id), user)
        session.last_update_time = event.timestamp
        session._storage_update_marker = str(expected + 1)
        return self._commit_event_to_session(session, event)

    @staticmethod
    async def _holds(store: Store, sid: str, seq: int, content: str) -> bool:
        """Whether message ``seq`` of ``sid`` is exactly the event JSON ``content`` (its id
        and timestamp included, so only the same event matches)."""
        try:
            m = await store.amessage(sid, seq)
        except UnknownSession:
            return False
        return m is not None and m.get("content") == content

    def __repr__(self) -> str:
        return f"AgentStateSessionService(prefix={self._prefix!r}, id_prefix={self._id_prefix!r})"

