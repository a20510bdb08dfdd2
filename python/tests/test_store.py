"""The core binding against a real redis-server: every capability family through the sync
methods and their async twins, the exception hierarchy, and sharing one Store between
threads and event loops."""

from __future__ import annotations

import asyncio
import json
import threading

import pytest

import agentstate
from agentstate import Conflict, InvalidInput, Store, TooLarge, UnknownSession


def test_sessions_and_messages(store: Store):
    sid = store.create_session("planner", user="alice", metadata={"k": [1, 2]})
    assert sid == "planner"
    with pytest.raises(agentstate.AlreadyExists):
        store.create_session("planner")
    meta = store.session("planner")
    assert meta["user_id"] == "alice" and meta["metadata"] == {"k": [1, 2]}
    assert store.session("nobody") is None
    assert store.list_sessions(user="alice") == ["planner"]

    assert store.append(sid, "user", "hello") == 1
    assert store.append(sid, "assistant", "hi", meta={"m": 1}, tool_calls=[{"id": "c1"}]) == 2
    assert store.append(sid, "user", "retry", idempotency_key="k1") == 3
    assert store.append(sid, "user", "retry", idempotency_key="k1") == 3
    with pytest.raises(Conflict) as e:
        store.append(sid, "user", "stale", expect_seq=3)
    assert (e.value.expected, e.value.current) == (3, 4)
    assert store.append_many(sid, [{"role": "user", "content": "a"}, {"role": "tool", "content": "b"}]) == [4, 5]

    msgs = store.messages(sid)
    assert [m["seq"] for m in msgs] == [1, 2, 3, 4, 5]
    assert msgs[1]["meta"] == {"m": 1} and msgs[1]["tool_calls"] == [{"id": "c1"}]
    assert msgs[0]["state"] == "active" and isinstance(msgs[0]["created_at"], int)
    assert [m["seq"] for m in store.messages(sid, last=2)] == [4, 5]
    assert [m["seq"] for m in store.messages(sid, after=3)] == [4, 5]
    assert store.message(sid, 2)["content"] == "hi"
    assert store.message(sid, 99) is None

    assert store.compact(sid, 1, 2, "greetings", before_tokens=10, after_tokens=2) == (1, 6)
    assert [m["seq"] for m in store.messages(sid)] == [3, 4, 5, 6]
    assert len(store.messages(sid, all=True)) == 6
    assert store.compactions(sid)[0]["note_seq"] == 6

    store.record_usage(sid, 1, 10, 5, model="m")
    assert store.usage(sid)[0]["total_tokens"] == 15
    with pytest.raises(UnknownSession):
        store.append("nobody", "user", "x")


def test_a_message_with_neither_content_nor_tool_calls_is_refused_and_writes_nothing(store: Store):
    """As the CLI's ``msg append`` refuses it: a message with nothing in it is a mistake."""
    sid = store.create_session("bodiless")
    store.append(sid, "user", "first")
    calls = [
        lambda: store.append(sid, "user", None),
        lambda: store.append(sid, "user"),
        lambda: store.append_many(sid, [{"role": "user", "content": "ok"}, {"role": "user"}]),
        lambda: store.append_checkpointed(sid, {"role": "user"}, "label", {}),
    ]
    for call in calls:
        with pytest.raises(InvalidInput, match="a message needs content or tool_calls"):
            call()
    assert [m["seq"] for m in store.messages(sid)] == [1]
    assert store.append(sid, "user", "") == 2  # empty content is content


def test_contents_array_is_the_json_array_of_the_contents_or_none(store: Store):
    """``contents_array`` joins the contents only when each is one whole JSON value: a
    content like ``1,2`` or ``"a"]`` would shift the array's elements if joined."""
    sid = store.create_session("arrays")
    texts = ['{"a":1,"b":[1.5,null,true]}', ' [1, "x]", {}] ', r'"\u00e9\",\\"', "2", "{}", "[]"]
    for t in texts:
        store.append(sid, "user", t)
    store.append(sid, "assistant", tool_calls=[{"id": "c1"}])  # no content: left out
    assert store.contents_array(sid) == "[" + ",".join(texts) + "]"
    assert json.loads(store.contents_array(sid)) == [json.loads(t) for t in texts]
    assert store.contents_array(sid, last=3) == "[{},[]]"  # the last 3 messages: 2 contents
    assert store.contents_array(sid, after=6) == "[]"
    for i, bad in enumerate(["1,2", '"a"]', "", " ", "NaN", "{} {}", "[1,"]):
        other = store.create_session(f"bad{i}")
        store.append(other, "user", "{}")
        store.append(other, "user", bad)
        assert store.contents_array(other) is None, bad
    with pytest.raises(UnknownSession):
        store.contents_array("nobody")


