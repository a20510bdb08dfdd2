"""Long-term memory through the LangGraph store (``AgentStateStore``) and the binding, with
real processes: answers equal to LangGraph's ``InMemoryStore`` over generated operation
sequences, four processes writing one namespace, items and search results back after a
FLUSHALL with a real ``agentstate spill`` running, TTL expiry in both tiers, ``forget_user``
erasing both tiers, and a Redis Cluster."""

from __future__ import annotations

import asyncio
import json
import multiprocessing
import random
import subprocess
import time
import uuid
import zlib
from typing import Any, List

import pytest

from support import RedisCluster, RedisServer, SpillDaemon, prepare_namespace, sqlite_rows, wait_until

DIMS = 16
WORDS = ["tea", "coffee", "dark", "light", "mode", "paris", "rome", "cats", "dogs", "jazz"]


def embed(texts: List[str]) -> List[List[float]]:
    """A deterministic bag-of-words embedding: each word adds 1 to its bucket."""
    out = []
    for text in texts:
        v = [0.0] * DIMS
        for word in text.split():
            v[zlib.crc32(word.encode()) % DIMS] += 1.0
        out.append(v)
    return out


INDEX = {"dims": DIMS, "embed": embed, "fields": ["text"]}


def _store(url: str, prefix: str, **kw: Any):
    from agentstate import Store
    from agentstate.langgraph import AgentStateStore

    return AgentStateStore(store=Store(url, prefix=prefix), **kw)


# -- the same answers as InMemoryStore ------------------------------------------------------


def _reference():
    from langgraph.store.memory import InMemoryStore

    class Reference(InMemoryStore):
        """InMemoryStore with the namespaces that hold no item pruned: its defaultdict
        keeps a namespace listed after its last item went (or after a get of it)."""

        def batch(self, ops):
            out = super().batch(ops)
            for ns in [ns for ns, items in self._data.items() if not items]:
                del self._data[ns]
            return out

    return Reference(index=INDEX)


def _ops(rng: random.Random, n: int):
    labels = ["a", "b", "c"]

    def ns():
        return tuple(rng.choice(labels) for _ in range(rng.randint(1, 3)))

    def value():
        return {
            "n": rng.randint(0, 5),
            "s": rng.choice(["x", "y", "z"]),
            "text": " ".join(rng.choice(WORDS) for _ in range(rng.randint(1, 4))),
        }

    def flt():
        return rng.choice([
            None,
            {"s": rng.choice(["x", "y"])},
            {"n": {"$gt": rng.randint(0, 4)}},
            {"n": {"$gte": 1, "$lte": rng.randint(1, 5)}},
            {"n": {"$lt": 3}, "s": {"$ne": "z"}},
            {"n": {"$eq": 2}},
        ])

    for _ in range(n):
        kind = rng.choices(["put", "delete", "get", "search", "query", "list"], [6, 1, 2, 2, 2, 2])[0]
        key = f"k{rng.randint(0, 5)}"
        if kind == "put":
            yield ("put", ns(), key, value())
        elif kind == "delete":
            yield ("delete", ns(), key)
        elif kind == "get":
            yield ("get", ns(), key)
        elif kind == "search":
            yield ("search", tuple(rng.choice(labels) for _ in range(rng.randint(0, 2))), flt())
        elif kind == "query":
            yield ("query", tuple(rng.choice(labels) for _ in range(rng.randint(0, 1))), flt(),
                   " ".join(rng.choice(WORDS) for _ in range(2)), rng.randint(1, 6))
        else:
            cond = {}
            if rng.random() < 0.5:
                cond["prefix"] = tuple(rng.choice(labels + ["*"]) for _ in range(rng.randint(1, 2)))
            if rng.random() < 0.3:
                cond["suffix"] = (rng.choice(labels + ["*"]),)
            yield ("list", cond, rng.choice([None, 1, 2]), rng.randint(1, 5), rng.randint(0, 2))


def _answer(store, op):
    kind = op[0]
    if kind == "put":
        return store.put(op[1], op[2], op[3])
    if kind == "delete":
        return store.delete(op[1], op[2])
    if kind == "get":
        item = store.get(op[1], op[2])
        return None if item is None else (item.namespace, item.key, item.value)
    if kind == "search":
        # Unranked, the order is the store's own (InMemoryStore: insertion; ours: newest
        # update first): the whole answer is compared as a set.
        found = store.search(op[1], filter=op[2], limit=1000)
        return sorted((i.namespace, i.key, json.dumps(i.value, sort_keys=True)) for i in found)
    if kind == "query":
        found = store.search(op[1], filter=op[2], query=op[3], limit=op[4])
        # Ranked: the scores in order, and the items scoring above the last one (those are
        # the same in any correct answer; items tied with the last may be either).
        scores = [round(i.score, 5) for i in found]
        return scores, sorted((s, i.namespace, i.key) for s, i in zip(scores, found) if s > min(scores, default=0))
    cond, depth, limit, offset = op[1:]
    return store.list_namespaces(max_depth=depth, limit=limit, offset=offset, **cond)


