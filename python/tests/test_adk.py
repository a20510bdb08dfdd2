"""agentstate's contract for Google ADK sessions (``agentstate.adk.AgentStateSessionService``),
in our words: every behaviour ADK's own session contract tests check (scoped state, ``temp:``,
event order, timestamps read back exactly, ``get_user_state``, listing, stale writers), plus
what only agentstate promises: the state lives where our model has a home (``forget_user``
erases ``user:`` state), ``temp:`` reaches neither Redis nor SQLite, events keep seq order
when timestamps tie, concurrent writers in two processes lose nothing, and a session comes
back whole after Redis lost everything.

Every test runs on a private redis-server, in its own namespace checked by a daemon pass;
the durability tests run a real ``agentstate spill`` writing a real SQLite file."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import textwrap
import uuid
from pathlib import Path

import pytest

pytest.importorskip("google.adk")

from google.adk.errors import StaleSessionError  # noqa: E402
from google.adk.errors.already_exists_error import AlreadyExistsError  # noqa: E402
from google.adk.errors.session_not_found_error import SessionNotFoundError  # noqa: E402
from google.adk.events.event import Event  # noqa: E402
from google.adk.events.event_actions import EventActions  # noqa: E402
from google.adk.sessions.base_session_service import GetSessionConfig  # noqa: E402
from google.adk.sessions.session import Session  # noqa: E402
from google.genai import types  # noqa: E402

from agentstate.adk import AgentStateSessionService  # noqa: E402
from support import RedisServer, SpillDaemon, prepare_namespace, sqlite_rows, wait_until  # noqa: E402

APP = "shop"


@pytest.fixture
def service(store):
    return AgentStateSessionService(store=store)


@pytest.fixture
def spilled(tmp_path):
    """A private redis-server (a test may empty it) with a running spill daemon flushing a
    fresh namespace to ``tmp_path/spill.db``: ``(server, db, service)``."""
    from agentstate import Store

    server = RedisServer()
    prefix = "l" + uuid.uuid4().hex[:8]
    db = tmp_path / "spill.db"
    daemon = SpillDaemon(server.url, db, prefix)
    try:
        yield server, db, AgentStateSessionService(store=Store(server.url, prefix=prefix))
    finally:
        daemon.stop()
        server.close()


def run(coro):
    return asyncio.run(coro)


def delta(**state):
    """An event whose only content is a state delta (``app__k`` stands for ``app:k``)."""
    return Event(
        invocation_id="inv",
        author="user",
        actions=EventActions(state_delta={k.replace("__", ":", 1): v for k, v in state.items()}),
    )


# -- sessions ------------------------------------------------------------------------------


def test_a_created_session_reads_back_equal_and_is_gone_once_deleted(service):
    async def go():
        created = await service.create_session(app_name=APP, user_id="ann", state={"k": "v"})
        assert created.id and created.state == {"k": "v"} and created.events == []
        got = await service.get_session(app_name=APP, user_id="ann", session_id=created.id)
        assert got == created
        assert got.last_update_time == created.last_update_time
        await service.delete_session(app_name=APP, user_id="ann", session_id=created.id)
        assert await service.get_session(app_name=APP, user_id="ann", session_id=created.id) is None
        # Deleting what is not there is no error.
        await service.delete_session(app_name=APP, user_id="ann", session_id=created.id)

    run(go())


def test_unknown_ids_read_as_none_and_a_taken_id_is_refused(service):
    async def go():
        assert await service.get_session(app_name=APP, user_id="ann", session_id="nope") is None
        await service.create_session(app_name=APP, user_id="ann", session_id="s1", state={"a": 1})
        with pytest.raises(AlreadyExistsError):
            await service.create_session(app_name=APP, user_id="ann", session_id="s1", state={"a": 2})
        # Surrounding whitespace is not part of an id (ADK's rule): same session.
        with pytest.raises(AlreadyExistsError):
            await service.create_session(app_name=APP, user_id="ann", session_id="  s1 ")
        got = await service.get_session(app_name=APP, user_id="ann", session_id=" s1 ")
        assert got.id == "s1" and got.state == {"a": 1}
        # A blank id is no id: one is generated.
        blank = await service.create_session(app_name=APP, user_id="ann", session_id="   ")
        assert blank.id.strip() == blank.id and blank.id

    run(go())


def test_one_session_id_under_two_users_is_two_sessions(service):
    async def go():
        mine = await service.create_session(app_name=APP, user_id="u1", session_id="s")
        await service.append_event(mine, Event(invocation_id="i", author="user"))
        await service.create_session(app_name=APP, user_id="u2", session_id="s")
        theirs = await service.get_session(app_name=APP, user_id="u2", session_id="s")
        assert theirs.user_id == "u2" and theirs.events == []

    run(go())


def test_odd_ids_map_to_valid_agentstate_ids_and_come_back_exactly(service, store):
    async def go():
        app, user, sid = "my app/ü", "user with spaces " * 10, "sess:" + "x" * 200
        created = await service.create_session(app_name=app, user_id=user, session_id=sid, state={"k": 1})
        got = await service.get_session(app_name=app, user_id=user, session_id=sid)
        assert (got.app_name, got.user_id, got.id) == (app, user, sid)
        listed = (await service.list_sessions(app_name=app)).sessions
        assert [(s.user_id, s.id) for s in listed] == [(user, sid)]
        assert got == created
        # Ids joined with "@" stay apart even when a part holds an "@".
        a = await service.create_session(app_name=APP, user_id="z", session_id="x@y", state={"who": 1})
        b = await service.create_session(app_name=APP, user_id="y@z", session_id="x", state={"who": 2})
        assert service.session_key(APP, "z", "x@y") != service.session_key(APP, "y@z", "x")
        assert (await service.get_session(app_name=APP, user_id="z", session_id="x@y")).state == a.state
        assert (await service.get_session(app_name=APP, user_id="y@z", session_id="x")).state == b.state

    run(go())


# -- listing -------------------------------------------------------------------------------


def test_listing_is_per_user_or_per_app_oldest_update_first_with_merged_state_and_no_events(service):
    async def go():
        for user, sid in [("u1", "a"), ("u1", "b"), ("u2", "c")]:
            await service.create_session(app_name=APP, user_id=user, session_id=sid, state={"own": sid})
        await service.create_session(app_name="other", user_id="u1", session_id="z")
        a = await service.get_session(app_name=APP, user_id="u1", session_id="a")
        await service.append_event(a, delta(app__motd="hi", user__lang="fr"))
        mine = (await service.list_sessions(app_name=APP, user_id="u1")).sessions
        assert [s.id for s in mine] == ["b", "a"]  # a was updated last
        assert mine[1].state == {"own": "a", "app:motd": "hi", "user:lang": "fr"}
        assert all(s.events == [] for s in mine)
        every = (await service.list_sessions(app_name=APP)).sessions
        assert [(s.user_id, s.id) for s in every] == [("u1", "b"), ("u2", "c"), ("u1", "a")]
        assert every[1].state == {"own": "c", "app:motd": "hi"}
        assert (await service.list_sessions(app_name=APP, user_id="nobody")).sessions == []
        assert [s.id for s in (await service.list_sessions(app_name="other")).sessions] == ["z"]

    run(go())


def test_the_binding_lists_one_page_at_a_time_by_cursor(store):
    for i in range(25):
        store.create_session(f"pg-{i:02}", user="paula")
    store.create_session("zz-other", user="otto")
    pages, after = [], None
    while True:
        ids, after = store.list_sessions_page(10, user="paula", after=after)
        pages.append(ids)
        if after is None:
            break
    assert [len(p) for p in pages] == [10, 10, 5]
    assert sum(pages, []) == [f"pg-{i:02}" for i in range(25)]
    assert store.list_sessions_page(100, prefix="zz")[0] == ["zz-other"]


# -- state scopes --------------------------------------------------------------------------


def test_app_state_is_shared_by_the_apps_users_user_state_by_one_users_sessions(service):
    async def go():
        s1 = await service.create_session(
            app_name=APP, user_id="u1", session_id="s1", state={"app:a1": 1, "user:p1": 1, "own": 1}
        )
        await service.append_event(s1, delta(app__a2=2, user__p2=2, own2=2))
        s1b = await service.create_session(app_name=APP, user_id="u1", session_id="s1b")
        assert s1b.state == {"app:a1": 1, "app:a2": 2, "user:p1": 1, "user:p2": 2}
        s2 = await service.create_session(app_name=APP, user_id="u2", session_id="s2")
        assert s2.state == {"app:a1": 1, "app:a2": 2}
        elsewhere = await service.create_session(app_name="other", user_id="u1", session_id="s3")
        assert elsewhere.state == {}
        again = await service.get_session(app_name=APP, user_id="u1", session_id="s1")
        assert again.state == {"app:a1": 1, "app:a2": 2, "user:p1": 1, "user:p2": 2, "own": 1, "own2": 2}

    run(go())


def test_a_none_is_stored_a_dict_replaces_and_types_survive(service):
    async def go():
        s = await service.create_session(
            app_name=APP, user_id="u1", session_id="s",
            state={"flag": False, "n": 0.1 + 0.2, "profile": {"name": "ada", "role": "x"},
                   "app:cfg": {"a": 1, "b": 2}, "user:pref": "dark"},
        )
        await service.append_event(
            s, delta(profile={"name": "bob"}, gone=None, app__cfg={"a": 9}, user__pref=None, new_flag=True)
        )
        expected = {"flag": False, "n": 0.1 + 0.2, "profile": {"name": "bob"}, "gone": None,
                    "new_flag": True, "app:cfg": {"a": 9}, "user:pref": None}
        assert s.state == expected
        got = await service.get_session(app_name=APP, user_id="u1", session_id="s")
        assert got.state == expected
        assert got.state["flag"] is False and got.state["n"] == 0.30000000000000004

    run(go())


def test_temp_state_is_seen_by_the_invocation_and_stored_nowhere(spilled):
    server, db, service = spilled

    async def go():
        s = await service.create_session(app_name=APP, user_id="u", session_id="s",
                                         state={"temp:seed": "SECRET-T0"})
        event = delta(temp__scratch="SECRET-T1", kept="yes")
        await service.append_event(s, event)
        assert s.state["temp:scratch"] == "SECRET-T1"  # this invocation sees it
        assert "temp:scratch" not in event.actions.state_delta
        got = await service.get_session(app_name=APP, user_id="u", session_id="s")
        assert got.state == {"kept": "yes"}
        assert "temp:scratch" not in got.events[0].actions.state_delta

    asyncio.run(go())
    wait_until(lambda: sqlite_rows(db, "SELECT count(*) FROM messages")[0][0] == 1, what="the flush")
    wait_until(lambda: sqlite_rows(db, "SELECT count(*) FROM checkpoints")[0][0] == 2, what="the flush")
    # Neither Redis (every key, every value) nor any SQLite table holds a temp: value.
    dump = subprocess.run(
        ["redis-cli", "-u", server.url, "--scan"], capture_output=True, text=True, check=True
    ).stdout.split()
    for key in dump:
        kind = subprocess.run(["redis-cli", "-u", server.url, "type", key],
                              capture_output=True, text=True).stdout.strip()
        cmd = {"hash": ["hgetall"], "list": ["lrange", key, "0", "-1"], "string": ["get"],
               "stream": ["xrange", key, "-", "+"]}.get(kind, ["type"])
        args = cmd if len(cmd) > 1 else cmd + [key]
        out = subprocess.run(["redis-cli", "-u", server.url, *args], capture_output=True, text=True).stdout
        assert "SECRET-T" not in out and "temp:" not in out, key
    tables = [r[0] for r in sqlite_rows(db, "SELECT name FROM sqlite_master WHERE type = 'table'")]
    for table in tables:
        for row in sqlite_rows(db, f"SELECT * FROM {table}"):
            assert "SECRET-T" not in repr(row), table


def test_get_user_state_is_one_users_state_of_one_app(service):
    async def go():
        assert await service.get_user_state(app_name=APP, user_id="u1") == {}
        s = await service.create_session(app_name=APP, user_id="u1")
        await service.append_event(s, delta(user__profile={"name": "Alice"}, own=1, app__x=1))
        await service.append_event(s, delta(user__counter=1))
        await service.append_event(s, delta(user__counter=2))
        assert await service.get_user_state(app_name=APP, user_id="u1") == {
            "profile": {"name": "Alice"}, "counter": 2}
        assert await service.get_user_state(app_name=APP, user_id="u2") == {}
        assert await service.get_user_state(app_name="other", user_id="u1") == {}

    run(go())


def test_forget_user_erases_the_users_adk_state(service, store):
    async def go():
        s = await service.create_session(app_name=APP, user_id="gdpr", state={"user:email": "a@b.c"})
        await service.append_event(s, delta(user__phone="123", app__shared=1))
        store.forget_user(service.user_key(APP, "gdpr"))
        assert await service.get_user_state(app_name=APP, user_id="gdpr") == {}
        got = await service.get_session(app_name=APP, user_id="gdpr", session_id=s.id)
        assert got.state == {"app:shared": 1}

    run(go())


# -- events --------------------------------------------------------------------------------


def test_events_read_back_equal_bytes_and_every_field_included(service):
    async def go():
        s = await service.create_session(app_name=APP, user_id="u")
        content = types.Content(role="user", parts=[types.Part.from_bytes(data=b"\x00img", mime_type="image/png")])
        await service.append_event(s, Event(invocation_id="i1", author="user", content=content))
        await service.append_event(s, Event(
            invocation_id="i2", author="agent", turn_complete=True, interrupted=True,
            error_code="E", error_message="m", long_running_tool_ids={"t1"},
            custom_metadata={"k": "v"}, timestamp=1700000000.123,
            actions=EventActions(artifact_delta={"f": 0}, transfer_to_agent="b", escalate=True),
            usage_metadata=types.GenerateContentResponseUsageMetadata(total_token_count=2),
        ))
        got = await service.get_session(app_name=APP, user_id="u", session_id=s.id)
        assert got == s
        assert got.events[0].content == content
        assert got.last_update_time == 1700000000.123

    run(go())


def test_events_keep_append_order_whatever_their_timestamps(service):
    async def go():
        s = await service.create_session(app_name=APP, user_id="u")
        stamps = [100.0, 100.0, 50.0, 1730613600.0, 1730615400.0]
        for i, t in enumerate(stamps):
            await service.append_event(s, Event(id=f"e{4 - i}", author="user", timestamp=t))
        got = await service.get_session(app_name=APP, user_id="u", session_id=s.id)
        assert [e.id for e in got.events] == ["e4", "e3", "e2", "e1", "e0"]
        assert [e.timestamp for e in got.events] == stamps
        assert got.last_update_time == stamps[-1]

    run(go())


def test_a_bounded_get_returns_what_it_asks_for(service):
    async def go():
        s = await service.create_session(app_name=APP, user_id="u")
        for i in range(1, 251):
            await service.append_event(s, Event(id=f"e{i}", author="user", timestamp=1000.0 + i))

        async def ids(**config):
            got = await service.get_session(app_name=APP, user_id="u", session_id=s.id,
                                            config=GetSessionConfig(**config))
            return [e.id for e in got.events]

        assert await ids() == [f"e{i}" for i in range(1, 251)]
        assert await ids(num_recent_events=0) == []
        assert await ids(num_recent_events=3) == ["e248", "e249", "e250"]
        assert await ids(after_timestamp=1248.0) == ["e248", "e249", "e250"]
        assert await ids(after_timestamp=1010.0) == [f"e{i}" for i in range(10, 251)]
        assert await ids(after_timestamp=5000.0) == []
        assert await ids(after_timestamp=1249.0, num_recent_events=3) == ["e249", "e250"]

    run(go())


def test_partial_events_are_not_stored_and_unknown_sessions_are_not_found(service):
    async def go():
        s = await service.create_session(app_name=APP, user_id="u")
        await service.append_event(s, Event(author="user", partial=True))
        assert s.events == []
        assert (await service.get_session(app_name=APP, user_id="u", session_id=s.id)).events == []
        with pytest.raises(SessionNotFoundError):
            await service.append_event(Session(app_name=APP, user_id="u", id="never"), Event(author="user"))
        await service.delete_session(app_name=APP, user_id="u", session_id=s.id)
        with pytest.raises(SessionNotFoundError):
            await service.append_event(s, Event(author="user"))

    run(go())


# -- concurrency ---------------------------------------------------------------------------


def test_a_stale_writer_is_refused_and_writes_nothing(service):
    async def go():
        s = await service.create_session(app_name=APP, user_id="u")
        first = await service.get_session(app_name=APP, user_id="u", session_id=s.id)
        second = first.model_copy(deep=True)
        await service.append_event(first, delta(sk1="v1"))
        with pytest.raises(StaleSessionError, match="modified in storage"):
            await service.append_event(second, delta(sk2="v2", user__u=1, app__a=1))
        got = await service.get_session(app_name=APP, user_id="u", session_id=s.id)
        assert got.state == {"sk1": "v1"} and len(got.events) == 1
        # A session object this service did not hand out is checked by its time.
        outsider = Session(app_name=APP, user_id="u", id=s.id, last_update_time=0.0)
        with pytest.raises(StaleSessionError):
            await service.append_event(outsider, delta(sk3="v3"))
        # Reloaded, the writer goes on.
        await service.append_event(got, delta(sk2="v2"))
        for _ in range(8):
            latest = await service.get_session(app_name=APP, user_id="u", session_id=s.id)
            racers = [latest.model_copy(deep=True) for _ in range(2)]
            results = await asyncio.gather(
                *(service.append_event(r, delta(race=i)) for i, r in enumerate(racers)),
                return_exceptions=True,
            )
            assert sum(isinstance(r, StaleSessionError) for r in results) == 1
            assert sum(isinstance(r, Event) for r in results) == 1
        final = await service.get_session(app_name=APP, user_id="u", session_id=s.id)
        assert len(final.events) == 10

    run(go())


_APPENDER = textwrap.dedent(
    """
    import asyncio, sys, time
    from pathlib import Path
    from google.adk.errors import StaleSessionError
    from google.adk.events.event import Event
    from agentstate import Store
    from agentstate.adk import AgentStateSessionService

    url, prefix, name, per, start = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]), sys.argv[5]

    async def appender(service, who):
        for i in range(per):
            while True:  # ADK's way: a stale writer reloads and tries again
                s = await service.get_session(app_name="shop", user_id="u", session_id="shared")
                try:
                    await service.append_event(s, Event(id=f"{who}-{i}", author=who))
                    break
                except StaleSessionError:
                    pass

    async def main():
        service = AgentStateSessionService(store=await Store.aconnect(url, prefix=prefix))
        Path(start, name).touch()
        while len(list(Path(start).iterdir())) < 2:
            time.sleep(0.001)
        await asyncio.gather(*(appender(service, f"{name}{w}") for w in range(4)))

    asyncio.run(main())
    """
)


def test_eight_appenders_in_two_processes_lose_nothing_and_agree_on_one_order(redis_server, prefix, tmp_path, service):
    prepare_namespace(redis_server.url, prefix, tmp_path / "prepare.db")
    run(service.create_session(app_name=APP, user_id="u", session_id="shared"))
    start = tmp_path / "start"
    start.mkdir()
    per = 10
    procs = [
        subprocess.Popen([sys.executable, "-c", _APPENDER, redis_server.url, prefix, name, str(per), str(start)])
        for name in ("a", "b")
    ]
    assert [p.wait(timeout=120) for p in procs] == [0, 0]
    got = run(service.get_session(app_name=APP, user_id="u", session_id="shared"))
    ids = [e.id for e in got.events]
    assert sorted(ids) == sorted(f"{n}{w}-{i}" for n in "ab" for w in range(4) for i in range(per))
    # Each appender's events in its own order, and every reader sees one order (seq order).
    for who in [f"{n}{w}" for n in "ab" for w in range(4)]:
        assert [i for i in ids if i.startswith(who + "-")] == [f"{who}-{i}" for i in range(per)]
    store_seqs = [m["seq"] for m in service._store.messages(service.session_key(APP, "u", "shared"))]
    assert store_seqs == list(range(1, 8 * per + 1))
    again = run(service.get_session(app_name=APP, user_id="u", session_id="shared"))
    assert [e.id for e in again.events] == ids


# -- durability ----------------------------------------------------------------------------


def test_a_session_comes_back_whole_after_redis_loses_everything(spilled):
    server, db, service = spilled

    async def write():
        s = await service.create_session(app_name=APP, user_id="u", session_id="s",
                                         state={"own": 1, "user:lang": "fr", "app:motd": "hi"})
        for i in range(5):
            await service.append_event(s, Event(id=f"e{i}", author="user", timestamp=1000.5 + i,
                                                actions=EventActions(state_delta={f"k{i}": [i, {"x": i}]})))
        await service.append_event(s, delta(user__lang="de"))
        return await service.get_session(app_name=APP, user_id="u", session_id="s")

    before = asyncio.run(write())
    wait_until(lambda: sqlite_rows(db, "SELECT count(*) FROM messages")[0][0] == 6, what="the flush of 6 events")
    wait_until(lambda: sqlite_rows(db, "SELECT count(*) FROM user_values")[0][0] == 2, what="the flush of user data")

    server.restart_empty()

    async def read():
        after = await service.get_session(app_name=APP, user_id="u", session_id="s")
        listed = (await service.list_sessions(app_name=APP, user_id="u")).sessions
        return after, listed

    after, listed = wait_until(lambda: _whole(asyncio.run(read()), before), what="the restore")
    assert after == before
    assert after.state == {"own": 1, "user:lang": "de", "app:motd": "hi",
                           **{f"k{i}": [i, {"x": i}] for i in range(5)}}
    assert [s.id for s in listed] == ["s"]
    # The restored session goes on where it stopped.
    asyncio.run(service.append_event(after, delta(more=1)))
    assert [m["seq"] for m in service._store.messages(service.session_key(APP, "u", "s"))] == list(range(1, 8))


def _whole(read, before):
    """The read, once user and app state are back too (re-seeded by the daemon after the
    loss, while the session itself is restored on demand)."""
    after, listed = read
    return (after, listed) if after is not None and after.state == before.state else None


def test_the_readme_example_runs_an_adk_runner_twice_and_the_counts_go_on(tmp_path):
    server = RedisServer()
    try:
        example = Path(__file__).resolve().parents[1] / "examples" / "adk_counter.py"
        env = {**os.environ, "AGENTSTATE_REDIS_URL": server.url}
        outputs = [
            subprocess.run([sys.executable, str(example)], cwd=tmp_path, env=env,
                           capture_output=True, text=True, timeout=120, check=True).stdout
            for _ in range(2)
        ]
        assert "turn 2 (visit 2, app turn 2)" in outputs[0]
        assert "turn 4 (visit 4, app turn 4)" in outputs[1]
        assert "8 events; state: {'count': 4, 'app:turns': 4, 'user:visits': 4}" in outputs[1]
    finally:
        server.close()


def test_a_session_whose_creator_stopped_before_its_state_reads_as_created_and_goes_on(service, store):
    async def go():
        # create_session's first script only: what a creator dying before the second leaves.
        sid = service.session_key(APP, "u", "half")
        store.create_session(sid, user=service.user_key(APP, "u"),
                             metadata={"framework": "google-adk", "app": APP, "user": "u", "session": "half"})
        got = await service.get_session(app_name=APP, user_id="u", session_id="half")
        assert (got.id, got.state, got.events) == ("half", {}, [])
        await service.append_event(got, delta(k=1))
        again = await service.get_session(app_name=APP, user_id="u", session_id="half")
        assert again.state == {"k": 1} and len(again.events) == 1
        # A session another agentstate tool made under such an id is no ADK session.
        store.create_session(service.session_key(APP, "u", "foreign"))
        assert await service.get_session(app_name=APP, user_id="u", session_id="foreign") is None

    run(go())
