"""pytest plugin (``-p agentstate_langgraph_store_swap``): runs LangGraph's own store tests
(``tests/test_store.py`` of the langgraph-checkpoint sdist, unedited) with ``InMemoryStore``
swapped for :class:`agentstate.langgraph.AgentStateStore`.

The test module names ``InMemoryStore`` at run time (each test constructs its stores, and
``MockAsyncBatchedStore`` wraps one), so the plugin rebinds that module global to a subclass
of ``AgentStateStore`` taking the same arguments (``index``), on a namespace of its own per
construction (``_swap.RebindPlugin``). Tests that construct no store test LangGraph's
helpers and run as they are; those reading ``InMemoryStore``'s internals are deselected with
reasons (``langgraph_store_deselected.txt``).

``AGENTSTATE_SWAP_BROKEN=1`` swaps in a deliberately broken store instead (its searches
ignore ``offset``): the suite must then fail.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any, Optional

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from _swap import BROKEN, RebindPlugin, load_deselected  # noqa: E402

from agentstate.langgraph import AgentStateStore  # noqa: E402

_plugin = RebindPlugin(
    load_deselected(Path(__file__).with_name("langgraph_store_deselected.txt")),
    "agentstate.langgraph.AgentStateStore",
    "langgraph.store.memory.InMemoryStore -> {}",
    "InMemoryStore",
)


class SwappedStore(AgentStateStore):
    """``InMemoryStore(index=...)`` as the tests call it, on a fresh namespace."""

    def __init__(self, *, index: Optional[Any] = None) -> None:
        super().__init__(index=index, store=_plugin.fresh_store())


def _no_offset(ops):
    return [op._replace(offset=0) if hasattr(op, "namespace_prefix") else op for op in ops]


class BrokenStore(SwappedStore):
    """Deliberately broken: a search ignores its offset."""

    def batch(self, ops):
        return super().batch(_no_offset(ops))

    async def abatch(self, ops):
        return await super().abatch(_no_offset(ops))


_plugin.stand_in_class = BrokenStore if BROKEN else SwappedStore


def pytest_configure(config):
    config.pluginmanager.register(_plugin, "agentstate-swap")