def test_a_stored_element_that_is_not_one_message_fails_a_load_instead_of_shifting_it(store: Store, redis_server, prefix):
    """Loads decode a read's elements one after the other with one deserializer: an element
    holding two messages, or none, must fail the load, not shift the messages after it."""
    import subprocess

    def cli(*args: str) -> str:  # redis-cli, as an operator would (no client library needed)
        out = subprocess.run(["redis-cli", "-u", redis_server.url, *args],
                             capture_output=True, text=True, check=True).stdout
        return out[:-1] if out.endswith("\n") else out

    sid = store.create_session("corrupt")
    store.append_many(sid, [{"role": "user", "content": c} for c in ('"a"', '"b"', '"c"')])
    [key] = cli("--scan", "--pattern", f"{prefix}:*:s:{sid}:msgs").split()
    first, second = cli("LINDEX", key, "0"), cli("LINDEX", key, "1")
    for bad in (first + " " + second, "", " "):
        cli("LSET", key, "1", bad)
        for read in (store.messages, store.contents, store.contents_array):
            with pytest.raises(InvalidInput, match="stored message"):
                read(sid)
    cli("LSET", key, "1", " " + second + " \n")  # whitespace around one value: as before, read
    assert store.contents(sid) == ['"a"', '"b"', '"c"']


def test_working_state_checkpoints_and_rounds(store: Store):
    sid = store.create_session()
    assert sid.startswith("sess_")
    assert store.set_working(sid, "plan", {"step": 1}) == 1
    assert store.set_working(sid, "plan", {"step": 2}, if_version=1) == 2
    with pytest.raises(Conflict) as e:
        store.set_working(sid, "plan", {"step": 3}, if_version=1)
    assert e.value.current == 2
    assert store.get_working(sid, "plan") == {"step": 2}
    assert store.working(sid) == {"version": 2, "values": {"plan": {"step": 2}}}

    cid = store.checkpoint(sid, "after-plan")
    latest = store.checkpoint_latest(sid, "after-plan")
    assert latest["id"] == cid and latest["payload"] == {"plan": {"step": 2}}
    assert [c["label"] for c in store.checkpoints(sid)] == ["after-plan"]
    assert store.delete_working(sid, "plan") == 3
    assert store.get_working(sid, "plan") is None

    state = {"turn": 1}
    assert store.save_state("alice", state) == 1
    state["turn"] = 99  # a copy was stored
    assert store.save_state("alice", {"turn": 2}) == 2
    assert store.save_state("alice", {"turn": 7}, round_id=7) == 7
    assert store.export_state("alice") == {"turn": 7}
    assert store.export_state("alice", round_id=1) == {"turn": 1}
    assert store.export_state("alice", session_id="other") is None


def test_decisions_consumer_and_user_data(store: Store):
    sid = store.create_session("d1")
    did = store.record_decision(sid, "ship", "tests pass", action="deploy", meta={"v": 1})
    assert [d["id"] for d in store.incomplete_decisions(sid)] == [did]
    consumer = store.consumer("billing", "w1", from_start=True, block=0.2)
    batch = consumer.read()
    assert [(d["type"], d["decision"]) for d in batch] == [("decision", "ship")]
    assert consumer.ack(batch) == 1
    with pytest.raises(KeyError):
        consumer.ack(batch)  # already acked
    assert store.record_outcome(did, "deployed") is True
    assert store.record_outcome(did, "deployed") is False
    assert store.incomplete_decisions(sid) == []

    store.set_user_value("bob", "tz", "UTC")
    assert store.user_value("bob", "tz") == "UTC"
    assert store.delete_user_value("bob", "tz") is True
    store.set_user_value("bob", "lang", "de")
    receipt = store.forget_user("bob")
    assert receipt["removed_keys"] == ["lang"]
    assert store.user_value("bob", "lang") is None


