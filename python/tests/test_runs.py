"""Runs across processes: the run lease and its fencing token, the inbox and the tool-effect
ledger, each driven by real Python processes (their own Store, pool and tokio runtime) against
the test's private redis-server; and the adapters' opt-in run leases."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import tempfile
import textwrap
from typing import List

import pytest

import agentstate
from agentstate import Fenced, Leased, Store
from support import wait_until

_PRELUDE = textwrap.dedent(
    """
    import json, sys, time
    from pathlib import Path
    from agentstate import Fenced, Leased, Store

    url, prefix, sid, name, start, count = sys.argv[1:7]
    store = Store(url, prefix=prefix)

    def barrier():
        # every process starts its racing call together, whatever its import time
        Path(start, name).touch()
        while len(list(Path(start).iterdir())) < int(count):
            time.sleep(0.001)
    """
)
"""What every child program starts with: its arguments, its store and the start barrier."""


def _race(store: Store, redis_server, sid: str, body: str, n: int) -> List[str]:
    """Runs ``body`` in ``n`` processes that start together; returns each one's stdout."""
    start = tempfile.mkdtemp(prefix="agentstate-barrier-")
    code = _PRELUDE + textwrap.dedent(body)
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", code, redis_server.url, store.prefix, sid, f"p{i}", start, str(n)],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        )
        for i in range(n)
    ]
    outs = []
    for p in procs:
        out, err = p.communicate(timeout=60)
        assert p.returncode == 0, err
        outs.append(out.strip())
    return outs


def test_two_processes_race_for_a_lease_one_wins_and_a_takeover_gets_a_larger_token(store: Store, redis_server):
    sid = store.create_session()
    outs = _race(store, redis_server, sid, """
        barrier()
        try:
            print("won", store.acquire_lease(sid, name, 1500)["token"])
        except Leased as e:
            print("leased", e.holder, e.token)
    """, 2)
    won = [o for o in outs if o.startswith("won")]
    lost = [o for o in outs if o.startswith("leased")]
    assert len(won) == 1 and len(lost) == 1, outs
    token = int(won[0].split()[1])
    holder = store.lease_holder(sid)
    assert holder is not None and holder["token"] == token
    assert lost[0].split()[2] == str(token)  # the loser was told who holds it
    with pytest.raises(Leased):
        store.acquire_lease(sid, "late", 1000)
    wait_until(lambda: store.lease_holder(sid) is None, what="the lease to expire")
    taken = store.acquire_lease(sid, "late", 1000)
    assert taken["token"] > token
    assert store.acquire_lease(sid, "late", 1000)["token"] == taken["token"]  # same owner keeps it
    assert not store.renew_lease(sid, holder["owner"], token, 1000)
    assert store.renew_lease(sid, "late", taken["token"], 1000)
    assert not store.release_lease(sid, holder["owner"], token)
    assert store.release_lease(sid, "late", taken["token"])
    assert store.lease_holder(sid) is None


def test_a_holder_stopped_past_its_ttl_is_fenced_when_it_wakes_and_writes_nothing(store: Store, redis_server):
    """The holder is paused with SIGSTOP while its lease (500 ms) expires and another process
    takes the session over; woken with SIGCONT, its renewal fails (``run.lost``) and its
    fenced append, tool-effect intent and result, and inbox claim and delivery raise
    ``Fenced``: the transcript holds only the successor's message, the ledger only the
    successor's call."""
    sid = store.create_session()
    store.inbox_put(sid, [{"item_id": "mail-1", "role": "user", "content": "mail"}])
    code = _PRELUDE + textwrap.dedent("""
        with store.run_lease(sid, ttl_ms=500) as run:
            run.store.append(sid, "assistant", "before the pause")
            print(run.token, flush=True)
            sys.stdin.readline()  # the test pauses us here, then wakes us and writes a line
            deadline = time.monotonic() + 10
            while not run.lost and time.monotonic() < deadline:
                time.sleep(0.01)
            writes = [
                lambda: run.store.append(sid, "assistant", "after the pause"),
                lambda: run.store.effect_begin(sid, "call-A", {"by": "A"}),
                lambda: run.store.effect_finish(sid, "call-B", {"by": "A"}),
                lambda: run.store.inbox_claim(sid, run.owner, run.token),
                lambda: run.store.inbox_deliver(sid, run.owner, run.token, ["mail-1"]),
            ]
            for write in writes:
                try:
                    write()
                    print("written", run.lost, flush=True)
                except Fenced as e:
                    print("fenced", run.lost, e.token, e.current, e.holder, flush=True)
    """)
    p = subprocess.Popen(
        [sys.executable, "-c", code, redis_server.url, store.prefix, sid, "holder", "-", "1"],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )
    try:
        token = int(p.stdout.readline())
        os.kill(p.pid, signal.SIGSTOP)
        wait_until(lambda: store.lease_holder(sid) is None, what="the paused holder's lease to expire")
        successor = store.acquire_lease(sid, "successor", 30000)
        assert successor["token"] > token
        store.fenced(successor["token"]).append(sid, "assistant", "the successor's")
        assert store.fenced(successor["token"]).effect_begin(sid, "call-B", {"by": "B"})["state"] == "started"
        os.kill(p.pid, signal.SIGCONT)
        p.stdin.write("go\n")
        p.stdin.flush()
        out, err = p.communicate(timeout=30)
    finally:
        if p.poll() is None:  # a failed assertion above: do not leave it stopped
            os.kill(p.pid, signal.SIGCONT)
            p.kill()
    assert p.returncode == 0, err
    refused = ["fenced", "True", str(token), str(successor["token"]), "successor"]
    assert [line.split() for line in out.splitlines()] == [refused] * 5
    contents = [m["content"] for m in store.messages(sid)]
    assert contents == ["before the pause", "the successor's"]
    assert [(e["call_id"], e["state"]) for e in store.effects(sid)] == [("call-B", "running")]
    assert [i["state"] for i in store.inbox(sid)] == ["pending"]


