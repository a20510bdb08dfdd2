"""Argument checks the adapters run before their first read or write.

A framework calls an adapter with whatever its caller handed it; a wrong type must not reach
the core, where it could be iterated into something else (a dict's keys stored as items, a
string's characters taken for run ids) or fail with an error naming nothing. Each check raises
``TypeError`` (wrong type) or ``ValueError`` (right type, refused value) naming the argument
as the caller wrote it, and returns the value to use.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping, Sequence, Set
from typing import Any, List, Optional

from ._agentstate import Store


def _kind(value: Any) -> str:
    return "None" if value is None else type(value).__name__


def type_error(name: str, expected: str, value: Any) -> TypeError:
    return TypeError(f"{name} must be {expected}, got {_kind(value)}: {value!r:.80}")


def string(name: str, value: Any) -> str:
    """A ``str``."""
    if not isinstance(value, str):
        raise type_error(name, "a str", value)
    return value


def optional_string(name: str, value: Any) -> Optional[str]:
    """A ``str`` or None."""
    if value is not None and not isinstance(value, str):
        raise type_error(name, "a str or None", value)
    return value


def integer(name: str, value: Any) -> int:
    """An ``int`` (not a bool, whose ``True`` would pass for 1)."""
    if not isinstance(value, int) or isinstance(value, bool):
        raise type_error(name, "an int", value)
    return value


def count(name: str, value: Any) -> int:
    """An int >= 0."""
    integer(name, value)
    if value < 0:
        raise ValueError(f"{name} must be >= 0, got {value}")
    return value


def limit(name: str, value: Any) -> Optional[int]:
    """None (no limit) or an int >= 0 (0: nothing). A negative limit is refused rather than
    read as "no limit" (SQLite's ``LIMIT -1``) or "nothing" (LangGraph's in-memory saver):
    the frameworks' own backends disagree on it, so any reading would surprise someone."""
    if value is None:
        return None
    return count(name, value)


def positive(name: str, value: Any) -> int:
    """An int >= 1."""
    integer(name, value)
    if value < 1:
        raise ValueError(f"{name} must be >= 1, got {value}")
    return value


def store(value: Any) -> Optional[Store]:
    """An :class:`agentstate.Store` or None."""
    if value is not None and not isinstance(value, Store):
        raise type_error("store", "an agentstate.Store or None", value)
    return value


def connection(url: Any, prefix: Any, partitions: Any, store_: Any) -> None:
    """The constructor arguments every adapter shares (url and prefix None: the
    environment's, as ``resolved`` reads them)."""
    optional_string("url", url)
    optional_string("prefix", prefix)
    positive("partitions", partitions)
    store(store_)


def mapping(name: str, value: Any) -> Mapping:
    """A dict (any ``Mapping``)."""
    if not isinstance(value, Mapping):
        raise type_error(name, "a dict", value)
    return value


_TEXT = (str, bytes, bytearray, memoryview)


def sequence(name: str, value: Any, what: str) -> List[Any]:
    """A sequence (list, tuple, deque...), as a list; a str or bytes (its characters), a dict
    (its keys), a set (no order) or a generator (spent once read) is refused."""
    if not isinstance(value, Sequence) or isinstance(value, _TEXT):
        raise type_error(name, f"a list of {what}", value)
    return list(value)


def collection(name: str, value: Any, what: str) -> List[Any]:
    """A sequence or a set, as a list (for arguments whose order does not matter); a str or
    bytes, a dict or a generator is refused."""
    if not isinstance(value, (Sequence, Set)) or isinstance(value, _TEXT):
        raise type_error(name, f"a list of {what}", value)
    return list(value)


def thread_id(name: str, value: Any) -> Any:
    """A LangGraph thread id: a str, an int or a UUID (stored as its ``str``). None and
    other objects are refused: ``str()`` of them is a thread nobody meant (``"None"``)."""
    if isinstance(value, bool) or not isinstance(value, (str, int, uuid.UUID)):
        raise type_error(name, "a str, int or UUID", value)
    return value


def run_id(name: str, value: Any) -> str:
    """A run id: a str or a UUID, as a str."""
    if not isinstance(value, (str, uuid.UUID)):
        raise type_error(name, "a str or UUID", value)
    return str(value)
