"""Benchmark: long-term memory through LangGraph's ``BaseStore``, agentstate's
``AgentStateStore`` next to LangGraph's ``InMemoryStore`` and, without vector search (this
machine's PostgreSQL has no pgvector), langgraph-checkpoint-postgres' ``PostgresStore``, in
one run, for 10k and 100k items of 256 and 1536 dimensions:

* put/s: every item put one after the other from one process (``store.put``, one op each;
  the value ~100 bytes plus its vector);
* search p50 over all items (``search(("bench",), query=..., limit=10)``, ranked by cosine
  similarity; ``PostgresStore``: the same search without a query, newest first) and over one
  user's namespace (``("bench", "u7")``, 1/100 of the items);
* Redis memory per item (``INFO memory`` used_memory after the puts minus before, / items).

The embedding is a cheap deterministic fake (one of 1000 fixed random unit vectors picked
by a hash of the text), the same function for every store, so the figures measure the
stores. Items are spread over 100 namespaces ``("bench", "u<i % 100>")``.

    cd python && maturin develop --release
    pip install langgraph-checkpoint-postgres==3.2.0 'psycopg[binary,pool]'
    python bench_store.py                  # a private redis-server, 127.0.0.1:5432 for Postgres
    python bench_store.py --sizes 10000 --dims 1536 --json

It needs the ``agentstate`` CLI (``$AGENTSTATE_BIN``) for one spill pass over its namespace;
no daemon runs during the measurement. The PostgreSQL database (user postgres, trust auth)
is created and dropped by the run. Figures are reported, never asserted.
"""

from __future__ import annotations

import json
import random
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
import zlib
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional

sys.path.insert(0, str(Path(__file__).parent / "tests"))

NAMESPACES = 100
SEARCHES = {10_000: 30, 100_000: 3}
PG_ADMIN = "postgresql://postgres@127.0.0.1:5432/postgres"


def fake_embed(dims: int) -> Callable[[List[str]], List[List[float]]]:
    rng = random.Random(dims)
    pool = []
    for _ in range(1000):
        v = [rng.gauss(0, 1) for _ in range(dims)]
        norm = sum(x * x for x in v) ** 0.5
        pool.append([x / norm for x in v])

    def embed(texts: List[str]) -> List[List[float]]:
        return [pool[zlib.crc32(t.encode()) % len(pool)] for t in texts]

    return embed


def _value(i: int) -> Dict[str, Any]:
    return {"text": f"memory {i}: the user prefers option {i % 37} in context {i % 11}", "n": i % 10}


def _used_memory(url: str) -> int:
    port = url.rsplit(":", 1)[1]
    out = subprocess.run(["redis-cli", "-p", port, "INFO", "memory"], capture_output=True, text=True).stdout
    return int(next(line.split(":")[1] for line in out.splitlines() if line.startswith("used_memory:")))


def measure(store: Any, n: int, query: bool, after_puts: Callable[[], Dict[str, float]] = dict) -> Dict[str, Any]:
    """Puts n items, then searches; ``after_puts`` adds figures taken between the two (a
    search's reply buffers would count in Redis' memory)."""
    t0 = time.perf_counter()
    for i in range(n):
        store.put(("bench", f"u{i % NAMESPACES}"), f"k{i}", _value(i))
    put_s = time.perf_counter() - t0
    out: Dict[str, Any] = {"put_per_s": n / put_s, **after_puts()}
    for name, prefix in (("user", ("bench", "u7")), ("all", ("bench",))):
        times = []
        try:
            for j in range(SEARCHES[n]):
                q = f"what does the user prefer for option {j}" if query else None
                t = time.perf_counter()
                found = store.search(prefix, query=q, limit=10)
                times.append(time.perf_counter() - t)
                assert len(found) == 10
        except Exception as e:  # a search that cannot finish is a figure too
            out[f"search_{name}_error"] = f"{type(e).__name__} after {time.perf_counter() - t:.0f} s"
            continue
        out[f"search_{name}_p50_ms"] = statistics.median(times) * 1000
    return out