def test_rejected_input_raises_typed_errors(store: Store):
    with pytest.raises(InvalidInput):
        store.create_session("has space")
    sid = store.create_session()
    with pytest.raises(InvalidInput):
        store.append(sid, "User", "bad role")
    with pytest.raises(TypeError):
        store.set_working(sid, "k", object())
    with pytest.raises(TooLarge) as e:
        store.append(sid, "user", "x" * (1 << 20))
    assert e.value.limit == 1 << 20
    assert issubclass(TooLarge, InvalidInput) and issubclass(InvalidInput, agentstate.AgentStateError)
    assert store.messages(sid) == []  # nothing was written


def test_async_twins(store, redis_server, prefix):
    async def main():
        store = await Store.aconnect(redis_server.url, prefix=prefix)
        sid = await store.acreate_session("a1")
        seqs = await asyncio.gather(*(store.aappend(sid, "user", str(i)) for i in range(50)))
        assert sorted(seqs) == list(range(1, 51))
        assert len(await store.amessages(sid)) == 50
        assert (await store.asession(sid))["next_seq"] == 51
        with pytest.raises(UnknownSession):
            await store.aappend("nobody", "user", "x")
        assert await store.aset_working(sid, "k", [1]) == 1
        assert await store.aget_working(sid, "k") == [1]
        assert await store.asave_state("u", {"a": 1}) == 1
        assert await store.aexport_state("u") == {"a": 1}

    asyncio.run(main())


