"""A Python user's first contact: the wheel carries the ``agentstate`` command and
an in-process spill daemon, ``Store`` reads the same variables as the CLI and the adapters,
errors say what failed, where, and what to do, ``session()`` restores like every other read,
and a durable write lost with Redis says so."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import threading
from pathlib import Path

import pytest

import agentstate
from agentstate import SpillDaemon, Store
from support import RedisServer, sqlite_rows, wait_until


def redis_cli(url: str, *args: str) -> str:
    port = url.rsplit(":", 1)[1]
    return subprocess.run(
        ["redis-cli", "-p", port, *args], check=True, capture_output=True, text=True
    ).stdout.strip()


def namespace_keys(url: str, prefix: str) -> list:
    return sorted(redis_cli(url, "--scan", "--pattern", f"{prefix}:*").split())


def wal_length(url: str, prefix: str) -> int:
    """Entries in the namespace's 16 wal streams."""
    return sum(int(redis_cli(url, "XLEN", f"{prefix}:{{{p}}}:wal")) for p in range(16))


@pytest.fixture
def own_redis():
    """A Redis of this test alone (the tests here flush it)."""
    server = RedisServer()
    yield server.url
    server.close()


@pytest.fixture
def clean_env(monkeypatch):
    for name in ("AGENTSTATE_REDIS_URL", "AGENTSTATE_DB", "AGENTSTATE_PREFIX"):
        monkeypatch.delenv(name, raising=False)
    return monkeypatch


# ---- one configuration ----------------------------------------------------------------------


def test_store_and_daemon_read_the_environment(own_redis, clean_env, tmp_path, prefix):
    db = tmp_path / "env.db"
    clean_env.setenv("AGENTSTATE_REDIS_URL", own_redis)
    clean_env.setenv("AGENTSTATE_PREFIX", prefix)
    clean_env.setenv("AGENTSTATE_DB", str(db))
    daemon = SpillDaemon()
    assert daemon.db == db
    with daemon:
        store = Store()
        assert (store.url, store.prefix) == (own_redis, prefix)
        assert repr(store) == f"Store(url='{own_redis}', prefix='{prefix}', partitions=16, durable=False)"
        store.with_durability(True).create_session("envs")
    # Everything went to that Redis, in that namespace, and the daemon wrote that file.
    assert namespace_keys(own_redis, "as") == []
    assert f"{prefix}:config" in namespace_keys(own_redis, prefix)
    assert sqlite_rows(db, "SELECT id FROM sessions") == [("envs",)]


def test_an_argument_beats_the_environment(own_redis, redis_server, clean_env, prefix):
    clean_env.setenv("AGENTSTATE_REDIS_URL", redis_server.url)
    clean_env.setenv("AGENTSTATE_PREFIX", "from-env")
    store = Store(own_redis, prefix=prefix)
    assert (store.url, store.prefix) == (own_redis, prefix)


def test_an_empty_variable_counts_as_unset(clean_env):
    clean_env.setenv("AGENTSTATE_REDIS_URL", "")
    clean_env.setenv("AGENTSTATE_PREFIX", "")
    clean_env.setenv("AGENTSTATE_DB", "")
    daemon = SpillDaemon()
    assert repr(daemon) == (
        "SpillDaemon(url='redis://127.0.0.1:6379', db='./agentstate.db', prefix='as', running=False)"
    )


def test_the_cli_reads_the_same_variables(own_redis, clean_env, tmp_path, prefix):
    clean_env.setenv("AGENTSTATE_REDIS_URL", own_redis)
    clean_env.setenv("AGENTSTATE_PREFIX", prefix)
    with SpillDaemon(own_redis, tmp_path / "cli.db", prefix=prefix):
        out = subprocess.run(
            [agentstate_command(), "session", "create", "--id", "from-cli"],
            check=True, capture_output=True, text=True,
        ).stdout
        assert out == "from-cli\n"
        assert Store(own_redis, prefix=prefix).session("from-cli")["id"] == "from-cli"
    assert namespace_keys(own_redis, "as") == []


