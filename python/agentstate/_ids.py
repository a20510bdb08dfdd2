"""Mapping framework ids onto agentstate ids (1-128 chars of ``[A-Za-z0-9._@+-]``).

An id that already fits is used as is, so sessions stay readable in ``redis-cli`` and
``sqlite3``; any other id maps to a stable digest (``h.`` + 40 hex chars). ``@`` joins a
session id and an agent id, so neither part may contain it verbatim.
"""

from __future__ import annotations

import hashlib
import re

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
