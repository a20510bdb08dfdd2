"""``AgentStateSession``: the OpenAI Agents SDK ``Session`` protocol on agentstate.

Each conversation item is one agentstate message (its ``role`` is the item's role, or its
``type`` for tool calls and outputs; its ``content`` the item's exact JSON text), so the
history is live in Redis, flushed to SQLite by the spill daemon and restored from it after
Redis lost it — and other agentstate tools (CLI, compaction, checkpoints) see it too.

    from agents import Agent, Runner
    from agentstate.openai_agents import AgentStateSession

    session = AgentStateSession("conversation-42", url="redis://127.0.0.1:6379")
    result = await Runner.run(Agent(name="a", instructions="..."), "hello", session=session)

``add_items`` is the core's ``append_many`` (one script: the items get consecutive seqs, no
other writer's item lands between them; with an idempotency key, so a repeat after it raised
stores nothing twice); ``pop_item`` its ``pop_message`` (one script, logged
to the wal); ``clear_session`` closes the agentstate session (Redis and SQLite, one script)
and the next ``add_items`` starts it again. Each read or write is one round trip, and a
mutation whose caller is cancelled still runs to its outcome before the cancellation is
re-raised.

One run per conversation across processes (opt-in): the SDK's ``Session`` has no hook where
a run starts or ends, so wrap the run yourself::

    async with session.run_lease():          # agentstate.Leased if another process runs it
        await Runner.run(agent, "hello", session=session)

While the lease is held the session's writes carry its fencing token: a run whose lease
another process took over (it was paused past the TTL) gets ``agentstate.Fenced`` from
``add_items`` or ``pop_item`` and writes nothing.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from typing import Any, AsyncIterator, Dict, List, Optional, TypeVar, Union

from agents.memory.session_settings import SessionSettings, coerce_session_settings
from agents.models.fake_id import FAKE_RESPONSES_ID

from . import _check, _ids
from ._agentstate import AlreadyExists, RunLease, Store, UnknownSession, resolved
from ._shared import ashared_store

__all__ = ["AgentStateSession", "ID_PREFIX"]

#: The default ``id_prefix``: this framework's sessions in an id space of their own.
ID_PREFIX = "oai."

_T = TypeVar("_T")



def _encode(index: int, item: Any) -> Dict[str, Any]:
    """The agentstate message of ``items[index]``: ``TypeError``/``ValueError`` naming it
    when it is no dict or not JSON-serializable (before anything is written)."""
    if not isinstance(item, dict):
        raise _check.type_error(f"items[{index}]", "a dict (a TResponseInputItem)", item)
    try:
        content = json.dumps(item, ensure_ascii=False, separators=(",", ":"))
    except TypeError as e:
        raise TypeError(f"items[{index}] is not JSON-serializable: {e}") from e
    except ValueError as e:  # a circular reference
        raise ValueError(f"items[{index}] is not JSON-serializable: {e}") from e
    if not content.isascii():
        try:
            content.encode("utf-8")
        except UnicodeEncodeError:  # a lone surrogate (valid in a str): stored escaped, as
            content = json.dumps(item, separators=(",", ":"))  # SQLiteSession stores it
    return {"role": _ids.role(item.get("role") or item.get("type")), "content": content}


def _item_id(item: Dict[str, Any]) -> Optional[str]:
    """An item's own id, as the model made it: a response item's ``id`` (``msg_...``,
    ``fc_...``, ``rs_...``), else a tool output's ``call_id`` (with its type, since a call
    and its output share the call id); None for the user's input and other id-less items.
    The SDK's placeholder for models that make no ids (``__fake_id__``, on every item of
    such a model) is no id: it would make two turns' outputs look alike."""
    item_id = item.get("id")
    if isinstance(item_id, str) and item_id and item_id != FAKE_RESPONSES_ID:
        return item_id
    call_id = item.get("call_id")
    if isinstance(call_id, str) and call_id:
        return f"{item.get('type')}:{call_id}"
    return None


def _decode(message: Dict[str, Any]) -> Optional[Any]:
    """The item of one stored message: its content parsed as JSON; a message written by
    other agentstate tools (e.g. a compaction note) becomes ``{"role", "content"}``."""
    content = message.get("content")
    if content is None:
        return None
    try:
        return json.loads(content)
    except ValueError:
        return {"role": message["role"], "content": content}