@pytest.mark.parametrize("seed", range(6))
def test_generated_operations_answer_as_in_memory_store(redis_server, prefix, tmp_path, seed):
    prepare_namespace(redis_server.url, prefix, tmp_path / "p.db")
    ours, ref = _store(redis_server.url, prefix, index=INDEX), _reference()
    rng = random.Random(seed)
    for step, op in enumerate(_ops(rng, 150)):
        want, got = _answer(ref, op), _answer(ours, op)
        assert got == want, f"seed {seed}, step {step}: {op}"


def test_the_async_api_answers_as_the_sync_one(redis_server, prefix, tmp_path):
    prepare_namespace(redis_server.url, prefix, tmp_path / "p.db")
    store = _store(redis_server.url, prefix, index=INDEX)

    async def run():
        await store.aput(("users", "u1"), "a", {"text": "tea paris", "n": 1})
        await store.aput(("users", "u2"), "b", {"text": "coffee rome", "n": 2})
        got = await store.aget(("users", "u1"), "a")
        ranked = await store.asearch(("users",), query="coffee")
        spaces = await store.alist_namespaces(prefix=("users",))
        await store.adelete(("users", "u1"), "a")
        return got, ranked, spaces, await store.aget(("users", "u1"), "a")

    got, ranked, spaces, gone = asyncio.run(run())
    assert got.value == {"text": "tea paris", "n": 1}
    assert [i.key for i in ranked] == ["b", "a"] and ranked[0].score > ranked[1].score
    assert spaces == [("users", "u1"), ("users", "u2")]
    assert gone is None
    assert store.get(("users", "u2"), "b").value == {"text": "coffee rome", "n": 2}


def test_bad_arguments_are_refused_naming_them_and_write_nothing(store):
    from agentstate.langgraph import AgentStateStore

    lg = AgentStateStore(store=store)
    with pytest.raises(ValueError, match="ttl must be a positive whole number of minutes"):
        lg.put(("a",), "k", {"v": 1}, ttl=0.5)
    with pytest.raises(ValueError, match="limit must be >= 0"):
        lg.search(("a",), limit=-1)
    with pytest.raises(TypeError, match="namespace must be a tuple or list of str"):
        store.put_memory("users", "k", {"v": 1})
    with pytest.raises(TypeError, match=r"vectors\[\"f\"\] must be a list of numbers"):
        store.put_memory(("a",), "k", {"v": 1}, vectors={"f": "text"})
    with pytest.raises(ValueError, match="ttl_minutes must be a whole number"):
        store.put_memory(("a",), "k", {"v": 1}, ttl_minutes=-1)
    assert store.list_memory_namespaces() == []


# -- four processes writing one namespace -----------------------------------------------------


def _writer(url: str, prefix: str, proc: int, n: int) -> None:
    lg = _store(url, prefix)
    for j in range(n):
        lg.put(("team", "shared"), f"p{proc}-{j}", {"proc": proc, "j": j})


