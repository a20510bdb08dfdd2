"""Benchmark: agentstate's AgentStateSessionService next to Google ADK's own session services
(InMemorySessionService, DatabaseSessionService on a SQLite file, RedisSessionService on the
same Redis) in one run:

* append: ``append_event`` per second, 1 writer (one session) and 8 writers (asyncio tasks,
  a session each), ``APPENDS`` events per writer;
* get: ``get_session(num_recent_events=20)`` median latency on a session of ``--events``
  events and on one of 100 (flat means the long history costs nothing extra);
* list: ``list_sessions`` of a user with ``--sessions`` sessions (ADK's call returns them all),
  and for agentstate one page of 100 ids (``Store.list_sessions_page``).

Run it on a release build of the extension:

    cd python && maturin develop --release && pip install "google-adk==2.13.0" redis
    python bench_adk.py [--events 10000] [--sessions 10000] [--json]

It needs the ``agentstate`` CLI (``$AGENTSTATE_BIN`` or on PATH) for one spill pass over its
namespace. Figures are reported, never asserted (BENCHMARKS.md records a run).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any, Callable, Dict, List

sys.path.insert(0, str(Path(__file__).parent / "tests"))

from google.adk.events.event import Event  # noqa: E402
from google.adk.events.event_actions import EventActions  # noqa: E402
from google.adk.sessions.base_session_service import GetSessionConfig  # noqa: E402
from google.genai import types  # noqa: E402

APPENDS, WRITERS, GETS = 300, 8, 50
APP = "bench"


def _event(i: int) -> Event:
    return Event(
        invocation_id=f"inv{i}",
        author="user" if i % 2 == 0 else "agent",
        content=types.Content(role="user", parts=[types.Part(text=f"turn {i}: the quick brown fox jumps over the lazy dog")]),
        actions=EventActions(state_delta={"turn": i}),
    )


async def _appends(service: Any, writers: int) -> float:
    sessions = [await service.create_session(app_name=APP, user_id="w", session_id=f"a{writers}-{w}-{uuid.uuid4().hex[:6]}")
                for w in range(writers)]

    async def writer(session: Any) -> None:
        for i in range(APPENDS):
            await service.append_event(session, _event(i))

    t = time.perf_counter()
    await asyncio.gather(*(writer(s) for s in sessions))
    return writers * APPENDS / (time.perf_counter() - t)


async def _get_ms(service: Any, events: int) -> float:
    session = await service.create_session(app_name=APP, user_id="g", session_id=f"g{events}-{uuid.uuid4().hex[:6]}")
    for i in range(events):
        await service.append_event(session, _event(i))
    config = GetSessionConfig(num_recent_events=20)
    samples = []
    for _ in range(GETS):
        t = time.perf_counter()
        got = await service.get_session(app_name=APP, user_id="g", session_id=session.id, config=config)
        samples.append(time.perf_counter() - t)
        assert len(got.events) == 20
    return statistics.median(samples) * 1000


async def _list_ms(service: Any, sessions: int, user: str) -> float:
    for i in range(sessions):
        await service.create_session(app_name=APP, user_id=user, session_id=f"l{i:06}")
    samples = []
    for _ in range(3):
        t = time.perf_counter()
        got = await service.list_sessions(app_name=APP, user_id=user)
        samples.append(time.perf_counter() - t)
        assert len(got.sessions) == sessions
    return statistics.median(samples) * 1000


async def _measure(name: str, make: Callable[[], Any], args: argparse.Namespace) -> Dict[str, Any]:
    service = make()
    row: Dict[str, Any] = {"service": name}
    steps = [
        ("append_1_per_s", lambda: _appends(service, 1)),
        ("append_8_per_s", lambda: _appends(service, WRITERS)),
        ("get_20_of_100_ms", lambda: _get_ms(service, 100)),
        (f"get_20_of_{args.events}_ms", lambda: _get_ms(service, args.events)),
        (f"list_{args.sessions}_ms", lambda: _list_ms(service, args.sessions, "lister")),
    ]
    for key, step in steps:
        try:
            row[key] = await step()
        except Exception as e:  # a service that fails a step (e.g. SQLite "database is locked")
            row[key] = f"failed: {type(e).__name__}"
    close = getattr(service, "close", None)
    if close is not None:
        await close()
    print(f"  {name}: {row}", file=sys.stderr)
    return row


def _cell(value: Any) -> str:
    if value is None:
        return "-"
    return f"{value:.1f}" if isinstance(value, float) else str(value)


def main() -> None:
    from agentstate import Store
    from agentstate.adk import AgentStateSessionService
    from google.adk.integrations.redis._config import RedisSessionServiceConfig
    from google.adk.integrations.redis._redis_session_service import RedisSessionService
    from google.adk.sessions.database_session_service import DatabaseSessionService
    from google.adk.sessions.in_memory_session_service import InMemorySessionService
    from support import RedisServer, prepare_namespace

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--events", type=int, default=10_000)
    ap.add_argument("--sessions", type=int, default=10_000)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    server = RedisServer()
    tmp = Path(tempfile.mkdtemp(prefix="bench-adk-"))
    prefix = "badk"
    prepare_namespace(server.url, prefix, tmp / "prepare.db")
    store = Store(server.url, prefix=prefix)
    services = [
        ("adk InMemorySessionService", InMemorySessionService),
        ("adk DatabaseSessionService (SQLite)", lambda: DatabaseSessionService(f"sqlite+aiosqlite:///{tmp / 'adk.db'}")),
        ("adk RedisSessionService", lambda: RedisSessionService(config=RedisSessionServiceConfig(uri=server.url, key_prefix="adkbench:"))),
        ("agentstate AgentStateSessionService", lambda: AgentStateSessionService(store=store)),
    ]
    rows = [asyncio.run(_measure(name, make, args)) for name, make in services]

    async def page() -> float:
        service = AgentStateSessionService(store=store)
        user = service.user_key(APP, "lister")
        samples = []
        for _ in range(50):
            t = time.perf_counter()
            ids, _next = await store.alist_sessions_page(100, user=user)
            samples.append(time.perf_counter() - t)
            assert len(ids) == 100
        return statistics.median(samples) * 1000

    rows[-1]["page_of_100_ms"] = asyncio.run(page())
    server.close()
    if args.json:
        print(json.dumps(rows, indent=1))
        return
    keys = [k for k in rows[-1] if k != "service"]
    print("| service | " + " | ".join(keys) + " |")
    print("|---|" + "---|" * len(keys))
    for row in rows:
        print(f"| {row['service']} | " + " | ".join(_cell(row.get(k)) for k in keys) + " |")


if __name__ == "__main__":
    main()
