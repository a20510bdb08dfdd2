"""Test support shared by agentstate's own Python tests and the framework-suite harnesses:
a private ``redis-server`` on a free loopback port (never the shared 6379), and the spill
daemon as a real ``agentstate spill`` subprocess."""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any, Callable, List, Optional, Sequence

REPO = Path(__file__).resolve().parents[2]


_handed_out: set = set()


def free_port(cluster: bool = False) -> int:
    """A free loopback port below the ephemeral range (23000-31999: a client socket of a busy
    machine cannot take it between this check and redis-server's bind; the Rust tests use
    20000-22767), never the same twice in one process. A cluster node also binds its bus
    port, port + 10000: it gets a port in 12000-19999, so both stay below the range."""
    import random

    low, high = (12000, 20000) if cluster else (23000, 32000)
    for _ in range(1000):
        port = random.randrange(low, high)
        if port in _handed_out:
            continue
        try:
            for p in [port, port + 10000] if cluster else [port]:
                with socket.socket() as s:
                    s.bind(("127.0.0.1", p))
        except OSError:
            continue
        _handed_out.add(port)
        return port
    raise RuntimeError(f"no free loopback port in {low}-{high - 1}")


def bench_redis(doc: str, add_arguments: Optional[Callable[[Any], None]] = None):
    """The benches' command line (``--redis URL``, ``--json``, and what ``add_arguments``
    adds to the ``argparse`` parser): returns the parsed arguments and a context manager
    yielding the Redis URL — ``--redis``, or a private redis-server for the run, closed when
    the block ends."""
    import argparse
    import contextlib

    ap = argparse.ArgumentParser(description=doc.split("\n\n")[0])
    ap.add_argument("--redis", help="Redis URL (default: a private redis-server)")
    ap.add_argument("--json", action="store_true", help="print one JSON document")
    if add_arguments is not None:
        add_arguments(ap)
    args = ap.parse_args()

    @contextlib.contextmanager
    def redis_url():
        if args.redis is not None:
            yield args.redis
            return
        server = RedisServer()
        try:
            yield server.url
        finally:
            server.close()

    return args, redis_url()


class RedisServer:
    """A ``redis-server`` child with no persistence in a temp dir; ``restart_empty`` plays
    "Redis lost everything" (same port, empty memory)."""

    def __init__(self, args: Sequence[str] = ()) -> None:
        if shutil.which("redis-server") is None:
            raise RuntimeError("redis-server is not on PATH (scripts/ensure-tools.sh installs it)")
        self.dir = Path(tempfile.mkdtemp(prefix="agentstate-py-redis-"))
        self.port = free_port(cluster="--cluster-enabled" in args)
        self.args = list(args)
        self.proc: Optional[subprocess.Popen] = None
        self.start()

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}"

    def start(self) -> None:
        log = open(self.dir / "redis.log", "ab")
        self.proc = subprocess.Popen(
            ["redis-server", "--port", str(self.port), "--bind", "127.0.0.1", "--save", "",
             "--appendonly", "no", "--dir", str(self.dir), *self.args],
            stdout=log, stderr=subprocess.STDOUT,
        )
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=0.2) as s:
                    s.sendall(b"PING\r\n")
                    if s.recv(16).startswith(b"+PONG"):
                        return
            except OSError:
                time.sleep(0.02)
        raise RuntimeError("redis-server did not start:\n" + (self.dir / "redis.log").read_text())

    def stop(self) -> None:
        if self.proc is not None:
            self.proc.kill()
            self.proc.wait()
            self.proc = None

    def restart_empty(self) -> None:
        self.stop()
        self.start()

    def close(self) -> None:
        self.stop()
        shutil.rmtree(self.dir, ignore_errors=True)


