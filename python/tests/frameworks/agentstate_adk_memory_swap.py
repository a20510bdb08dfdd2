"""pytest plugin (``-p agentstate_adk_memory_swap``): runs Google ADK's own memory-service
tests (``tests/unittests/memory/test_in_memory_memory_service.py``, fetched by
scripts/test-python.sh at the pinned commit, unedited) with ``InMemoryMemoryService``
swapped for :class:`agentstate.adk.AgentStateMemoryService`.

The test module names ``InMemoryMemoryService`` at run time, so the plugin rebinds that
module global to a subclass of ``AgentStateMemoryService`` on a namespace of its own per
construction (``_swap.RebindPlugin``). Tests that read ``InMemoryMemoryService``'s internals
(``_session_events``) are deselected with reasons (``adk_memory_deselected.txt``).

``AGENTSTATE_SWAP_BROKEN=1`` swaps in a deliberately broken service instead (it stores only
the first event of each ingestion): the suite must then fail.
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from _swap import BROKEN, RebindPlugin, load_deselected  # noqa: E402

from agentstate.adk import AgentStateMemoryService  # noqa: E402

_plugin = RebindPlugin(
    load_deselected(Path(__file__).with_name("adk_memory_deselected.txt")),
    "agentstate.adk.AgentStateMemoryService",
    "google.adk.memory.InMemoryMemoryService -> {}",
    "InMemoryMemoryService",
)


class SwappedService(AgentStateMemoryService):
    """``InMemoryMemoryService()`` as the tests call it, on a fresh namespace."""

    def __init__(self) -> None:
        super().__init__(store=_plugin.fresh_store())


class BrokenService(SwappedService):
    """Deliberately broken: an ingestion stores the first of its events only."""

    async def add_session_to_memory(self, session) -> None:
        await super().add_session_to_memory(session.model_copy(update={"events": session.events[:1]}))

    async def add_events_to_memory(self, *, events, **kw) -> None:
        await super().add_events_to_memory(events=list(events)[:1], **kw)


_plugin.stand_in_class = BrokenService if BROKEN else SwappedService


def pytest_configure(config):
    config.pluginmanager.register(_plugin, "agentstate-swap")
