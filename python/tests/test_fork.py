"""Forking a process that used agentstate: multiprocessing's `fork` and `forkserver` start
methods, a celery-style prefork pool of plain `os.fork`s, a child making its own Store while
the parent writes, a spill daemon and a consumer carried across a fork, and a real
`gunicorn --preload` app. Each scenario runs as its own Python process (a crash is a failed
test, not a dead pytest) with a timeout, and its children are waited for with deadlines and
killed if they hang (before fork safety, every forked child hung on its first call)."""

from __future__ import annotations

import http.client
import os
import signal
import socket
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import pytest

from agentstate import Store
from agentstate.testing import agentstate_daemon, agentstate_redis, agentstate_store  # noqa: F401

_PRELUDE = textwrap.dedent(
    """
    import asyncio, gc, os, signal, sys, time, traceback
    from agentstate import Store

    def arun(call):
        # awaits call() (an async twin) on a new event loop: the twins need a running loop
        async def go():
            return await call()
        return asyncio.run(go())

    def child(body):
        # runs body() in this forked child and exits: 0 when it returned, 1 when it raised
        try:
            body()
        except BaseException:
            traceback.print_exc()
            sys.stderr.flush()
            os._exit(1)
        os._exit(0)

    def wait_children(pids, timeout=30.0):
        # every child must exit 0 within timeout; a hung one is killed and reported
        deadline, pending, failed = time.monotonic() + timeout, set(pids), []
        while pending and time.monotonic() < deadline:
            for pid in list(pending):
                done, status = os.waitpid(pid, os.WNOHANG)
                if done:
                    pending.discard(pid)
                    if os.waitstatus_to_exitcode(status) != 0:
                        failed.append(os.waitstatus_to_exitcode(status))
            time.sleep(0.01)
        for pid in pending:
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
        if pending or failed:
            sys.exit(f"{len(pending)} child(ren) hung (killed after {timeout} s); exit codes of the failed: {failed}")

    def check_timeline(store, sid, expected):
        # every message exactly once, seqs 1..n without a gap
        msgs = store.messages(sid)
        seqs = [m["seq"] for m in msgs]
        assert seqs == list(range(1, len(seqs) + 1)), seqs
        contents = sorted(m["content"] for m in msgs)
        assert contents == sorted(expected), (len(contents), len(expected))
    """
)


def _run(tmp_path: Path, name: str, body: str, *args: str, timeout: float = 120) -> str:
    """Runs `_PRELUDE + body` as a Python program (a file: forkserver children import their
    target from it); fails with its output unless it exits 0 within `timeout`."""
    script = tmp_path / f"{name}.py"
    script.write_text(_PRELUDE + textwrap.dedent(body))
    try:
        p = subprocess.run(
            [sys.executable, str(script), *args],
            capture_output=True, text=True, timeout=timeout, cwd=tmp_path,
        )
    except subprocess.TimeoutExpired as e:
        pytest.fail(f"{name} did not finish in {timeout} s:\n{e.stdout}\n{e.stderr}")
    assert p.returncode == 0, f"{name} exited {p.returncode}:\n{p.stdout}\n{p.stderr}"
    return p.stdout


@pytest.mark.parametrize("method", ["fork", "forkserver"])
def test_multiprocessing_children_and_parent_append_to_one_session(
    agentstate_store: Store, tmp_path: Path, method: str
):
    """Four multiprocessing children (under `fork` they use the parent's own Store object,
    its sync methods and an async twin) and the parent append to one session together."""
    _run(tmp_path, "mp_" + method, """
        import multiprocessing

        def append(store, url, name, n):
            if store is None:  # forkserver: the Store cannot be pickled; make one
                store = Store(url)
            for i in range(n):
                if i % 5 == 0:
                    arun(lambda: store.aappend("shared", "user", f"{name}:{i}"))
                else:
                    store.append("shared", "user", f"{name}:{i}")

        if __name__ == "__main__":
            url, method = sys.argv[1], sys.argv[2]
            ctx = multiprocessing.get_context(method)
            if method == "forkserver":
                ctx.set_forkserver_preload(["agentstate"])
            store = Store(url)
            store.create_session("shared")
            store.append("shared", "user", "parent:before")
            expected = ["parent:before"]
            procs = []
            for c in range(4):
                mine = store if method == "fork" else None
                procs.append(ctx.Process(target=append, args=(mine, url, f"c{c}", 30)))
                expected += [f"c{c}:{i}" for i in range(30)]
            for p in procs:
                p.start()
            for i in range(30):  # the parent keeps appending while they run
                store.append("shared", "user", f"parent:{i}")
                expected.append(f"parent:{i}")
            deadline = time.monotonic() + 30
            for p in procs:
                p.join(max(0.0, deadline - time.monotonic()))
            hung = [p for p in procs if p.is_alive()]
            for p in hung:
                p.kill()
                p.join()
            assert not hung, f"{len(hung)} child(ren) hung"
            assert [p.exitcode for p in procs] == [0, 0, 0, 0], [p.exitcode for p in procs]
            store.append("shared", "user", "parent:after")
            expected.append("parent:after")
            check_timeline(store, "shared", expected)
    """, agentstate_store.url, method)


