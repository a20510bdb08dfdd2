"""Benchmark: agentstate's LangGraph checkpointer (``AgentStateSaver``) next to LangGraph's
``InMemorySaver`` and ``SqliteSaver`` (langgraph-checkpoint-sqlite), on the anchors' W3 and a
long-history list:

* W3 state: 16 threads x 200 rounds of a ~4 KB state, each round a ``put`` (a new checkpoint
  whose ``messages`` channel, ~4 KB, changed) then a ``get_tuple`` of the latest, by 16 OS
  threads (one LangGraph thread each; the binding releases the GIL) -> rounds/s, put and get
  p50/p99. Also the same through the async API (``aput``/``aget_tuple``) on 16 asyncio tasks.
* list: one thread of 500 checkpoints (each with pending writes), ``list`` of all 500
  (materialised tuples, values deserialised) and ``list(limit=10)``: median of 5 runs, ms.

The Redis team's saver (langgraph-checkpoint-redis) needs Redis Stack (RedisJSON and
RediSearch), which is not installable here (no ``redis-stack-server`` package in Debian), so
it is not in the table.

Run it on a release build of the extension:

    cd python && maturin develop --release
    pip install langgraph-checkpoint-sqlite==3.1.2   # (pinned in tests/requirements.txt)
    python bench_langgraph.py               # a private redis-server (--save '' --appendonly no)
    python bench_langgraph.py --redis URL   # an existing Redis (its own key prefix)
    python bench_langgraph.py --json

It needs the ``agentstate`` CLI (``cargo build --release``, or ``$AGENTSTATE_BIN``) for one
spill pass over its namespace; no daemon runs during the measurement. Figures are reported,
never asserted.
"""

from __future__ import annotations

import asyncio
import json
import statistics
import sys
import tempfile
import threading
import time
import uuid
from pathlib import Path
from typing import Any, Callable, Dict, List, Tuple

sys.path.insert(0, str(Path(__file__).parent / "tests"))

THREADS, ROUNDS, LIST_LEN, LIST_RUNS = 16, 200, 500, 5


def _messages(thread: int, round_: int) -> List[Dict[str, Any]]:
    """~4 KB of chat state."""
    return [
        {"role": "user" if i % 2 == 0 else "assistant", "id": f"m{round_}-{i}",
         "content": f"thread {thread} round {round_} message {i}: " + "the quick brown fox jumps over the lazy dog " * 2}
        for i in range(25)
    ]


def _checkpoint(saver: Any, previous: Any, values: Dict[str, Any], changed: List[str]) -> Tuple[Dict[str, Any], Dict[str, Any]]:
    """A checkpoint following ``previous`` (its versions bumped for ``changed``) and the
    ``new_versions`` to put with it."""
    from langgraph.checkpoint.base import empty_checkpoint

    cp = empty_checkpoint()
    versions = dict(previous["channel_versions"]) if previous else {}
    new_versions = {}
    for ch in changed:
        versions[ch] = new_versions[ch] = saver.get_next_version(versions.get(ch), None)
    cp["channel_versions"] = versions
    cp["channel_values"] = values
    cp["versions_seen"] = {"agent": dict(versions)}
    return cp, new_versions


def _pct(samples: List[float], p: float) -> float:
    s = sorted(samples)
    return s[min(len(s) - 1, int(round(p / 100 * (len(s) - 1))))] * 1000.0


def _summary(puts: List[float], gets: List[float], secs: float) -> Dict[str, float]:
    return {
        "rounds_per_s": len(puts) / secs,
        "put_p50_ms": _pct(puts, 50), "put_p99_ms": _pct(puts, 99),
        "get_p50_ms": _pct(gets, 50), "get_p99_ms": _pct(gets, 99),
    }


def w3_sync(saver: Any, tag: str) -> Dict[str, float]:
    puts: List[float] = []
    gets: List[float] = []
    lock = threading.Lock()
    states = [[_messages(t, r) for r in range(ROUNDS)] for t in range(THREADS)]

    def worker(t: int) -> None:
        config = {"configurable": {"thread_id": f"{tag}-w3-{t}", "checkpoint_ns": ""}}
        previous = None
        mine_p, mine_g = [], []
        for r in range(ROUNDS):
            cp, nv = _checkpoint(saver, previous, {"messages": states[t][r], "step": r}, ["messages", "step"])
            t0 = time.perf_counter()
            stored = saver.put(config, cp, {"source": "loop", "step": r, "parents": {}}, nv)
            t1 = time.perf_counter()
            got = saver.get_tuple({"configurable": {"thread_id": config["configurable"]["thread_id"], "checkpoint_ns": ""}})
            t2 = time.perf_counter()
            assert got.checkpoint["id"] == cp["id"] and got.checkpoint["channel_values"]["step"] == r
            config = stored
            previous = cp
            mine_p.append(t1 - t0)
            mine_g.append(t2 - t1)
        with lock:
            puts.extend(mine_p)
            gets.extend(mine_g)

    threads = [threading.Thread(target=worker, args=(t,)) for t in range(THREADS)]
    t0 = time.perf_counter()
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    return _summary(puts, gets, time.perf_counter() - t0)