# ---- the wheel's command line and daemon -----------------------------------------------------


def agentstate_command() -> str:
    """The ``agentstate`` console script installed beside this interpreter."""
    path = Path(sys.executable).parent / "agentstate"
    assert path.exists(), f"the package installed no agentstate command next to {sys.executable}"
    return str(path)


def test_the_package_installs_the_agentstate_command():
    for cmd in ([agentstate_command()], [sys.executable, "-m", "agentstate"]):
        done = subprocess.run([*cmd, "--version"], capture_output=True, text=True)
        assert (done.returncode, done.stdout) == (0, f"agentstate {agentstate.__version__}\n")
        # Bad usage exits 2 with clap's message on one `error:` line, as the binary does.
        done = subprocess.run([*cmd, "no-such-verb"], capture_output=True, text=True)
        assert done.returncode == 2 and "unrecognized subcommand 'no-such-verb'" in done.stderr
        assert done.stderr.startswith("error: ") and done.stderr.count("\n") == 1, done.stderr


def test_the_demo_from_the_wheel_stays_in_its_lane_and_its_hints_run_as_printed(own_redis, tmp_path):
    # An application's configuration exported, as README suggests: the demo must not use it.
    app_env = {"AGENTSTATE_REDIS_URL": own_redis, "AGENTSTATE_DB": str(tmp_path / "app.db"),
               "AGENTSTATE_PREFIX": "app", "PATH": "/usr/bin:/bin"}
    for cmd in ([agentstate_command()], [sys.executable, "-m", "agentstate"]):
        done = subprocess.run([*cmd, "demo"], capture_output=True, text=True, cwd=tmp_path,
                              env=app_env, timeout=300)
        assert done.returncode == 0, done.stdout + done.stderr
        assert not (tmp_path / "app.db").exists()
        assert namespace_keys(own_redis, "app") == []
        hints = [line.strip() for line in done.stdout.split("Look for yourself:\n", 1)[1].splitlines()
                 if line.startswith("  ")]
        ours = [h for h in hints if "session show" in h or " export " in h]
        assert len(ours) == 2, hints
        for hint in ours:
            # The command as it was entered (the console script, or this interpreter with -m).
            assert hint.startswith(cmd[0] if len(cmd) == 1 else f"{sys.executable} -m agentstate"), hint
            ran = subprocess.run(["sh", "-c", hint], capture_output=True, text=True, cwd=tmp_path,
                                 env={"PATH": "/usr/bin:/bin"}, timeout=60)
            assert ran.returncode == 0 and ran.stdout, (hint, ran.stderr)


def test_writing_with_no_daemon_running_is_logged_once_and_not_with_one(own_redis, tmp_path):
    """Writes succeed either way; a process whose namespace has no running daemon is told
    once, through the ``agentstate`` logger, that they are not durable."""
    script = f"""
import asyncio, logging, sys
from agentstate import SpillDaemon, Store
logging.basicConfig(stream=sys.stdout, format="%(name)s %(levelname)s %(message)s")
daemon = SpillDaemon({own_redis!r}, {str(tmp_path / "a.db")!r}).start()
if sys.argv[1] == "stopped":
    daemon.stop()
store = Store({own_redis!r})
sid = store.create_session()
store.append(sid, "user", "one")
async def two():
    await store.aappend(sid, "user", "two")
asyncio.run(two())
print("seqs", [m["seq"] for m in store.messages(sid)])
"""
    told = ("agentstate WARNING no spill daemon of namespace \"as\" is running: writes stay in "
            "Redis only (not durable) until one runs; start one with `agentstate --prefix as spill`")
    for case, times in (("stopped", 1), ("running", 0)):
        done = subprocess.run([sys.executable, "-c", script, case], capture_output=True, text=True, timeout=60)
        assert done.returncode == 0, done.stderr
        assert "seqs [1, 2]" in done.stdout, done.stdout
        assert done.stdout.count(told) == times, (case, done.stdout)


