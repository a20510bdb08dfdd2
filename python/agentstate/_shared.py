"""One connected :class:`~agentstate.Store` per (url, prefix, partitions) in the process, so
every adapter object (a session per conversation) shares one connection pool. ``url`` and
``prefix`` left as None resolve as ``Store``'s do (``AGENTSTATE_REDIS_URL``,
``AGENTSTATE_PREFIX``, then the defaults)."""

from __future__ import annotations

import os
import threading
from typing import Dict, Optional, Tuple

from ._agentstate import Store, resolved

_Key = Tuple[str, str, int]
_stores: Dict[_Key, Store] = {}
_lock = threading.Lock()


def _after_fork_in_child() -> None:
    # Another thread may have held the lock (connecting) when the process forked; in the
    # child that thread is gone and the lock would stay held. The cached stores stay: a
    # Store reconnects by itself in a forked child.
    global _lock
    _lock = threading.Lock()


os.register_at_fork(after_in_child=_after_fork_in_child)


def shared_store(
    url: Optional[str] = None, prefix: Optional[str] = None, partitions: int = 16
) -> Store:
    """The process-wide store for this namespace, connecting (blocking) on first use. The
    store gets the arguments as given, so it reads the environment itself and blames a bad
    ``AGENTSTATE_REDIS_URL`` on the variable, not on an argument nobody passed."""
    key = (*resolved(url, prefix), partitions)
    with _lock:
        store = _stores.get(key)
        if store is None:
            store = Store(url, prefix=prefix, partitions=partitions)
            _stores[key] = store
        return store


async def ashared_store(
    url: Optional[str] = None, prefix: Optional[str] = None, partitions: int = 16
) -> Store:
    """Like :func:`shared_store`, but connects without blocking the event loop."""
    key = (*resolved(url, prefix), partitions)
    store = _stores.get(key)
    if store is not None:
        return store
    store = await Store.aconnect(url, prefix=prefix, partitions=partitions)
    with _lock:
        # Two tasks may have connected at once: keep the first, drop ours.
        return _stores.setdefault(key, store)


def _forget_all() -> None:
    """Drops the cached stores (tests that restart Redis on the same URL use it)."""
    with _lock:
        _stores.clear()


__all__ = ["shared_store", "ashared_store"]