def ours(url: str, dims: int, n: int) -> Dict[str, float]:
    from support import prepare_namespace

    from agentstate import Store
    from agentstate.langgraph import AgentStateStore

    prefix = "b" + uuid.uuid4().hex[:8]
    with tempfile.TemporaryDirectory() as d:
        prepare_namespace(url, prefix, Path(d) / "bench.db")
    store = AgentStateStore(store=Store(url, prefix=prefix),
                            index={"dims": dims, "embed": fake_embed(dims), "fields": ["text"]})
    before = _used_memory(url)
    out = measure(store, n, query=True,
                  after_puts=lambda: {"redis_bytes_per_item": (_used_memory(url) - before) / n})
    subprocess.run(["redis-cli", "-p", url.rsplit(":", 1)[1], "FLUSHALL"], stdout=subprocess.DEVNULL)
    return out


def in_memory(dims: int, n: int) -> Dict[str, float]:
    from langgraph.store.memory import InMemoryStore

    return measure(InMemoryStore(index={"dims": dims, "embed": fake_embed(dims), "fields": ["text"]}), n, query=True)


def postgres(n: int) -> Optional[Dict[str, float]]:
    """PostgresStore without an index (no pgvector here), on a database made for the run."""
    try:
        import psycopg
        from langgraph.store.postgres import PostgresStore
    except ImportError:
        return None
    name = "agentstate_bench_" + uuid.uuid4().hex[:8]
    with psycopg.connect(PG_ADMIN, autocommit=True) as admin:
        admin.execute(f"CREATE DATABASE {name}")
    try:
        with PostgresStore.from_conn_string(PG_ADMIN.rsplit("/", 1)[0] + "/" + name) as store:
            store.setup()
            return measure(store, n, query=False)
    finally:
        with psycopg.connect(PG_ADMIN, autocommit=True) as admin:
            admin.execute(f"DROP DATABASE {name} WITH (FORCE)")


def _ms(got: Dict[str, Any], name: str) -> str:
    if f"search_{name}_p50_ms" in got:
        return f"{got[f'search_{name}_p50_ms']:>9.2f} ms"
    return got[f"search_{name}_error"]


def main() -> None:
    from support import bench_redis

    def add_arguments(ap):
        ap.add_argument("--sizes", type=int, nargs="+", default=[10_000, 100_000])
        ap.add_argument("--dims", type=int, nargs="+", default=[256, 1536])
        ap.add_argument("--postgres-items", type=int, default=10_000,
                        help="the size PostgresStore runs at (it has no vectors: once, at the first dims)")

    args, redis_url = bench_redis(__doc__, add_arguments)
    rows: List[Dict[str, Any]] = []
    with redis_url as url:
        for n in args.sizes:
            for dims in args.dims:
                for name, run in (("AgentStateStore", lambda: ours(url, dims, n)),
                                  ("InMemoryStore", lambda: in_memory(dims, n)),
                                  ("PostgresStore*", lambda: postgres(n)
                                   if dims == args.dims[0] and n == args.postgres_items else None)):
                    got = run()
                    if got is not None:
                        rows.append({"store": name, "items": n, "dims": dims, **got})
                        if not args.json:
                            print(f"{name:16} {n:>7,} items {dims:>5} dims: {got['put_per_s']:>8,.0f} put/s, "
                                  f"search p50 all {_ms(got, 'all')}, one user {_ms(got, 'user')}"
                                  + (f", Redis {got['redis_bytes_per_item']:,.0f} B/item"
                                     if "redis_bytes_per_item" in got else ""), flush=True)
    if args.json:
        print(json.dumps({"results": rows}, indent=2))
    else:
        print("* PostgresStore without an index (no pgvector): its searches are unranked "
              "(newest first), its items carry no vector")


if __name__ == "__main__":
    main()