def test_building_from_source_without_cargo_says_what_to_do_in_one_line(tmp_path):
    """``pip install ./python`` on a machine without cargo: one line saying to install it or
    use a prebuilt wheel, not maturin's attempt to install Rust and its traceback."""
    pytest.importorskip("maturin")
    source = Path(__file__).resolve().parents[1]
    no_cargo = ":".join(p for p in os.environ.get("PATH", "").split(":")
                        if p and not (Path(p) / "cargo").exists())
    done = subprocess.run(
        [sys.executable, "-m", "pip", "install", "--no-build-isolation", "--no-deps", "--dry-run",
         "--target", str(tmp_path / "t"), str(source)],
        capture_output=True, text=True, timeout=120, env={**os.environ, "PATH": no_cargo},
    )
    assert done.returncode != 0
    said = [line.strip() for line in (done.stdout + done.stderr).splitlines()
            if "needs cargo" in line]
    assert said == ["error: building agentstate from source needs cargo (Rust): install it with "
                    "rustup (https://rustup.rs), or install a prebuilt wheel (scripts/build-wheel.sh "
                    "makes one on a machine with cargo)"], done.stdout + done.stderr
    assert "Traceback" not in done.stdout + done.stderr


def test_a_runtime_error_is_one_line_and_exit_1(own_redis, tmp_path):
    # The namespace's daemon first (an id is called unknown only once a daemon has checked
    # this Redis against its durable tier).
    db = str(tmp_path / "agentstate.db")
    subprocess.run(
        [agentstate_command(), "--redis", own_redis, "--db", db, "spill", "--once"],
        check=True, capture_output=True,
    )
    done = subprocess.run(
        [agentstate_command(), "--redis", own_redis, "--db", db, "msg", "list", "nobody"],
        capture_output=True, text=True,
    )
    assert done.returncode == 1
    assert done.stderr.startswith("error: unknown session nobody") and done.stderr.count("\n") == 1


def lease_owners(url: str, prefix: str) -> set:
    """The owners of the 16 partition leases (`""` for a lease nobody holds)."""
    return {redis_cli(url, "GET", f"{prefix}:{{{p}}}:lease").split(" ")[0] for p in range(16)}


def test_an_in_process_daemon_and_agentstate_spill_share_the_leases(own_redis, tmp_path, prefix):
    """The in-process daemon takes the partitions through the same leases as `agentstate
    spill`: started first it owns all 16; the command joins and they share them; stopped, it
    hands its share over, and every write is committed exactly once."""
    db = tmp_path / "shared.db"
    inproc = SpillDaemon(own_redis, db, prefix=prefix).start()
    assert inproc.running and lease_owners(own_redis, prefix) == {inproc.owner}
    log_path = tmp_path / "spill.log"
    with open(log_path, "w") as log:
        standby = subprocess.Popen(
            [agentstate_command(), "--redis", own_redis, "--db", str(db), "--prefix", prefix,
             "spill", "--interval-ms", "20", "--lease-ms", "500"],
            stdout=subprocess.DEVNULL, stderr=log,
        )
    try:
        wait_until(lambda: "spill daemon started" in log_path.read_text(),
                   what="agentstate spill to start")
        durable = Store(own_redis, prefix=prefix, durable=True)
        sids = [f"s{i}" for i in range(24)]  # spread over the partitions
        for sid in sids:
            durable.create_session(sid)
            durable.append(sid, "user", f"hello {sid}")
        wait_until(lambda: len(lease_owners(own_redis, prefix) - {""}) == 2,
                   what="the two daemons to share the partitions")
        assert inproc.owner in lease_owners(own_redis, prefix)
        inproc.stop()
        assert not inproc.running
        for sid in sids:
            durable.append(sid, "assistant", f"bye {sid}")
        # Every partition owned by one daemon (a lease taken a moment later reads "" now).
        wait_until(lambda: len(lease_owners(own_redis, prefix)) == 1
                   and "" not in lease_owners(own_redis, prefix),
                   what="agentstate spill to own every partition")
        [owner] = lease_owners(own_redis, prefix)
        assert owner not in ("", inproc.owner)
        rows = sqlite_rows(db, "SELECT session_id, seq FROM messages ORDER BY session_id, seq")
        assert rows == sorted((sid, seq) for sid in sids for seq in (1, 2))
    finally:
        standby.terminate()
        assert standby.wait(timeout=20) == 0