def test_processes_put_the_same_inbox_items_once_and_the_holder_delivers_each_once(store: Store, redis_server):
    sid = store.create_session()
    outs = _race(store, redis_server, sid, """
        barrier()
        items = [{"item_id": f"m{i}", "role": "user", "content": f"message {i}"} for i in range(20)]
        print(json.dumps(store.inbox_put(sid, items)))
    """, 4)
    added = [json.loads(o) for o in outs]
    assert all(len(a) == 20 for a in added)
    assert [sum(a[i] for a in added) for i in range(20)] == [1] * 20  # each accepted once
    assert [i["state"] for i in store.inbox(sid)] == ["pending"] * 20

    with store.run_lease(sid) as run:
        with pytest.raises(Fenced):
            store.inbox_claim(sid, "not-the-holder", run.token)
        claimed = store.inbox_claim(sid, run.owner, run.token, limit=15)
        assert len(claimed) == 15 and all(i["state"] == "claimed" for i in claimed)
        ids = [i["item_id"] for i in claimed]
        seqs = run.store.inbox_deliver(sid, run.owner, run.token, ids)
        assert run.store.inbox_deliver(sid, run.owner, run.token, ids) == seqs  # once only
        rest = store.inbox_claim(sid, run.owner, run.token)
        assert store.inbox_void(sid, [rest[-1]["item_id"]]) == 1
        seqs += store.inbox_deliver(sid, run.owner, run.token, [i["item_id"] for i in rest[:-1]])
    messages = store.messages(sid)
    assert [m["seq"] for m in messages] == seqs == list(range(1, 20))
    delivered = [m["content"] for m in messages]
    assert sorted(delivered) == sorted(f"message {i}" for i in range(19))
    assert len(set(delivered)) == 19  # each exactly once
    states = {i["item_id"]: (i["state"], i["seq"]) for i in store.inbox(sid)}
    assert sum(s == "void" for s, _ in states.values()) == 1
    assert all(seq is not None for s, seq in states.values() if s == "delivered")


