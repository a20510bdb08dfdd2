"""pytest plugin (``-p agentstate_adk_swap``): runs Google ADK's own session contract tests
(``tests/unittests/sessions/test_session_service.py`` with its ``_conformance.py`` backend
registry, fetched by scripts/test-python.sh at a pinned commit, unedited) against
:class:`agentstate.adk.AgentStateSessionService`.

ADK holds a backend to its contract by registering it in ``_conformance.BACKENDS``, the
``session_service`` fixture's parameters. When that module is imported, this plugin appends
an ``agentstate`` entry (a service with an ``id_prefix`` of its own per test, on a private
redis-server with a real spill daemon, ``agentstate spill``, flushing to SQLite) and
re-declares the fixture, with ADK's own fixture body, over that entry alone: ADK's services
are ADK's to test. Tests that do not take the fixture test ADK's own services and are
deselected. The entry records no divergence.

``AGENTSTATE_SWAP_BROKEN=1`` registers a deliberately broken service instead (it drops
``user:`` state): the suite must then fail.
"""

from __future__ import annotations

import contextlib
import importlib.abc
import importlib.machinery
import sys
import uuid
from pathlib import Path
from typing import Any, Dict

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from _swap import BROKEN, SwapPlugin, mark_used, start_backend  # noqa: E402

from agentstate.adk import AgentStateSessionService  # noqa: E402

_server, _daemon, _store = start_backend("adk")
REGISTRY = "unittests.sessions._conformance"


class _Broken(AgentStateSessionService):
    """Deliberately broken: ``user:`` state is never stored."""

    async def _write_scoped(self, store: Any, uid: str, delta: Dict[str, Any]) -> None:
        if uid.endswith("@app"):
            await super()._write_scoped(store, uid, delta)


@contextlib.asynccontextmanager
async def _make_agentstate(tmp_path: Path):
    del tmp_path
    mark_used()
    kind = _Broken if BROKEN else AgentStateSessionService
    yield kind(store=_store, id_prefix="t" + uuid.uuid4().hex[:12])


def _register(module: Any) -> None:
    """Adds the agentstate backend to ADK's registry and re-declares its fixture over it."""
    module.BACKENDS.append(module._Backend("agentstate", _make_agentstate))
    body = module.session_service._get_wrapped_function()
    module.session_service = pytest.fixture(
        params=[module.BACKENDS[-1]], ids=lambda backend: backend.name
    )(body)


class _Loader(importlib.abc.Loader):
    def __init__(self, inner: importlib.abc.Loader) -> None:
        self.inner = inner

    def create_module(self, spec):
        return self.inner.create_module(spec)

    def exec_module(self, module) -> None:
        self.inner.exec_module(module)
        _register(module)


class _Finder(importlib.abc.MetaPathFinder):
    """Wraps the loader of ADK's backend registry (whatever package path the test tree is
    imported under) so that :func:`_register` runs right after the module body."""

    def find_spec(self, name, path, target=None):
        if not name.endswith(REGISTRY):
            return None
        spec = importlib.machinery.PathFinder.find_spec(name, path)
        if spec is not None and spec.loader is not None:
            spec.loader = _Loader(spec.loader)
        return spec


sys.meta_path.insert(0, _Finder())


class _AdkPlugin(SwapPlugin):
    """Keeps only the contract tests (those taking ``session_service``)."""

    def pytest_collection_modifyitems(self, config, items):
        keep = [i for i in items if "session_service" in getattr(i, "fixturenames", ())]
        drop = [i for i in items if i not in keep]
        if drop:
            config.hook.pytest_deselected(items=drop)
            items[:] = keep


def pytest_configure(config):
    stand_in = "agentstate.adk.AgentStateSessionService"
    plugin = _AdkPlugin({}, stand_in, "_conformance.BACKENDS += {}", (_server, _daemon))
    config.pluginmanager.register(plugin, "agentstate-swap")
