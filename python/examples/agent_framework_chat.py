"""A Microsoft Agent Framework agent whose history lives in agentstate (README "Microsoft
Agent Framework").

Runs without a model or network: ``EchoClient`` is a stub chat client that answers with the
number of messages it was sent. ``AgentStateHistoryProvider`` loads the session's history
before each run and stores the new messages after it. Needs Redis (AGENTSTATE_REDIS_URL, else
127.0.0.1:6379); starts a spill daemon in this process. Run it twice: the history goes on.
"""

import asyncio

from agent_framework import Agent, AgentSession, BaseChatClient, ChatResponse, Message

from agentstate import SpillDaemon
from agentstate.agent_framework import AgentStateHistoryProvider


class EchoClient(BaseChatClient):
    """Answers "heard N messages" (N: what the agent sent it, history included)."""

    async def _inner_get_response(self, *, messages, stream=False, options=None, **kwargs):
        return ChatResponse(messages=[Message(role="assistant", contents=[f"heard {len(messages)} messages"])])


async def main() -> None:
    history = AgentStateHistoryProvider(max_messages=50)
    agent = Agent(client=EchoClient(), context_providers=[history])
    session = AgentSession(session_id="demo-chat")
    for text in ["hello", "again"]:
        response = await agent.run(text, session=session)
        print("user:", text, "| assistant:", response.text)
    stored = await history.get_messages("demo-chat")
    print(len(stored), "messages stored")


if __name__ == "__main__":
    with SpillDaemon(db="agentstate.db"):
        asyncio.run(main())
