"""``AgentStateSessionRepository``: a Strands Agents ``SessionRepository`` on agentstate.

Use it with Strands' own ``RepositorySessionManager``:

    from strands import Agent
    from strands.session.repository_session_manager import RepositorySessionManager
    from agentstate.strands import AgentStateSessionRepository

    repo = AgentStateSessionRepository(url="redis://127.0.0.1:6379")
    agent = Agent(session_manager=RepositorySessionManager(session_id="s1", session_repository=repo))

The mapping onto agentstate (everything is live in Redis, flushed to SQLite, restored):

* a Strands session is the agentstate session ``<id_prefix><session id>`` (``strands.``
  by default: no other adapter's), its ``Session`` JSON in the session's metadata;
* each agent is a linked sub-agent session ``<that id>@<agent>`` (closing the session closes
  its agents); the ``SessionAgent`` JSON it was created with is that session's metadata, each
  update a checkpoint labelled ``agent`` (``created_at`` stays the creation's, as in Strands'
  file and S3 repositories) — each one script (``put_checkpoint``);
* message ``n`` of an agent is the message with seq ``n + 1`` of the agent's session, its
  content the ``SessionMessage`` JSON: creation is an append that expects exactly that seq
  (so creating an existing message fails, but repeating the same create after it raised
  succeeds without a second copy), an update or redaction replaces that message with
  the core's ``replace_message`` (one script, logged to the wal);
* multi-agent state is a checkpoint of the session labelled ``ma.<id>``.

One run per agent of a session across processes (opt-in): Strands' repository is not told
where an invocation starts or ends, so wrap it in the repository's run lease::

    with repo.run_lease("s1", agent.agent_id):   # agentstate.Leased if another process runs it
        agent("hello")

The lease is the agent's session's (``<session>@<agent>``: the session its messages go to),
and while it is held the agent's writes carry its fencing token: a holder paused past the TTL
whose lease another process took gets ``agentstate.Fenced`` from ``create_message``, an
agent update or a redaction, and writes nothing.

Creating what exists or updating what is missing raises ``SessionException``; reading what is
missing returns ``None`` (``[]`` for a message list). An argument of the wrong type (an id
that is no ``str``, a ``Session``/``SessionAgent``/``SessionMessage`` that is something else, a
``limit``/``offset``/``message_id`` that is no int) raises ``TypeError``, a negative
``limit``/``offset``/``message_id`` ``ValueError``, each naming the argument, before anything
is read or written.
"""

from __future__ import annotations

import contextlib
import json
from typing import TYPE_CHECKING, Any, Dict, Iterator, List, Optional

from strands.session.session_repository import SessionRepository
from strands.types.exceptions import SessionException
from strands.types.session import Session, SessionAgent, SessionMessage

from . import _check, _ids
from ._agentstate import AlreadyExists, Conflict, InvalidInput, RunLease, Store, UnknownSession
from ._shared import shared_store

if TYPE_CHECKING:
    from strands.multiagent.base import MultiAgentBase

__all__ = ["AgentStateSessionRepository", "ID_PREFIX"]

#: The default ``id_prefix``: Strands sessions in an id space of their own.
ID_PREFIX = "strands."

AGENT_LABEL = "agent"


