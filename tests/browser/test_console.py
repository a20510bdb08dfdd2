"""`agentstate ui` in a real headless Chromium (Debian's, driven by Playwright).

A private redis-server, a real `agentstate spill` daemon and `agentstate ui` processes; the
sessions are written with the real CLI. Screenshots go to $SCREENSHOTS (default
target/screenshots).
"""

import json
import os
import re
import shutil
import socket
import subprocess
import tempfile
import time
from pathlib import Path

import pytest
from playwright.sync_api import expect, sync_playwright

ROOT = Path(__file__).resolve().parents[2]
BIN = os.environ.get("AGENTSTATE_BIN", str(ROOT / "target" / "debug" / "agentstate"))
CHROMIUM = os.environ.get("CHROMIUM", "/usr/bin/chromium")
SHOTS = Path(os.environ.get("SCREENSHOTS", ROOT / "target" / "screenshots"))
SCRIPT = "<script>window.__pwned = 1; document.title = 'pwned'</script><b>not bold</b>"


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_for_port(port, proc, what):
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"{what} exited with {proc.returncode}")
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            return
        except OSError:
            time.sleep(0.05)
    raise RuntimeError(f"{what} did not listen on {port}")


class Deployment:
    """A private Redis, a spill daemon and the durable SQLite file, with the CLI on them."""

    def __init__(self):
        self.dir = Path(tempfile.mkdtemp(prefix="agentstate-browser-"))
        self.port = free_port()
        self.redis = subprocess.Popen(
            ["redis-server", "--port", str(self.port), "--bind", "127.0.0.1", "--save", "",
             "--appendonly", "no", "--dir", str(self.dir)],
            stdout=subprocess.DEVNULL,
        )
        wait_for_port(self.port, self.redis, "redis-server")
        self.url = f"redis://127.0.0.1:{self.port}"
        self.db = self.dir / "agentstate.db"
        self.procs = [self.redis]
        self.daemon = self.spawn(["spill", "--interval-ms", "20"])

    def base(self):
        return [BIN, "--redis", self.url, "--db", str(self.db)]

    def spawn(self, args):
        proc = subprocess.Popen(self.base() + args, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        self.procs.append(proc)
        return proc

    def cli(self, *args, stdin=None):
        out = subprocess.run(self.base() + list(args), capture_output=True, text=True, input=stdin, timeout=60)
        assert out.returncode == 0, f"agentstate {' '.join(args)}: {out.stderr}"
        return out.stdout.strip()

    def redis_cli(self, *args):
        return subprocess.run(["redis-cli", "-p", str(self.port), *args], capture_output=True, text=True, check=True).stdout

    def console(self, *extra):
        port = free_port()
        proc = self.spawn(["ui", "--listen", f"127.0.0.1:{port}", *extra])
        wait_for_port(port, proc, "agentstate ui")
        return f"http://127.0.0.1:{port}", proc

    def close(self):
        for proc in reversed(self.procs):
            proc.terminate()
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()
        shutil.rmtree(self.dir, ignore_errors=True)


@pytest.fixture(scope="module")
def deployment():
    d = Deployment()
    # A planner with a sub-agent, a compaction, checkpoints, decisions, usage, working state.
    d.cli("session", "create", "--id", "planner", "--user", "alice", "--model", "gpt-x")
    d.cli("session", "create", "--id", "planner.researcher", "--parent", "planner", "--lifecycle", "linked")
    d.cli("msg", "append", "planner", "--role", "system", "--content", "You plan trips.")
    d.cli("msg", "append", "planner", "--role", "user", "--content", "Plan three days in Lisbon.", "--round", "1")
    d.cli("msg", "append", "planner", "--role", "assistant", "--content", "Day 1: Alfama and the castle.", "--round", "1")
    d.cli("usage", "planner", "--round", "1", "--prompt", "420", "--completion", "180")
    d.cli("compact", "planner", "--from", "2", "--to", "3", "--note", "User wants 3 days in Lisbon; day 1 planned.",
          "--before-tokens", "600", "--after-tokens", "40", "--round", "2")
    d.cli("msg", "append", "planner", "--role", "user", "--content", "Add a day trip to Sintra.", "--round", "2")
    d.cli("work", "set", "planner", "itinerary", '{"days": 3, "city": "Lisbon"}')
    d.cli("checkpoint", "create", "planner", "after-day-1")
    decision = d.cli("decide", "planner", "--decision", "book the 9:10 train to Sintra", "--rationale", "avoids the crowds",
                     "--action", "call the booking tool")
    d.cli("outcome", decision, "--outcome", "booked, seat 42")
    d.cli("decide", "planner", "--decision", "ask about the budget", "--rationale", "hotels vary a lot")
    d.cli("msg", "append", "planner", "--role", "assistant", "--content", "Sintra added as day 3.", "--round", "2")
    d.cli("usage", "planner", "--round", "2", "--prompt", "510", "--completion", "230")
    d.cli("msg", "append", "planner.researcher", "--role", "assistant", "--content", "Trains leave every 20 minutes.")
    # An agent that wrote markup.
    d.cli("session", "create", "--id", "mallory", "--user", "bob")
    d.cli("msg", "append", "mallory", "--role", "user", "--content", SCRIPT)
    # A session Redis no longer holds: flushed, then its keys gone (as after its idle TTL).
    d.cli("session", "create", "--id", "old-run", "--user", "alice")
    d.cli("msg", "append", "old-run", "--role", "user", "--content", "from last week")
    d.cli("spill", "--once")
    keys = d.cli("keys", "old-run").split()
    d.redis_cli("DEL", *keys)
    # A run in flight: its lease held, an inbox in every state, a tool call that never finished.
    d.cli("session", "create", "--id", "runner", "--user", "carol")
    token = d.cli("lease", "acquire", "runner", "--owner", "worker-7", "--ttl-ms", "600000")
    for item, text in [("in-1", "First, check the weather."), ("in-2", "Then book a table."),
                       ("in-3", "Never mind the museum."), ("in-4", SCRIPT), ("in-5", "And call a taxi.")]:
        d.cli("inbox", "put", "runner", "--item-id", item, "--role", "user", "--content", text)
    d.cli("inbox", "claim", "runner", "--owner", "worker-7", "--token", token, "--limit", "2")
    d.cli("inbox", "deliver", "runner", "--owner", "worker-7", "--token", token, "in-1")
    d.cli("inbox", "void", "runner", "in-3")
    assert d.cli("effects", "begin", "runner", "call-weather", "--args", '{"city": "Lisbon"}') == "started"
    d.cli("effects", "finish", "runner", "call-weather", "--result", '{"forecast": "sun"}')
    assert d.cli("effects", "begin", "runner", "call-booking", "--args", '{"table": 4}') == "started"
    # Long-term memory: two of alice's namespaces (one item markup an agent wrote), one of bob's.
    d.cli("memory", "put", "users.alice.prefs", "tz", '{"tz": "Europe/Lisbon"}')
    d.cli("memory", "put", "users.alice.prefs", "seat", '{"seat": "window"}', "--ttl", "1440")
    d.cli("memory", "put", "users.alice.facts", "note", json.dumps({"text": SCRIPT}))
    d.cli("memory", "put", "users.bob.prefs", "tz", '{"tz": "UTC"}')
    # A consumer group holding one decision.
    d.cli("tail", "--group", "billing", "--consumer", "worker-1", "--count", "1", "--from-start", "--no-ack")
    yield d
    d.close()


@pytest.fixture(scope="module")
def browser():
    SHOTS.mkdir(parents=True, exist_ok=True)
    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox", "--disable-dev-shm-usage"])
        yield b
        b.close()


@pytest.fixture(scope="module")
def console(deployment):
    url, proc = deployment.console()
    yield url
    proc.terminate()
    proc.wait(timeout=10)


@pytest.fixture
def page(browser):
    context = browser.new_context(viewport={"width": 1360, "height": 900})
    pg = context.new_page()
    errors = []
    pg.on("pageerror", lambda e: errors.append(str(e)))
    yield pg
    context.close()
    assert errors == [], f"script errors on the page: {errors}"


def test_the_session_list_shows_live_and_durable_sessions_and_filters(page, console):
    page.goto(f"{console}/sessions")
    rows = page.locator("#sessions tbody tr")
    expect(rows).to_have_count(5)
    ids = [r.get_attribute("data-session") for r in rows.all()]
    assert ids == ["mallory", "old-run", "planner", "planner.researcher", "runner"]
    expect(page.locator('tr[data-session="planner"] .badge')).to_have_text("live")
    expect(page.locator('tr[data-session="old-run"] .badge')).to_have_text("expired")
    expect(page.locator('tr[data-session="planner"] td.num')).to_have_text("6")
    page.screenshot(path=SHOTS / "sessions.png", full_page=True)
    page.fill("input[name=user]", "alice")
    page.click("form.filters button")
    expect(rows).to_have_count(2)
    page.select_option("select[name=tier]", "durable")
    page.click("form.filters button")
    expect(rows).to_have_count(1)
    expect(rows.first).to_have_attribute("data-session", "old-run")


def test_a_session_shows_its_timeline_in_seq_order_with_the_compaction_folded(page, console):
    page.goto(f"{console}/sessions")
    page.click('a[href="/sessions/planner"]')
    expect(page.locator("h1")).to_contain_text("planner")
    timeline = page.locator("#timeline > li")
    # Top level: #1, the folded #2–#3, the note #4, #5, the checkpoint, the decisions, #6.
    kinds = timeline.evaluate_all(
        "items => items.map(li => li.dataset.seq ? 'm' + li.dataset.seq"
        " : li.classList.contains('folded') ? 'fold' + li.dataset.from + '-' + li.dataset.to"
        " : li.classList.contains('checkpoint') ? 'ckpt' : 'dec')"
    )
    assert kinds == ["m1", "fold2-3", "m4", "m5", "ckpt", "dec", "dec", "m6"], kinds
    seqs = [int(s) for s in page.locator("#timeline li[data-seq]").evaluate_all("l => l.map(x => x.dataset.seq)")]
    assert seqs == [1, 2, 3, 4, 5, 6]
    folded = page.locator("li.folded")
    expect(folded.locator("summary")).to_contain_text("User wants 3 days in Lisbon; day 1 planned.")
    expect(folded.locator("summary")).to_contain_text("600 → 40 tokens")
    compacted = folded.locator('li[data-seq="2"]')
    expect(compacted).to_be_hidden()
    folded.locator("summary").click()
    expect(compacted).to_be_visible()
    expect(compacted.locator("pre.content")).to_have_text("Plan three days in Lisbon.")
    expect(page.locator("li.decision").first.locator(".outcome")).to_have_text("outcome: booked, seat 42")
    expect(page.locator("li.decision").nth(1).locator(".outcome")).to_have_text("waiting for its outcome")
    expect(page.locator("dl.working")).to_contain_text("Lisbon")
    expect(page.locator("ul.tree")).to_contain_text("planner.researcher")
    expect(page.locator("svg.chart g")).to_have_count(2)
    page.screenshot(path=SHOTS / "session.png", full_page=True)


def test_a_message_appended_from_the_cli_appears_without_a_reload(page, console, deployment):
    page.goto(f"{console}/sessions/planner")
    expect(page.locator("#live-state")).to_contain_text("live")
    marker = page.evaluate("() => (window.__loaded = Math.random())")
    seq = deployment.cli("msg", "append", "planner", "--role", "assistant", "--content", "Live: tickets booked.")
    item = page.locator(f'#timeline li[data-seq="{seq}"]')
    expect(item).to_be_visible()
    expect(item.locator("pre.content")).to_have_text("Live: tickets booked.")
    # A decision and its outcome arrive the same way.
    decision = deployment.cli("decide", "planner", "--decision", "pay the deposit", "--rationale", "prices rise")
    live_decision = page.locator(f'li.decision[data-decision="{decision}"]')
    expect(live_decision).to_contain_text("pay the deposit")
    deployment.cli("outcome", decision, "--outcome", "paid")
    expect(live_decision.locator(".outcome")).to_have_text("outcome: paid")
    # Still the same page: nothing reloaded it.
    assert page.evaluate("() => window.__loaded") == marker
    page.screenshot(path=SHOTS / "session-live.png", full_page=True)


def test_a_script_an_agent_wrote_is_shown_as_text_and_never_runs(page, console, deployment):
    page.goto(f"{console}/sessions/mallory")
    expect(page.locator('li[data-seq="1"] pre.content')).to_have_text(SCRIPT)
    expect(page.locator("#live-state")).to_contain_text("live")
    # The same text arriving live.
    seq = deployment.cli("msg", "append", "mallory", "--role", "assistant", "--content", SCRIPT)
    expect(page.locator(f'li[data-seq="{seq}"] pre.content')).to_have_text(SCRIPT)
    assert page.evaluate("() => window.__pwned") is None
    assert page.title() != "pwned"
    assert page.locator("main script, main b").count() == 0
    page.screenshot(path=SHOTS / "script-inert.png", full_page=True)


def test_a_run_shows_who_holds_its_lease_its_inbox_and_its_unresolved_tool_calls_first(page, console):
    page.goto(f"{console}/sessions/runner")
    lease = page.locator("#lease")
    expect(lease).to_contain_text("held by worker-7")
    token = int(page.locator("#lease dd.token").inner_text())
    assert token > 0
    expect(lease.locator("dd.expires")).to_have_text(re.compile(r"^(9|10) min$"))
    inbox = page.locator("#inbox tbody tr")
    expect(inbox).to_have_count(5)
    states = inbox.evaluate_all("rows => rows.map(r => r.dataset.item + ':' + r.dataset.state)")
    assert states == ["in-1:delivered", "in-2:claimed", "in-3:void", "in-4:pending", "in-5:pending"], states
    delivered = page.locator('#inbox tr[data-item="in-1"]')
    expect(delivered.locator("td").nth(3)).to_have_text("user")
    expect(delivered.locator("td.content")).to_have_text("First, check the weather.")
    expect(delivered.locator("td").last).to_have_text("1")
    expect(page.locator('#inbox tr[data-item="in-2"] td').last).to_have_text("—")
    # What an agent put in the inbox is text, whatever it looks like.
    expect(page.locator('#inbox tr[data-item="in-4"] td.content')).to_have_text(SCRIPT)
    assert page.evaluate("() => window.__pwned") is None
    assert page.locator("main script, main b").count() == 0
    # The unfinished call first and marked, though it began after the finished one.
    effects = page.locator("#effects tbody tr")
    expect(effects).to_have_count(2)
    expect(effects.first).to_have_attribute("data-call", "call-booking")
    expect(effects.first).to_have_class("unresolved")
    expect(effects.first).to_contain_text("running")
    expect(effects.nth(1)).to_contain_text("call-weather")
    expect(effects.nth(1)).to_contain_text('{"forecast":"sun"}')
    expect(page.locator("#effects h2")).to_contain_text("1 unresolved")
    # The delivered item is in the transcript too.
    expect(page.locator('#timeline li[data-seq="1"] pre.content')).to_have_text("First, check the weather.")
    page.screenshot(path=SHOTS / "session-run.png", full_page=True)


def test_a_session_redis_lost_shows_its_durable_history_and_says_so(page, console):
    page.goto(f"{console}/sessions/old-run")
    expect(page.locator("#not-live")).to_contain_text("Redis does not hold this session")
    expect(page.locator('li[data-seq="1"] pre.content')).to_have_text("from last week")
    expect(page.locator("#live-state")).to_have_count(0)


def test_decisions_and_spill_pages(page, console):
    page.goto(f"{console}/decisions")
    row = page.locator('#groups tr[data-group="billing"]')
    expect(row).to_contain_text("worker-1 1")
    page.screenshot(path=SHOTS / "decisions.png", full_page=True)
    page.goto(f"{console}/spill")
    expect(page.locator("#partitions tbody tr")).to_have_count(16)
    page.screenshot(path=SHOTS / "spill.png", full_page=True)


def test_memory_pages_list_namespaces_and_show_their_items_as_text(page, console):
    page.goto(f"{console}/memory")
    rows = page.locator("#namespaces tbody tr")
    expect(rows).to_have_count(3)
    expect(rows.first).to_have_attribute("data-namespace", "users.alice.facts")
    page.screenshot(path=SHOTS / "memory.png", full_page=True)
    page.locator('tr[data-namespace="users.alice.prefs"] a').click()
    expect(page).to_have_url(re.compile(r"/memory/users\.alice\.prefs$"))
    items = page.locator("#items tbody tr")
    expect(items).to_have_count(2)
    expect(page.locator('tr[data-key="tz"] pre.content')).to_contain_text('"tz": "Europe/Lisbon"')
    expect(page.locator('tr[data-key="seat"] td').nth(3)).not_to_have_text("never")
    page.screenshot(path=SHOTS / "memory-namespace.png", full_page=True)
    page.goto(f"{console}/memory/users.alice.facts")
    expect(page.locator('tr[data-key="note"] pre.content')).to_contain_text("<script>")
    assert page.evaluate("window.__pwned") is None
    page.goto(f"{console}/memory/users..x")
    expect(page.locator("h1")).to_have_text("Bad request")


def test_the_token_gate(browser, deployment):
    token = "s3cret-token"
    url, proc = deployment.console("--token", token)
    try:
        context = browser.new_context()
        page = context.new_page()
        response = page.goto(f"{url}/sessions/planner")
        assert response.status == 401
        expect(page.locator("form.login")).to_be_visible()
        expect(page.locator("body")).not_to_contain_text("Lisbon")
        page.fill("input[name=token]", "wrong")
        page.click("form.login button")
        expect(page.locator("form.login .error")).to_be_visible()
        page.screenshot(path=SHOTS / "login.png")
        page.fill("input[name=token]", token)
        page.click("form.login button")
        expect(page.locator("#sessions")).to_be_visible()
        page.goto(f"{url}/sessions/planner")
        expect(page.locator("#timeline")).to_contain_text("Lisbon")
        context.close()
        # Scripts: the bearer header, or nothing.
        api = browser.new_context()
        assert api.request.get(f"{url}/sessions").status == 401
        assert api.request.get(f"{url}/sessions", headers={"Authorization": f"Bearer {token}"}).status == 200
        assert api.request.get(f"{url}/sessions", headers={"Authorization": "Bearer nope"}).status == 401
        api.close()
    finally:
        proc.terminate()
        proc.wait(timeout=10)


def test_listening_beyond_loopback_needs_a_token(deployment):
    out = subprocess.run(deployment.base() + ["ui", "--listen", f"0.0.0.0:{free_port()}"], capture_output=True, text=True,
                         timeout=30)
    assert out.returncode == 1
    assert out.stdout == ""
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and "--listen 0.0.0.0:" in lines[0], out.stderr
    assert "pass --token TOKEN" in lines[0]


def test_the_console_prints_its_url_as_json(deployment):
    port = free_port()
    proc = deployment.spawn(["--json", "ui", "--listen", f"127.0.0.1:{port}"])
    line = proc.stdout.readline()
    assert json.loads(line) == {"url": f"http://127.0.0.1:{port}/"}
    proc.terminate()
    assert proc.wait(timeout=10) == 0
