"""pytest plugin (``-p agentstate_harness_swap``): runs pydantic-ai-harness's own
step-persistence tests (tests/step_persistence, fetched at the pinned commit: the sdist ships
no tests), unedited, with the harness's stores swapped for
:class:`agentstate.pydantic_ai.AgentStateStepStore`.

Loaded before the suite is collected, it starts a private redis-server and a real spill
daemon (``agentstate spill``: everything the suite stores is also flushed to SQLite), and
replaces ``pydantic_ai_harness.step_persistence.InMemoryStepStore`` and ``SqliteStepStore``
(which the test modules import, and ``StepPersistence.from_spec`` builds) by stand-ins with their constructors: each in-memory store
gets its own ``id_prefix`` in the one namespace, each SQLite database file one per path (two
stores on one file share runs, as they share the file in the original).

``AGENTSTATE_SWAP_BROKEN=1`` swaps in a deliberately broken stand-in (``list_events`` loses
the newest event, ``latest_snapshot`` returns the oldest): the suite must then fail, which
proves the tests exercise the swap.
"""

from __future__ import annotations

import hashlib
import sys
import uuid
from pathlib import Path
from typing import Any, Optional

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import pydantic_ai_harness.step_persistence as step_persistence  # noqa: E402
import pydantic_ai_harness.step_persistence._capability as step_persistence_capability  # noqa: E402
import pydantic_ai_harness.step_persistence._store as step_persistence_store  # noqa: E402
from _swap import BROKEN, SwapPlugin, load_deselected, mark_used, start_backend  # noqa: E402

from agentstate.pydantic_ai import AgentStateStepStore  # noqa: E402

_server, _daemon, _store = start_backend("pah")


class InMemoryStepStore(AgentStateStepStore):
    """InMemoryStepStore's constructor over AgentStateStepStore: a fresh id prefix per
    instance (its own runs, as a fresh dict); snapshots are not pruned."""

    def __init__(self, *, max_snapshots_per_run: Optional[int] = None) -> None:
        mark_used()
        super().__init__(store=_store, id_prefix="m" + uuid.uuid4().hex[:12] + "-")


class SqliteStepStore(AgentStateStepStore):
    """SqliteStepStore's constructor over AgentStateStepStore: the database path becomes an
    id prefix; the media store and connection options are accepted and not needed."""

    def __init__(
        self,
        database: Any = None,
        *,
        connection: Any = None,
        media_store: Any = "auto",
        media_threshold_bytes: int = 64 * 1024,
        max_snapshots_per_run: Optional[int] = None,
    ) -> None:
        mark_used()
        key = str(Path(database).resolve()) if database is not None else uuid.uuid4().hex
        super().__init__(store=_store, id_prefix="f" + hashlib.sha256(key.encode()).hexdigest()[:12] + "-")


if BROKEN:

    class _Broken:
        """Deliberately broken: the newest event is lost on every read, and the latest
        snapshot is the oldest."""

        async def list_events(self, *, run_id: str) -> list:
            return (await super().list_events(run_id=run_id))[:-1]  # type: ignore[misc]

        async def latest_snapshot(self, *, run_id: str, include_interrupted: bool = False) -> Any:
            snaps = await self.list_snapshots(run_id=run_id, include_interrupted=include_interrupted)  # type: ignore[attr-defined]
            return snaps[0] if snaps else None

    class InMemoryStepStore(_Broken, InMemoryStepStore):  # type: ignore[no-redef]
        pass

    class SqliteStepStore(_Broken, SqliteStepStore):  # type: ignore[no-redef]
        pass


# Wherever the harness names them: the package (the tests import it from there) and the
# modules StepPersistence.from_spec builds its stores from.
for _module in (step_persistence, step_persistence_capability, step_persistence_store):
    _module.InMemoryStepStore = InMemoryStepStore  # type: ignore[attr-defined]
    _module.SqliteStepStore = SqliteStepStore  # type: ignore[attr-defined]


def pytest_configure(config):
    config.addinivalue_line("markers", "anyio: run with anyio")
    deselected = load_deselected(Path(__file__).with_name("pydantic_ai_harness_deselected.txt"))
    stand_in = "agentstate.pydantic_ai.AgentStateStepStore"
    plugin = SwapPlugin(
        deselected, stand_in, "InMemoryStepStore, SqliteStepStore -> {}", (_server, _daemon)
    )
    config.pluginmanager.register(plugin, "agentstate-swap")
