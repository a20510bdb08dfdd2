"""Type stubs of the extension module ``agentstate._agentstate`` (the Rust binding)."""

from typing import Any, Awaitable, Dict, List, Optional, Sequence, Tuple

JSON = Any
"""A value made of dict (str keys), list/tuple, str, int, float, bool and None."""

Message = Dict[str, Any]
"""A stored message: ``seq``, ``state`` (``active`` | ``compacted_out``), ``created_at`` (ms),
``role``, and those of ``content``, ``name``, ``tool_calls``, ``tool_call_id``,
``round_index``, ``meta`` that are set."""

__version__: str

class AgentStateError(Exception):
    """Base class of every agentstate error."""

class UnknownSession(AgentStateError):
    """The session exists neither in Redis nor in the durable tier."""

class NotLive(AgentStateError):
    """Not live in Redis and no spill daemon restored it in time (retryable)."""

class Conflict(AgentStateError):
    """An optimistic-concurrency check failed."""
    expected: int
    current: int

class InvalidInput(AgentStateError):
    """A rejected argument; nothing was written."""

class TooLarge(InvalidInput):
    """A payload over its limit; nothing was written."""
    size: int
    limit: int

class AlreadyExists(AgentStateError):
    """A create of something that exists."""

class RedisUnavailable(AgentStateError):
    """Redis cannot be reached (retryable)."""

class NamespaceMismatch(AgentStateError):
    """The configured namespace differs from the recorded one."""

class DurabilityTimeout(AgentStateError):
    """A durable write was not committed to SQLite in time."""

class Consumer:
    """A member of a consumer group over every partition's decisions stream."""
    @property
    def group(self) -> str: ...
    @property
    def name(self) -> str: ...
    def read(self) -> List[Dict[str, Any]]: ...
    def aread(self) -> Awaitable[List[Dict[str, Any]]]: ...
    def ack(self, deliveries: Sequence[Dict[str, Any]]) -> int: ...
    def aack(self, deliveries: Sequence[Dict[str, Any]]) -> Awaitable[int]: ...
    def release(self, deliveries: Sequence[Dict[str, Any]]) -> None: ...
    def arelease(self, deliveries: Sequence[Dict[str, Any]]) -> Awaitable[None]: ...

