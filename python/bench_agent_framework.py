"""Benchmark: agentstate's AgentStateHistoryProvider next to agent-framework-redis'
RedisHistoryProvider, both on the same private redis-server, in one run:

* save: ``save_messages`` of one turn (a user and an assistant message) per second, 1 writer
  and 8 writers (asyncio tasks, a session each), ``TURNS`` turns per writer;
* get: ``get_messages`` median latency on a history of 100 messages and of ``--messages``;
* bounded: the same with ``max_messages=100`` (RedisHistoryProvider trims the list to 100 on
  save; ours compacts the rest out and reads the newest 100).

Run it on a release build of the extension:

    cd python && maturin develop --release && pip install "agent-framework-redis==1.0.0b261022"
    python bench_agent_framework.py [--messages 2000] [--json]

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
from typing import Any, Callable, Dict, List, Optional

sys.path.insert(0, str(Path(__file__).parent / "tests"))

from agent_framework import Message  # noqa: E402

TURNS, WRITERS, GETS = 200, 8, 50


def _turn(i: int) -> List[Message]:
    return [Message(role="user", contents=[f"question {i}: the quick brown fox jumps over the lazy dog"]),
            Message(role="assistant", contents=[f"answer {i}: it does, every time it is asked"])]


async def _saves(provider: Any, writers: int) -> float:
    sessions = [f"s{writers}-{w}-{uuid.uuid4().hex[:6]}" for w in range(writers)]

    async def writer(session: str) -> None:
        for i in range(TURNS):
            await provider.save_messages(session, _turn(i))

    t = time.perf_counter()
    await asyncio.gather(*(writer(s) for s in sessions))
    return writers * TURNS / (time.perf_counter() - t)


async def _get_ms(provider: Any, messages: int, expect: int) -> float:
    session = f"g{messages}-{uuid.uuid4().hex[:6]}"
    for i in range(0, messages, 100):  # 50 turns per save
        await provider.save_messages(session, [m for j in range(i // 2, i // 2 + 50) for m in _turn(j)])
    samples = []
    for _ in range(GETS):
        t = time.perf_counter()
        got = await provider.get_messages(session)
        samples.append(time.perf_counter() - t)
        assert len(got) == expect, (len(got), expect)
    return statistics.median(samples) * 1000


async def _measure(name: str, make: Callable[[Optional[int]], Any], args: argparse.Namespace) -> Dict[str, Any]:
    row: Dict[str, Any] = {"provider": name}
    plain, bounded = make(None), make(100)
    steps = [
        ("save_turn_1_per_s", lambda: _saves(plain, 1)),
        ("save_turn_8_per_s", lambda: _saves(plain, WRITERS)),
        ("get_100_ms", lambda: _get_ms(plain, 100, 100)),
        (f"get_{args.messages}_ms", lambda: _get_ms(plain, args.messages, args.messages)),
        ("bounded_save_turn_1_per_s", lambda: _saves(bounded, 1)),
        (f"bounded_get_100_of_{args.messages}_ms", lambda: _get_ms(bounded, args.messages, 100)),
    ]
    for key, step in steps:
        try:
            row[key] = await step()
        except Exception as e:
            row[key] = f"failed: {type(e).__name__}: {e}"[:80]
    for p in (plain, bounded):
        await p.aclose()
    print(f"  {name}: {row}", file=sys.stderr)
    return row


def _cell(value: Any) -> str:
    if value is None:
        return "-"
    return f"{value:.1f}" if isinstance(value, float) else str(value)


def main() -> None:
    from agent_framework_redis import RedisHistoryProvider

    from agentstate import Store
    from agentstate.agent_framework import AgentStateHistoryProvider
    from support import RedisServer, prepare_namespace

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--messages", type=int, default=2000)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    server = RedisServer()
    tmp = Path(tempfile.mkdtemp(prefix="bench-maf-"))
    prefix = "bmaf"
    prepare_namespace(server.url, prefix, tmp / "prepare.db")

    def redis(max_messages: Optional[int]) -> Any:
        return RedisHistoryProvider("bench", redis_url=server.url, application_id="bench",
                                    max_messages=max_messages)

    async def run_agentstate() -> Dict[str, Any]:
        store = await Store.aconnect(server.url, prefix=prefix)
        return await _measure(
            "agentstate AgentStateHistoryProvider",
            lambda m: AgentStateHistoryProvider("bench", store=store, max_messages=m), args)

    rows = [asyncio.run(_measure("agent-framework-redis RedisHistoryProvider", redis, args)),
            asyncio.run(run_agentstate())]
    server.close()
    if args.json:
        print(json.dumps(rows, indent=1))
        return
    keys = [k for k in rows[-1] if k != "provider"]
    print("| provider | " + " | ".join(keys) + " |")
    print("|---|" + "---|" * len(keys))
    for row in rows:
        print(f"| {row['provider']} | " + " | ".join(_cell(row.get(k)) for k in keys) + " |")


if __name__ == "__main__":
    main()
