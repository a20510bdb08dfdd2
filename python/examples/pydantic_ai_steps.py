"""A Pydantic AI agent whose runs and history live in agentstate (README "Pydantic AI").

Runs without a model or network: ``TestModel`` calls the agent's ``add`` tool, then answers.
The harness's ``StepPersistence`` records each run's events, snapshots and tool effects in an
``AgentStateStepStore``; an ``AgentStateMessageHistory`` keeps the conversation, so each run
starts from the previous one's messages. Needs Redis (AGENTSTATE_REDIS_URL, else
127.0.0.1:6379); starts a spill daemon in this process. Run it twice: the history goes on.
"""

import asyncio

from pydantic_ai import Agent
from pydantic_ai.models.test import TestModel
from pydantic_ai_harness.step_persistence import StepPersistence

from agentstate import SpillDaemon
from agentstate.pydantic_ai import AgentStateMessageHistory, AgentStateStepStore


async def main() -> None:
    steps = AgentStateStepStore()
    history = AgentStateMessageHistory("demo-chat")
    earlier = await history.aload()
    number = len(await steps.list_runs(conversation_id="demo-chat")) + 1
    agent = Agent(TestModel(), capabilities=[StepPersistence(store=steps, agent_name="adder")])

    @agent.tool_plain
    def add(a: int, b: int) -> int:
        return a + b

    result = await agent.run("add 1 and 2", message_history=earlier, conversation_id="demo-chat")
    await history.aappend(result.new_messages())
    print(f"run {number}: {len(earlier)} earlier messages, answer {result.output}")
    run = (await steps.list_runs(conversation_id="demo-chat"))[-1]
    print("events:", [e.kind for e in await steps.list_events(run_id=run.run_id)])
    print("unresolved tool calls:", await steps.list_unresolved_tool_effects(run_id=run.run_id))


if __name__ == "__main__":
    with SpillDaemon(db="agentstate.db"):
        asyncio.run(main())
