"""Benchmark: agentstate's AgentStateSession next to openai-agents' own RedisSession on the
same Redis, on the anchors' workloads W1 and W2:

* W1 append: 64 sessions x 500 appends (one item per ``add_items`` call) by N asyncio
  workers (``--workers``, default 8: each owns 64/N sessions and appends to them in turn)
  -> appends/s, p50/p99 latency.
* W2 load: full loads (``get_items()``, 500 items each) of the 64 sessions by the same
  workers, 3 passes (``--passes``) -> loads/s, items/s, p50/p99 latency. At 64 workers, 3
  passes are 3 loads per worker: a burst whose ramp and tail weigh on loads/s; ``--passes 30``
  measures the steady state.

Run it on a release build of the extension:

    cd python && maturin develop --release && pip install "openai-agents[redis]==0.24.0"
    python bench.py                 # a private redis-server on a free port (--save '' --appendonly no)
    python bench.py --redis URL     # an existing Redis (uses its own key prefixes, cleans up)
    python bench.py --json          # one JSON document
    python bench.py --workers 64    # 64 asyncio workers (one session each) instead of 8
    python bench.py --passes 30     # W2 loads every session 30 times instead of 3

It needs the `agentstate` CLI (`cargo build --release`, or `$AGENTSTATE_BIN`) for one spill
pass over its namespace (a namespace takes creates once a daemon has checked it); no daemon
runs during the measurement.

Figures are reported, never asserted. AgentStateSession writes more per append than
RedisSession (the message element, the session meta, the wal entry the spill daemon needs,
TTL refreshes): the comparison is of what each costs its caller.
"""

from __future__ import annotations

import asyncio
import json
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any, Callable, Dict, List

sys.path.insert(0, str(Path(__file__).parent / "tests"))

SESSIONS, APPENDS = 64, 500


def _item(session: int, i: int) -> Dict[str, Any]:
    return {"role": "user" if i % 2 == 0 else "assistant",
            "content": f"message {i} of session {session}: the quick brown fox jumps over the lazy dog"}


def _pct(samples: List[float], p: float) -> float:
    s = sorted(samples)
    return s[min(len(s) - 1, int(round(p / 100 * (len(s) - 1))))] * 1000.0


async def _workload(sessions: List[Any], workers: int, passes: int) -> Dict[str, Any]:
    """W1 then W2 (`passes` loads of each session) over `sessions` (objects with the Session
    protocol) by `workers` tasks."""
    per_worker = [sessions[w::workers] for w in range(workers)]

    async def appender(mine: List[Any], lat: List[float]) -> None:
        for i in range(APPENDS):
            for idx, s in enumerate(mine):
                t = time.perf_counter()
                await s.add_items([_item(idx, i)])
                lat.append(time.perf_counter() - t)

    lat1: List[float] = []
    t0 = time.perf_counter()
    await asyncio.gather(*(appender(m, lat1) for m in per_worker))
    w1_secs = time.perf_counter() - t0

    async def loader(mine: List[Any], lat: List[float], counts: List[int]) -> None:
        for _ in range(passes):
            for s in mine:
                t = time.perf_counter()
                items = await s.get_items()
                lat.append(time.perf_counter() - t)
                counts.append(len(items))

    lat2: List[float] = []
    counts: List[int] = []
    t0 = time.perf_counter()
    await asyncio.gather(*(loader(m, lat2, counts) for m in per_worker))
    w2_secs = time.perf_counter() - t0
    assert all(c == APPENDS for c in counts), "a load lost items"
    return {
        "w1_appends": len(lat1),
        "w1_appends_per_s": len(lat1) / w1_secs,
        "w1_p50_ms": _pct(lat1, 50),
        "w1_p99_ms": _pct(lat1, 99),
        "w2_loads": len(lat2),
        "w2_loads_per_s": len(lat2) / w2_secs,
        "w2_items_per_s": sum(counts) / w2_secs,
        "w2_p50_ms": _pct(lat2, 50),
        "w2_p99_ms": _pct(lat2, 99),
    }


