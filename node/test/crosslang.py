"""The Python side of crosslang.test.mjs, run with the Python package installed:
``python crosslang.py URL COMMAND ARG`` prints one JSON document.

- ``session-read ID``: the items of the Python AgentStateSession ``ID``.
- ``session-add ID``: adds two items (a message and a function call, the Python SDK's shapes).
- ``graph ID``: runs the counter graph (n += 1, then n doubled) on LangGraph thread ``ID``
  with input n = 1 over the Python AgentStateSaver; prints the state values after it.
- ``graph-read ID``: the state values and the number of checkpoints of thread ``ID``.
- ``memory-put NS``: puts item "p1" ``{"text": "zebra ocean", "from": "python"}`` into namespace
  ``("cross", NS)`` with the Python AgentStateStore (the letter-count embedding of
  helpers.mjs' letterEmbeddings, field "text"); prints every item of the namespace and the
  keys a search for "apple" ranks, with their scores.
"""

import asyncio
import json
import operator
import sys
from typing import Annotated, TypedDict

url, command, arg = sys.argv[1:4]


def counter():
    from langgraph.graph import END, START, StateGraph

    from agentstate.langgraph import AgentStateSaver

    class State(TypedDict):
        n: Annotated[int, operator.add]

    g = StateGraph(State)
    g.add_node("inc", lambda s: {"n": 1})
    g.add_node("double", lambda s: {"n": s["n"]})
    g.add_edge(START, "inc")
    g.add_edge("inc", "double")
    g.add_edge("double", END)
    return g.compile(checkpointer=AgentStateSaver(url))


def letters(texts):
    """helpers.mjs' letterEmbeddings in Python: letter counts over 16 buckets."""
    out = []
    for text in texts:
        v = [0.0] * 16
        for ch in text.lower():
            v[ord(ch) % 16] += 1
        out.append(v)
    return out


def memory(ns):
    from agentstate.langgraph import AgentStateStore

    store = AgentStateStore(url, index={"dims": 16, "embed": letters, "fields": ["text"]})
    store.put(("cross", ns), "p1", {"text": "zebra ocean", "from": "python"})
    items = store.search(("cross", ns), limit=100)
    ranked = store.search(("cross", ns), query="apple", limit=100)
    as_ms = lambda t: round(t.timestamp() * 1000)
    return {
        "items": sorted(
            [{"key": i.key, "namespace": list(i.namespace), "value": i.value, "createdAt": as_ms(i.created_at)} for i in items],
            key=lambda i: i["key"],
        ),
        "ranked": [[i.key, i.score] for i in ranked],
    }


async def main():
    if command == "memory-put":
        return memory(arg)
    if command.startswith("session"):
        from agentstate.openai_agents import AgentStateSession

        s = AgentStateSession(arg, url=url)
        if command == "session-add":
            await s.add_items(
                [
                    {"role": "user", "content": "from python"},
                    {"type": "function_call", "call_id": "py-1", "name": "lookup", "arguments": "{}"},
                ]
            )
        return await s.get_items()
    graph = counter()
    config = {"configurable": {"thread_id": arg}}
    if command == "graph":
        graph.invoke({"n": 1}, config)
    state = graph.get_state(config)
    return {"values": state.values, "checkpoints": len(list(graph.get_state_history(config)))}


print(json.dumps(asyncio.run(main())))
