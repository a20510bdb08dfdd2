"""Redis lost while Python agents keep writing: writer processes (``agentstate.Store``, no
durable tier of their own, started with ``spawn``) append durably through a FLUSHALL and a
Redis restart without persistence, while the namespace's daemon (``agentstate spill`` in the
durable tier's directory) restores. Every acknowledged durable append is in the durable tier
with its seq, once; every session comes back; a create of a durable id is refused."""

from __future__ import annotations

import json
import multiprocessing
import os
import subprocess
import time
import uuid

from support import RedisServer, agentstate_bin, sqlite_rows

SESSIONS = 6
WRITERS = 3


def _writer(url: str, prefix: str, n: int, sids, stop, out: str) -> None:
    """Appends ``w<n>-<i>`` durably to the sessions in turn, each with its idempotency key;
    a failed append is retried with the same key until acknowledged. Writes one JSON line per
    acknowledgement (``acked``) and per failure (``error``) to ``out``."""
    import agentstate

    store = agentstate.Store(url, prefix=prefix, durable=True)
    i = 0
    with open(out, "a") as log:
        while not stop.is_set():
            sid = sids[(n + i) % len(sids)]
            content = f"w{n}-{i}"
            deadline = time.monotonic() + 30
            while True:
                try:
                    seq = store.append(sid, "user", content, idempotency_key=content)
                    log.write(json.dumps({"acked": [sid, seq, content]}) + "\n")
                    break
                except agentstate.AgentStateError as e:
                    log.write(json.dumps({"error": f"{sid} {content}: {type(e).__name__}: {e}"}) + "\n")
                    if time.monotonic() > deadline:
                        raise
                    time.sleep(0.05)
            log.flush()
            i += 1


def _back(store, sids, errors) -> float:
    """Every session readable again; how long it took. A create of a durable id is refused."""
    import agentstate

    started = time.monotonic()
    try:
        store.create_session(id=sids[0])
        raise AssertionError("a create of a durable id was accepted")
    except (agentstate.AlreadyExists, agentstate.NotLive):
        pass
    for sid in sids:
        while True:
            try:
                assert store.messages(sid), f"{sid} came back empty"
                break
            except agentstate.AgentStateError as e:
                errors.append(f"{sid}: {type(e).__name__}: {e}")
                assert time.monotonic() - started < 30, f"{sid} did not come back: {e}"
                time.sleep(0.05)
    return time.monotonic() - started


def test_python_writers_lose_no_durable_append_through_redis_losses(tmp_path, monkeypatch):
    import agentstate

    server = RedisServer()
    durable, agent = tmp_path / "durable", tmp_path / "agent"
    durable.mkdir()
    agent.mkdir()
    prefix = "p" + uuid.uuid4().hex[:8]
    env = {k: v for k, v in os.environ.items() if not k.startswith("AGENTSTATE_")}
    log = open(durable / "spill.log", "ab")
    daemon = subprocess.Popen(
        [str(agentstate_bin()), "--redis", server.url, "--prefix", prefix, "spill", "--lease-ms", "1000"],
        cwd=durable, env=env, stdout=subprocess.DEVNULL, stderr=log,
    )
    ctx = multiprocessing.get_context("spawn")
    stop = ctx.Event()
    writers = []
    try:
        monkeypatch.chdir(agent)
        store = agentstate.Store(server.url, prefix=prefix, daemon_wait=10)
        sids = [f"py{i}" for i in range(SESSIONS)]
        for sid in sids:
            store.create_session(id=sid)
            store.with_durability(True).append(sid, "system", "first")
        writers = [
            ctx.Process(target=_writer, args=(server.url, prefix, n, sids, stop, str(tmp_path / f"w{n}.jsonl")))
            for n in range(WRITERS)
        ]
        for w in writers:
            w.start()
        seen_errors: list = []
        time.sleep(2)
        _flushall(server.url)
        flushed = _back(store, sids, seen_errors)
        time.sleep(2)
        server.restart_empty()
        restarted = _back(store, sids, seen_errors)
        time.sleep(1)
        stop.set()
        for w in writers:
            w.join(timeout=60)
            assert w.exitcode == 0, "a writer failed"
    finally:
        stop.set()
        for w in writers:
            if w.is_alive():
                w.kill()
        daemon.terminate()
        assert daemon.wait(timeout=30) == 0, (durable / "spill.log").read_text()
        server.close()

    got = []
    for n in range(WRITERS):
        for line in (tmp_path / f"w{n}.jsonl").read_text().splitlines():
            record = json.loads(line)
            if "acked" in record:
                got.append(tuple(record["acked"]))
            else:
                seen_errors.append(record["error"])
    assert got, "no append was acknowledged"
    assert not any("UnknownSession" in e for e in seen_errors), seen_errors
    assert not (agent / "agentstate.db").exists(), "an agent created a durable tier"
    db = durable / "agentstate.db"
    for sid in sids:
        rows = sqlite_rows(db, "SELECT seq, element FROM messages WHERE session_id = ? ORDER BY seq", sid)
        assert [r[0] for r in rows] == list(range(1, len(rows) + 1)), sid
        contents = [json.loads(r[1])["content"] for r in rows]
        assert len(set(contents)) == len(contents), f"a content twice in {sid}"
    durable_rows = {
        (sid, seq): element
        for sid in sids
        for seq, element in sqlite_rows(db, "SELECT seq, element FROM messages WHERE session_id = ?", sid)
    }
    seqs = set()
    for sid, seq, content in got:
        assert (sid, seq) not in seqs, f"seq {seq} of {sid} acknowledged twice"
        seqs.add((sid, seq))
        element = durable_rows.get((sid, seq))
        assert element is not None, f"acknowledged seq {seq} of {sid} is not durable"
        assert json.loads(element)["content"] == content, (sid, seq, content, element)
    print(f"{len(got)} durable appends acknowledged; back after {flushed:.2f} s and {restarted:.2f} s")


def _flushall(url: str) -> None:
    port = url.rsplit(":", 1)[1]
    subprocess.run(["redis-cli", "-p", port, "FLUSHALL"], check=True, stdout=subprocess.DEVNULL)
