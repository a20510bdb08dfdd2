"""Benchmark: what `durable=True` costs an append. One writer appends N messages, one at a
time, to a private redis-server with an in-process `SpillDaemon` on a temp SQLite file:
first with the default write-behind (the call returns once Redis has the message), then with
`durable=True` (it returns once the daemon committed it to SQLite). Prints the median and
p99 per append of each, and their ratio. Figures are reported, never asserted.

    cd python && maturin develop --release
    python bench_durable.py            # N = 500, the daemon's default pass interval (50 ms)
    python bench_durable.py 2000 0.005 # another N, a 5 ms pass interval
"""

from __future__ import annotations

import statistics
import sys
import tempfile
import time
from pathlib import Path

from agentstate import SpillDaemon, Store
from agentstate.testing import RedisServer


def per_append_ms(store: Store, sid: str, n: int) -> list:
    times = []
    for i in range(n):
        started = time.perf_counter()
        store.append(sid, "user", f"message {i}")
        times.append((time.perf_counter() - started) * 1000)
    return times


def main() -> None:
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 500
    interval = float(sys.argv[2]) if len(sys.argv) > 2 else 0.05
    server = RedisServer()
    try:
        with tempfile.TemporaryDirectory() as tmp, SpillDaemon(
            server.url, Path(tmp) / "b.db", interval=interval
        ):
            store = Store(server.url)
            rows = {}
            for label, s in (("write-behind", store), ("durable=True", store.with_durability(True))):
                sid = s.create_session()
                per_append_ms(s, sid, 20)  # warm up: connections, scripts
                times = sorted(per_append_ms(s, sid, n))
                rows[label] = (statistics.median(times), times[int(len(times) * 0.99) - 1])
            for label, (median, p99) in rows.items():
                print(f"{label:13} median {median:6.2f} ms   p99 {p99:6.2f} ms   ({n} appends)")
            ratio = rows["durable=True"][0] / rows["write-behind"][0]
            print(f"durable / write-behind (median): {ratio:.1f}x (daemon pass interval {interval} s)")
    finally:
        server.stop()


if __name__ == "__main__":
    main()
