"""LangGraph's checkpointer conformance suite (``langgraph-checkpoint-conformance``, pinned in
python/tests/requirements.txt) against :class:`agentstate.langgraph.AgentStateSaver`.

    python python/tests/frameworks/langgraph_conformance.py [--cluster]

starts a private redis-server and a real spill daemon (``agentstate spill``: everything the
suite stores is also flushed to SQLite), registers the saver with the suite's
``checkpointer_test`` decorator (a fresh ``id_prefix`` per capability suite: each one gets an
empty store; ``--cluster``: the 3-master Redis Cluster fixture instead), runs ``validate`` with per-test output, prints the report and exits 0 only when
every base and extended capability was detected and passed with exactly the expected number
of cases (81).

``AGENTSTATE_SWAP_BROKEN=1`` registers a deliberately broken saver instead (``list`` yields
oldest first, ``put_writes`` keeps only a call's first write): the run must then fail.

Each case that called the saver (any of its public methods between the previous case's result
and its own) counts as having used it; with ``AGENTSTATE_SWAP_RECORD=<dir>`` those cases
(``capability::test``) are written to ``<dir>/used.txt`` and the failed ones to
``<dir>/failed.txt``, which scripts/test-python.sh compares (``check_broken.py``). Exit codes:
0 every case passed, 1 cases failed, 2 the run itself broke (an exception outside the cases).
"""

from __future__ import annotations

import asyncio
import functools
import inspect
import sys
import tempfile
import traceback
import uuid
from pathlib import Path
from typing import Any, AsyncIterator, List, Optional, Sequence, Set, Tuple

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import _swap  # noqa: E402
from _swap import BROKEN, start_backend, stop_backend  # noqa: E402
from support import RedisCluster, SpillDaemon, prepare_namespace, sqlite_rows  # noqa: E402

from langgraph.checkpoint.conformance import checkpointer_test, validate  # noqa: E402
from langgraph.checkpoint.conformance.report import ProgressCallbacks  # noqa: E402

from agentstate.langgraph import AgentStateSaver  # noqa: E402

EXPECTED = {
    "put": 17,
    "put_writes": 10,
    "get_tuple": 10,
    "list": 16,
    "delete_thread": 5,
    "delete_for_runs": 7,
    "copy_thread": 8,
    "prune": 8,
}
"""Cases per capability in langgraph-checkpoint-conformance 0.0.2 (81 in all)."""



_calls = [0]
"""Calls of the saver's public methods so far (a case used the saver when it moved)."""

SAVER_METHODS = [
    "get_tuple", "list", "put", "put_writes", "delete_thread", "delete_for_runs", "copy_thread", "prune",
    "aget_tuple", "alist", "aput", "aput_writes", "adelete_thread", "adelete_for_runs", "acopy_thread", "aprune",
]


def counted(cls: type) -> type:
    """``cls`` with every public saver method counting its calls in ``_calls``."""

    def wrap(method: Any) -> Any:
        if inspect.isasyncgenfunction(method):
            async def agen(self: Any, *args: Any, **kwargs: Any) -> Any:
                _calls[0] += 1
                async for item in method(self, *args, **kwargs):
                    yield item
            return functools.wraps(method)(agen)
        if inspect.iscoroutinefunction(method):
            async def coro(self: Any, *args: Any, **kwargs: Any) -> Any:
                _calls[0] += 1
                return await method(self, *args, **kwargs)
            return functools.wraps(method)(coro)
        if inspect.isgeneratorfunction(method):
            def gen(self: Any, *args: Any, **kwargs: Any) -> Any:
                _calls[0] += 1
                yield from method(self, *args, **kwargs)
            return functools.wraps(method)(gen)

        def plain(self: Any, *args: Any, **kwargs: Any) -> Any:
            _calls[0] += 1
            return method(self, *args, **kwargs)
        return functools.wraps(method)(plain)

    counting = type("Counted" + cls.__name__, (cls,), {name: wrap(getattr(cls, name)) for name in SAVER_METHODS})
    counting.__doc__ = cls.__doc__
    return counting


