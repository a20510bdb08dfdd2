"""``AgentStateStore``: a LangGraph long-term memory store (``BaseStore``) on agentstate,
re-exported by :mod:`agentstate.langgraph`.

    from agentstate.langgraph import AgentStateStore

    store = AgentStateStore("redis://127.0.0.1:6379",
                            index={"dims": 1536, "embed": embed, "fields": ["text"]},
                            ttl={"default_ttl": 60 * 24})
    store.put(("users", "u1", "prefs"), "theme", {"text": "likes dark mode"})
    store.search(("users", "u1"), query="display preferences")

Each LangGraph item is one memory item of the core (``Store.put_memory``): shared by every
process on the namespace, flushed to the durable tier by the spill daemon, put back after a
Redis loss, erased by ``Store.forget_user(user)`` when the namespace's second label is that
user. The embedding runs here, in the adapter's process (``index["embed"]``, one call per
batch for the puts' texts and one per distinct query); the vectors are stored with the item,
one per indexed field path (``path.<i>`` for each text of a list, as ``InMemoryStore`` names
them), and the core ranks a search by exact cosine similarity, the best field of each item.

Reads in a batch see the store as it was before the batch's puts; the last put of a
(namespace, key) in a batch wins. Results differ from ``InMemoryStore`` where it keeps
stale state: a put with ``index=False`` (or without a field it embedded before) drops the
item's old vectors, a namespace whose last item went is no longer listed, a search without
a query lists the most recently updated first. TTLs are whole minutes (``ttl=1.5`` is
refused); ``refresh_ttl`` (default ``ttl["refresh_on_read"]``, else True) moves an item's
expiry to now + its TTL when a get or search returns it.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from datetime import datetime, timezone
from typing import Any, Dict, List, Optional, Tuple

from langgraph.store.base import (
    BaseStore,
    GetOp,
    IndexConfig,
    Item,
    ListNamespacesOp,
    Op,
    PutOp,
    Result,
    SearchItem,
    SearchOp,
    TTLConfig,
    ensure_embeddings,
    get_text_at_path,
    tokenize_path,
    validate_op_namespace,
)

from . import _check
from ._agentstate import Store, resolved
from ._shared import ashared_store, shared_store

__all__ = ["AgentStateStore"]

ALL = 2**63 - 1
"""A limit that admits every item (the core's 0 means its default page)."""


def _when(ms: int) -> datetime:
    return datetime.fromtimestamp(ms / 1000, tz=timezone.utc)


def _minutes(name: str, ttl: Any) -> Optional[int]:
    """A TTL in LangGraph's minutes as the core's whole minutes (None: no expiry)."""
    if ttl is None:
        return None
    if isinstance(ttl, bool) or not isinstance(ttl, (int, float)) or not math.isfinite(ttl):
        raise _check.type_error(name, "a number of minutes or None", ttl)
    if ttl <= 0 or ttl != int(ttl):
        raise ValueError(
            f"{name} must be a positive whole number of minutes (the store keeps TTLs in "
            f"minutes), got {ttl!r}: round it to whole minutes"
        )
    return int(ttl)


def _contains(value: Any, wanted: Any) -> bool:
    """LangGraph's nested filter match: a dict matches when each of its fields does."""
    if isinstance(wanted, dict):
        return isinstance(value, dict) and all(_contains(value.get(k), v) for k, v in wanted.items())
    return value == wanted


def _split_filter(flt: Optional[Dict[str, Any]]) -> Tuple[Dict[str, Any], Dict[str, Any]]:
    """The conditions the core evaluates (top-level fields: a value or ``$`` operators) and
    the nested-dict ones (a sub-dict must be contained) evaluated here."""
    core, nested = {}, {}
    for field, want in (flt or {}).items():
        if isinstance(want, dict) and not any(str(k).startswith("$") for k in want):
            nested[field] = want
        else:
            core[field] = want
    return core, nested


def _search_item(d: Dict[str, Any]) -> SearchItem:
    return SearchItem(
        namespace=d["namespace"],
        key=d["key"],
        value=d["value"],
        created_at=_when(d["created_at"]),
        updated_at=_when(d["updated_at"]),
        score=d["score"],
    )


def _item(d: Optional[Dict[str, Any]]) -> Optional[Item]:
    if d is None:
        return None
    return Item(
        namespace=d["namespace"],
        key=d["key"],
        value=d["value"],
        created_at=_when(d["created_at"]),
        updated_at=_when(d["updated_at"]),
    )


def _listing(op: ListNamespacesOp) -> Dict[str, Any]:
    """The core's arguments for a namespace listing (one prefix and one suffix condition:
    several of a kind must all hold, which is the longest of them only when they agree,
    so a second one is refused)."""
    args: Dict[str, Any] = {"max_depth": op.max_depth, "limit": op.limit, "offset": op.offset}
    for cond in op.match_conditions or ():
        if cond.match_type not in ("prefix", "suffix"):
            raise ValueError(f"unsupported match type {cond.match_type!r}: use prefix or suffix")
        if cond.match_type in args:
            raise ValueError(f"list_namespaces takes one {cond.match_type} condition")
        args[cond.match_type] = tuple(cond.path)
    return args


class AgentStateStore(BaseStore):
    """LangGraph's ``BaseStore`` on agentstate (module docs above).

    Args:
        url: the Redis URL (default ``AGENTSTATE_REDIS_URL``, else redis://127.0.0.1:6379).
        prefix: the agentstate key prefix (default ``AGENTSTATE_PREFIX``, else ``as``).
        index: LangGraph's ``IndexConfig`` (``dims``, ``embed``, ``fields``, default
            ``["$"]``): the fields embedded on put and the query embedded on search.
        ttl: LangGraph's ``TTLConfig``: ``default_ttl`` (whole minutes) for puts that name
            none, ``refresh_on_read`` (default True) for reads that name none.
        partitions: the namespace's partition count (16).
        store: an already connected :class:`agentstate.Store` to use instead of ``url``.
    """

    supports_ttl = True

    def __init__(
        self,
        url: Optional[str] = None,
        *,
        prefix: Optional[str] = None,
        index: Optional[IndexConfig] = None,
        ttl: Optional[TTLConfig] = None,
        partitions: int = 16,
        store: Optional[Store] = None,
    ) -> None:
        _check.connection(url, prefix, partitions, store)
        if ttl is not None:
            _check.mapping("ttl", ttl)
            _minutes("ttl['default_ttl']", ttl.get("default_ttl"))
        self.ttl_config = dict(ttl) if ttl is not None else None
        self.index_config: Optional[Dict[str, Any]] = None
        self.embeddings = None
        self._fields: List[Tuple[str, Any]] = []
        if index is not None:
            _check.mapping("index", index)
            if "embed" not in index:
                raise ValueError("index needs 'embed': the embeddings or function for its texts")
            self.index_config = dict(index)
            self.embeddings = ensure_embeddings(index["embed"])
            self._fields = [
                (p, p if p == "$" else tokenize_path(p)) for p in (index.get("fields") or ["$"])
            ]
        self._url, self._prefix = resolved(url, prefix)
        self._partitions = partitions
        self._store = store

    # -- connection ---------------------------------------------------------------------

    def _sync(self) -> Store:
        if self._store is None:
            self._store = shared_store(self._url, self._prefix, self._partitions)
        return self._store

    async def _async(self) -> Store:
        if self._store is None:
            self._store = await ashared_store(self._url, self._prefix, self._partitions)
        return self._store

    # -- what a batch does, shared by batch and abatch -----------------------------------

    def _checked(self, ops: Iterable[Op]) -> Tuple[List[Op], Dict[Tuple[Tuple[str, ...], str], PutOp]]:
        """The ops, each checked, and the puts that take effect (the last per item)."""
        ops = list(ops)
        puts: Dict[Tuple[Tuple[str, ...], str], PutOp] = {}
        for op in ops:
            if not isinstance(op, (GetOp, SearchOp, ListNamespacesOp, PutOp)):
                raise ValueError(f"Unknown operation type: {type(op)}")
            validate_op_namespace(op)
            if isinstance(op, SearchOp):
                _check.count("limit", op.limit)
                _check.count("offset", op.offset)
            elif isinstance(op, ListNamespacesOp):
                _check.count("limit", op.limit)
                _check.count("offset", op.offset)
                _listing(op)
            elif isinstance(op, PutOp):
                if op.value is not None:
                    _check.mapping("value", op.value)
                    _minutes("ttl", op.ttl)
                puts[(tuple(op.namespace), op.key)] = op
        return ops, puts

    def _queries(self, ops: List[Op]) -> List[str]:
        """The distinct query texts to embed."""
        if self.embeddings is None:
            return []
        return sorted({op.query for op in ops if isinstance(op, SearchOp) and op.query})

    def _texts(self, puts: Dict[Any, PutOp]) -> List[Tuple[Tuple[Tuple[str, ...], str], str, str]]:
        """(item, field path, text) for every text the puts index."""
        if self.embeddings is None:
            return []
        out = []
        for item, op in puts.items():
            if op.value is None or op.index is False:
                continue
            paths = self._fields if op.index is None else [(p, tokenize_path(p)) for p in op.index]
            for path, field in paths:
                texts = get_text_at_path(op.value, field)
                if len(texts) > 1:
                    out.extend((item, f"{path}.{i}", t) for i, t in enumerate(texts))
                elif texts:
                    out.append((item, path, texts[0]))
        return out

    @staticmethod
    def _vectors(texts: List[Tuple[Any, str, str]], embedded: List[List[float]]) -> Dict[Any, Dict[str, List[float]]]:
        if len(embedded) != len(texts):
            raise ValueError(
                f"the embedding function returned {len(embedded)} vectors for {len(texts)} texts"
            )
        out: Dict[Any, Dict[str, List[float]]] = {}
        for (item, path, _), vector in zip(texts, embedded):
            out.setdefault(item, {})[path] = list(vector)
        return out

    def _search_args(self, op: SearchOp, queries: Dict[str, List[float]]) -> Tuple[Dict[str, Any], Dict[str, Any]]:
        """The core's search arguments, and the nested conditions checked here (with which
        the core returns every match and the page is cut here)."""
        core, nested = _split_filter(op.filter)
        args = {
            "prefix": tuple(op.namespace_prefix),
            "filter": core,
            "query": queries.get(op.query) if op.query else None,
            "limit": ALL if nested else op.limit,
            "offset": 0 if nested else op.offset,
            "refresh_ttl": op.refresh_ttl,
        }
        return args, nested

    @staticmethod
    def _page(op: SearchOp, found: List[Dict[str, Any]], nested: Dict[str, Any]) -> List[SearchItem]:
        if nested:
            found = [d for d in found if all(_contains(d["value"].get(k), v) for k, v in nested.items())]
            found = found[op.offset : op.offset + op.limit]
        return [_search_item(d) for d in found]

    def _put_args(self, op: PutOp, vectors: Dict[str, List[float]]) -> Dict[str, Any]:
        return {"vectors": vectors or None, "ttl_minutes": _minutes("ttl", op.ttl)}

    # -- BaseStore ------------------------------------------------------------------------

    def batch(self, ops: Iterable[Op]) -> List[Result]:
        ops, puts = self._checked(ops)
        store = self._sync()
        queries = self._queries(ops)
        qv = dict(zip(queries, map(self.embeddings.embed_query, queries))) if queries else {}
        results: List[Result] = []
        for op in ops:
            if isinstance(op, GetOp):
                d = store.get_memory(op.namespace, op.key, refresh_ttl=op.refresh_ttl)
                results.append(_item(d))
            elif isinstance(op, SearchOp):
                if op.limit == 0:
                    results.append([])
                    continue
                args, nested = self._search_args(op, qv)
                results.append(self._page(op, store.search_memory(**args), nested))
            elif isinstance(op, ListNamespacesOp):
                results.append(store.list_memory_namespaces(**_listing(op)) if op.limit else [])
            else:
                results.append(None)
        texts = self._texts(puts)
        vectors = self._vectors(texts, self.embeddings.embed_documents([t for _, _, t in texts])) if texts else {}
        for item, op in puts.items():
            if op.value is None:
                store.delete_memory(op.namespace, op.key)
            else:
                store.put_memory(op.namespace, op.key, dict(op.value), **self._put_args(op, vectors.get(item, {})))
        return results

    async def abatch(self, ops: Iterable[Op]) -> List[Result]:
        ops, puts = self._checked(ops)
        store = await self._async()
        queries = self._queries(ops)
        qv = {}
        for q in queries:
            qv[q] = await self.embeddings.aembed_query(q)
        results: List[Result] = []
        for op in ops:
            if isinstance(op, GetOp):
                d = await store.aget_memory(op.namespace, op.key, refresh_ttl=op.refresh_ttl)
                results.append(_item(d))
            elif isinstance(op, SearchOp):
                if op.limit == 0:
                    results.append([])
                    continue
                args, nested = self._search_args(op, qv)
                results.append(self._page(op, await store.asearch_memory(**args), nested))
            elif isinstance(op, ListNamespacesOp):
                results.append(await store.alist_memory_namespaces(**_listing(op)) if op.limit else [])
            else:
                results.append(None)
        texts = self._texts(puts)
        vectors = {}
        if texts:
            vectors = self._vectors(texts, await self.embeddings.aembed_documents([t for _, _, t in texts]))
        for item, op in puts.items():
            if op.value is None:
                await store.adelete_memory(op.namespace, op.key)
            else:
                await store.aput_memory(op.namespace, op.key, dict(op.value), **self._put_args(op, vectors.get(item, {})))
        return results
