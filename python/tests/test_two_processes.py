"""Two processes adding to one session interleave without loss: each is a real Python
process with its own agentstate Store (its own connection pool and tokio runtime)."""

from __future__ import annotations

import subprocess
import sys
import textwrap
import tempfile
import uuid
from pathlib import Path

from support import prepare_namespace

_PRELUDE = textwrap.dedent(
    """
    import sys, time
    from pathlib import Path
    from agentstate import Store

    url, prefix, name, count, start = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]), sys.argv[5]

    def barrier(folder):
        # both processes start writing together, whatever their import times
        Path(folder, name).touch()
        while len(list(Path(folder).iterdir())) < 2:
            time.sleep(0.001)
    """
)
"""What both child programs start with: their arguments and the barrier."""

_OPENAI_WRITER = _PRELUDE + textwrap.dedent(
    """
    import asyncio
    from agentstate.openai_agents import AgentStateSession

    async def other_has_written(session):
        # halfway, each process waits for an item of the other: the two really interleave,
        # whatever the scheduler does (one could otherwise finish before the other starts)
        for _ in range(60000):  # 60 s at most
            if any(not i["content"].startswith(name + ":") for i in await session.get_items()):
                return
            await asyncio.sleep(0.001)
        raise SystemExit(f"{name}: the other process wrote nothing in 60 s")

    async def main():
        session = AgentStateSession("shared-conv", store=await Store.aconnect(url, prefix=prefix))
        barrier(start)
        for b in range(count):  # count batches
            if b == count // 2:
                await other_has_written(session)
            # a batch of 3 items: one add_items call
            await session.add_items([{"role": "user", "content": f"{name}:{b}:{i}"} for i in range(3)])

    asyncio.run(main())
    """
)

_STRANDS_WRITER = _PRELUDE + textwrap.dedent(
    """
    from strands.types.session import Session, SessionAgent, SessionMessage, SessionType
    from strands.types.exceptions import SessionException
    from agentstate.strands import AgentStateSessionRepository

    repo = AgentStateSessionRepository(store=Store(url, prefix=prefix))
    barrier(start)
    try:
        repo.create_session(Session(session_id="team", session_type=SessionType.AGENT))
    except SessionException:
        pass  # the other process created it first
    repo.create_agent("team", SessionAgent(agent_id=name, state={}, conversation_manager_state={}))
    for i in range(count):
        msg = {"role": "user", "content": [{"text": f"{name}:{i}"}]}
        repo.create_message("team", name, SessionMessage(message=msg, message_id=i))
    """
)


def _run_pair(script: str, url: str, prefix: str, count: int) -> None:
    start = tempfile.mkdtemp(prefix="agentstate-barrier-")
    prepare_namespace(url, prefix, Path(start).with_suffix(".db"))
    procs = [
        subprocess.Popen([sys.executable, "-c", script, url, prefix, name, str(count), str(start)])
        for name in ("A", "B")
    ]
    assert [p.wait(timeout=120) for p in procs] == [0, 0]


def test_two_processes_interleave_items_without_loss(redis_server):
    from agentstate import Store
    from agentstate.openai_agents import AgentStateSession
    import asyncio

    prefix = "i" + uuid.uuid4().hex[:8]
    _run_pair(_OPENAI_WRITER, redis_server.url, prefix, 200)
    store = Store(redis_server.url, prefix=prefix)
    items = asyncio.run(AgentStateSession("shared-conv", store=store).get_items())
    texts = [i["content"] for i in items]
    assert len(texts) == 1200 and len(set(texts)) == 1200
    for name in ("A", "B"):
        mine = [t for t in texts if t.startswith(name + ":")]
        assert mine == [f"{name}:{b}:{i}" for b in range(200) for i in range(3)]  # in order
    # Each add_items landed as one block: its 3 items have consecutive seqs.
    for k in range(0, 1200, 3):
        assert len({t.rsplit(":", 1)[0] for t in texts[k:k + 3]}) == 1, texts[k:k + 3]
    assert [m["seq"] for m in store.messages("oai.shared-conv")] == list(range(1, 1201))
    # and they did interleave (neither process wrote everything first: each waited halfway
    # for an item of the other)
    owners = [t[0] for t in texts]
    assert owners != sorted(owners) and owners != sorted(owners, reverse=True)


def test_two_processes_share_a_strands_session(redis_server):
    from agentstate import Store
    from agentstate.strands import AgentStateSessionRepository

    prefix = "j" + uuid.uuid4().hex[:8]
    _run_pair(_STRANDS_WRITER, redis_server.url, prefix, 150)
    repo = AgentStateSessionRepository(store=Store(redis_server.url, prefix=prefix))
    assert repo.read_session("team") is not None
    for name in ("A", "B"):
        msgs = repo.list_messages("team", name)
        assert [m.message_id for m in msgs] == list(range(150))
        assert [m.message["content"][0]["text"] for m in msgs] == [f"{name}:{i}" for i in range(150)]
    assert sorted(repo.store.children("strands.team")) == ["strands.team@A", "strands.team@B"]