def test_concurrent_effect_begin_starts_once_and_a_killed_process_leaves_it_unresolved(store: Store, redis_server):
    sid = store.create_session()
    outs = _race(store, redis_server, sid, """
        barrier()
        print(store.effect_begin(sid, "charge-1", {"amount": 5, "to": "acct"})["state"])
    """, 4)
    assert sorted(outs) == ["running"] * 3 + ["started"]
    assert store.effect_finish(sid, "charge-1", {"ok": True})
    assert not store.effect_finish(sid, "charge-1", {"ok": False})  # the first result stays
    done = store.effect_begin(sid, "charge-1", {"to": "acct", "amount": 5})  # same args, any order
    assert done["state"] == "done" and done["result"] == {"ok": True}
    with pytest.raises(agentstate.InvalidInput):
        store.effect_begin(sid, "charge-1", {"amount": 6, "to": "acct"})

    code = _PRELUDE + textwrap.dedent("""
        print(store.effect_begin(sid, "charge-2", {"amount": 7})["state"], flush=True)
        time.sleep(60)  # the tool "runs" until the test kills us
    """)
    p = subprocess.Popen(
        [sys.executable, "-c", code, redis_server.url, store.prefix, sid, "doomed", "-", "1"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )
    assert p.stdout.readline().strip() == "started"
    p.kill()
    p.wait()
    unresolved = store.unresolved_effects(sid)
    assert [e["call_id"] for e in unresolved] == ["charge-2"]
    assert unresolved[0]["state"] == "running" and unresolved[0]["result"] is None
    assert [e["call_id"] for e in store.effects(sid)] == ["charge-1", "charge-2"]
    assert store.effect(sid, "charge-2")["args_digest"].startswith("sha256:")
    assert store.effect(sid, "nothing") is None
    assert store.effect_finish(sid, "charge-2", "reconciled")
    assert store.unresolved_effects(sid) == []


def test_the_async_twins_and_async_with_run_lease(store: Store):
    sid = store.create_session()

    async def main():
        lease = await store.aacquire_lease(sid, "a1", 5000)
        assert (await store.alease_holder(sid))["owner"] == "a1"
        assert await store.arenew_lease(sid, "a1", lease["token"], 5000)
        assert await store.arelease_lease(sid, "a1", lease["token"])
        assert await store.ainbox_put(sid, [{"item_id": "x", "role": "user", "content": "hi"}]) == [True]
        async with store.run_lease(sid, "a2", 3000) as run:
            assert run.token > lease["token"] and run.owner == "a2" and not run.lost
            assert run.store.fence == run.token and store.fence is None
            with pytest.raises(Leased):
                async with store.run_lease(sid, "a3"):
                    pass
            [item] = await store.ainbox_claim(sid, run.owner, run.token)
            assert item["message"]["content"] == "hi"
            assert await store.ainbox_deliver(sid, run.owner, run.token, ["x"]) == [1]
            assert await run.store.aappend(sid, "assistant", "hello") == 2
            assert (await store.aeffect_begin(sid, "t1", [1, 2]))["state"] == "started"
            assert [e["call_id"] for e in await store.aunresolved_effects(sid)] == ["t1"]
            assert await store.aeffect_finish(sid, "t1", {"sum": 3})
            assert (await store.aeffect(sid, "t1"))["result"] == {"sum": 3}
            assert len(await store.aeffects(sid)) == 1
            assert await store.ainbox_void(sid, ["x"]) == 0  # delivered: left alone
            assert [i["state"] for i in await store.ainbox(sid)] == ["delivered"]
        assert await store.alease_holder(sid) is None  # released on exit
        # a third owner waits for a holder to release
        held = await store.aacquire_lease(sid, "a4", 30000)

        async def release_soon():
            await asyncio.sleep(0.2)
            await store.arelease_lease(sid, "a4", held["token"])

        releasing = asyncio.ensure_future(release_soon())
        async with store.run_lease(sid, "a5", wait=10) as run:
            assert run.token > held["token"]
        await releasing

    asyncio.run(main())


def test_a_fenced_store_refuses_writes_once_another_owner_holds_the_lease(store: Store):
    sid = store.create_session()
    first = store.acquire_lease(sid, "w1", 30000)
    fenced = store.fenced(first["token"])
    fenced.append(sid, "user", "one")
    fenced.set_working(sid, "k", 1)
    store.release_lease(sid, "w1", first["token"])
    store.acquire_lease(sid, "w2", 30000)
    for write in (lambda: fenced.append(sid, "user", "two"),
                  lambda: fenced.append_many(sid, [{"role": "user", "content": "two"}]),
                  lambda: fenced.set_working(sid, "k", 2),
                  lambda: fenced.checkpoint(sid, "c"),
                  lambda: fenced.effect_begin(sid, "call-1", {"n": 1}),
                  lambda: fenced.inbox_claim(sid, "w1", first["token"])):
        with pytest.raises(Fenced) as e:
            write()
        assert e.value.holder == "w2" and e.value.token == first["token"]
        assert "taken over by w2" in str(e.value), e.value
    assert store.effects(sid) == []
    assert [m["content"] for m in store.messages(sid)] == ["one"]
    assert store.get_working(sid, "k") == 1
    with pytest.raises(Leased) as e:
        store.acquire_lease(sid, "w3", 30000)
    assert "held by w2" in str(e.value) and " UTC (in " in str(e.value), e.value
    assert "no wait= was given" in str(e.value), e.value
    with pytest.raises(Leased) as e:
        with store.run_lease(sid, "w3", wait=0.05):
            pass
    assert "wait= (0.05 s) ran out while it was held" in str(e.value), e.value
    with store.run_lease(sid, "w2", wait=0) as run:  # "w2" holds it already: same token
        assert run.lease["owner"] == "w2"
    with pytest.raises(ValueError):
        store.run_lease(sid).token  # not entered
    lease = store.run_lease(sid, "w3")
    with lease:
        pass
    with pytest.raises(RuntimeError):
        lease.__enter__()  # one run per RunLease object


# ---- the adapters' run leases ---------------------------------------------------------


def test_openai_session_run_lease_refuses_a_second_run_and_fences_its_writes(store: Store):
    pytest.importorskip("agents")
    from agentstate.openai_agents import AgentStateSession

    async def main():
        one = AgentStateSession("conv", store=store, id_prefix=store.prefix)
        two = AgentStateSession("conv", store=store, id_prefix=store.prefix)
        async with one.run_lease(ttl_ms=30000) as run:
            await one.add_items([{"role": "user", "content": "hi"}])
            with pytest.raises(Leased):
                async with two.run_lease():
                    pass
            # another process takes the conversation over (say this one was paused)
            store.release_lease(one.agentstate_id, run.owner, run.token)
            store.acquire_lease(one.agentstate_id, "other", 30000)
            with pytest.raises(Fenced):
                await one.add_items([{"role": "user", "content": "stale"}])
        assert await two.get_items() == [{"role": "user", "content": "hi"}]
        holder = store.lease_holder(one.agentstate_id)
        store.release_lease(one.agentstate_id, "other", holder["token"])
        async with two.run_lease(wait=5):
            await two.add_items([{"role": "user", "content": "again"}])
        await one.add_items([{"role": "user", "content": "unfenced"}])  # no lease held: plain
        assert len(await one.get_items()) == 3

    asyncio.run(main())


def test_strands_repository_run_lease_refuses_a_second_run_and_fences_its_writes(store: Store):
    pytest.importorskip("strands")
    from strands.types.exceptions import SessionException
    from strands.types.session import Session, SessionAgent, SessionMessage, SessionType

    from agentstate.strands import AgentStateSessionRepository

    one = AgentStateSessionRepository(store=store, id_prefix=store.prefix)
    two = AgentStateSessionRepository(store=store, id_prefix=store.prefix)
    one.create_session(Session(session_id="s", session_type=SessionType.AGENT))
    one.create_agent("s", SessionAgent(agent_id="a", state={}, conversation_manager_state={}))
    with pytest.raises(SessionException):
        with one.run_lease("s", "missing"):
            pass

    def message(i: int) -> SessionMessage:
        return SessionMessage(message={"role": "user", "content": [{"text": str(i)}]}, message_id=i)

    with one.run_lease("s", "a") as run:
        one.create_message("s", "a", message(0))
        with pytest.raises(Leased):
            with two.run_lease("s", "a"):
                pass
        store.release_lease(run.sid, run.owner, run.token)
        store.acquire_lease(run.sid, "other", 30000)
        with pytest.raises(Fenced):
            one.create_message("s", "a", message(1))
    assert [m.message_id for m in two.list_messages("s", "a")] == [0]
    store.release_lease(run.sid, "other", store.lease_holder(run.sid)["token"])
    with two.run_lease("s", "a", wait=5):
        two.create_message("s", "a", message(1))
    assert [m.message_id for m in one.list_messages("s", "a")] == [0, 1]


def test_adk_service_run_lease_refuses_a_second_run_and_fences_its_events(store: Store):
    pytest.importorskip("google.adk")
    from google.adk.errors.session_not_found_error import SessionNotFoundError
    from google.adk.events.event import Event

    from agentstate.adk import AgentStateSessionService

    async def main():
        one = AgentStateSessionService(store=store, id_prefix=store.prefix)
        two = AgentStateSessionService(store=store, id_prefix=store.prefix)
        ids = dict(app_name="shop", user_id="u1", session_id="s1")
        with pytest.raises(SessionNotFoundError):
            async with one.run_lease(**ids):
                pass
        session = await one.create_session(app_name="shop", user_id="u1", session_id="s1")
        async with one.run_lease(**ids, ttl_ms=30000) as run:
            assert run.sid == one.session_key("shop", "u1", "s1")
            with pytest.raises(Leased) as e:
                async with two.run_lease(**ids):
                    pass
            assert e.value.holder == run.owner
            await one.append_event(session, Event(invocation_id="i1", author="user"))
            # another process takes the session over (say this one was paused past its TTL):
            # this runner's next event is refused before its successor wrote anything
            store.release_lease(run.sid, run.owner, run.token)
            store.acquire_lease(run.sid, "other", 30000)
            with pytest.raises(Fenced):
                await one.append_event(session, Event(invocation_id="i1", author="model"))
        stored = await two.get_session(**ids)
        assert [e.author for e in stored.events] == ["user"]
        store.release_lease(run.sid, "other", store.lease_holder(run.sid)["token"])
        async with two.run_lease(**ids, wait=5):  # free again
            pass

    asyncio.run(main())
