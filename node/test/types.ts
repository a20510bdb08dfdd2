// Checked by strict `tsc --noEmit` in scripts/test-node.sh (never run), on the TypeScript npm
// installs by default and on the previous major, as ESM (this file: the .d.mts declarations)
// and as CommonJS (a copy named types.cts: the .d.ts ones): the package's declared types
// accept what the tests and the README do, every class implementing a framework interface is
// taken by the framework call that takes it, and a wrong argument is refused.
import { Store, SpillDaemon, AgentStateSaver, AgentStateSession, Conflict, AgentStateError, type Message } from '@agentstate/node';
import { AgentStateSaver as Saver2 } from '@agentstate/node/langgraph';
import { AgentStateSession as Session2 } from '@agentstate/node/openai-agents';
import { StateGraph, MessagesAnnotation, START, END } from '@langchain/langgraph';
import { Agent, run } from '@openai/agents-core';

export async function example(): Promise<void> {
  const daemon = await new SpillDaemon({ url: 'redis://127.0.0.1:1', db: '/tmp/x.db' }).start();
  const store = await Store.connect({ url: 'redis://127.0.0.1:1', prefix: 'as', durable: true });
  const id: string = await store.createSession({ id: 'a', user: 'u' });
  const seq: number = await store.append(id, 'user', 'hi', { idempotencyKey: 'k' });
  const ms: Message[] = await store.loadMessages(id, { last: seq });
  ms[0].createdAt.toFixed();
  try {
    await store.setWorking(id, 'k', { a: [1, null] }, 3);
  } catch (e) {
    if (e instanceof Conflict) e.current.toFixed();
    if (e instanceof AgentStateError) e.code.toUpperCase();
  }
  // @ts-expect-error a seq is a number
  await store.message(id, 'one');
  store.close();
  await daemon.stop();
}

/** LangGraph.js' compile() takes the saver as its checkpointer; OpenAI Agents JS' run() the session. */
export async function frameworks(): Promise<void> {
  const builder = new StateGraph(MessagesAnnotation)
    .addNode('echo', (s: typeof MessagesAnnotation.State) => ({ messages: s.messages }))
    .addEdge(START, 'echo')
    .addEdge('echo', END);
  const graph = builder.compile({ checkpointer: new AgentStateSaver({ url: 'redis://127.0.0.1:1' }) });
  builder.compile({ checkpointer: new Saver2({ store: await Store.connect({ url: 'redis://127.0.0.1:1' }) }) });
  await graph.invoke({ messages: [] }, { configurable: { thread_id: 't' } });
  const agent = new Agent({ name: 'a', instructions: 'be brief' });
  await run(agent, 'hi', { session: new AgentStateSession('conv', { url: 'redis://127.0.0.1:1' }) });
  await run(agent, 'hi', { session: new Session2('conv', { idPrefix: 'x.' }) });
}
