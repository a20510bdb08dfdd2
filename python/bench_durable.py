"""Benchmark: what durability costs, against the `agentstate` installed beside this Python.
Each part starts a private redis-server and the install's own `agentstate spill` as a child
process (its default settings), and reports, never asserts:

1. one writer appending N messages one at a time: write-behind (returns once Redis has it)
   against `durable=True` (returns once the durable tier committed it), median and p99 per
   append, on SQLite and (with `--postgres`) on a PostgreSQL database made and dropped here;
2. W writers (threads, a session each) appending `durable=True` for S seconds: appends/s;
3. the same W writers without `durable`: the write-behind window (acknowledged append to its
   commit) from the daemon's `agentstate_write_behind_seconds` histogram (`--metrics`), as
   bucket bounds (an install without that series says so);
4. the daemon idle for S seconds with sessions in Redis: its CPU, per cent of one core.

    python bench_durable.py [--n 500] [--writers 8] [--seconds 5]
                            [--postgres postgresql://postgres@127.0.0.1:5432/postgres]

BENCHMARKS.md runs it with two installs side by side (today's build and this one).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from pathlib import Path

from agentstate import Store
from agentstate._agentstate import RedisServer  # agentstate.testing without pytest

AGENTSTATE = shutil.which("agentstate", path=str(Path(sys.executable).parent)) or "agentstate"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Daemon:
    """`agentstate spill` as a child process; `metrics` serves Prometheus on a free port."""

    def __init__(self, url: str, db: str, metrics: bool = False):
        self.metrics = f"127.0.0.1:{free_port()}" if metrics else None
        args = [AGENTSTATE, "--redis", url, "--db", db, "spill"]
        if self.metrics:
            args += ["--metrics", self.metrics]
        self.proc = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        time.sleep(1.5)  # started and holding its partitions

    def cpu_seconds(self) -> float:
        fields = Path(f"/proc/{self.proc.pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

    def scrape(self) -> str:
        with urllib.request.urlopen(f"http://{self.metrics}/metrics", timeout=10) as r:
            return r.read().decode()

    def stop(self) -> None:
        self.proc.terminate()
        self.proc.wait(timeout=30)


def per_append_ms(store: Store, sid: str, n: int) -> list:
    times = []
    for i in range(n):
        started = time.perf_counter()
        store.append(sid, "user", f"message {i}")
        times.append((time.perf_counter() - started) * 1000)
    return times


def p50_p99(times: list) -> tuple:
    times = sorted(times)
    return statistics.median(times), times[max(int(len(times) * 0.99) - 1, 0)]


def one_writer(url: str, db: str, n: int) -> dict:
    daemon = Daemon(url, db)
    try:
        out = {}
        store = Store(url)
        for label, s in (("write_behind", store), ("durable", store.with_durability(True))):
            sid = s.create_session()
            per_append_ms(s, sid, 20)  # warm up: connections, scripts
            out[label] = p50_p99(per_append_ms(s, sid, n))
        return out
    finally:
        daemon.stop()


def writers(store: Store, count: int, seconds: float) -> float:
    """`count` threads appending to a session each for `seconds`: appends per second."""
    sids = [store.create_session() for _ in range(count)]
    done = [0] * count
    stop = time.monotonic() + seconds

    def run(i: int) -> None:
        while time.monotonic() < stop:
            store.append(sids[i], "user", "x" * 200)
            done[i] += 1

    threads = [threading.Thread(target=run, args=(i,)) for i in range(count)]
    started = time.monotonic()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return sum(done) / (time.monotonic() - started)


def histogram(text: str, name: str) -> list:
    """(upper bound s, cumulative count) of Prometheus histogram `name`."""
    buckets = []
    for line in text.splitlines():
        if line.startswith(name + "_bucket{"):
            le = line.split('le="', 1)[1].split('"', 1)[0]
            buckets.append((float("inf") if le == "+Inf" else float(le), float(line.rsplit(" ", 1)[1])))
    return sorted(buckets)


def quantile_ms(buckets: list, q: float):
    total = buckets[-1][1] if buckets else 0
    if not total:
        return None
    for bound, cumulative in buckets:
        if cumulative >= q * total:
            return bound * 1000
    return None


def many_writers(url: str, db: str, count: int, seconds: float) -> dict:
    daemon = Daemon(url, db, metrics=True)
    try:
        store = Store(url)
        durable = writers(store.with_durability(True), count, seconds)
        before = histogram(daemon.scrape(), "agentstate_write_behind_seconds")
        behind_rate = writers(store, count, seconds)
        time.sleep(1.5)  # the last commits
        after = histogram(daemon.scrape(), "agentstate_write_behind_seconds")
        window = [(b, c - dict(before).get(b, 0)) for b, c in after]
        return {
            "durable_appends_per_s": durable,
            "write_behind_appends_per_s": behind_rate,
            "window_p50_ms": quantile_ms(window, 0.5),
            "window_p99_ms": quantile_ms(window, 0.99),
            "window_measured": bool(after),
        }
    finally:
        daemon.stop()


def idle_cpu(url: str, db: str, seconds: float) -> float:
    daemon = Daemon(url, db)
    try:
        store = Store(url)
        for _ in range(100):
            store.append(store.create_session(), "user", "idle")
        time.sleep(2)
        start = daemon.cpu_seconds()
        time.sleep(seconds)
        return (daemon.cpu_seconds() - start) / seconds * 100
    finally:
        daemon.stop()


def postgres_db(admin_url: str, name: str, create: bool) -> str:
    sql = f'CREATE DATABASE "{name}"' if create else f'DROP DATABASE IF EXISTS "{name}"'
    subprocess.run(["psql", admin_url, "-qc", sql], check=True, capture_output=True)
    return admin_url.rsplit("/", 1)[0] + "/" + name


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--n", type=int, default=500)
    ap.add_argument("--writers", type=int, default=8)
    ap.add_argument("--seconds", type=float, default=5.0)
    ap.add_argument("--postgres", help="an admin URL: a database is made and dropped there")
    args = ap.parse_args()
    results = {"agentstate": AGENTSTATE}
    with tempfile.TemporaryDirectory() as tmp:
        for part, run in (
            ("sqlite", lambda url: one_writer(url, f"{tmp}/one.db", args.n)),
            ("many", lambda url: many_writers(url, f"{tmp}/many.db", args.writers, args.seconds)),
            ("idle_cpu_percent", lambda url: idle_cpu(url, f"{tmp}/idle.db", args.seconds * 2)),
        ):
            server = RedisServer()
            try:
                results[part] = run(server.url)
            finally:
                server.stop()
        if args.postgres:
            name = f"bench_durable_{os.getpid()}"
            server = RedisServer()
            try:
                results["postgres"] = one_writer(server.url, postgres_db(args.postgres, name, True), args.n)
            finally:
                server.stop()
                postgres_db(args.postgres, name, False)
    for tier in ("sqlite", "postgres"):
        for label, (p50, p99) in results.get(tier, {}).items():
            print(f"one writer, {tier:8} {label:12}  p50 {p50:6.2f} ms   p99 {p99:6.2f} ms   ({args.n} appends)")
    many = results["many"]
    print(f"{args.writers} writers durable=True: {many['durable_appends_per_s']:,.0f} appends/s")
    if many["window_measured"]:
        print(f"{args.writers} writers write-behind: {many['write_behind_appends_per_s']:,.0f} appends/s, "
              f"window p50 <= {many['window_p50_ms']} ms, p99 <= {many['window_p99_ms']} ms")
    else:
        print(f"{args.writers} writers write-behind: {many['write_behind_appends_per_s']:,.0f} appends/s "
              "(this install has no write-behind histogram)")
    print(f"idle daemon: {results['idle_cpu_percent']:.2f}% of a core")
    print(json.dumps(results))


if __name__ == "__main__":
    main()