# ---- errors that say what to do --------------------------------------------------------------


def test_a_url_that_is_not_redis_is_refused_naming_it(clean_env):
    with pytest.raises(ValueError) as e:
        Store("http://localhost:1")
    assert str(e.value).startswith("Store url http://localhost:1 is not a Redis URL: the scheme http:// is not a Redis scheme — use redis://")
    clean_env.setenv("AGENTSTATE_REDIS_URL", "http://user:secret@localhost:1")
    with pytest.raises(ValueError) as e:
        Store()
    assert str(e.value).startswith("AGENTSTATE_REDIS_URL http://user:***@localhost:1 is not a Redis URL")
    # The adapters' shared store (every adapter connects through it) blames the variable too.
    from agentstate._shared import ashared_store, shared_store

    for connect in (shared_store, lambda: asyncio.run(ashared_store())):
        with pytest.raises(ValueError) as e:
            connect()
        assert str(e.value).startswith("AGENTSTATE_REDIS_URL http://user:***@localhost:1 is not a Redis URL")


def test_an_unreachable_redis_names_the_address_and_the_fix():
    with pytest.raises(agentstate.RedisUnavailable) as e:
        Store("redis://127.0.0.1:1")
    assert str(e.value) == (
        "cannot reach Redis at 127.0.0.1:1: connection refused — start one with `agentstate server` "
        "(a command this package installs) or `docker compose up -d redis`, or connect elsewhere: "
        "Store(url) or AGENTSTATE_REDIS_URL"
    )


def test_no_daemon_names_the_command_with_its_prefix(own_redis, prefix):
    store = Store(own_redis, prefix=prefix, daemon_wait=0.2)
    with pytest.raises(agentstate.NotLive) as e:
        store.create_session("first")
    text = str(e.value)
    assert f"`agentstate spill --redis {own_redis} --prefix {prefix}`" in text
    assert f'agentstate.SpillDaemon(url, db, prefix="{prefix}").start()' in text
    assert namespace_keys(own_redis, prefix) == [f"{prefix}:config"]  # refused: no session


def test_too_large_names_its_setting_and_the_limit_is_an_option(store):
    sid = store.create_session()
    big = "x" * (1 << 20)
    with pytest.raises(agentstate.TooLarge) as e:
        store.append(sid, "user", big)
    assert (e.value.size, e.value.limit) > (1 << 20, 0) and e.value.limit == 1 << 20
    assert "raise the limit: Store(..., max_message_bytes=N)" in str(e.value)
    assert store.messages(sid) == []
    roomy = Store(store.url, prefix=store.prefix, max_message_bytes=2 << 20)
    assert roomy.limits == {"message": 2 << 20, "working_value": 512 << 10, "state": 16 << 20}
    assert roomy.append(sid, "user", big) == 1
    assert [m["content"] for m in store.messages(sid)] == [big]
    with pytest.raises(ValueError, match="max_state_bytes must be a positive number of bytes"):
        Store(store.url, prefix=store.prefix, max_state_bytes=0)
    # A checkpoint (as a LangGraph checkpoint) is state: its refusal names the state limit.
    tight = Store(store.url, prefix=store.prefix, max_state_bytes=1024)
    with pytest.raises(agentstate.TooLarge) as e:
        tight.put_checkpoint(sid, "step", {"x": "y" * 2048})
    assert "raise the limit: Store(..., max_state_bytes=N)" in str(e.value)
    with pytest.raises(agentstate.TooLarge) as e:
        tight.graph_put("t", "", "c1", None, {"v": "y" * 2048}, {}, [], [])
    assert "raise the limit: Store(..., max_state_bytes=N)" in str(e.value)