async def w3_async(saver: Any, tag: str) -> Dict[str, float]:
    puts: List[float] = []
    gets: List[float] = []
    states = [[_messages(t, r) for r in range(ROUNDS)] for t in range(THREADS)]

    async def worker(t: int) -> None:
        config = {"configurable": {"thread_id": f"{tag}-w3a-{t}", "checkpoint_ns": ""}}
        previous = None
        for r in range(ROUNDS):
            cp, nv = _checkpoint(saver, previous, {"messages": states[t][r], "step": r}, ["messages", "step"])
            t0 = time.perf_counter()
            stored = await saver.aput(config, cp, {"source": "loop", "step": r, "parents": {}}, nv)
            t1 = time.perf_counter()
            got = await saver.aget_tuple({"configurable": {"thread_id": config["configurable"]["thread_id"], "checkpoint_ns": ""}})
            t2 = time.perf_counter()
            assert got.checkpoint["id"] == cp["id"]
            config, previous = stored, cp
            puts.append(t1 - t0)
            gets.append(t2 - t1)

    t0 = time.perf_counter()
    await asyncio.gather(*(worker(t) for t in range(THREADS)))
    return _summary(puts, gets, time.perf_counter() - t0)


def list_500(saver: Any, tag: str) -> Dict[str, float]:
    tid = f"{tag}-list"
    config = {"configurable": {"thread_id": tid, "checkpoint_ns": ""}}
    previous = None
    for r in range(LIST_LEN):
        cp, nv = _checkpoint(saver, previous, {"step": r, "note": f"checkpoint {r}"}, ["step", "note"])
        config = saver.put(config, cp, {"source": "loop", "step": r, "parents": {}}, nv)
        saver.put_writes(config, [("note", f"write {r}"), ("step", r + 1)], f"task-{r}", "~agent")
        previous = cp
    query = {"configurable": {"thread_id": tid}}

    def timed(fn: Callable[[], int], expect: int) -> float:
        runs = []
        for _ in range(LIST_RUNS):
            t0 = time.perf_counter()
            n = fn()
            runs.append(time.perf_counter() - t0)
            assert n == expect, (n, expect)
        return statistics.median(runs) * 1000.0

    return {
        "list_all_ms": timed(lambda: len(list(saver.list(query))), LIST_LEN),
        "list_10_ms": timed(lambda: len(list(saver.list(query, limit=10))), 10),
    }


def _agentstate(url: str) -> Any:
    from agentstate import Store
    from agentstate.langgraph import AgentStateSaver

    from support import prepare_namespace

    prefix = "lgbench" + uuid.uuid4().hex[:6]
    with tempfile.TemporaryDirectory() as d:  # one spill pass: the namespace takes creates
        prepare_namespace(url, prefix, Path(d) / "bench.db")
    return AgentStateSaver(store=Store(url, prefix=prefix))


def run(url: str, sqlite_dir: Path) -> Dict[str, Dict[str, Any]]:
    import sqlite3

    from langgraph.checkpoint.memory import InMemorySaver
    from langgraph.checkpoint.sqlite import SqliteSaver

    rows: Dict[str, Dict[str, Any]] = {}
    agentstate = _agentstate(url)
    rows["AgentStateSaver"] = {**w3_sync(agentstate, "a"), **list_500(agentstate, "a"),
                               **{f"async_{k}": v for k, v in asyncio.run(w3_async(agentstate, "a")).items()}}
    memory = InMemorySaver()
    rows["InMemorySaver"] = {**w3_sync(memory, "m"), **list_500(memory, "m")}
    conn = sqlite3.connect(str(sqlite_dir / "lg.sqlite"), check_same_thread=False)
    try:
        sqlite_saver = SqliteSaver(conn)
        rows["SqliteSaver"] = {**w3_sync(sqlite_saver, "s"), **list_500(sqlite_saver, "s")}
    finally:
        conn.close()
    return rows


def main() -> None:
    from support import bench_redis

    args, redis_url = bench_redis(__doc__)
    with redis_url as url, tempfile.TemporaryDirectory() as d:
        rows = run(url, Path(d))
    if args.json:
        print(json.dumps({"workload": {"threads": THREADS, "rounds": ROUNDS, "list": LIST_LEN}, "results": rows}, indent=2))
        return
    print(f"W3: {THREADS} threads x {ROUNDS} rounds (put ~4 KB state, then get latest), sync API on "
          f"{THREADS} OS threads; list: {LIST_LEN} checkpoints, median of {LIST_RUNS}")
    print(f"{'':16} {'rounds/s':>9} {'put p50':>8} {'put p99':>8} {'get p50':>8} {'get p99':>8} "
          f"{'list 500 ms':>12} {'list 10 ms':>11}")
    for name, x in rows.items():
        print(f"{name:16} {x['rounds_per_s']:>9,.0f} {x['put_p50_ms']:>8.3f} {x['put_p99_ms']:>8.3f} "
              f"{x['get_p50_ms']:>8.3f} {x['get_p99_ms']:>8.3f} {x['list_all_ms']:>12.2f} {x['list_10_ms']:>11.2f}")
    a = rows["AgentStateSaver"]
    print(f"AgentStateSaver async API (16 asyncio tasks): {a['async_rounds_per_s']:,.0f} rounds/s, "
          f"put p50/p99 {a['async_put_p50_ms']:.3f}/{a['async_put_p99_ms']:.3f} ms, "
          f"get p50/p99 {a['async_get_p50_ms']:.3f}/{a['async_get_p99_ms']:.3f} ms")


if __name__ == "__main__":
    main()
