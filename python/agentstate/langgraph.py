"""``AgentStateSaver``: a LangGraph checkpointer (``BaseCheckpointSaver``) on agentstate; the
long-term memory store ``AgentStateStore`` (``BaseStore``) is re-exported from
:mod:`agentstate._langgraph_store`.

Runs on plain Redis (no RedisJSON or RediSearch) and on Redis Cluster; every checkpoint is
flushed to SQLite by the spill daemon and a thread Redis lost is restored from it.

    from langgraph.graph import StateGraph
    from agentstate.langgraph import AgentStateSaver

    saver = AgentStateSaver("redis://127.0.0.1:6379")
    graph = builder.compile(checkpointer=saver)
    graph.invoke({"messages": []}, {"configurable": {"thread_id": "t-1"}})

The storage is the core's per-thread checkpoint log (``Store.graph_*``): a LangGraph thread
is one agentstate session (its id mapped by :func:`agentstate._ids.part`, after the
``id_prefix``), holding every namespace's checkpoints (id, parent, metadata), the channel
blobs they reference (one per channel version) and the pending writes, all in one hash slot.
This module only converts between LangGraph's objects and the core's strings: each method is
one binding call (one script: a put is one round trip, ``get_tuple`` one, a ``list`` page one).

Values (channel blobs and pending writes) are stored as ``"<type>:<payload>"`` strings: plain
JSON values (dict/list/str/int/finite float/bool/None, nothing else) as ``json:<json text>``
so they read well in ``redis-cli`` and ``sqlite3``, anything else as the serializer's
``(type, bytes)`` with the bytes in base64 (``msgpack:...``). The JSON shortcut is taken only
with LangGraph's default ``JsonPlusSerializer``: with any other ``serde`` (e.g. an
``EncryptedSerializer``) every value goes through it. A channel listed in ``new_versions``
without a value is stored as ``empty:`` and skipped on load, as the Postgres saver does.

Arguments are checked before anything is read or written: a config without a
``configurable`` dict or a ``thread_id`` (a str, int or UUID; never None, whose ``str`` would
be a thread called ``"None"``), ``writes`` that are no list of ``(channel, value)`` pairs (a
dict's keys would be unpacked into pairs), ``run_ids``/``thread_ids`` given as one str (its
characters would be the ids) or a ``limit`` that is no int raise ``TypeError``/``ValueError``
naming the argument. ``list(limit=n)`` takes None (all) or n >= 0 (0: none); a negative limit
raises ``ValueError`` (LangGraph's in-memory saver reads it as "none", SQLite's ``LIMIT -1`` as
"all": we refuse to pick one).
"""

from __future__ import annotations

import base64
import gc
import hashlib
import itertools
import json
import json.scanner
import os
import time
from collections.abc import AsyncIterator, Callable, Iterator, Sequence
from typing import Any, Dict, List, Optional, Tuple

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import (
    WRITES_IDX_MAP,
    BaseCheckpointSaver,
    ChannelVersions,
    Checkpoint,
    CheckpointMetadata,
    CheckpointTuple,
    get_checkpoint_id,
    get_serializable_checkpoint_metadata,
)
from langgraph.checkpoint.serde.base import SerializerProtocol
from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer

from . import _check, _ids
from ._agentstate import Store, plain_json, resolved
from ._langgraph_store import AgentStateStore
from ._shared import ashared_store, shared_store

__all__ = ["AgentStateSaver", "AgentStateStore"]


EMPTY = "empty:"
"""The stored value of a channel versioned without a value (skipped on load)."""

TYPED = "$agentstate.typed"
"""Key of the one-key object standing in for a checkpoint or metadata value that is not
plain JSON: ``{TYPED: "<type>:<base64>"}``."""

FIRST_PAGE = 100
MAX_PAGE = 1000
"""``list`` without a limit reads a first page of 100 checkpoints (callers often stop after
the first few), then pages of 1000."""

_decode_json = json.JSONDecoder().decode
_scan_json = json.scanner.make_scanner(json.JSONDecoder())
"""The C scanner behind ``json.loads``, called at an index: decodes a stored ``json:<text>``
without slicing off the prefix or the whitespace regex matches ``decode`` adds per value
(a third of a ``list``'s decoding)."""

_version_seq = itertools.count()
_version_nonce = f"{os.getpid()}.{time.time_ns()}"