def test_prefork_pool_of_plain_forks(agentstate_store: Store, tmp_path: Path):
    """Celery's prefork shape: the parent used the store (sync and async), then forks four
    workers with os.fork; each appends (and drops the inherited store at the end, as a
    worker exiting does) while the parent appends too."""
    _run(tmp_path, "prefork", """
        url = sys.argv[1]
        store = Store(url)
        store.create_session("jobs")
        arun(lambda: store.aappend("jobs", "user", "parent:before"))
        expected = ["parent:before"]

        def work(name):
            def body():
                global store
                for i in range(40):
                    store.append("jobs", "user", f"{name}:{i}")
                del store
                gc.collect()
            return body

        pids = []
        for w in range(4):
            pid = os.fork()
            if pid == 0:
                child(work(f"w{w}"))
            pids.append(pid)
            expected += [f"w{w}:{i}" for i in range(40)]
        for i in range(40):
            store.append("jobs", "user", f"parent:{i}")
            expected.append(f"parent:{i}")
        wait_children(pids)
        for i in range(20):  # the parent's connections still work after its children left
            store.append("jobs", "user", f"parent:after:{i}")
            expected.append(f"parent:after:{i}")
        check_timeline(store, "jobs", expected)
    """, agentstate_store.url)


def test_a_child_with_its_own_store_leaves_the_parent_alive(agentstate_store: Store, tmp_path: Path):
    """The child connects a Store of its own (new sockets) and drops the inherited one while
    a thread of the parent keeps appending: the parent neither crashes nor stalls."""
    _run(tmp_path, "own_store", """
        import threading
        url = sys.argv[1]
        store = Store(url)
        store.create_session("s")
        store.append("s", "user", "parent:before")
        written, stop = ["parent:before"], threading.Event()

        def parent_writer():
            i = 0
            while not stop.is_set():
                store.append("s", "user", f"parent:{i}")
                written.append(f"parent:{i}")
                i += 1

        t = threading.Thread(target=parent_writer)
        t.start()
        time.sleep(0.05)

        def body():
            global store
            mine = Store(url)
            for i in range(100):
                mine.append("s", "user", f"child:{i}")
            arun(lambda: mine.aappend("s", "user", "child:async"))
            del store  # the inherited one: must not touch the parent's connections
            gc.collect()

        pid = os.fork()
        if pid == 0:
            child(body)
        wait_children([pid])
        time.sleep(0.2)  # the parent keeps appending after the child is gone
        stop.set()
        t.join(30)
        assert not t.is_alive(), "the parent's writer stalled"
        assert len(written) > 10, len(written)
        check_timeline(store, "s", written + [f"child:{i}" for i in range(100)] + ["child:async"])
    """, agentstate_store.url)


def test_a_spill_daemon_and_a_consumer_across_a_fork(agentstate_redis: str, tmp_path: Path):
    """A SpillDaemon started in the parent stays the parent's: in the child it reads as not
    running and `stop()` does nothing, while the parent's daemon commits the child's durable
    writes. A Consumer made before the fork reads and acks in the child (joining the group
    again under its name) and keeps working in the parent."""
    _run(tmp_path, "daemon_consumer", """
        from agentstate import SpillDaemon
        url, db = sys.argv[1], sys.argv[2]
        daemon = SpillDaemon(url, db).start()
        owner = daemon.owner
        store = Store(url)
        store.create_session("d")
        consumer = store.consumer("g", "w", from_start=True, block=0.2)
        store.record_decision("d", "before", "made in the parent")
        batch = consumer.read()
        assert [d["decision"] for d in batch] == ["before"], batch
        assert consumer.ack(batch) == 1

        def body():
            assert daemon.running is False and daemon.owner is None
            assert daemon.stop() is None  # the parent's daemon: left alone
            # a durable write returns once a daemon committed it: the parent's does
            assert store.with_durability(True).append("d", "user", "child:durable") == 1
            store.record_decision("d", "in-child", "made in the child")
            got = []
            for _ in range(20):
                got += consumer.read()
                if got:
                    break
            assert [d["decision"] for d in got] == ["in-child"], got
            assert consumer.ack(got) == 1

        pid = os.fork()
        if pid == 0:
            child(body)
        wait_children([pid])
        assert daemon.running and daemon.owner == owner
        assert store.with_durability(True).append("d", "user", "parent:durable") == 2
        store.record_decision("d", "after", "made in the parent again")
        batch = consumer.read()
        assert [d["decision"] for d in batch] == ["after"], batch  # the child acked its one
        assert consumer.ack(batch) == 1
        daemon.stop()
        assert not daemon.running
        import sqlite3
        rows = sqlite3.connect(db).execute("select count(*) from messages").fetchone()
        assert rows == (2,), rows
    """, agentstate_redis, str(tmp_path / "own.db"))


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