def test_one_store_many_threads_and_event_loops(store: Store):
    sid = store.create_session("shared")

    def sync_worker():
        for i in range(100):
            store.append(sid, "user", f"t{i}")

    def loop_worker():
        async def run():
            await asyncio.gather(*(store.aappend(sid, "assistant", f"a{i}") for i in range(100)))

        asyncio.run(run())  # a new event loop in each thread

    threads = [threading.Thread(target=f) for f in (sync_worker, sync_worker, loop_worker, loop_worker)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    seqs = [m["seq"] for m in store.messages(sid)]
    assert seqs == list(range(1, 401))  # gapless, nothing lost


def test_stubs_match_the_extension_and_every_method_has_an_async_twin():
    import ast
    from pathlib import Path

    from agentstate.testing import RedisServer

    stub = ast.parse((Path(agentstate.__file__).parent / "_agentstate.pyi").read_text())
    classes = {n.name: n for n in stub.body if isinstance(n, ast.ClassDef)}
    for cls in (agentstate.Store, agentstate.Consumer, agentstate.SpillDaemon, RedisServer, agentstate.RunLease):
        runtime = {n for n in dir(cls) if not n.startswith("_")}
        stubbed = {
            n.name for n in classes[cls.__name__].body
            if isinstance(n, ast.FunctionDef) and not n.name.startswith("__")
        }
        assert runtime == stubbed, (cls.__name__, runtime ^ stubbed)
        for name in runtime:
            assert getattr(cls, name).__doc__, f"{cls.__name__}.{name} has no docstring"
    names = {n for n in dir(Store) if not n.startswith("_")}
    twins = {n for n in names if n.startswith("a") and n[1:] in names}
    plain = names - twins - {"aconnect", "with_durability", "durable", "prefix", "partitions", "url", "limits",
                             "fenced", "fence", "run_lease"}
    assert plain and all("a" + n in names for n in plain), sorted(n for n in plain if "a" + n not in names)
    for exc in ("Conflict", "InvalidInput", "TooLarge", "UnknownSession", "NotLive", "RedisUnavailable",
                "DurabilityTimeout", "WriteLost", "Fenced", "Leased"):
        assert exc in classes and issubclass(getattr(agentstate, exc), agentstate.AgentStateError)


def test_the_readme_example_runs(redis_server, tmp_path, monkeypatch):
    import re
    from pathlib import Path

    monkeypatch.setenv("AGENTSTATE_REDIS_URL", redis_server.url)
    monkeypatch.chdir(tmp_path)  # the example's daemon writes ./agentstate.db
    readme = (Path(__file__).resolve().parents[2] / "README.md").read_text()
    code = re.search(r"## Python.*?```python\n(.*?)```", readme, re.S).group(1)
    assert len(code.strip().splitlines()) <= 10
    scope: dict = {}
    exec(code, scope)
    assert [m["content"] for m in scope["store"].messages(scope["sid"])] == ["plan the release"]
    assert asyncio.run(scope["session"].get_items()) == [{"role": "user", "content": "hi"}]


def _blocked_clients(server) -> int:
    """How many clients Redis has blocked in a command (``INFO clients``)."""
    import re
    import subprocess

    out = subprocess.run(["redis-cli", "-p", str(server.port), "INFO", "clients"],
                         check=True, capture_output=True, text=True).stdout
    return int(re.search(r"blocked_clients:(\d+)", out).group(1))


def test_blocking_calls_release_the_gil_and_async_twins_leave_the_loop_free(store: Store, redis_server):
    """A consumer read blocks in Redis until a decision arrives. The decision is recorded by
    another Python thread (sync call) or another coroutine (async twin), which first waits
    until Redis shows the read blocked: had the read held the GIL or the event loop, that
    writer could not run before the read gave up (``block``; 60 s here only bounds a hang)
    and the read would return ``[]``. No time is measured: python/bench_blocking.py reports
    how much a spinning thread and the loop get done during a blocked read."""
    from support import wait_until

    sid = store.create_session()
    consumer = store.consumer("waiters", "c1", block=60)
    idle = _blocked_clients(redis_server)

    def writer():
        wait_until(lambda: _blocked_clients(redis_server) > idle, timeout=60, what="the read to block in Redis")
        store.record_decision(sid, "ship", "recorded while the sync read blocks")

    t = threading.Thread(target=writer)
    t.start()
    batch = consumer.read()
    t.join()
    assert [d["decision"] for d in batch] == ["ship"]
    assert consumer.ack(batch) == 1

    async def main():
        async def writer():
            while _blocked_clients(redis_server) == idle:
                await asyncio.sleep(0.01)
            await store.arecord_decision(sid, "ship again", "recorded while the async read blocks")

        w = asyncio.ensure_future(writer())
        batch = await consumer.aread()
        if w.done():
            await w  # its error, if any
        else:
            w.cancel()  # the read returned without the writer's decision: it never got to run
        return batch

    batch = asyncio.run(main())
    assert [d["decision"] for d in batch] == ["ship again"]


def test_stub_signatures_match_the_extension():
    """Every method and constructor in `_agentstate.pyi` takes the parameters the extension
    takes: same names, same kinds (positional / keyword-only), defaults in the same places."""
    import ast
    import inspect
    from pathlib import Path

    from agentstate.testing import RedisServer

    stub = ast.parse((Path(agentstate.__file__).parent / "_agentstate.pyi").read_text())
    classes = {n.name: n for n in stub.body if isinstance(n, ast.ClassDef)}

    def stubbed(fn: ast.FunctionDef) -> list:
        a = fn.args
        positional = a.posonlyargs + a.args
        defaults = [False] * (len(positional) - len(a.defaults)) + [True] * len(a.defaults)
        out = [(x.arg, "POSITIONAL_OR_KEYWORD", d) for x, d in zip(positional, defaults)]
        out += [(x.arg, "KEYWORD_ONLY", d is not None) for x, d in zip(a.kwonlyargs, a.kw_defaults)]
        if a.vararg:
            out.append((a.vararg.arg, "VAR_POSITIONAL", False))
        return [p for p in out if p[0] != "self"]

    checked = 0
    for cls in (agentstate.Store, agentstate.Consumer, agentstate.SpillDaemon, RedisServer):
        for fn in classes[cls.__name__].body:
            if not isinstance(fn, ast.FunctionDef) or fn.name in ("__enter__", "__exit__"):
                continue
            if any(isinstance(d, ast.Name) and d.id == "property" for d in fn.decorator_list):
                continue
            sig = inspect.signature(cls if fn.name == "__init__" else getattr(cls, fn.name))
            runtime = [
                (p.name, p.kind.name, p.default is not inspect.Parameter.empty)
                for p in sig.parameters.values()
                if p.name not in ("self", "$self")
            ]
            assert runtime == stubbed(fn), (cls.__name__, fn.name)
            checked += 1
    assert checked > 100