def _dumps(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


class AgentStateSessionRepository(SessionRepository):
    """A Strands ``SessionRepository`` storing sessions, agents, messages and multi-agent
    state in agentstate.

    Args:
        url: Redis URL; default ``$AGENTSTATE_REDIS_URL``, else ``redis://127.0.0.1:6379``; ``prefix``
            likewise ``$AGENTSTATE_PREFIX``, else ``as``.
        prefix: agentstate namespace prefix.
        partitions: the namespace's partition count.
        store: an already connected :class:`agentstate.Store` to use instead of ``url``.
        id_prefix: prepended to every Strands session id to form the agentstate id, so several
            applications (or test cases) can share one namespace without sharing sessions;
            the agentstate ids this repository makes start with it. The default, ``'strands.'``,
            keeps this framework's ids apart from every other adapter's (an OpenAI Agents
            session "X" and a LangGraph thread "X" are two sessions); give two adapters the
            same ``id_prefix`` to share one agentstate session on purpose, and ``""`` to
            read data written under the bare id (before adapters had prefixes).

    The namespace must have a spill daemon (``agentstate spill``) that has checked it against
    SQLite before sessions can be created (see docs/python.md).
    """

    def __init__(
        self,
        *,
        url: Optional[str] = None,
        prefix: Optional[str] = None,
        partitions: int = 16,
        store: Optional[Store] = None,
        id_prefix: str = ID_PREFIX,
    ) -> None:
        _check.string("id_prefix", id_prefix)
        _check.connection(url, prefix, partitions, store)
        self._prefix = id_prefix
        self._store = store or shared_store(url, prefix, partitions)
        #: agentstate session id -> the fenced store of the run lease held on it.
        self._fenced: Dict[str, Store] = {}

    def _sid(self, session_id: str, name: str = "session_id") -> str:
        return _ids.part(self._prefix + _check.string(name, session_id))

    def _aid(self, session_id: str, agent_id: str, name: str = "agent_id") -> str:
        _check.string("session_id", session_id)
        return _ids.joined(self._prefix + session_id, _check.string(name, agent_id))

    @property
    def store(self) -> Store:
        """The agentstate store underneath."""
        return self._store

    def _writer(self, sid: str) -> Store:
        """The store writes to ``sid`` go through: the run lease's fenced one while held."""
        return self._fenced.get(sid, self._store)

    @contextlib.contextmanager
    def run_lease(
        self,
        session_id: str,
        agent_id: str,
        *,
        ttl_ms: int = 30000,
        wait: Optional[float] = None,
        owner: Optional[str] = None,
    ) -> Iterator[RunLease]:
        """Holds the run lease of agent ``agent_id`` of session ``session_id`` while the
        block runs (wrap the agent's invocation in it): renewed in the background every
        third of ``ttl_ms``, released at the end, so one invocation at a time works on it
        across processes; the agent's writes carry the lease's token meanwhile.
        ``agentstate.Leased`` when another owner holds it, unless ``wait`` (seconds) lets it
        wait that long; ``SessionException`` when the agent does not exist."""
        aid = self._aid(session_id, agent_id)
        lease = self._store.run_lease(aid, owner, ttl_ms, wait=wait)
        try:
            run = lease.__enter__()
        except UnknownSession as e:
            raise SessionException(f"Agent {agent_id} does not exist in session {session_id}") from e
        self._fenced[aid] = run.store
        try:
            yield run
        finally:
            self._fenced.pop(aid, None)
            lease.__exit__(None, None, None)

    def _live_meta(self, sid: str) -> Optional[Dict[str, Any]]:
        """The session's meta (restored from SQLite when Redis lost it), or None."""
        try:
            return self._store.require_session(sid)
        except UnknownSession:
            return None

    # ---- sessions -------------------------------------------------------------------------

    def create_session(self, session: Session, **kwargs: Any) -> Session:
        """Creates the session; ``SessionException`` when it exists (live or restorable)."""
        _instance("session", session, Session)
        sid = self._sid(session.session_id, "session.session_id")
        try:
            self._store.create_session(
                sid,
                metadata={"strands": "session", "session": session.to_dict()},
            )
        except AlreadyExists as e:
            raise SessionException(f"Session {session.session_id} already exists") from e
        return session

    def read_session(self, session_id: str, **kwargs: Any) -> Optional[Session]:
        """The session, or None."""
        data = _strands_meta(self._live_meta(self._sid(session_id)), "session")
        return None if data is None else Session.from_dict(data)

    # ---- agents ---------------------------------------------------------------------------

    def create_agent(self, session_id: str, session_agent: SessionAgent, **kwargs: Any) -> None:
        """Creates the agent's sub-session; ``SessionException`` when the session is missing
        or the agent exists."""
        _instance("session_agent", session_agent, SessionAgent)
        sid = self._sid(session_id)
        aid = self._aid(session_id, session_agent.agent_id, "session_agent.agent_id")
        try:
            self._store.create_session(
                aid,
                parent=sid,
                lifecycle="linked",
                metadata={"strands": "agent", "agent": session_agent.to_dict()},
            )
        except AlreadyExists as e:
            raise SessionException(
                f"Agent {session_agent.agent_id} already exists in session {session_id}"
            ) from e
        except UnknownSession as e:
            raise SessionException(f"Session {session_id} does not exist") from e

    def read_agent(self, session_id: str, agent_id: str, **kwargs: Any) -> Optional[SessionAgent]:
        """The agent as last updated, or None."""
        aid = self._aid(session_id, agent_id)
        created = _strands_meta(self._live_meta(aid), "agent")
        if created is None:
            return None
        try:
            ckpt = self._store.checkpoint_latest(aid, AGENT_LABEL)
        except UnknownSession:
            return None
        if ckpt is None:
            return SessionAgent.from_dict(created)
        data = dict(ckpt["payload"][AGENT_LABEL])
        data["created_at"] = created.get("created_at", data.get("created_at"))
        return SessionAgent.from_dict(data)

    def update_agent(self, session_id: str, session_agent: SessionAgent, **kwargs: Any) -> None:
        """Records the agent's new state (a checkpoint); ``SessionException`` when missing."""
        _instance("session_agent", session_agent, SessionAgent)
        aid = self._aid(session_id, session_agent.agent_id, "session_agent.agent_id")
        try:
            self._writer(aid).put_checkpoint(aid, AGENT_LABEL, {AGENT_LABEL: session_agent.to_dict()})
        except UnknownSession as e:
            raise SessionException(
                f"Agent {session_agent.agent_id} in session {session_id} does not exist"
            ) from e

    # ---- messages -------------------------------------------------------------------------

    def create_message(
        self, session_id: str, agent_id: str, session_message: SessionMessage, **kwargs: Any
    ) -> None:
        """Appends message ``message_id`` (it must be the agent's next one). Safe to repeat
        after it raised (``RedisUnavailable``, ``WriteLost``, a timeout): the message id is
        its seq, so a repeat cannot land twice, and a repeat of a write that was applied
        (the same message at that id) succeeds; another message at that id is
        ``SessionException``."""
        aid = self._aid(session_id, agent_id)
        mid, role, content = _message(session_message)
        try:
            self._writer(aid).append(aid, role, content, expect_seq=mid + 1)
        except UnknownSession as e:
            raise SessionException(f"Agent {agent_id} does not exist in session {session_id}") from e
        except Conflict as e:
            if e.current > mid + 1 and self._holds(aid, mid, content):
                return  # an earlier attempt stored it (its reply was lost)
            if e.current > mid + 1:
                raise SessionException(
                    f"Message {mid} already exists in agent {agent_id} in session {session_id}"
                ) from e
            raise SessionException(
                f"Message {mid} of agent {agent_id} would leave a gap: the next message id is "
                f"{e.current - 1}"
            ) from e

    def _holds(self, aid: str, mid: int, content: str) -> bool:
        """Whether message ``mid`` of ``aid`` is exactly ``content`` (a repeated create)."""
        try:
            m = self._store.message(aid, mid + 1)
        except UnknownSession:
            return False
        return m is not None and m.get("content") == content

    def read_message(
        self, session_id: str, agent_id: str, message_id: int, **kwargs: Any
    ) -> Optional[SessionMessage]:
        """Message ``message_id``, or None."""
        aid = self._aid(session_id, agent_id)
        _check.count("message_id", message_id)
        try:
            m = self._store.message(aid, message_id + 1)
        except UnknownSession:
            return None
        return None if m is None else SessionMessage.from_dict(json.loads(m["content"]))

    def update_message(
        self, session_id: str, agent_id: str, session_message: SessionMessage, **kwargs: Any
    ) -> None:
        """Replaces message ``message_id`` (e.g. a redaction); ``SessionException`` when it
        does not exist."""
        aid = self._aid(session_id, agent_id)
        mid, role, content = _message(session_message)
        try:
            self._writer(aid).replace_message(aid, mid + 1, {"role": role, "content": content})
        except (UnknownSession, InvalidInput) as e:
            raise SessionException(f"Message {mid} does not exist in session {session_id}") from e

    def list_messages(
        self,
        session_id: str,
        agent_id: str,
        limit: Optional[int] = None,
        offset: int = 0,
        **kwargs: Any,
    ) -> List[SessionMessage]:
        """Messages ``offset .. offset + limit`` in id order (one round trip). ``limit`` is
        None (all) or an int >= 0, ``offset`` an int >= 0: a negative one raises
        ``ValueError`` (in a Python slice, as Strands' file repository applies them, it would
        count from the end)."""
        aid = self._aid(session_id, agent_id)
        _check.limit("limit", limit)
        _check.count("offset", offset)
        try:
            rows = self._store.contents(aid, after=offset)
        except UnknownSession:
            return []
        if limit is not None:
            rows = rows[:limit]
        return [SessionMessage.from_dict(json.loads(c)) for c in rows if c is not None]

    # ---- multi-agent state ----------------------------------------------------------------

    def create_multi_agent(self, session_id: str, multi_agent: "MultiAgentBase", **kwargs: Any) -> None:
        """Stores the multi-agent state (a checkpoint of the session)."""
        self._save_multi(session_id, *_multi_state(multi_agent))

    def read_multi_agent(self, session_id: str, multi_agent_id: str, **kwargs: Any) -> Optional[Dict[str, Any]]:
        """The multi-agent state, or None."""
        sid = self._sid(session_id)
        label = _multi_label(_check.string("multi_agent_id", multi_agent_id))
        try:
            ckpt = self._store.checkpoint_latest(sid, label)
        except UnknownSession:
            return None
        return None if ckpt is None else ckpt["payload"].get(label)

    def update_multi_agent(self, session_id: str, multi_agent: "MultiAgentBase", **kwargs: Any) -> None:
        """Replaces the multi-agent state; ``SessionException`` when there is none."""
        multi_agent_id, state = _multi_state(multi_agent)
        if self.read_multi_agent(session_id, multi_agent_id) is None:
            raise SessionException(
                f"MultiAgent state {multi_agent_id} in session {session_id} does not exist"
            )
        self._save_multi(session_id, multi_agent_id, state)

    def _save_multi(self, session_id: str, multi_agent_id: str, state: Dict[str, Any]) -> None:
        sid, label = self._sid(session_id), _multi_label(multi_agent_id)
        try:
            self._store.put_checkpoint(sid, label, {label: state})
        except UnknownSession as e:
            raise SessionException(f"Session {session_id} does not exist") from e


def _instance(name: str, value: Any, kind: type) -> None:
    if not isinstance(value, kind):
        raise _check.type_error(name, f"a strands {kind.__name__}", value)


def _message(session_message: Any) -> "tuple[int, str, str]":
    """The message id, agentstate role and stored content of a ``SessionMessage``, checked."""
    _instance("session_message", session_message, SessionMessage)
    mid = _check.count("session_message.message_id", session_message.message_id)
    message = _check.mapping("session_message.message", session_message.message)
    try:
        content = _dumps(session_message.to_dict())
    except TypeError as e:
        raise TypeError(f"session_message is not JSON-serializable: {e}") from e
    except ValueError as e:  # a circular reference
        raise ValueError(f"session_message is not JSON-serializable: {e}") from e
    return mid, _ids.role(message.get("role"), "message"), content


def _multi_state(multi_agent: Any) -> "tuple[str, Dict[str, Any]]":
    """A multi-agent's id and state, checked (any object with an ``id`` and a
    ``serialize_state()``, as ``MultiAgentBase``)."""
    multi_agent_id = _check.string("multi_agent.id", getattr(multi_agent, "id", None))
    serialize = getattr(multi_agent, "serialize_state", None)
    if not callable(serialize):
        raise _check.type_error("multi_agent", "a strands MultiAgentBase", multi_agent)
    state = _check.mapping("multi_agent.serialize_state()", serialize())
    return multi_agent_id, dict(state)


def _multi_label(multi_agent_id: str) -> str:
    return _ids.part("ma." + multi_agent_id)


def _strands_meta(meta: Optional[Dict[str, Any]], kind: str) -> Optional[Dict[str, Any]]:
    """The Strands object kept in an agentstate session's metadata, when it holds one."""
    if not meta:
        return None
    md = meta.get("metadata")
    if not isinstance(md, dict) or md.get("strands") != kind:
        return None
    return md.get(kind)