def test_four_processes_writing_one_namespace_lose_no_item(redis_server, prefix, tmp_path):
    prepare_namespace(redis_server.url, prefix, tmp_path / "p.db")
    ctx = multiprocessing.get_context("spawn")
    procs = [ctx.Process(target=_writer, args=(redis_server.url, prefix, p, 100)) for p in range(4)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(60)
        assert p.exitcode == 0
    found = _store(redis_server.url, prefix).search(("team", "shared"), limit=1000)
    assert sorted((i.value["proc"], i.value["j"]) for i in found) == [
        (p, j) for p in range(4) for j in range(100)
    ]
    assert all(i.key == f"p{i.value['proc']}-{i.value['j']}" for i in found)


# -- with the spill daemon ---------------------------------------------------------------------


@pytest.fixture
def world(tmp_path):
    server = RedisServer()
    prefix = "m" + uuid.uuid4().hex[:8]
    db = tmp_path / "spill.db"
    daemon = SpillDaemon(server.url, db, prefix).wait_started()
    yield server, prefix, db, daemon
    if daemon.proc.poll() is None:
        assert daemon.stop() == 0
    server.close()


def _rows(db, sql, *params):
    try:
        return sqlite_rows(db, sql, *params)
    except Exception:  # the daemon has not created the table yet
        return None


def test_items_and_search_results_come_back_after_flushall(world):
    server, prefix, db, _ = world
    lg = _store(server.url, prefix, index=INDEX)
    for i, text in enumerate(["tea paris", "coffee rome", "dark mode jazz", "cats dogs"]):
        lg.put(("users", "ann", "facts"), f"f{i}", {"text": text, "i": i})
    lg.put(("users", "bob"), "theme", {"text": "light mode"})
    before_get = lg.get(("users", "ann", "facts"), "f1")
    before_search = [(i.key, i.score) for i in lg.search(("users",), query="dark mode")]
    before_list = lg.list_namespaces()
    wait_until(lambda: _rows(db, "SELECT count(*) FROM memory_items") == [(5,)], what="5 items flushed")

    assert subprocess.run(["redis-cli", "-p", str(server.port), "FLUSHALL"], capture_output=True,
                          text=True, check=True).stdout.strip() == "OK"

    # The daemon re-seeds partition by partition: wait for the last of them.
    wait_until(lambda: [(i.key, i.score) for i in lg.search(("users",), query="dark mode")] == before_search,
               timeout=30, what="the daemon to put every item back")
    assert lg.get(("users", "ann", "facts"), "f1") == before_get
    assert lg.list_namespaces() == before_list
    # And it goes on: a new put and a delete reach the durable tier.
    lg.put(("users", "bob"), "lang", {"text": "jazz"})
    lg.delete(("users", "ann", "facts"), "f0")
    wait_until(lambda: _rows(db, "SELECT key FROM memory_items ORDER BY key")
               == [("f1",), ("f2",), ("f3",), ("lang",), ("theme",)], what="the put and delete flushed")


def test_an_item_expires_after_its_ttl_in_both_tiers_unless_a_read_refreshed_it(world):
    server, prefix, db, _ = world
    lg = _store(server.url, prefix, ttl={"default_ttl": 1, "refresh_on_read": False})
    store, ns = lg._sync(), ("users", "ann")
    lg.put(ns, "short", {"v": 1})
    lg.put(ns, "refreshed", {"v": 2})
    lg.put(ns, "forever", {"v": 3}, ttl=None)
    wait_until(lambda: _rows(db, "SELECT count(*) FROM memory_items") == [(3,)], what="3 items flushed")
    assert [i.key for i in lg.search(ns)] == ["forever", "refreshed", "short"]
    first = store.get_memory(ns, "refreshed")
    assert first["ttl_minutes"] == 1 and first["expires_at"] - first["updated_at"] == 60_000
    # refresh_on_read is off: a plain read leaves the expiry; refresh_ttl=True moves it.
    time.sleep(20)
    lg.get(ns, "refreshed")
    assert store.get_memory(ns, "refreshed")["expires_at"] == first["expires_at"]
    assert lg.get(ns, "refreshed", refresh_ttl=True).value == {"v": 2}
    moved = store.get_memory(ns, "refreshed")["expires_at"]
    assert moved >= first["expires_at"] + 19_000
    wait_until(lambda: _rows(db, "SELECT expires_at FROM memory_items WHERE key = 'refreshed'") == [(moved,)],
               what="the refreshed expiry to reach SQLite")

    # The unit is minutes: this waits for the first one to pass.
    wait_until(lambda: lg.get(ns, "short") is None, timeout=75, what="the TTL to run out")
    assert [i.key for i in lg.search(ns)] == ["forever", "refreshed"]
    wait_until(lambda: _rows(db, "SELECT key FROM memory_items ORDER BY key") == [("forever",), ("refreshed",)],
               timeout=15, what="the expired row to leave SQLite")
    assert lg.list_namespaces() == [ns]


def test_forget_user_erases_their_items_from_both_tiers(world):
    server, prefix, db, daemon = world
    lg = _store(server.url, prefix)
    secret = "ann-secret-" + uuid.uuid4().hex
    lg.put(("users", "ann", "prefs"), "food", {"text": secret})
    lg.put(("users", "ann"), "city", {"text": secret + " paris"})
    lg.put(("users", "bob"), "city", {"text": "rome"})
    wait_until(lambda: _rows(db, "SELECT count(*) FROM memory_items") == [(3,)], what="3 items flushed")
    assert secret.encode() in db.read_bytes() + _wal(db)

    store = lg._sync()
    store.forget_user("ann")

    assert lg.search(("users",), limit=100) == lg.search(("users", "bob"))
    assert lg.list_namespaces() == [("users", "bob")]
    wait_until(lambda: _rows(db, "SELECT namespace FROM memory_items") == [("users.bob",)],
               what="ann's rows to leave SQLite")
    assert daemon.stop() == 0
    # secure_delete zeroes freed pages; the daemon's last connection checkpointed the wal.
    assert secret.encode() not in db.read_bytes() + _wal(db)


def _wal(db) -> bytes:
    wal = db.with_name(db.name + "-wal")
    return wal.read_bytes() if wal.exists() else b""


# -- Redis Cluster -----------------------------------------------------------------------------


def test_the_store_on_a_redis_cluster(tmp_path):
    cluster = RedisCluster()
    try:
        prefix = "c" + uuid.uuid4().hex[:8]
        prepare_namespace(cluster.url, prefix, tmp_path / "p.db")
        lg = _store(cluster.url, prefix, index=INDEX)
        spaces = [("users", f"u{i}", "notes") for i in range(12)]
        for i, ns in enumerate(spaces):
            lg.put(ns, "k", {"text": WORDS[i % len(WORDS)], "i": i})
        assert lg.list_namespaces(prefix=("users",), limit=100) == sorted(spaces)
        assert lg.get(("users", "u3", "notes"), "k").value == {"text": WORDS[3], "i": 3}
        top = lg.search(("users",), query="light", limit=2)  # the one word of its bucket
        assert top[0].value == {"text": "light", "i": 3} and top[0].score == pytest.approx(1.0)
        assert len(lg.search(("users",), filter={"i": {"$gte": 6}}, limit=100)) == 6
        lg.delete(("users", "u3", "notes"), "k")
        assert lg.get(("users", "u3", "notes"), "k") is None
        assert ("users", "u3", "notes") not in lg.list_namespaces(limit=100)
    finally:
        cluster.close()


# -- the ADK memory service --------------------------------------------------------------------


def _event(eid: str, text: str = "", ts: float = 1.0):
    from google.adk.events.event import Event
    from google.genai import types

    content = types.Content(parts=[types.Part(text=text)]) if text else None
    return Event(id=eid, invocation_id="i", author="user", timestamp=ts, content=content)


def test_adk_ingestion_keeps_the_events_with_text_once(store):
    from google.adk.sessions.session import Session

    from agentstate.adk import AgentStateMemoryService

    memory = AgentStateMemoryService(store=store)
    session = Session(app_name="shop", user_id="ann", id="s1", last_update_time=1,
                      events=[_event("e1", "tea in paris"), _event("e2"), _event("e3", "tea in rome")])

    async def run():
        await memory.add_session_to_memory(session)
        # Explicit events append once per id; without a session they share one bucket.
        await memory.add_events_to_memory(app_name="shop", user_id="ann", session_id="s1",
                                          events=[_event("e1", "tea again"), _event("e4", "tea at home")])
        await memory.add_events_to_memory(app_name="shop", user_id="ann", events=[_event("e5", "tea alone")])
        await memory.add_events_to_memory(app_name="shop", user_id="ann", events=[_event("e5", "tea alone")])
        found = await memory.search_memory(app_name="shop", user_id="ann", query="tea")
        # A delete keeps the event from coming back with the session.
        await memory.delete_memory(app_name="shop", user_id="ann", memory_id="e3")
        await memory.add_session_to_memory(session)
        after = await memory.search_memory(app_name="shop", user_id="ann", query="tea")
        return found.memories, after.memories

    found, after = asyncio.run(run())
    assert [m.id for m in found] == ["e1", "e3", "e4", "e5"]
    assert found[0].content.parts[0].text == "tea in paris"
    # The session replaced its events (e4 was not among them), less the deleted e3.
    assert [m.id for m in after] == ["e1", "e5"]
    assert store.list_memory_namespaces() == [("adk", "ann", "shop", "deleted"), ("adk", "ann", "shop", "events")]


def test_adk_search_by_similarity_and_forget_user(store):
    from google.adk.sessions.session import Session

    from agentstate.adk import AgentStateMemoryService

    async def aembed(text: str) -> List[float]:
        return embed([text.lower()])[0]

    memory = AgentStateMemoryService(store=store, embed=aembed)
    user = "ann@example.com"  # not a plain label: a digest names it
    texts = ["tea paris", "coffee rome", "jazz cats", "dark mode"]
    session = Session(app_name="shop", user_id=user, id="s1", last_update_time=1,
                      events=[_event(f"e{i}", t, ts=i) for i, t in enumerate(texts)])

    async def search(query):
        return await memory.search_memory(app_name="shop", user_id=user, query=query)

    asyncio.run(memory.add_session_to_memory(session))
    found = asyncio.run(search("coffee rome")).memories
    assert [m.id for m in found][0] == "e1" and len(found) == 4
    label = AgentStateMemoryService.memory_user(user)
    assert label.startswith("h-") and store.list_memory_namespaces() == [("adk", label, "shop", "events")]
    store.forget_user(label)
    assert asyncio.run(search("coffee rome")).memories == []
    assert store.list_memory_namespaces() == []
