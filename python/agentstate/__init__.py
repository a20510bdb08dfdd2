"""agentstate: a shared, live session store for AI-agent processes in Redis, with a durable
tier in SQLite or PostgreSQL — the Python package, a binding over the Rust core.

Every call is one Rust call on a shared tokio runtime: the sync methods (``store.append``)
release the GIL around the Redis I/O; their async twins (``await store.aappend``) never block
the event loop. One ``Store`` may be shared by any number of threads and event loops.

>>> from agentstate import SpillDaemon, Store
>>> daemon = SpillDaemon("redis://127.0.0.1:6379", "agentstate.db").start()  # doctest: +SKIP
>>> store = Store("redis://127.0.0.1:6379")                     # doctest: +SKIP
>>> sid = store.create_session(user="alice")                     # doctest: +SKIP
>>> store.append(sid, "user", "hello")                           # doctest: +SKIP
1

Adapters: :mod:`agentstate.openai_agents` (OpenAI Agents SDK ``Session``) and
:mod:`agentstate.strands` (Strands Agents ``SessionRepository``); :mod:`agentstate.langgraph`
(LangGraph checkpointer ``AgentStateSaver`` and store ``AgentStateStore``); :mod:`agentstate.adk`
(Google ADK ``AgentStateSessionService`` and ``AgentStateMemoryService``); :mod:`agentstate.pydantic_ai` (the Pydantic AI harness's
``StepStore`` and a ``message_history``); :mod:`agentstate.agent_framework` (Microsoft Agent
Framework ``HistoryProvider``).

Runs: ``with store.run_lease(sid) as run:`` holds the session's run lease (one run per
session across processes, renewed in the background); ``run.store`` writes under its fencing
token, refused (``Fenced``) once another process took the session over. The session's inbox
(``inbox_put`` / ``inbox_claim`` / ``inbox_deliver``) and tool-effect ledger
(``effect_begin`` / ``effect_finish``) serve the run.

Configuration: ``Store``, ``SpillDaemon``, the adapters and the ``agentstate`` command read
``AGENTSTATE_REDIS_URL``, ``AGENTSTATE_DB`` and ``AGENTSTATE_PREFIX`` when no argument names
them. The package installs the ``agentstate`` command (also ``python -m agentstate``); its
pytest plugin ``agentstate.testing`` gives tests a private Redis and a connected store.
"""

from ._agentstate import (
    AgentStateError,
    AlreadyExists,
    Backpressure,
    Conflict,
    Consumer,
    DurabilityTimeout,
    Fenced,
    InvalidInput,
    Leased,
    NamespaceMismatch,
    NotLive,
    RedisUnavailable,
    RunLease,
    SpillDaemon,
    Store,
    TooLarge,
    UnknownSession,
    WriteLost,
    __version__,
)
from ._shared import shared_store, ashared_store

__all__ = [
    "AgentStateError",
    "AlreadyExists",
    "Backpressure",
    "Conflict",
    "Consumer",
    "DurabilityTimeout",
    "Fenced",
    "InvalidInput",
    "Leased",
    "NamespaceMismatch",
    "NotLive",
    "RedisUnavailable",
    "RunLease",
    "SpillDaemon",
    "Store",
    "TooLarge",
    "UnknownSession",
    "WriteLost",
    "__version__",
    "shared_store",
    "ashared_store",
]
