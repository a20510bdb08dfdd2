"""How a user tests their own agent code against the real thing with agentstate's pytest
plugin: ``pytest -p agentstate.testing test_my_agent.py`` (scripts/test-python.sh runs this
file so). Each test gets a private redis-server and, with ``agentstate_store``, a spill daemon
in the test process writing a SQLite file in the test's tmp_path."""

import os
import sqlite3

import agentstate


def remember(store: agentstate.Store, conversation: str, *turns: str) -> int:
    """The user's code under test: records a conversation's turns, returns the last seq."""
    if store.session(conversation) is None:
        store.create_session(conversation, user="alice")
    seq = 0
    for turn in turns:
        seq = store.append(conversation, "user", turn)
    return seq


def test_remember_appends_in_order(agentstate_store):
    assert remember(agentstate_store, "c1", "hello", "again") == 2
    assert remember(agentstate_store, "c1", "third") == 3
    assert [m["content"] for m in agentstate_store.messages("c1")] == ["hello", "again", "third"]


def test_the_history_reaches_sqlite(agentstate_store, agentstate_daemon):
    durable = agentstate_store.with_durability(True)
    remember(durable, "c2", "kept")
    rows = sqlite3.connect(agentstate_daemon.db).execute(
        "SELECT session_id, seq FROM messages"
    ).fetchall()
    assert rows == [("c2", 1)]


def test_code_that_builds_its_own_store_finds_the_test_redis(agentstate_store, agentstate_redis):
    assert os.environ["AGENTSTATE_REDIS_URL"] == agentstate_redis
    own = agentstate.Store()  # as code deep inside an application would
    remember(own, "c3", "from elsewhere")
    assert agentstate_store.messages("c3")[0]["content"] == "from elsewhere"


def test_each_test_starts_from_an_empty_redis(agentstate_store):
    assert agentstate_store.list_sessions() == []