async def bench_agentstate(url: str, workers: int, passes: int) -> Dict[str, Any]:
    from agentstate import Store
    from agentstate.openai_agents import AgentStateSession

    from support import prepare_namespace

    prefix = "bench" + uuid.uuid4().hex[:6]
    with tempfile.TemporaryDirectory() as d:  # one spill pass: the namespace takes creates
        prepare_namespace(url, prefix, Path(d) / "bench.db")
    store = await Store.aconnect(url, prefix=prefix)
    sessions = [AgentStateSession(f"s{i}", store=store) for i in range(SESSIONS)]
    try:
        return await _workload(sessions, workers, passes)
    finally:
        for s in sessions:
            await s.clear_session()


async def bench_redis_session(url: str, workers: int, passes: int) -> Dict[str, Any]:
    import redis.asyncio as redis
    from agents.extensions.memory import RedisSession

    client = redis.from_url(url)
    prefix = "benchoai" + uuid.uuid4().hex[:6]
    sessions = [RedisSession(f"s{i}", redis_client=client, key_prefix=prefix) for i in range(SESSIONS)]
    try:
        return await _workload(sessions, workers, passes)
    finally:
        for s in sessions:
            await s.clear_session()
        await client.aclose()


def main() -> None:
    from support import bench_redis

    def positive(v: str) -> int:
        if not v.isdigit() or int(v) < 1:
            raise ValueError(v)
        return int(v)

    def add_arguments(ap: Any) -> None:
        ap.add_argument("--workers", type=int, default=8, choices=range(1, SESSIONS + 1),
                        metavar=f"1..{SESSIONS}", help="asyncio workers sharing the sessions (default 8)")
        ap.add_argument("--passes", type=positive, default=3, help="W2 loads of each session (default 3)")

    args, redis_url = bench_redis(__doc__, add_arguments)
    workers, passes = args.workers, args.passes
    rows: Dict[str, Dict[str, Any]] = {}
    with redis_url as url:
        for name, fn in (("AgentStateSession", bench_agentstate), ("RedisSession", bench_redis_session)):
            rows[name] = asyncio.run(fn(url, workers, passes))
    a, r = rows["AgentStateSession"], rows["RedisSession"]
    ratios = {
        "w1_appends_per_s": a["w1_appends_per_s"] / r["w1_appends_per_s"],
        "w1_p99": a["w1_p99_ms"] / r["w1_p99_ms"],
        "w2_loads_per_s": a["w2_loads_per_s"] / r["w2_loads_per_s"],
    }
    if args.json:
        print(json.dumps({"workload": {"sessions": SESSIONS, "appends": APPENDS, "workers": workers,
                                       "passes": passes},
                          "results": rows, "ratios": ratios}, indent=2))
        return
    print(f"W1: {SESSIONS} sessions x {APPENDS} appends by {workers} asyncio workers; "
          f"W2: full loads ({APPENDS} items) x {passes} passes")
    print(f"{'':20} {'W1 appends/s':>13} {'p50 ms':>8} {'p99 ms':>8} {'W2 loads/s':>11} {'items/s':>10} {'p50 ms':>8} {'p99 ms':>8}")
    for name, x in rows.items():
        print(f"{name:20} {x['w1_appends_per_s']:>13,.0f} {x['w1_p50_ms']:>8.3f} {x['w1_p99_ms']:>8.3f} "
              f"{x['w2_loads_per_s']:>11,.0f} {x['w2_items_per_s']:>10,.0f} {x['w2_p50_ms']:>8.3f} {x['w2_p99_ms']:>8.3f}")
    print(f"ratio agentstate/RedisSession: appends/s x{ratios['w1_appends_per_s']:.2f}, "
          f"W1 p99 x{ratios['w1_p99']:.2f}, loads/s x{ratios['w2_loads_per_s']:.2f}")


if __name__ == "__main__":
    main()
