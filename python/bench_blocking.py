"""Benchmark: what a blocked call leaves to the rest of the process. A consumer read that
finds nothing waits in Redis for its ``block`` time; meanwhile

* sync: a spinning Python thread keeps counting (the read releases the GIL) — its count
  during ``consumer.read()`` next to its count during ``time.sleep`` of the same length
  (which releases the GIL too: the baseline), and how long the read took against ``block``;
* async: a coroutine beating every 10 ms keeps beating (the twin leaves the loop free) — its
  beats during ``await consumer.aread()`` next to its beats during ``asyncio.sleep``.

These are the figures test_store.py's GIL/loop test once asserted (``>= 0.4 s``, ``> 10,000``
spins, ``>= 20`` beats): on a loaded machine they are noise, so the test now waits for
conditions (the read returns a decision recorded by the other thread or coroutine once Redis
shows the read blocked) and the numbers are reported here, never asserted.

    cd python && maturin develop --release
    python bench_blocking.py                 # a private redis-server on a free port
    python bench_blocking.py --redis URL     # an existing Redis (its own key prefix)
    python bench_blocking.py --json          # one JSON document

It needs the `agentstate` CLI (`cargo build --release`, or `$AGENTSTATE_BIN`) for one spill
pass over its namespace.
"""

from __future__ import annotations

import asyncio
import json
import sys
import tempfile
import threading
import time
import uuid
from pathlib import Path
from typing import Any, Callable, Dict

sys.path.insert(0, str(Path(__file__).parent / "tests"))

BLOCK = 0.5
RUNS = 5


def _spins_during(wait: Callable[[], Any]) -> Dict[str, float]:
    """Iterations of a spinning Python thread while ``wait()`` runs on this one."""
    count = [0]
    stop = threading.Event()

    def spin() -> None:
        while not stop.is_set():
            count[0] += 1

    t = threading.Thread(target=spin)
    t.start()
    started = time.perf_counter()
    wait()
    secs = time.perf_counter() - started
    stop.set()
    t.join()
    return {"secs": secs, "spins": count[0]}


async def _beats_during(wait: Callable[[], Any]) -> Dict[str, float]:
    """Beats of a coroutine sleeping 10 ms between beats while ``await wait()`` runs."""
    beats = [0]

    async def heartbeat() -> None:
        while True:
            beats[0] += 1
            await asyncio.sleep(0.01)

    hb = asyncio.ensure_future(heartbeat())
    await asyncio.sleep(0)
    started = time.perf_counter()
    await wait()
    secs = time.perf_counter() - started
    hb.cancel()
    return {"secs": secs, "beats": beats[0]}


def _median(xs: list) -> float:
    s = sorted(xs)
    return s[len(s) // 2]


def run(url: str) -> Dict[str, Any]:
    from agentstate import Store

    from support import prepare_namespace

    prefix = "blockbench" + uuid.uuid4().hex[:6]
    with tempfile.TemporaryDirectory() as d:
        prepare_namespace(url, prefix, Path(d) / "bench.db")
    store = Store(url, prefix=prefix)
    consumer = store.consumer("idle", "bench", block=BLOCK)

    read = [_spins_during(consumer.read) for _ in range(RUNS)]
    sleep = [_spins_during(lambda: time.sleep(BLOCK)) for _ in range(RUNS)]

    async def beats() -> Dict[str, list]:
        return {
            "aread": [await _beats_during(consumer.aread) for _ in range(RUNS)],
            "sleep": [await _beats_during(lambda: asyncio.sleep(BLOCK)) for _ in range(RUNS)],
        }

    b = asyncio.run(beats())
    return {
        "block_s": BLOCK,
        "runs": RUNS,
        "read_secs_median": _median([r["secs"] for r in read]),
        "spins_during_read_median": _median([r["spins"] for r in read]),
        "spins_during_sleep_median": _median([r["spins"] for r in sleep]),
        "aread_secs_median": _median([r["secs"] for r in b["aread"]]),
        "beats_during_aread_median": _median([r["beats"] for r in b["aread"]]),
        "beats_during_sleep_median": _median([r["beats"] for r in b["sleep"]]),
    }


def main() -> None:
    from support import bench_redis

    args, redis_url = bench_redis(__doc__)
    with redis_url as url:
        r = run(url)
    if args.json:
        print(json.dumps(r, indent=2))
        return
    print(f"an idle consumer read, block={BLOCK} s, median of {RUNS}:")
    print(f"  sync:  read took {r['read_secs_median']:.3f} s; a spinning thread counted "
          f"{r['spins_during_read_median']:,.0f} meanwhile ({r['spins_during_sleep_median']:,.0f} during "
          f"time.sleep({BLOCK}): x{r['spins_during_read_median'] / max(r['spins_during_sleep_median'], 1):.2f})")
    print(f"  async: aread took {r['aread_secs_median']:.3f} s; a 10 ms heartbeat beat "
          f"{r['beats_during_aread_median']:.0f} times meanwhile ({r['beats_during_sleep_median']:.0f} during "
          f"asyncio.sleep({BLOCK}))")


if __name__ == "__main__":
    main()