class Store:
    """A client of one agentstate namespace in one Redis, shareable across threads and
    event loops. Every method has an async twin prefixed with ``a``."""

    def __init__(
        self,
        url: str = "redis://127.0.0.1:6379",
        *,
        prefix: str = "as",
        partitions: int = 16,
        session_ttl: Optional[float] = None,
        pool_size: Optional[int] = None,
        daemon_wait: Optional[float] = None,
        durable: bool = False,
    ) -> None: ...
    @staticmethod
    def aconnect(
        url: str = "redis://127.0.0.1:6379",
        *,
        prefix: str = "as",
        partitions: int = 16,
        session_ttl: Optional[float] = None,
        pool_size: Optional[int] = None,
        daemon_wait: Optional[float] = None,
        durable: bool = False,
    ) -> Awaitable["Store"]: ...
    def with_durability(self, durable: bool) -> "Store": ...
    @property
    def durable(self) -> bool: ...
    @property
    def prefix(self) -> str: ...
    @property
    def partitions(self) -> int: ...

    # sessions
    def create_session(
        self,
        id: Optional[str] = None,
        *,
        user: Optional[str] = None,
        parent: Optional[str] = None,
        lifecycle: str = "ephemeral",
        ttl: Optional[float] = None,
        model: Optional[str] = None,
        system_prompt: Optional[str] = None,
        config: JSON = None,
        metadata: JSON = None,
    ) -> str: ...
    def acreate_session(
        self,
        id: Optional[str] = None,
        *,
        user: Optional[str] = None,
        parent: Optional[str] = None,
        lifecycle: str = "ephemeral",
        ttl: Optional[float] = None,
        model: Optional[str] = None,
        system_prompt: Optional[str] = None,
        config: JSON = None,
        metadata: JSON = None,
    ) -> Awaitable[str]: ...
    def session(self, sid: str) -> Optional[Dict[str, Any]]: ...
    def asession(self, sid: str) -> Awaitable[Optional[Dict[str, Any]]]: ...
    def require_session(self, sid: str) -> Dict[str, Any]: ...
    def arequire_session(self, sid: str) -> Awaitable[Dict[str, Any]]: ...
    def list_sessions(self, user: Optional[str] = None) -> List[str]: ...
    def alist_sessions(self, user: Optional[str] = None) -> Awaitable[List[str]]: ...
    def children(self, sid: str) -> List[str]: ...
    def achildren(self, sid: str) -> Awaitable[List[str]]: ...
    def touch(self, sid: str) -> None: ...
    def atouch(self, sid: str) -> Awaitable[None]: ...
    def archive(self, sid: str) -> None: ...
    def aarchive(self, sid: str) -> Awaitable[None]: ...
    def close_session(self, sid: str, cascade: bool = True) -> int: ...
    def aclose_session(self, sid: str, cascade: bool = True) -> Awaitable[int]: ...
    def set_pending(self, sid: str, pending: JSON) -> None: ...
    def aset_pending(self, sid: str, pending: JSON) -> Awaitable[None]: ...
    def pending(self, sid: str) -> JSON: ...
    def apending(self, sid: str) -> Awaitable[JSON]: ...

    # messages
    def append(
        self,
        sid: str,
        role: str,
        content: Optional[str] = None,
        *,
        name: Optional[str] = None,
        tool_calls: JSON = None,
        tool_call_id: Optional[str] = None,
        round_index: Optional[int] = None,
        meta: JSON = None,
        idempotency_key: Optional[str] = None,
        expect_seq: Optional[int] = None,
    ) -> int: ...
    def aappend(
        self,
        sid: str,
        role: str,
        content: Optional[str] = None,
        *,
        name: Optional[str] = None,
        tool_calls: JSON = None,
        tool_call_id: Optional[str] = None,
        round_index: Optional[int] = None,
        meta: JSON = None,
        idempotency_key: Optional[str] = None,
        expect_seq: Optional[int] = None,
    ) -> Awaitable[int]: ...
    def append_many(
        self, sid: str, messages: Sequence[Dict[str, Any]], *, expect_seq: Optional[int] = None
    ) -> List[int]: ...
    def aappend_many(
        self, sid: str, messages: Sequence[Dict[str, Any]], *, expect_seq: Optional[int] = None
    ) -> Awaitable[List[int]]: ...
    def pop_message(self, sid: str) -> Optional[Message]: ...
    def apop_message(self, sid: str) -> Awaitable[Optional[Message]]: ...
    def replace_message(self, sid: str, seq: int, message: Dict[str, Any]) -> None: ...
    def areplace_message(self, sid: str, seq: int, message: Dict[str, Any]) -> Awaitable[None]: ...
    def messages(
        self, sid: str, *, all: bool = False, after: Optional[int] = None, last: Optional[int] = None
    ) -> List[Message]: ...
    def amessages(
        self, sid: str, *, all: bool = False, after: Optional[int] = None, last: Optional[int] = None
    ) -> Awaitable[List[Message]]: ...
    def contents(
        self, sid: str, *, all: bool = False, after: Optional[int] = None, last: Optional[int] = None
    ) -> List[Optional[str]]: ...
    def acontents(
        self, sid: str, *, all: bool = False, after: Optional[int] = None, last: Optional[int] = None
    ) -> Awaitable[List[Optional[str]]]: ...
    def message(self, sid: str, seq: int) -> Optional[Message]: ...
    def amessage(self, sid: str, seq: int) -> Awaitable[Optional[Message]]: ...
    def compact(
        self,
        sid: str,
        from_seq: int,
        to_seq: int,
        note: str,
        *,
        before_tokens: Optional[int] = None,
        after_tokens: Optional[int] = None,
        round_index: Optional[int] = None,
    ) -> Tuple[int, int]: ...
    def acompact(
        self,
        sid: str,
        from_seq: int,
        to_seq: int,
        note: str,
        *,
        before_tokens: Optional[int] = None,
        after_tokens: Optional[int] = None,
        round_index: Optional[int] = None,
    ) -> Awaitable[Tuple[int, int]]: ...
    def compactions(self, sid: str) -> List[Dict[str, Any]]: ...
    def acompactions(self, sid: str) -> Awaitable[List[Dict[str, Any]]]: ...
    def record_usage(
        self,
        sid: str,
        round_index: int,
        prompt_tokens: int,
        completion_tokens: int,
        *,
        total_tokens: Optional[int] = None,
        model: Optional[str] = None,
    ) -> None: ...
    def arecord_usage(
        self,
        sid: str,
        round_index: int,
        prompt_tokens: int,
        completion_tokens: int,
        *,
        total_tokens: Optional[int] = None,
        model: Optional[str] = None,
    ) -> Awaitable[None]: ...
    def usage(self, sid: str) -> List[Dict[str, Any]]: ...
    def ausage(self, sid: str) -> Awaitable[List[Dict[str, Any]]]: ...

    # working state
    def set_working(self, sid: str, key: str, value: JSON, *, if_version: Optional[int] = None) -> int: ...
    def aset_working(
        self, sid: str, key: str, value: JSON, *, if_version: Optional[int] = None
    ) -> Awaitable[int]: ...
    def get_working(self, sid: str, key: str) -> JSON: ...
    def aget_working(self, sid: str, key: str) -> Awaitable[JSON]: ...
    def working(self, sid: str) -> Dict[str, Any]: ...
    def aworking(self, sid: str) -> Awaitable[Dict[str, Any]]: ...
    def delete_working(self, sid: str, key: str) -> int: ...
    def adelete_working(self, sid: str, key: str) -> Awaitable[int]: ...
    def clear_working(self, sid: str) -> int: ...
    def aclear_working(self, sid: str) -> Awaitable[int]: ...

    # checkpoints
    def checkpoint(self, sid: str, label: str, include_keys: Optional[Sequence[str]] = None) -> str: ...
    def acheckpoint(
        self, sid: str, label: str, include_keys: Optional[Sequence[str]] = None
    ) -> Awaitable[str]: ...
    def put_checkpoint(self, sid: str, label: str, payload: Dict[str, Any]) -> str: ...
    def aput_checkpoint(self, sid: str, label: str, payload: Dict[str, Any]) -> Awaitable[str]: ...
    def checkpoint_latest(self, sid: str, label: str) -> Optional[Dict[str, Any]]: ...
    def acheckpoint_latest(self, sid: str, label: str) -> Awaitable[Optional[Dict[str, Any]]]: ...
    def checkpoints(self, sid: str) -> List[Dict[str, Any]]: ...
    def acheckpoints(self, sid: str) -> Awaitable[List[Dict[str, Any]]]: ...

    # rounds (StateService)
    def save_state(
        self, user_id: str, state: JSON, session_id: Optional[str] = None, round_id: Optional[int] = None
    ) -> int: ...
    def asave_state(
        self, user_id: str, state: JSON, session_id: Optional[str] = None, round_id: Optional[int] = None
    ) -> Awaitable[int]: ...
    def export_state(
        self, user_id: str, session_id: Optional[str] = None, round_id: Optional[int] = None
    ) -> JSON: ...
    def aexport_state(
        self, user_id: str, session_id: Optional[str] = None, round_id: Optional[int] = None
    ) -> Awaitable[JSON]: ...

    # decisions and consumers
    def record_decision(
        self, sid: str, decision: str, rationale: str, *, action: Optional[str] = None, meta: JSON = None
    ) -> str: ...
    def arecord_decision(
        self, sid: str, decision: str, rationale: str, *, action: Optional[str] = None, meta: JSON = None
    ) -> Awaitable[str]: ...
    def record_outcome(self, decision_id: str, outcome: str) -> bool: ...
    def arecord_outcome(self, decision_id: str, outcome: str) -> Awaitable[bool]: ...
    def incomplete_decisions(self, sid: Optional[str] = None) -> List[Dict[str, Any]]: ...
    def aincomplete_decisions(self, sid: Optional[str] = None) -> Awaitable[List[Dict[str, Any]]]: ...
    def consumer(
        self,
        group: str,
        name: str,
        *,
        from_start: bool = False,
        min_idle: float = 30.0,
        max_deliveries: int = 5,
        block: float = 2.0,
        count: int = 100,
    ) -> Consumer: ...
    def aconsumer(
        self,
        group: str,
        name: str,
        *,
        from_start: bool = False,
        min_idle: float = 30.0,
        max_deliveries: int = 5,
        block: float = 2.0,
        count: int = 100,
    ) -> Awaitable[Consumer]: ...
    def dead_letters(self, count: int = 100) -> List[Dict[str, Any]]: ...
    def adead_letters(self, count: int = 100) -> Awaitable[List[Dict[str, Any]]]: ...

    # user data
    def set_user_value(self, user: str, key: str, value: JSON) -> None: ...
    def aset_user_value(self, user: str, key: str, value: JSON) -> Awaitable[None]: ...
    def user_value(self, user: str, key: str) -> JSON: ...
    def auser_value(self, user: str, key: str) -> Awaitable[JSON]: ...
    def delete_user_value(self, user: str, key: str) -> bool: ...
    def adelete_user_value(self, user: str, key: str) -> Awaitable[bool]: ...
    def forget_user(self, user: str) -> Dict[str, Any]: ...
    def aforget_user(self, user: str) -> Awaitable[Dict[str, Any]]: ...
