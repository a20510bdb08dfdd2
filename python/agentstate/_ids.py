"""Mapping framework ids onto agentstate ids (1-128 chars of ``[A-Za-z0-9._@+-]``).

An id that already fits is used as is, so sessions stay readable in ``redis-cli`` and
``sqlite3``; any other id maps to a stable digest (``h.`` + 40 hex chars). ``@`` joins a
session id and an agent id, so neither part may contain it verbatim.
"""

from __future__ import annotations

import hashlib
import json
import re
import secrets
from typing import Any, Optional, Sequence, Tuple

_PART = re.compile(r"[A-Za-z0-9._+-]{1,128}\Z")
_ROLE = re.compile(r"[a-z_]{1,32}\Z")


def part(raw: str) -> str:
    """The agentstate form of one framework id (never contains ``@``)."""
    if _PART.match(raw) and not raw.startswith("h."):
        return raw
    return "h." + hashlib.sha256(raw.encode("utf-8")).hexdigest()[:40]


def joined(first: str, second: str) -> str:
    """The id of ``second`` inside ``first`` (e.g. an agent of a session): ``first@second``,
    or a digest of both when that would pass 128 characters."""
    a, b = part(first), part(second)
    if len(a) + 1 + len(b) <= 128:
        return f"{a}@{b}"
    return "h." + hashlib.sha256(f"{a}@{b}".encode("utf-8")).hexdigest()[:40] + "@"


def role(candidate: object, fallback: str = "item") -> str:
    """A valid agentstate role (1-32 lowercase letters or ``_``) from a framework's
    role/type string, else ``fallback``."""
    if isinstance(candidate, str) and _ROLE.match(candidate):
        return candidate
    return fallback


def batch_key(tag: str, ids: "Sequence[Optional[str]]", messages: Any) -> Optional[str]:
    """The idempotency key of a batch whose items carry ids of their own (response item ids,
    message ids): ``tag`` + a digest of the ids and the stored ``messages``, so the same
    items written again (a retry, from any process) are recognised; None when no item has an
    id. The content is in it because not every model makes unique ids (test models and some
    providers repeat one id on every reply): only the same ids with the same content are one
    write."""
    if not any(ids):
        return None
    text = json.dumps([list(ids), messages], sort_keys=True, separators=(",", ":"), default=str)
    return tag + hashlib.sha256(text.encode("utf-8")).hexdigest()[:32]


class RetryKeys:
    """Idempotency keys for writes whose items have no ids of their own (a user's input):
    every call gets a fresh random key, except that a call which failed leaves its key for
    the next call with the same messages, so repeating it after ``RedisUnavailable``,
    ``WriteLost`` or a timeout (the write may have been applied) writes nothing twice. Only
    the repeat of a failed call reuses a key: two successful calls with equal messages (a
    user saying "yes" twice) are two writes. One per adapter object; not shared across
    processes (ids of the items' own, or a caller's key, are)."""

    __slots__ = ("_failed",)

    def __init__(self) -> None:
        #: (digest of the messages, key) of the last call that failed.
        self._failed: Optional[Tuple[str, str]] = None

    @staticmethod
    def _digest(messages: Any) -> str:
        text = json.dumps(messages, sort_keys=True, separators=(",", ":"), default=str)
        return hashlib.sha256(text.encode("utf-8")).hexdigest()

    def key(self, messages: Any) -> str:
        """The key for a call writing ``messages``: the failed call's when this repeats it."""
        failed = self._failed
        if failed is not None and failed[0] == self._digest(messages):
            return failed[1]
        return "r." + secrets.token_hex(12)

    def failed(self, messages: Any, key: str) -> None:
        """The call writing ``messages`` with ``key`` failed: its outcome is unknown."""
        self._failed = (self._digest(messages), key)

    def succeeded(self) -> None:
        """The last call succeeded: a later equal call is a new write."""
        self._failed = None
