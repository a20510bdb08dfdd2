"""pytest plugin (``-p agentstate_openai_swap``): runs openai-agents' own session tests, from
its sdist and unedited, with ``SQLiteSession`` swapped for
:class:`agentstate.openai_agents.AgentStateSession`.

Loaded before the suite is collected, it starts a private redis-server and a real spill
daemon (``agentstate spill``, so everything the suite stores is also flushed to SQLite), and
replaces ``agents.SQLiteSession`` / ``agents.memory.SQLiteSession`` (which the test modules
import) by a stand-in with SQLiteSession's constructor: each database (a ``:memory:`` one per
instance, a file per path) gets its own ``id_prefix`` in the one namespace, so sessions
sharing a ``db_path`` share sessions, as they share a file in the original.

``AGENTSTATE_SWAP_BROKEN=1`` swaps in a deliberately broken stand-in (``get_items`` loses the
newest item): the suite must then fail, which proves the tests exercise the swap.
"""

from __future__ import annotations

import hashlib
import sys
import uuid
from pathlib import Path
from typing import Any, Optional

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import agents  # noqa: E402
import agents.memory  # noqa: E402
from _swap import BROKEN, SwapPlugin, load_deselected, mark_used, start_backend  # noqa: E402

from agentstate.openai_agents import AgentStateSession  # noqa: E402

_server, _daemon, _store = start_backend("oai")


def _database(db_path: Any) -> str:
    """The id prefix standing for one SQLite database."""
    if str(db_path) == ":memory:":
        return "m" + uuid.uuid4().hex[:12] + "-"
    return "f" + hashlib.sha256(str(Path(db_path).resolve()).encode()).hexdigest()[:12] + "-"


class SQLiteSession(AgentStateSession):
    """SQLiteSession's constructor over AgentStateSession: the database becomes an id prefix;
    the table names are accepted and not needed."""

    def __init__(
        self,
        session_id: str,
        db_path: Any = ":memory:",
        sessions_table: str = "agent_sessions",
        messages_table: str = "agent_messages",
        session_settings: Optional[Any] = None,
    ) -> None:
        mark_used()
        super().__init__(
            session_id,
            store=_store,
            id_prefix=_database(db_path),
            session_settings=session_settings,
        )


if BROKEN:

    class SQLiteSession(SQLiteSession):  # type: ignore[no-redef]
        """Deliberately broken: loses the newest item on every read."""

        async def get_items(self, limit: Optional[int] = None) -> list:
            return (await super().get_items(limit))[:-1]


agents.SQLiteSession = SQLiteSession  # type: ignore[misc]
agents.memory.SQLiteSession = SQLiteSession  # type: ignore[misc]


def pytest_configure(config):
    deselected = load_deselected(Path(__file__).with_name("openai_agents_deselected.txt"))
    stand_in = "agentstate.openai_agents.AgentStateSession"
    plugin = SwapPlugin(deselected, stand_in, "SQLiteSession -> {}", (_server, _daemon))
    config.pluginmanager.register(plugin, "agentstate-swap")
