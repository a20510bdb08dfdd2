// Checked by strict `tsc --noEmit` in scripts/test-node.sh (never run), on the TypeScript npm
// installs by default and on the previous major, as ESM (this file: the .d.mts declarations)
// and as CommonJS (a copy named types.cts: the .d.ts ones): the package's declared types
// accept what the tests and the README do, every class implementing a framework interface is
// taken by the framework call that takes it, and a wrong argument is refused.
import { Store, SpillDaemon, AgentStateSaver, AgentStateSession, Conflict, AgentStateError, type Message, type MemoryItem } from '@agentstate/node';
import { AgentStateSaver as Saver2, AgentStateStore } from '@agentstate/node/langgraph';
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
  await store.putMemory(['users', 'u'], 'k', { a: 1 }, { vectors: { text: [0.5, 0.5] }, ttlMinutes: 5 });
  const item: MemoryItem | null = await store.getMemory(['users', 'u'], 'k');
  item?.createdAt.toFixed();
  const found: MemoryItem[] = await store.searchMemory({ prefix: ['users'], filter: { a: { $gt: 0 } }, query: [1, 0], limit: 3 });
  found[0].score?.toFixed();
  const spaces: string[][] = await store.listMemoryNamespaces({ suffix: ['*'], maxDepth: 1 });
  spaces.flat();
  // @ts-expect-error a namespace is an array of labels
  await store.getMemory('users', 'k');
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

/** LangGraph.js' compile() takes AgentStateStore as its store (a BaseStore). */
export async function memoryStore(): Promise<void> {
  const embed = async (texts: string[]) => texts.map(() => [0, 1]);
  const store = new AgentStateStore({ url: 'redis://127.0.0.1:1', index: { dims: 2, embed, fields: ['text'] }, ttl: { defaultTtl: 60 } });
  new StateGraph(MessagesAnnotation).addNode('echo', () => ({})).addEdge(START, 'echo').compile({ store });
  await store.put(['users', 'u'], 'k', { text: 'hi' }, false, { ttl: null });
  const hits = await store.search(['users'], { query: 'hello', filter: { n: { $gte: 1 } } });
  hits[0].score?.toFixed();
  // @ts-expect-error an item's value is an object
  await store.put(['users'], 'k', 'text');
}
