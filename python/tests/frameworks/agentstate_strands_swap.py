"""pytest plugin (``-p agentstate_strands_swap``): runs strands-agents' own session-manager
and agent tests, from its sdist and unedited, with their mocked repository swapped for
:class:`agentstate.strands.AgentStateSessionRepository`.

The tests import ``MockedSessionRepository`` from ``tests.fixtures.mock_session_repository``;
before they are collected this plugin starts a private redis-server and a real spill daemon
(``agentstate spill``: everything the suite stores is also flushed to SQLite) and puts a module
of that name in ``sys.modules`` whose ``MockedSessionRepository()`` is an
AgentStateSessionRepository with an ``id_prefix`` of its own per instance (each mock instance
is an empty store of its own).

``AGENTSTATE_SWAP_BROKEN=1`` swaps in a deliberately broken repository (``list_messages``
loses the newest message): the suite must then fail.
"""

from __future__ import annotations

import sys
import types
import uuid
from pathlib import Path
from typing import Any, List, Optional

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from _swap import BROKEN, SwapPlugin, load_deselected, mark_used, start_backend  # noqa: E402

from agentstate.strands import AgentStateSessionRepository  # noqa: E402

_server, _daemon, _store = start_backend("strands")


class MockedSessionRepository(AgentStateSessionRepository):
    """The suite's mock, replaced: an agentstate repository in a fresh namespace."""

    def __init__(self) -> None:
        mark_used()
        super().__init__(store=_store, id_prefix="r" + uuid.uuid4().hex[:12] + "-")


if BROKEN:

    class MockedSessionRepository(MockedSessionRepository):  # type: ignore[no-redef]
        """Deliberately broken: loses the newest message on every listing."""

        def list_messages(self, session_id: str, agent_id: str, limit: Optional[int] = None,
                          offset: int = 0, **kwargs: Any) -> List[Any]:
            return super().list_messages(session_id, agent_id, limit, offset, **kwargs)[:-1]


_module = types.ModuleType("tests.fixtures.mock_session_repository")
_module.__doc__ = "agentstate's stand-in for strands' MockedSessionRepository"
_module.MockedSessionRepository = MockedSessionRepository
sys.modules[_module.__name__] = _module


def pytest_configure(config):
    deselected = load_deselected(Path(__file__).with_name("strands_deselected.txt"))
    stand_in = "agentstate.strands.AgentStateSessionRepository"
    plugin = SwapPlugin(deselected, stand_in, "MockedSessionRepository -> {}", (_server, _daemon))
    config.pluginmanager.register(plugin, "agentstate-swap")
