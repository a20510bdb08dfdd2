"""A Google ADK agent whose sessions live in agentstate (README "Google ADK").

Runs without a model: ``Counter`` is an ADK custom agent that counts the user's turns in
session state (``count``), per-user state (``user:visits``) and app-wide state
(``app:turns``). Needs Redis (AGENTSTATE_REDIS_URL, else 127.0.0.1:6379); starts a spill
daemon in this process. Run it twice: the counts go on.
"""

import asyncio

from google.adk.agents import BaseAgent
from google.adk.events import Event, EventActions
from google.adk.runners import Runner
from google.genai import types

from agentstate import SpillDaemon
from agentstate.adk import AgentStateSessionService


class Counter(BaseAgent):
    """Answers each turn with the running counts; changes state only through events."""

    async def _run_async_impl(self, ctx):
        state = ctx.session.state
        count, visits, turns = state.get("count", 0) + 1, state.get("user:visits", 0) + 1, state.get("app:turns", 0) + 1
        yield Event(
            author=self.name,
            invocation_id=ctx.invocation_id,
            content=types.Content(role="model", parts=[types.Part(text=f"turn {count} (visit {visits}, app turn {turns})")]),
            actions=EventActions(state_delta={"count": count, "user:visits": visits, "app:turns": turns}),
        )


async def main() -> None:
    service = AgentStateSessionService()
    runner = Runner(app_name="counter", agent=Counter(name="counter"), session_service=service)
    session = await service.get_session(app_name="counter", user_id="alice", session_id="demo")
    if session is None:
        session = await service.create_session(app_name="counter", user_id="alice", session_id="demo")
    for text in ["hello", "again"]:
        message = types.Content(role="user", parts=[types.Part(text=text)])
        async for event in runner.run_async(user_id="alice", session_id="demo", new_message=message):
            print(event.author, ":", event.content.parts[0].text)
    session = await service.get_session(app_name="counter", user_id="alice", session_id="demo")
    print(len(session.events), "events;", "state:", session.state)


if __name__ == "__main__":
    with SpillDaemon(db="agentstate.db"):
        asyncio.run(main())