def test_a_number_out_of_range_is_a_value_error_naming_the_argument_and_writes_nothing(
    store, redis_server
):
    sid = store.create_session()
    store.append(sid, "user", "first")
    keys = lambda: sorted(  # noqa: E731
        subprocess.run(
            ["redis-cli", "-u", redis_server.url, "--scan", "--pattern", f"{store.prefix}*"],
            capture_output=True, text=True, check=True,
        ).stdout.split()
    )
    before = (keys(), store.messages(sid, all=True), store.working(sid))
    neg, huge = -1, 2**63  # unsigned arguments refuse -1; signed ones (i64) refuse 2**63
    url, pre = store.url, store.prefix
    msg = {"role": "user", "content": "x"}
    calls = [
        ("expect_seq", neg, lambda v: store.append(sid, "user", "x", expect_seq=v)),
        ("round_index", huge, lambda v: store.append(sid, "user", "x", round_index=v)),
        ("expect_seq", neg, lambda v: store.aappend(sid, "user", "x", expect_seq=v)),
        ("expect_seq", neg, lambda v: store.append_many(sid, [msg], expect_seq=v)),
        ("expect_seq", neg, lambda v: store.append_checkpointed(sid, msg, "l", {}, expect_seq=v)),
        ("seq", neg, lambda v: store.replace_message(sid, v, msg)),
        ("seq", neg, lambda v: store.message(sid, v)),
        ("after", neg, lambda v: store.messages(sid, after=v)),
        ("last", neg, lambda v: store.contents(sid, last=v)),
        ("last", neg, lambda v: store.contents_array(sid, last=v)),
        ("from_seq", neg, lambda v: store.compact(sid, v, 1, "n")),
        ("to_seq", neg, lambda v: store.compact(sid, 1, v, "n")),
        ("before_tokens", huge, lambda v: store.compact(sid, 1, 1, "n", before_tokens=v)),
        ("round_index", huge, lambda v: store.record_usage(sid, v, 1, 1)),
        ("prompt_tokens", huge, lambda v: store.record_usage(sid, 1, v, 1)),
        ("total_tokens", huge, lambda v: store.record_usage(sid, 1, 1, 1, total_tokens=v)),
        ("if_version", neg, lambda v: store.set_working(sid, "k", 1, if_version=v)),
        ("round_id", neg, lambda v: store.save_state("u", {}, round_id=v)),
        ("round_id", neg, lambda v: store.export_state("u", round_id=v)),
        ("limit", neg, lambda v: store.list_sessions_page(v)),
        ("limit", neg, lambda v: store.graph_list("t", limit=v)),
        ("token", neg, lambda v: store.inbox_claim(sid, "o", v)),
        ("limit", neg, lambda v: store.inbox_claim(sid, "o", 1, limit=v)),
        ("token", neg, lambda v: store.inbox_deliver(sid, "o", v, ["i"])),
        ("ttl_ms", neg, lambda v: store.acquire_lease(sid, "o", v)),
        ("token", neg, lambda v: store.renew_lease(sid, "o", v, 1000)),
        ("ttl_ms", neg, lambda v: store.renew_lease(sid, "o", 1, v)),
        ("token", neg, lambda v: store.release_lease(sid, "o", v)),
        ("token", neg, lambda v: store.fenced(v)),
        ("ttl_ms", neg, lambda v: store.run_lease(sid, ttl_ms=v)),
        ("max_deliveries", neg, lambda v: store.consumer("g", "c", max_deliveries=v)),
        ("count", neg, lambda v: store.consumer("g", "c", count=v)),
        ("count", neg, lambda v: store.dead_letters(v)),
        ("partitions", neg, lambda v: Store(url, prefix=pre, partitions=v)),
        ("pool_size", neg, lambda v: Store(url, prefix=pre, pool_size=v)),
        ("max_message_bytes", neg, lambda v: Store(url, prefix=pre, max_message_bytes=v)),
        ("partitions", neg, lambda v: Store.aconnect(url, prefix=pre, partitions=v)),
        ("partitions", neg, lambda v: SpillDaemon(url, "x.db", prefix=pre, partitions=v)),
    ]
    for name, bad, call in calls:
        with pytest.raises(ValueError, match=rf"^{name} must be a whole number from -?\d+ to \d+, got {bad}$"):
            call(bad)
        with pytest.raises(TypeError, match=rf"^{name} must be an int, got str$"):
            call("1")
    with pytest.raises(TypeError, match="^seq must be an int, got bool$"):
        store.message(sid, True)
    assert (keys(), store.messages(sid, all=True), store.working(sid)) == before
    assert store.message(sid, 1)["content"] == "first"