_GUNICORN_APP = """
    import os
    from agentstate import Store

    store = Store()  # module level: made (and used) in the master, before the workers fork
    store.create_session("web")
    store.append("web", "user", "master")

    def app(environ, start_response):
        seq = store.append("web", "user", f"{os.getpid()}:{environ['PATH_INFO']}")
        start_response("200 OK", [("Content-Type", "text/plain")])
        return [f"{seq} {os.getpid()}".encode()]
"""


def test_gunicorn_preload_four_workers(agentstate_store: Store, tmp_path: Path):
    """`gunicorn --preload -w 4`: the app module made its Store in the master; four workers
    answer concurrent requests, each an append: every seq once, gapless."""
    pytest.importorskip("gunicorn")
    (tmp_path / "forkapp.py").write_text(textwrap.dedent(_GUNICORN_APP))
    port = _free_port()
    log = open(tmp_path / "gunicorn.log", "wb")
    server = subprocess.Popen(
        [sys.executable, "-m", "gunicorn", "--preload", "-w", "4", "-b", f"127.0.0.1:{port}",
         "--timeout", "30", "forkapp:app"],
        cwd=tmp_path, stdout=log, stderr=subprocess.STDOUT,
    )
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                assert server.poll() is None, (tmp_path / "gunicorn.log").read_text()
                assert time.monotonic() < deadline, "gunicorn did not listen in 30 s"
                time.sleep(0.05)
        answers: list = []
        errors: list = []

        def client(c: int) -> None:
            try:
                for i in range(50):
                    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=20)
                    conn.request("GET", f"/c{c}/{i}")
                    r = conn.getresponse()
                    assert r.status == 200, r.status
                    seq, pid = r.read().decode().split()
                    answers.append((int(seq), int(pid)))
                    conn.close()
            except BaseException as e:  # reported below: a hung worker is a timeout here
                errors.append(repr(e))

        clients = [threading.Thread(target=client, args=(c,)) for c in range(8)]
        for t in clients:
            t.start()
        for t in clients:
            t.join(120)
        assert not errors, (errors[:3], (tmp_path / "gunicorn.log").read_text()[-3000:])
        assert sorted(s for s, _ in answers) == list(range(2, 402))
        assert len({p for _, p in answers}) >= 2  # more than one worker answered
        msgs = agentstate_store.messages("web")
        assert [m["seq"] for m in msgs] == list(range(1, 402))
        assert sorted(m["content"].split(":", 1)[1] for m in msgs[1:]) == sorted(
            f"/c{c}/{i}" for c in range(8) for i in range(50)
        )
    finally:
        server.send_signal(signal.SIGTERM)
        try:
            server.wait(30)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait()
        log.close()


def test_an_adapter_made_before_the_fork(agentstate_store: Store, tmp_path: Path):
    """An OpenAI Agents session (on the process-wide shared store, async twins) used by the
    parent, then by forked children and the parent at once: every item once."""
    pytest.importorskip("agents")
    _run(tmp_path, "adapter", """
        from agentstate.openai_agents import AgentStateSession
        session = AgentStateSession("conv")  # AGENTSTATE_REDIS_URL: the shared store
        asyncio.run(session.add_items([{"role": "user", "content": "parent:before"}]))
        expected = ["parent:before"]

        def body_of(name):
            def body():
                async def go():
                    for i in range(10):
                        await session.add_items([{"role": "user", "content": f"{name}:{i}"}])
                asyncio.run(go())
            return body

        pids = []
        for c in range(2):
            pid = os.fork()
            if pid == 0:
                child(body_of(f"c{c}"))
            pids.append(pid)
            expected += [f"c{c}:{i}" for i in range(10)]

        async def parent():
            for i in range(10):
                await session.add_items([{"role": "user", "content": f"parent:{i}"}])
        asyncio.run(parent())
        expected += [f"parent:{i}" for i in range(10)]
        wait_children(pids)
        items = asyncio.run(session.get_items())
        assert sorted(i["content"] for i in items) == sorted(expected), items
    """)