class RedisCluster:
    """Three ``redis-server --cluster-enabled yes`` masters joined with ``redis-cli --cluster
    create`` (all 16384 slots), as the Rust tests' cluster fixture; ``url`` names every node."""

    def __init__(self) -> None:
        self.nodes = [
            RedisServer(["--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf",
                         "--cluster-node-timeout", "5000"])
            for _ in range(3)
        ]
        try:
            subprocess.run(
                ["redis-cli", "--cluster", "create", *(f"127.0.0.1:{n.port}" for n in self.nodes),
                 "--cluster-replicas", "0", "--cluster-yes"],
                check=True, stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT,
            )
            wait_until(self._ok, timeout=20, what="cluster_state:ok on every node")
        except BaseException:
            self.close()
            raise

    def _ok(self) -> bool:
        for n in self.nodes:
            out = subprocess.run(["redis-cli", "-p", str(n.port), "CLUSTER", "INFO"],
                                 capture_output=True, text=True).stdout
            if "cluster_state:ok" not in out:
                return False
        return True

    @property
    def url(self) -> str:
        return "redis+cluster://" + ",".join(f"127.0.0.1:{n.port}" for n in self.nodes)

    def close(self) -> None:
        for n in self.nodes:
            n.close()


def agentstate_bin() -> Path:
    """The ``agentstate`` CLI built by cargo (``$AGENTSTATE_BIN``, else the debug build in
    ``$CARGO_TARGET_DIR`` or the repo's ``target/``)."""
    if os.environ.get("AGENTSTATE_BIN"):
        return Path(os.environ["AGENTSTATE_BIN"])
    target = Path(os.environ.get("CARGO_TARGET_DIR", REPO / "target"))
    for profile in ("debug", "release"):
        p = target / profile / "agentstate"
        if p.exists():
            return p
    raise RuntimeError("no agentstate binary: run `cargo build --bin agentstate` first")


class SpillDaemon:
    """``agentstate spill`` as a subprocess (the deployment shape); ``stop`` sends SIGTERM
    (it drains, commits and exits 0)."""

    def __init__(self, url: str, db: Path, prefix: str = "as", partitions: int = 16) -> None:
        self.log = open(Path(db).with_suffix(".spill.log"), "ab")
        self.proc = subprocess.Popen(
            [str(agentstate_bin()), "--redis", url, "--db", str(db), "--prefix", prefix,
             "--partitions", str(partitions), "spill", "--interval-ms", "20", "--lease-ms", "600"],
            stdout=self.log, stderr=subprocess.STDOUT,
        )

    def wait_started(self) -> "SpillDaemon":
        """Waits for the start line (logged after the first pass, the SIGTERM handler
        installed before it): a ``stop`` then finds it draining, not starting, and returns 0
        however short the test."""
        log = Path(self.log.name)
        try:
            wait_until(lambda: "spill daemon started" in log.read_text(), what="the spill daemon to start")
        except BaseException:
            self.proc.kill()
            self.proc.wait()
            raise
        return self

    def stop(self) -> int:
        self.proc.send_signal(signal.SIGTERM)
        return self.proc.wait(timeout=20)


def prepare_namespace(url: str, prefix: str, db: Path) -> None:
    """One spill-daemon pass (``agentstate spill --once``) over a fresh namespace, as a
    deployment starts its daemon first: until a daemon has checked a Redis against SQLite,
    agentstate refuses creates (the id might be a session SQLite holds)."""
    subprocess.run(
        [str(agentstate_bin()), "--redis", url, "--db", str(db), "--prefix", prefix,
         "spill", "--once"],
        check=True, stdout=subprocess.DEVNULL,
    )


def sqlite_rows(db: Path, sql: str, *params) -> List[tuple]:
    """Reads the daemon's SQLite file (read-only)."""
    import sqlite3

    con = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    try:
        return con.execute(sql, params).fetchall()
    finally:
        con.close()


def wait_until(cond, timeout: float = 10.0, what: str = "condition"):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        v = cond()
        if v:
            return v
        time.sleep(0.05)
    raise AssertionError(f"timed out waiting for {what}")
