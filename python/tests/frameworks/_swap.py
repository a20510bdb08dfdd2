"""What both swap plugins share: deselection from a reviewed list (each entry with its
reason, reported by pytest as "deselected"), and counting the tests that really constructed
the agentstate stand-in, so the report shows how much of the suite exercised it.

With ``AGENTSTATE_SWAP_RECORD=<dir>`` the plugin also writes ``<dir>/used.txt`` (the node ids
of the tests that constructed the stand-in) and ``<dir>/failed.txt`` (those that failed, in
any phase): scripts/test-python.sh runs the suites with a deliberately broken stand-in and
checks with ``check_broken.py`` that enough tests used it and that every failure is one of
them.
"""

from __future__ import annotations

import os
import re
import tempfile
from pathlib import Path
from typing import Dict, List, Set, Tuple

import pytest

from support import RedisServer, SpillDaemon, prepare_namespace, sqlite_rows

BROKEN = os.environ.get("AGENTSTATE_SWAP_BROKEN") == "1"
"""``AGENTSTATE_SWAP_BROKEN=1``: each plugin swaps in its deliberately broken stand-in."""

_db: List[Path] = []

_current: List[str] = [""]
_used: Set[str] = set()
_failed: Set[str] = set()


def start_backend(prefix: str) -> Tuple[RedisServer, SpillDaemon, "object"]:
    """A private redis-server, the namespace checked by one daemon pass, then a running
    ``agentstate spill`` flushing it to a SQLite file; returns them with a connected store."""
    from agentstate import Store

    server = RedisServer()
    db = Path(tempfile.mkdtemp(prefix="agentstate-swap-")) / f"{prefix}.db"
    prepare_namespace(server.url, prefix, db)
    daemon = SpillDaemon(server.url, db, prefix)
    _db.append(db)
    return server, daemon, Store(server.url, prefix=prefix)


def stop_backend(server: RedisServer, daemon: SpillDaemon) -> None:
    """Stops the daemon (it drains and commits) and the server; removes the SQLite file."""
    import shutil

    daemon.stop()
    server.close()
    for db in _db:
        shutil.rmtree(db.parent, ignore_errors=True)


def mark_used() -> None:
    """Called by a stand-in's constructor: the running test exercised agentstate (a
    construction outside any test, at import or collection, counts for none)."""
    if _current[0]:
        _used.add(_current[0])


def record(used: Set[str], failed: Set[str]) -> None:
    """Writes the tests that used the stand-in and those that failed, one id a line, to
    ``$AGENTSTATE_SWAP_RECORD`` (when set), for ``check_broken.py``."""
    folder = os.environ.get("AGENTSTATE_SWAP_RECORD")
    if not folder:
        return
    Path(folder).mkdir(parents=True, exist_ok=True)
    for name, ids in (("used", used), ("failed", failed)):
        Path(folder, f"{name}.txt").write_text("".join(f"{i}\n" for i in sorted(ids)))


def load_deselected(path: Path) -> Dict[str, str]:
    """``node id  # reason`` lines; a node id without ``[...]`` covers all its parameters,
    and ``*`` matches any text (``file.py::*[sqlite*``: every test's ``sqlite`` cases)."""
    out: Dict[str, str] = {}
    for line in path.read_text().splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        node, _, reason = line.partition("#")
        out[node.strip()] = reason.strip()
    return out


class SwapPlugin:
    """Registered by each swap module: deselects its list, tracks stand-in use, names the
    swap in the report header and stops the module's backend (``start_backend``) at the end.
    ``stand_in`` is the dotted name of the agentstate class swapped in, ``swap`` what the
    header says of it, with ``{}`` where the stand-in goes."""

    def __init__(
        self, deselected: Dict[str, str], stand_in: str, swap: str, backend: Tuple[RedisServer, SpillDaemon]
    ) -> None:
        self.deselected = deselected
        self.patterns = [
            re.compile(re.escape(node).replace(r"\*", ".*")) for node in deselected if "*" in node
        ]
        self.label = ("BROKEN " if BROKEN else "") + stand_in.rsplit(".", 1)[-1]
        self.header = swap.format("BROKEN stand-in" if BROKEN else stand_in)
        self.backend = backend

    def _deselected(self, nodeid: str) -> bool:
        base = nodeid.split("[", 1)[0]
        return (
            nodeid in self.deselected
            or base in self.deselected
            or any(p.fullmatch(nodeid) for p in self.patterns)
        )

    def pytest_collection_modifyitems(self, config, items):
        keep, drop = [], []
        for item in items:
            (drop if self._deselected(item.nodeid) else keep).append(item)
        if drop:
            config.hook.pytest_deselected(items=drop)
            items[:] = keep

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_protocol(self, item, nextitem):
        _current[0] = item.nodeid
        try:
            return (yield)
        finally:
            _current[0] = ""

    def pytest_runtest_logreport(self, report):
        if report.failed:
            _failed.add(report.nodeid)

    def pytest_sessionfinish(self, session, exitstatus):
        record(_used, _failed)

    def pytest_report_header(self, config):
        return f"agentstate swap: {self.header} on {self.backend[0].url}"

    def pytest_unconfigure(self, config):
        stop_backend(*self.backend)

    def pytest_terminal_summary(self, terminalreporter):
        terminalreporter.write_line(
            f"agentstate swap: {len(_used)} tests constructed the {self.label} stand-in"
        )
        if _db:
            (sessions, messages), = sqlite_rows(
                _db[0], "SELECT (SELECT count(*) FROM sessions), (SELECT count(*) FROM messages)"
            )
            terminalreporter.write_line(
                f"agentstate swap: the spill daemon has flushed {sessions} sessions and "
                f"{messages} messages to SQLite ({_db[0]})"
            )


class RebindPlugin(SwapPlugin):
    """For suites whose tests construct the framework's in-memory class by its module-global
    name at run time: rebinds that name in each collected test module to ``stand_in_class``,
    whose every construction takes a store from :meth:`fresh_store` (a namespace prefix of
    its own on one private redis-server, checked by one spill-daemon pass), so two objects of
    one test are as separate as two in-memory ones. No daemon runs: these suites test the
    adapter's answers; survival is python/tests' to test."""

    def __init__(self, deselected: Dict[str, str], stand_in: str, swap: str, name: str) -> None:
        self.server = RedisServer()
        self.folder = Path(tempfile.mkdtemp(prefix="agentstate-swap-"))
        self.name = name
        self.stand_in_class: "type | None" = None
        self.made = 0
        super().__init__(deselected, stand_in, swap, (self.server, None))

    def fresh_store(self):
        """A connected store on a new namespace prefix (counts the construction as a use)."""
        import uuid

        from agentstate import Store

        mark_used()
        self.made += 1
        prefix = "s" + uuid.uuid4().hex[:10]
        prepare_namespace(self.server.url, prefix, self.folder / f"{prefix}.db")
        return Store(self.server.url, prefix=prefix)

    def pytest_collection_modifyitems(self, config, items):
        super().pytest_collection_modifyitems(config, items)
        for item in items:
            module = getattr(item, "module", None)
            if module is not None and hasattr(module, self.name):
                setattr(module, self.name, self.stand_in_class)

    def pytest_unconfigure(self, config):
        import shutil

        self.server.close()
        shutil.rmtree(self.folder, ignore_errors=True)

    def pytest_terminal_summary(self, terminalreporter):
        terminalreporter.write_line(
            f"agentstate swap: {len(_used)} tests constructed the {self.label} stand-in "
            f"({self.made} constructions, one namespace each)"
        )