async def _settle(mutation: "asyncio.Future[_T]") -> _T:
    """Awaits a mutation (an asyncio future of the binding) so that it runs to its outcome
    even when the caller is cancelled meanwhile, then re-raises the cancellation: a cancelled
    ``add_items`` has either happened or not, and the caller knows which (the SDK's own
    sessions promise the same)."""
    try:
        return await asyncio.shield(mutation)
    except asyncio.CancelledError:
        while not mutation.done():
            try:
                await asyncio.wait({mutation})
            except asyncio.CancelledError:
                pass
        raise


class AgentStateSession:
    """An OpenAI Agents SDK session stored in agentstate.

    Args:
        session_id: the conversation's id, a str (the agentstate session
            ``<id_prefix><session_id>`` when that is 1-128 chars of ``[A-Za-z0-9._+-]``,
            else a stable digest of it).
        url: Redis URL; default ``$AGENTSTATE_REDIS_URL``, else ``redis://127.0.0.1:6379``; ``prefix``
            likewise ``$AGENTSTATE_PREFIX``, else ``as``.
        prefix: agentstate namespace prefix.
        session_settings: a ``SessionSettings`` or a dict (``{"limit": n}``), normalised as
            the SDK does; its ``limit`` is used when ``get_items`` gets none.
        partitions: the namespace's partition count.
        store: an already connected :class:`agentstate.Store` to use instead of ``url``.
        id_prefix: prepended to ``session_id`` to form the agentstate id, so several
            applications (or test cases) can share one namespace without sharing sessions;
            the agentstate ids this session makes start with it. The default, ``'oai.'``,
            keeps this framework's ids apart from every other adapter's (an OpenAI Agents
            session "X" and a LangGraph thread "X" are two sessions); give two adapters the
            same ``id_prefix`` to share one agentstate session on purpose, and ``""`` to
            read data written under the bare id (before adapters had prefixes).

    The namespace must have a spill daemon (``agentstate spill``) that has checked it against
    SQLite before sessions can be created (see docs/python.md): that is what lets a session Redis
    lost be restored instead of silently started anew.
    """

    session_settings: Optional[SessionSettings] = None

    def __init__(
        self,
        session_id: str,
        *,
        url: Optional[str] = None,
        prefix: Optional[str] = None,
        session_settings: Union[SessionSettings, Dict[str, Any], None] = None,
        partitions: int = 16,
        store: Optional[Store] = None,
        id_prefix: str = ID_PREFIX,
    ) -> None:
        _check.string("session_id", session_id)
        _check.string("id_prefix", id_prefix)
        _check.connection(url, prefix, partitions, store)
        self.session_id = session_id
        self.session_settings = (
            coerce_session_settings(session_settings)
            if session_settings is not None
            else SessionSettings()
        )
        _check.limit("session_settings.limit", self.session_settings.limit)
        self._sid = _ids.part(id_prefix + session_id)
        self._url, self._prefix = resolved(url, prefix)
        self._partitions = partitions
        self._store = store
        #: The fenced store of the run lease this session holds, which its writes go through.
        self._fenced: Optional[Store] = None
        self._closed = False
        #: The key of a failed add_items of id-less items, for its repeat.
        self._retry = _ids.RetryKeys()

    @property
    def agentstate_id(self) -> str:
        """The agentstate session id holding this conversation."""
        return self._sid

    async def _open(self) -> Store:
        if self._closed:
            raise RuntimeError(f"{type(self).__name__} is closed")
        store = self._store
        if store is None:
            store = self._store = await ashared_store(self._url, self._prefix, self._partitions)
        return store

    async def _writer(self) -> Store:
        """The store writes go through: the run lease's fenced one while it is held."""
        store = await self._open()
        return self._fenced or store

    @contextlib.asynccontextmanager
    async def run_lease(
        self, *, ttl_ms: int = 30000, wait: Optional[float] = None, owner: Optional[str] = None
    ) -> AsyncIterator[RunLease]:
        """Holds the conversation's run lease while the block runs (renewed in the
        background every third of ``ttl_ms``, released at the end), so one run at a time
        works on it across processes; the session's writes carry the lease's token meanwhile
        (``Fenced`` once another process took it over). ``Leased`` when another owner holds
        it, unless ``wait`` (seconds) lets it wait that long. Creates the agentstate session
        when it does not exist yet (a lease belongs to a session)."""
        store = await self._open()
        await _settle(self._create(store))
        async with store.run_lease(self._sid, owner, ttl_ms, wait=wait) as run:
            self._fenced = run.store
            try:
                yield run
            finally:
                self._fenced = None

    async def get_items(self, limit: Optional[int] = None) -> List[Any]:
        """The latest ``limit`` items in chronological order (all when ``limit`` and
        ``session_settings.limit`` are None; none when it is 0). One round trip.

        ``limit`` must be None or an int >= 0: a negative one raises ``ValueError`` (the
        SDK's ``SQLiteSession`` hands it to SQLite, where ``LIMIT -1`` means "no limit";
        we refuse to guess), a non-int ``TypeError``."""
        _check.limit("limit", limit)
        store = await self._open()
        if limit is None:
            limit = self.session_settings.limit if self.session_settings else None
            _check.limit("session_settings.limit", limit)  # it may have been reassigned
        if limit == 0:
            return []
        last = limit
        try:
            array = await store.acontents_array(self._sid, last=last)
        except UnknownSession:
            return []
        if array is not None:  # every content is an item's JSON: one parse of them all
            return json.loads(array)
        # A message another agentstate tool wrote (e.g. a compaction note) is no JSON.
        try:
            messages = await store.amessages(self._sid, last=last)
        except UnknownSession:
            return []
        items = []
        for m in messages:
            item = _decode(m)
            if item is not None:
                items.append(item)
        return items

    async def add_items(self, items: List[Any], *, idempotency_key: Optional[str] = None) -> None:
        """Appends the items in order (the session is created on first use).

        ``items`` must be a list (any sequence) of JSON-serializable dicts: a dict, str, set
        or generator in its place, or an item that is no dict or no JSON, raises
        ``TypeError``/``ValueError`` naming it (``items``, ``items[3]``) before anything is
        written.

        Safe to repeat after it raised (``RedisUnavailable``, ``WriteLost``, a timeout: the
        items may have been stored): the append carries an idempotency key, so a repeat
        stores nothing twice. The key is ``idempotency_key`` when given (1-128 chars of
        ``[A-Za-z0-9._@+-]``, the same for the repeat, from any process); else derived from
        the items' own ids (response items' ``id``, tool outputs' ``call_id``) and content, so
        the same model output is stored once whichever process repeats it; else (only items without
        ids, e.g. the user's input) the failed call's key, kept by this object for its
        repeat."""
        items = _check.sequence("items", items, "items (dicts)")
        if idempotency_key is not None:
            _check.string("idempotency_key", idempotency_key)
        messages = [_encode(i, item) for i, item in enumerate(items)]
        store = await self._writer()
        if not messages:
            return
        key = idempotency_key or _ids.batch_key("oai.", [_item_id(item) for item in items], messages)
        if key is None:
            key = self._retry.key(messages)
        try:
            try:
                await _settle(store.aappend_many(self._sid, messages, idempotency_key=key))
            except UnknownSession:  # first write: create the session, then append
                await _settle(self._create(store))
                await _settle(store.aappend_many(self._sid, messages, idempotency_key=key))
        except BaseException:
            self._retry.failed(messages, key)
            raise
        self._retry.succeeded()

    def _create(self, store: Store) -> "asyncio.Future[None]":
        async def create() -> None:
            try:
                await store.acreate_session(
                    self._sid,
                    metadata={"framework": "openai-agents", "session_id": self.session_id},
                )
            except AlreadyExists:
                pass  # another writer created it first

        return asyncio.ensure_future(create())

    async def pop_item(self) -> Optional[Any]:
        """Removes and returns the newest item, or None when the session is empty."""
        store = await self._writer()
        try:
            message = await _settle(store.apop_message(self._sid))
        except UnknownSession:
            return None
        return None if message is None else _decode(message)

    async def clear_session(self) -> None:
        """Deletes every item: the agentstate session is closed (Redis and SQLite)."""
        store = await self._open()
        try:
            await _settle(store.aclose_session(self._sid, True))
        except UnknownSession:
            pass

    def close(self) -> None:
        """Marks the session closed (later calls raise ``RuntimeError``); the connection pool
        is shared by the process and stays open."""
        self._closed = True

    def __repr__(self) -> str:
        return f"AgentStateSession({self.session_id!r}, prefix={self._prefix!r})"