def test_bytes_content_is_a_type_error_naming_content_and_writes_nothing(store):
    sid = store.create_session()
    for append in (store.append, store.aappend):
        with pytest.raises(TypeError, match=r'^content must be a str, got bytes: decode it first \(content=data\.decode\("utf-8"\)\)'):
            append(sid, "user", b"bytes")
    with pytest.raises(TypeError, match="^content must be a str, got int$"):
        store.append(sid, "user", 7)
    assert store.messages(sid) == []
    assert store.append(sid, "user", "text") == 1


# ---- restore and Redis loss ------------------------------------------------------------------


def test_session_restores_after_redis_lost_it(own_redis, tmp_path, prefix):
    with SpillDaemon(own_redis, tmp_path / "r.db", prefix=prefix):
        store = Store(own_redis, prefix=prefix, durable=True)
        store.create_session("kept", user="alice")
        assert store.append("kept", "user", "remember me") == 1
        redis_cli(own_redis, "FLUSHALL")
        meta = store.session("kept")
        assert (meta["id"], meta["user_id"]) == ("kept", "alice")
        assert [m["content"] for m in store.messages("kept")] == ["remember me"]
        assert store.session("never-existed") is None


def test_a_durable_write_lost_with_redis_says_so(own_redis, tmp_path, prefix):
    daemon = SpillDaemon(own_redis, tmp_path / "lost.db", prefix=prefix).start()
    store = Store(own_redis, prefix=prefix)
    store.with_durability(True).create_session("s")
    daemon.stop()  # nothing commits the next write: it stays in Redis alone
    before = wal_length(own_redis, prefix)
    outcome = []

    def write():
        try:
            outcome.append(store.with_durability(True).append("s", "user", "lost", idempotency_key="k1"))
        except agentstate.AgentStateError as e:
            outcome.append(e)

    writer = threading.Thread(target=write)
    writer.start()
    wait_until(lambda: wal_length(own_redis, prefix) > before, what="the write in the wal")
    redis_cli(own_redis, "FLUSHALL")
    writer.join(timeout=30)
    [err] = outcome
    assert type(err) is agentstate.WriteLost
    assert str(err).startswith(f"Redis at {own_redis[len('redis://'):]} lost entry ")
    assert "with an idempotency key a repeat cannot apply it twice" in str(err)
    assert "running" not in str(err)
    assert sqlite_rows(tmp_path / "lost.db", "SELECT count(*) FROM messages") == [(0,)]


def test_the_daemon_keeps_its_spool_where_it_is_told_and_refuses_a_bad_budget(
    own_redis, tmp_path, prefix
):
    """`spool=` puts the daemon's spool (the file it moves the wal into while the durable tier
    is down) in that directory, not beside the SQLite file; `wal_budget` takes whole bytes."""
    spool = tmp_path / "spool"
    spool.mkdir()
    with SpillDaemon(own_redis, tmp_path / "a.db", prefix=prefix, wal_budget=1 << 20, spool=spool):
        assert [p.name for p in spool.iterdir() if p.suffix == ".spool"] == ["a.db.spool"]
        assert not (tmp_path / "a.db.spool").exists()
    with pytest.raises(ValueError, match="wal_budget"):
        SpillDaemon(own_redis, tmp_path / "b.db", prefix=prefix, wal_budget=-1)
