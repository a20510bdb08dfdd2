"""The wheel on a PostgreSQL durable tier: ``agentstate.SpillDaemon(url, "postgres://…")``
flushes into it, the wheel's ``agentstate`` command reads the history back from the same URL,
and a session Redis lost comes back from PostgreSQL. The server is the tests' own
(``AGENTSTATE_TEST_PG``, an admin URL set by scripts/test-python.sh); each test creates and
drops a database of its own."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

from agentstate import SpillDaemon, Store


def psql(admin: str, sql: str) -> None:
    subprocess.run([psql_bin(), "-q", "-v", "ON_ERROR_STOP=1", admin, "-c", sql], check=True)


def psql_bin() -> str:
    found = shutil.which("psql") or next(iter(sorted(Path("/usr/lib/postgresql").glob("*/bin/psql"))), None)
    assert found, "psql is needed to create the test database"
    return str(found)


@pytest.fixture
def pg_url():
    admin = os.environ.get("AGENTSTATE_TEST_PG")
    assert admin, "AGENTSTATE_TEST_PG is unset: run through scripts/test-python.sh"
    name = "agentstate_py_" + uuid.uuid4().hex[:12]
    psql(admin, f"CREATE DATABASE {name}")
    yield admin.rsplit("/", 1)[0] + "/" + name
    psql(admin, f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")


def cli(*args: str) -> str:
    command = Path(sys.executable).parent / "agentstate"
    return subprocess.run([str(command), *args], check=True, capture_output=True, text=True).stdout


def test_an_in_process_daemon_flushes_into_postgresql_and_the_cli_reads_it_back(redis_server, prefix, pg_url):
    url = redis_server.url
    daemon = SpillDaemon(url, pg_url, prefix=prefix)
    assert daemon.db == pg_url
    assert repr(daemon).startswith(f"SpillDaemon(url='{url}', db='{pg_url}'")
    with daemon:
        durable = Store(url, prefix=prefix).with_durability(True)
        durable.create_session("pg", user="alice")
        assert [durable.append("pg", "user", f"m{i}") for i in range(1, 4)] == [1, 2, 3]
    lines = [json.loads(l) for l in cli("--redis", url, "--prefix", prefix, "--db", pg_url, "export", "pg").splitlines()]
    assert [l["type"] for l in lines] == ["session", "message", "message", "message"]
    assert [l["content"] for l in lines[1:]] == ["m1", "m2", "m3"]


def test_a_session_redis_lost_comes_back_from_postgresql(redis_server, prefix, pg_url):
    url = redis_server.url
    with SpillDaemon(url, pg_url, prefix=prefix):
        store = Store(url, prefix=prefix)
        store.create_session("lost")
        store.with_durability(True).append("lost", "user", "kept in PostgreSQL")
        keys = cli("--redis", url, "--prefix", prefix, "keys", "lost").split()
        subprocess.run(["redis-cli", "-u", url, "DEL", *keys], check=True, capture_output=True)
        assert [m["content"] for m in store.messages("lost")] == ["kept in PostgreSQL"]
