"""Benchmark: agentstate's AgentStateStepStore next to pydantic-ai-harness' own SqliteStepStore
(a SQLite file) and PostgresStepStore (an asyncpg pool) in one run:

* events: ``append_event`` per second, 1 writer (one run) and 8 writers (asyncio tasks, a
  run each), ``EVENTS`` events per writer; ``list_events`` of a run of ``EVENTS`` events;
* snapshots: ``save_snapshot`` per second and ``latest_snapshot`` median latency, with a
  history of ``--messages`` messages (a tool call and its return per pair), on a run that
  already holds ``SNAPSHOTS`` snapshots;
* effects: a ``started`` + ``completed`` tool-effect pair per second.

Run it on a release build of the extension:

    cd python && maturin develop --release && pip install "pydantic-ai-harness==0.62.0" asyncpg
    AGENTSTATE_TEST_PG=postgres://... python bench_pydantic_ai.py [--messages 40] [--json]

``AGENTSTATE_TEST_PG`` (an admin URL; scripts/test-postgres.sh prints one) adds the
PostgreSQL row, in a database of its own; without it or asyncpg that row is left out. It needs
the ``agentstate`` CLI (``$AGENTSTATE_BIN`` or on PATH) for one spill pass over its namespace.
Figures are reported, never asserted (BENCHMARKS.md records a run).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any, Awaitable, Callable, Dict, List, Optional

sys.path.insert(0, str(Path(__file__).parent / "tests"))

from pydantic_ai.messages import (  # noqa: E402
    ModelRequest,
    ModelResponse,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
    UserPromptPart,
)
from pydantic_ai_harness.step_persistence import (  # noqa: E402
    ContinuableSnapshot,
    StepEvent,
    ToolEffectRecord,
)

EVENTS, WRITERS, SNAPSHOTS, READS, EFFECTS = 500, 8, 20, 50, 200


def _history(messages: int) -> List[Any]:
    out: List[Any] = [ModelRequest(parts=[UserPromptPart(content="plan the release, step by step")])]
    for i in range(messages // 2):
        out.append(ModelResponse(parts=[TextPart("checking"), ToolCallPart("lookup", {"item": i}, tool_call_id=f"c{i}")]))
        out.append(ModelRequest(parts=[ToolReturnPart("lookup", {"item": i, "status": "ok", "note": "the quick brown fox"}, tool_call_id=f"c{i}")]))
    return out


async def _events(steps: Any, writers: int) -> float:
    runs = [f"ev{writers}-{w}-{uuid.uuid4().hex[:6]}" for w in range(writers)]

    async def writer(run_id: str) -> None:
        for i in range(EVENTS):
            await steps.append_event(StepEvent(run_id=run_id, kind="model_request_started", step_index=i,
                                               idempotency_key=f"{i}:{i}:model_request_started:"))

    t = time.perf_counter()
    await asyncio.gather(*(writer(r) for r in runs))
    return writers * EVENTS / (time.perf_counter() - t)


async def _list_events_ms(steps: Any) -> float:
    run_id = f"le-{uuid.uuid4().hex[:6]}"
    for i in range(EVENTS):
        await steps.append_event(StepEvent(run_id=run_id, kind="tool_call_started", step_index=i))
    samples = []
    for _ in range(20):
        t = time.perf_counter()
        got = await steps.list_events(run_id=run_id)
        samples.append(time.perf_counter() - t)
        assert len(got) == EVENTS
    return statistics.median(samples) * 1000


async def _snapshots(steps: Any, messages: int) -> Dict[str, float]:
    run_id = f"sn-{uuid.uuid4().hex[:6]}"
    history = _history(messages)
    t = time.perf_counter()
    for i in range(SNAPSHOTS):
        await steps.save_snapshot(ContinuableSnapshot(run_id=run_id, step_index=i, messages=history,
                                                      idempotency_key=f"{i}:{i}:complete"))
    saves = SNAPSHOTS / (time.perf_counter() - t)
    samples = []
    for _ in range(READS):
        t = time.perf_counter()
        got = await steps.latest_snapshot(run_id=run_id)
        samples.append(time.perf_counter() - t)
        assert got is not None and len(got.messages) == len(history)
    return {"snapshot_save_per_s": saves, "snapshot_latest_ms": statistics.median(samples) * 1000}


async def _effects(steps: Any) -> float:
    run_id = f"ef-{uuid.uuid4().hex[:6]}"
    t = time.perf_counter()
    for i in range(EFFECTS):
        started = ToolEffectRecord(tool_call_id=f"call{i}", tool_name="charge", run_id=run_id, status="started")
        await steps.record_tool_effect(started)
        await steps.record_tool_effect(ToolEffectRecord(tool_call_id=f"call{i}", tool_name="charge", run_id=run_id,
                                                        status="completed", started_at=started.started_at))
    return EFFECTS / (time.perf_counter() - t)


async def _measure(name: str, make: Callable[[], Awaitable[Any]], args: argparse.Namespace) -> Dict[str, Any]:
    steps = await make()
    row: Dict[str, Any] = {"store": name}
    measures: List[Any] = [
        ("events_1_per_s", lambda: _events(steps, 1)),
        ("events_8_per_s", lambda: _events(steps, WRITERS)),
        (f"list_{EVENTS}_events_ms", lambda: _list_events_ms(steps)),
        (None, lambda: _snapshots(steps, args.messages)),
        ("effect_pairs_per_s", lambda: _effects(steps)),
    ]
    for key, step in measures:
        try:
            got = await step()
        except Exception as e:  # a store that fails a step (e.g. SQLite "database is locked")
            got = f"failed: {type(e).__name__}: {e}"[:80]
        if key is None and isinstance(got, dict):
            row.update(got)
        elif key is None:
            row["snapshot_save_per_s"] = row["snapshot_latest_ms"] = got
        else:
            row[key] = got
    print(f"  {name}: {row}", file=sys.stderr)
    return row


def _cell(value: Any) -> str:
    if value is None:
        return "-"
    return f"{value:.1f}" if isinstance(value, float) else str(value)


async def _postgres(admin: str) -> Optional[Any]:
    try:
        import asyncpg  # type: ignore[import-not-found]
    except ImportError:
        return None
    from pydantic_ai_harness.step_persistence import PostgresStepStore

    name = "bench_pah_" + uuid.uuid4().hex[:8]
    conn = await asyncpg.connect(admin)
    await conn.execute(f"CREATE DATABASE {name}")
    await conn.close()
    pool = await asyncpg.create_pool(admin.rsplit("/", 1)[0] + "/" + name, min_size=1, max_size=WRITERS)
    return PostgresStepStore(pool)


def main() -> None:
    from agentstate import Store
    from agentstate.pydantic_ai import AgentStateStepStore
    from pydantic_ai_harness.step_persistence import SqliteStepStore
    from support import RedisServer, prepare_namespace

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--messages", type=int, default=40, help="messages per snapshot history")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    server = RedisServer()
    tmp = Path(tempfile.mkdtemp(prefix="bench-pah-"))
    prefix = "bpah"
    prepare_namespace(server.url, prefix, tmp / "prepare.db")
    store = Store(server.url, prefix=prefix)

    async def agentstate() -> Any:
        return AgentStateStepStore(store=store)

    async def sqlite() -> Any:
        return SqliteStepStore(database=tmp / "harness.db", media_store=None)

    stores: List[Any] = [("harness SqliteStepStore", sqlite)]
    admin = os.environ.get("AGENTSTATE_TEST_PG")
    if admin:
        stores.append(("harness PostgresStepStore (asyncpg)", lambda: _postgres(admin)))
    stores.append(("agentstate AgentStateStepStore", agentstate))

    rows = []
    for name, make in stores:
        async def made(make: Any = make) -> Any:
            steps = await make()
            if steps is None:
                raise RuntimeError("asyncpg is not installed")
            return steps

        try:
            rows.append(asyncio.run(_measure(name, made, args)))
        except RuntimeError as e:
            print(f"  {name}: left out ({e})", file=sys.stderr)
    server.close()
    if args.json:
        print(json.dumps(rows, indent=1))
        return
    keys = [k for k in rows[-1] if k != "store"]
    print("| store | " + " | ".join(keys) + " |")
    print("|---|" + "---|" * len(keys))
    for row in rows:
        print(f"| {row['store']} | " + " | ".join(_cell(row.get(k)) for k in keys) + " |")


if __name__ == "__main__":
    main()