def _new_version_nonce() -> None:
    # Forked children would otherwise share the parent's nonce and counter, and so draw the
    # same version tie-breakers (LangGraph's own, from `random`, is reseeded at a fork).
    global _version_nonce
    _version_nonce = f"{os.getpid()}.{time.time_ns()}"


os.register_at_fork(after_in_child=_new_version_nonce)


#: The default ``id_prefix``: LangGraph threads in an id space of their own.
ID_PREFIX = "lg."


class AgentStateSaver(BaseCheckpointSaver[str]):
    """A LangGraph checkpoint saver storing threads in agentstate (sync and async methods).

    Args:
        url: Redis URL; default ``$AGENTSTATE_REDIS_URL``, else ``redis://127.0.0.1:6379``; ``prefix``
            likewise ``$AGENTSTATE_PREFIX``, else ``as``
            (a cluster URL works too: a thread lives in one hash slot).
        prefix: agentstate namespace prefix.
        id_prefix: prepended to every LangGraph ``thread_id`` to form the agentstate session
            id, so several applications (or test cases) share a namespace without sharing
            threads; the agentstate ids this saver makes start with it. The default, ``'lg.'``,
            keeps this framework's ids apart from every other adapter's (an OpenAI Agents
            session "X" and a LangGraph thread "X" are two sessions); give two adapters the
            same ``id_prefix`` to share one agentstate session on purpose, and ``""`` to
            read data written under the bare id (before adapters had prefixes).
            ``delete_for_runs`` acts on the whole namespace.
        serde: LangGraph serializer (default ``JsonPlusSerializer``).
        partitions: the namespace's partition count.
        store: an already connected :class:`agentstate.Store` to use instead of ``url``.

    The namespace must have a spill daemon (``agentstate spill``) that has checked it against
    SQLite before threads can be created (see docs/python.md): that is what lets a thread Redis
    lost be restored instead of silently started anew.
    """

    def __init__(
        self,
        url: Optional[str] = None,
        *,
        prefix: Optional[str] = None,
        id_prefix: str = ID_PREFIX,
        serde: Optional[SerializerProtocol] = None,
        partitions: int = 16,
        store: Optional[Store] = None,
    ) -> None:
        _check.string("id_prefix", id_prefix)
        _check.connection(url, prefix, partitions, store)
        super().__init__(serde=serde)
        self._url, self._prefix = resolved(url, prefix)
        self._id_prefix = id_prefix
        self._partitions = partitions
        self._store = store

    # -- connection and ids -------------------------------------------------------------

    def _sync(self) -> Store:
        if self._store is None:
            self._store = shared_store(self._url, self._prefix, self._partitions)
        return self._store

    async def _async(self) -> Store:
        if self._store is None:
            self._store = await ashared_store(self._url, self._prefix, self._partitions)
        return self._store

    def _thread(self, name: str, thread_id: Any) -> str:
        return _ids.part(self._id_prefix + str(_check.thread_id(name, thread_id)))

    def _threads(self, thread_ids: Any) -> List[str]:
        """The session ids of ``prune``'s threads, every one checked before the first prune."""
        ids = _check.collection("thread_ids", thread_ids, "thread ids")
        return [self._thread(f"thread_ids[{i}]", t) for i, t in enumerate(ids)]

    def agentstate_id(self, thread_id: Any) -> str:
        """The agentstate session id holding a LangGraph thread (a str, int or UUID)."""
        return self._thread("thread_id", thread_id)

    @staticmethod
    def _conf(config: Any, name: str = "config", thread: bool = True) -> Dict[str, Any]:
        """``config["configurable"]``, checked: a dict with a ``thread_id`` (str, int or UUID;
        unless ``thread`` is False, as for ``list``'s ``before``), ``checkpoint_ns`` and
        ``checkpoint_id`` str or None when present."""
        _check.mapping(name, config)
        conf = config.get("configurable")
        where = f'{name}["configurable"]'
        if conf is None:
            raise ValueError(f"{where} is missing: LangGraph's config holds its ids there")
        _check.mapping(where, conf)
        if thread:
            if conf.get("thread_id") is None:
                raise ValueError(f'{where}["thread_id"] is missing')
            _check.thread_id(f'{where}["thread_id"]', conf["thread_id"])
        _check.optional_string(f'{where}["checkpoint_ns"]', conf.get("checkpoint_ns"))
        _check.optional_string(f'{where}["checkpoint_id"]', conf.get("checkpoint_id"))
        return conf  # type: ignore[return-value]

    # -- values ---------------------------------------------------------------------------

    def _dumps(self, value: Any) -> str:
        """The stored string of a channel value or a pending write."""
        if type(self.serde) is JsonPlusSerializer:
            text = plain_json(value)
            if text is not None:
                return "json:" + text
        kind, data = self.serde.dumps_typed(value)
        if kind == "json":  # ours is "json:<text>"; the serializer's own JSON is bytes
            kind = "serde-json"
        return f"{kind}:{base64.b64encode(data).decode('ascii')}"

    def _loads(self, stored: str) -> Any:
        if stored.startswith("json:"):
            try:
                value, end = _scan_json(stored, 5)
                if end == len(stored):
                    return value
            except StopIteration:
                pass
            return _decode_json(stored[5:])  # what json.loads does: whitespace, the error
        kind, _, payload = stored.partition(":")
        if kind == "serde-json":
            kind = "json"
        return self.serde.loads_typed((kind, base64.b64decode(payload)))

    def _dump_doc(self, value: Any) -> Any:
        """A JSON value for the core: ``value`` itself when plain, else wrapped."""
        if plain_json(value) is not None:
            return value
        kind, data = self.serde.dumps_typed(value)
        return {TYPED: f"{kind}:{base64.b64encode(data).decode('ascii')}"}

    def _load_doc(self, value: Any) -> Any:
        if type(value) is dict and len(value) == 1 and TYPED in value:
            kind, _, payload = value[TYPED].partition(":")
            return self.serde.loads_typed((kind, base64.b64decode(payload)))
        return value

    def _dump_metadata(self, metadata: Dict[str, Any]) -> Dict[str, Any]:
        """Metadata key by key, so that ``list(filter=...)`` compares top-level values."""
        return {k: self._dump_doc(v) for k, v in metadata.items()}

    # -- converting the core's records ----------------------------------------------------

    def _tuple(self, thread_id: Any, record: Dict[str, Any]) -> CheckpointTuple:
        """The CheckpointTuple of a record of the binding's (a fresh dict: its checkpoint
        and metadata dicts are completed in place rather than copied). Only a dict holding
        the ``TYPED`` key can be a wrapped value (``_load_doc``), and the tuple is built
        positionally: a tenth of a list's ``_tuple`` time went to calls and keywords."""
        ns = record["ns"]
        loads = self._loads
        checkpoint = record["checkpoint"]
        if TYPED in checkpoint:
            checkpoint = self._load_doc(checkpoint)
        checkpoint["channel_values"] = {ch: loads(v) for ch, v in record["values"].items() if v != EMPTY}
        metadata = record["metadata"]
        for k, v in metadata.items():
            if type(v) is dict and TYPED in v:
                metadata[k] = self._load_doc(v)
        parent = record["parent"]
        return CheckpointTuple(
            {"configurable": {"thread_id": thread_id, "checkpoint_ns": ns, "checkpoint_id": record["id"]}},
            checkpoint,  # type: ignore[arg-type]
            metadata,  # type: ignore[arg-type]
            {"configurable": {"thread_id": thread_id, "checkpoint_ns": ns, "checkpoint_id": parent}} if parent else None,
            [(task, channel, loads(value)) for task, channel, value in record["writes"]],
        )

    def _tuples(self, thread_id: Any, read: Callable[[], List[Dict[str, Any]]]) -> List[CheckpointTuple]:
        """The tuples of the page ``read()`` returns, read and built with the cyclic GC paused
        (when it was running): a page is thousands of new dicts, lists and tuples, which set
        off a generation-0 collection every 700 allocations; none of them forms a cycle. The
        sync ``list`` reads (the binding call) inside the pause, so the binding's records are
        freed before the GC runs again and the first collection after it scans only the
        tuples: pausing around the building alone let a collection run between the binding's
        conversion and ours, scanning every record too (callgrind, a 500-checkpoint list:
        the GC's instructions 12 % of the list's -> 3 %). Other threads may run while the
        call waits for Redis, with the GC paused for those milliseconds. The async ``alist``
        awaits outside the pause (other tasks run then) and passes the page it got. Built
        before the first is yielded, so no caller code runs while the GC is paused."""
        running = gc.isenabled()
        if running:
            gc.disable()
        try:
            return [self._tuple(thread_id, record) for record in read()]
        finally:
            if running:
                gc.enable()

    def _put_args(
        self,
        config: RunnableConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> Tuple[tuple, RunnableConfig]:
        conf = self._conf(config)
        _check.mapping("checkpoint", checkpoint)
        _check.string('checkpoint["id"]', checkpoint.get("id"))
        _check.mapping('checkpoint["channel_values"]', checkpoint.get("channel_values"))
        _check.mapping('checkpoint["channel_versions"]', checkpoint.get("channel_versions"))
        _check.mapping("metadata", metadata)
        _check.mapping("new_versions", new_versions)
        thread_id = conf["thread_id"]
        ns = conf.get("checkpoint_ns") or ""
        values = checkpoint["channel_values"]
        doc = self._dump_doc({k: v for k, v in checkpoint.items() if k != "channel_values"})
        md = get_serializable_checkpoint_metadata(config, metadata)
        if md.get("run_id") is not None and not isinstance(md["run_id"], str):
            md["run_id"] = str(md["run_id"])  # the core indexes a str run_id (delete_for_runs)
        args = (
            self.agentstate_id(thread_id),
            ns,
            checkpoint["id"],
            conf.get("checkpoint_id"),
            doc,
            self._dump_metadata(md),  # type: ignore[arg-type]
            [(ch, str(v)) for ch, v in checkpoint["channel_versions"].items()],
            [
                (ch, str(v), self._dumps(values[ch]) if ch in values else EMPTY)
                for ch, v in new_versions.items()
            ],
        )
        stored: RunnableConfig = {
            "configurable": {"thread_id": thread_id, "checkpoint_ns": ns, "checkpoint_id": checkpoint["id"]}
        }
        return args, stored

    def _writes_args(
        self, config: RunnableConfig, writes: Sequence[Tuple[str, Any]], task_id: str, task_path: str
    ) -> tuple:
        conf = self._conf(config)
        if conf.get("checkpoint_id") is None:
            raise ValueError('config["configurable"]["checkpoint_id"] is missing: writes belong to a checkpoint')
        pairs = _check.sequence("writes", writes, "(channel, value) pairs")
        for i, pair in enumerate(pairs):
            if not isinstance(pair, (tuple, list)) or len(pair) != 2:
                raise _check.type_error(f"writes[{i}]", "a (channel, value) pair", pair)
            _check.string(f"writes[{i}][0] (the channel)", pair[0])
        _check.string("task_id", task_id)
        _check.string("task_path", task_path)
        return (
            self.agentstate_id(conf["thread_id"]),
            conf.get("checkpoint_ns") or "",
            conf["checkpoint_id"],
            task_id,
            task_path,
            [(WRITES_IDX_MAP.get(ch, idx), ch, self._dumps(v)) for idx, (ch, v) in enumerate(pairs)],
        )

    def _list_query(
        self, config: Optional[RunnableConfig], filter: Optional[Dict[str, Any]], before: Optional[RunnableConfig]
    ) -> Tuple[Any, str, Optional[str], Optional[str], Optional[Dict[str, Any]], Optional[str]]:
        if config is None:
            raise ValueError("AgentStateSaver.list needs a config with a thread_id (listing every thread is not supported)")
        conf = self._conf(config)
        if filter is not None:
            _check.mapping("filter", filter)
        if before is not None:
            self._conf(before, "before", thread=False)
        thread_id = conf["thread_id"]
        return (
            thread_id,
            self.agentstate_id(thread_id),
            conf.get("checkpoint_ns"),
            get_checkpoint_id(config),
            self._dump_metadata(filter) if filter else None,
            get_checkpoint_id(before) if before else None,
        )

    @staticmethod
    def _matches_one(record: Optional[Dict[str, Any]], flt: Optional[Dict[str, Any]], before: Optional[str]) -> bool:
        """``list`` of a config naming one checkpoint: that checkpoint, if it passes the
        filter and ``before`` (what the core's ``graph_list`` applies to a page)."""
        if record is None or (before is not None and record["id"] >= before):
            return False
        md = record["metadata"]
        return not flt or all(k in md and md[k] == v for k, v in flt.items())

    @staticmethod
    def _page_sizes(limit: Optional[int]) -> Iterator[int]:
        if limit is not None:
            yield limit
            return
        yield FIRST_PAGE
        while True:
            yield MAX_PAGE

    # -- sync API -------------------------------------------------------------------------

    def get_tuple(self, config: RunnableConfig) -> Optional[CheckpointTuple]:
        """The checkpoint ``config`` names (its ``checkpoint_id``, else the newest of its
        namespace) with its pending writes in ``writes_sort_key`` order; one round trip."""
        conf = self._conf(config)
        record = self._sync().graph_get(
            self.agentstate_id(conf["thread_id"]), conf.get("checkpoint_ns") or "", get_checkpoint_id(config)
        )
        return None if record is None else self._tuple(conf["thread_id"], record)

    def list(
        self,
        config: Optional[RunnableConfig],
        *,
        filter: Optional[Dict[str, Any]] = None,
        before: Optional[RunnableConfig] = None,
        limit: Optional[int] = None,
    ) -> Iterator[CheckpointTuple]:
        """The thread's checkpoints, newest first (one namespace when ``config`` has a
        ``checkpoint_ns``, else all), read a page per round trip."""
        thread_id, sid, ns, one, flt, before_id = self._list_query(config, filter, before)
        if _check.limit("limit", limit) == 0:
            return
        store = self._sync()
        if one is not None:
            record = store.graph_get(sid, ns or "", one)
            if self._matches_one(record, flt, before_id):
                yield self._tuple(thread_id, record)  # type: ignore[arg-type]
            return
        for size in self._page_sizes(limit):
            page = self._tuples(thread_id, lambda: store.graph_list(sid, ns, before_id, flt, size))
            for t in page:
                yield t
            if len(page) < size or limit is not None:
                return
            before_id = page[-1].config["configurable"]["checkpoint_id"]

    def put(
        self,
        config: RunnableConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> RunnableConfig:
        """Stores a checkpoint, its metadata and its new channel blobs: one round trip."""
        args, stored = self._put_args(config, checkpoint, metadata, new_versions)
        self._sync().graph_put(*args)
        return stored

    def put_writes(
        self, config: RunnableConfig, writes: Sequence[Tuple[str, Any]], task_id: str, task_path: str = ""
    ) -> None:
        """Stores a task's pending writes for the checkpoint ``config`` names: a repeated
        ``(task_id, idx)`` is kept as first written, special writes (errors, interrupts)
        overwrite."""
        self._sync().graph_put_writes(*self._writes_args(config, writes, task_id, task_path))

    def delete_thread(self, thread_id: str) -> None:
        """Deletes every checkpoint, blob and write of the thread (Redis and SQLite)."""
        self._sync().graph_delete(self._thread("thread_id", thread_id))

    def delete_for_runs(self, run_ids: Sequence[str]) -> None:
        """Deletes the checkpoints (and their writes) whose metadata ``run_id`` is listed,
        in every thread of the namespace."""
        runs = _run_ids(run_ids)
        if runs:
            self._sync().graph_delete_runs(runs)

    def copy_thread(self, source_thread_id: str, target_thread_id: str) -> None:
        """Copies every checkpoint, blob and write of a thread (all namespaces) to another."""
        source, target = self._thread("source_thread_id", source_thread_id), self._thread("target_thread_id", target_thread_id)
        self._sync().graph_copy(source, target)

    def prune(self, thread_ids: Sequence[str], *, strategy: str = "keep_latest") -> None:
        """``keep_latest``: keeps each namespace's newest checkpoint (with its writes and the
        blobs it references); ``delete``: drops every checkpoint. One call per thread."""
        keep = _keep_latest(strategy)
        sids = self._threads(thread_ids)
        store = self._sync()
        for sid in sids:
            store.graph_prune(sid, keep)

    # -- async API ------------------------------------------------------------------------

    async def aget_tuple(self, config: RunnableConfig) -> Optional[CheckpointTuple]:
        """Async :meth:`get_tuple`."""
        conf = self._conf(config)
        store = await self._async()
        record = await store.agraph_get(
            self.agentstate_id(conf["thread_id"]), conf.get("checkpoint_ns") or "", get_checkpoint_id(config)
        )
        return None if record is None else self._tuple(conf["thread_id"], record)

    async def alist(
        self,
        config: Optional[RunnableConfig],
        *,
        filter: Optional[Dict[str, Any]] = None,
        before: Optional[RunnableConfig] = None,
        limit: Optional[int] = None,
    ) -> AsyncIterator[CheckpointTuple]:
        """Async :meth:`list`."""
        thread_id, sid, ns, one, flt, before_id = self._list_query(config, filter, before)
        if _check.limit("limit", limit) == 0:
            return
        store = await self._async()
        if one is not None:
            record = await store.agraph_get(sid, ns or "", one)
            if self._matches_one(record, flt, before_id):
                yield self._tuple(thread_id, record)  # type: ignore[arg-type]
            return
        for size in self._page_sizes(limit):
            records = await store.agraph_list(sid, ns, before_id, flt, size)
            page = self._tuples(thread_id, lambda: records)
            for t in page:
                yield t
            if len(page) < size or limit is not None:
                return
            before_id = page[-1].config["configurable"]["checkpoint_id"]

    async def aput(
        self,
        config: RunnableConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> RunnableConfig:
        """Async :meth:`put`."""
        args, stored = self._put_args(config, checkpoint, metadata, new_versions)
        store = await self._async()
        await store.agraph_put(*args)
        return stored

    async def aput_writes(
        self, config: RunnableConfig, writes: Sequence[Tuple[str, Any]], task_id: str, task_path: str = ""
    ) -> None:
        """Async :meth:`put_writes`."""
        store = await self._async()
        await store.agraph_put_writes(*self._writes_args(config, writes, task_id, task_path))

    async def adelete_thread(self, thread_id: str) -> None:
        """Async :meth:`delete_thread`."""
        store = await self._async()
        await store.agraph_delete(self._thread("thread_id", thread_id))

    async def adelete_for_runs(self, run_ids: Sequence[str]) -> None:
        """Async :meth:`delete_for_runs`."""
        runs = _run_ids(run_ids)
        if runs:
            store = await self._async()
            await store.agraph_delete_runs(runs)

    async def acopy_thread(self, source_thread_id: str, target_thread_id: str) -> None:
        """Async :meth:`copy_thread`."""
        source, target = self._thread("source_thread_id", source_thread_id), self._thread("target_thread_id", target_thread_id)
        store = await self._async()
        await store.agraph_copy(source, target)

    async def aprune(self, thread_ids: Sequence[str], *, strategy: str = "keep_latest") -> None:
        """Async :meth:`prune`."""
        keep = _keep_latest(strategy)
        sids = self._threads(thread_ids)
        store = await self._async()
        for sid in sids:
            await store.agraph_prune(sid, keep)

    # -- versions -------------------------------------------------------------------------

    def get_next_version(self, current: Optional[str], channel: None = None) -> str:
        """The in-memory saver's version scheme, ``f"{n:032}.{h:016}"``: ``n`` counts up,
        ``h`` tells apart versions ``n`` written on different branches of a thread (time
        travel: a fork from an older checkpoint reuses its counter, and its blobs must not
        collide with the newer branch's). ``h`` comes from a process nonce and a counter,
        not from ``random`` or ``uuid4``, which tests patch."""
        if current is None:
            current_v = 0
        elif isinstance(current, int):
            current_v = current
        else:
            current_v = int(str(current).split(".")[0])
        digest = hashlib.blake2b(f"{_version_nonce}.{next(_version_seq)}".encode(), digest_size=8).digest()
        h = int.from_bytes(digest[:7], "big") / float(1 << 56)
        return f"{current_v + 1:032}.{h:016}"

    def __repr__(self) -> str:
        return f"AgentStateSaver(prefix={self._prefix!r}, id_prefix={self._id_prefix!r})"


def _run_ids(run_ids: Any) -> List[str]:
    ids = _check.collection("run_ids", run_ids, "run ids")
    return [_check.run_id(f"run_ids[{i}]", r) for i, r in enumerate(ids)]


def _keep_latest(strategy: str) -> bool:
    if strategy not in ("keep_latest", "delete"):
        raise ValueError(f"unknown prune strategy {strategy!r} (expected 'keep_latest' or 'delete')")
    return strategy == "keep_latest"