class BrokenSaver(AgentStateSaver):
    """Deliberately broken: lists oldest first and loses all but a task's first write."""

    async def alist(self, config: Any, **kwargs: Any) -> AsyncIterator[Any]:  # type: ignore[override]
        found = [t async for t in super().alist(config, **kwargs)]
        for t in reversed(found):
            yield t

    async def aput_writes(self, config: Any, writes: Sequence[Tuple[str, Any]], task_id: str,
                          task_path: str = "") -> None:
        await super().aput_writes(config, list(writes)[:1], task_id, task_path)


def _cluster_backend(prefix: str) -> Tuple[Any, SpillDaemon, Any]:
    """Like ``start_backend``, on the 3-master cluster fixture."""
    from agentstate import Store

    cluster = RedisCluster()
    db = Path(tempfile.mkdtemp(prefix="agentstate-lg-cluster-")) / f"{prefix}.db"
    prepare_namespace(cluster.url, prefix, db)
    daemon = SpillDaemon(cluster.url, db, prefix)
    _swap._db.append(db)
    return cluster, daemon, Store(cluster.url, prefix=prefix)


class Usage:
    """The cases that used the saver and those that failed, from the suite's per-case
    callback (the verbose printer's output is kept)."""

    def __init__(self) -> None:
        self.used: Set[str] = set()
        self.failed: Set[str] = set()
        self.constructed = 0
        self._seen = 0
        self._print = ProgressCallbacks.verbose()

    def callbacks(self) -> ProgressCallbacks:
        def start(capability: str, detected: bool) -> None:
            self._seen = _calls[0]  # calls made while the capability was detected count for none
            if self._print.on_capability_start:
                self._print.on_capability_start(capability, detected)

        def result(capability: str, test: str, passed: bool, error: Optional[str]) -> None:
            case = f"{capability}::{test}"
            if _calls[0] > self._seen:
                self.used.add(case)
            self._seen = _calls[0]
            if not passed:
                self.failed.add(case)
            if self._print.on_test_result:
                self._print.on_test_result(capability, test, passed, error)

        return ProgressCallbacks(on_capability_start=start, on_test_result=result)


def main() -> int:
    cluster = "--cluster" in sys.argv[1:]
    server, daemon, store = (_cluster_backend if cluster else start_backend)("langgraph")
    try:
        kind = counted(BrokenSaver if BROKEN else AgentStateSaver)
        label = ("BROKEN " if BROKEN else "") + "AgentStateSaver"
        usage = Usage()
        print(f"agentstate conformance: {label} on {server.url} (prefix langgraph)")

        @checkpointer_test(name=label)
        async def saver() -> AsyncIterator[AgentStateSaver]:
            usage.constructed += 1
            yield kind(store=store, id_prefix="c" + uuid.uuid4().hex[:10] + "-")

        report = asyncio.run(validate(saver, progress=usage.callbacks()))
        report.print_report()
        _swap.record(usage.used, usage.failed)
        print(f"agentstate conformance: constructed the {label} {usage.constructed} times (a fresh one per "
              f"capability); {len(usage.used)} cases called it, {len(usage.failed)} failed")
        counts = {name: (r.tests_passed, r.tests_failed) for name, r in report.results.items()}
        print(f"agentstate conformance: passed/failed per capability {counts}")
        total = sum(p for p, _ in counts.values())
        failed = sum(f for _, f in counts.values())
        print(f"agentstate conformance: {total} passed, {failed} failed (expected {sum(EXPECTED.values())} passed)")
        (sessions,), = sqlite_rows(_swap._db[-1], "SELECT count(*) FROM sessions")
        print(f"agentstate conformance: the spill daemon has flushed {sessions} thread sessions to SQLite so far")
        ok = report.passed_all() and counts == {k: (n, 0) for k, n in EXPECTED.items()}
        return 0 if ok else 1
    finally:
        stop_backend(server, daemon)


if __name__ == "__main__":
    try:
        code = main()
    except BaseException:  # the run broke outside the cases: not a rejection of the saver
        traceback.print_exc()
        code = 2
    sys.exit(code)
