// Checked by `tsc --noEmit` in scripts/test-node.sh (never run): the package's declared types
// accept what the tests and the README do, and refuse a wrong argument.
import { Store, SpillDaemon, AgentStateSaver, AgentStateSession, Conflict, AgentStateError, type Message } from '@agentstate/node';
import { AgentStateSaver as Saver2 } from '@agentstate/node/langgraph';
import { AgentStateSession as Session2 } from '@agentstate/node/openai-agents';
import type { Session } from '@openai/agents-core';
import type { BaseCheckpointSaver } from '@langchain/langgraph-checkpoint';

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
  const saver: BaseCheckpointSaver<string> = new AgentStateSaver({ url: 'redis://127.0.0.1:1' });
  const session: Session = new AgentStateSession('conv', { url: 'redis://127.0.0.1:1' });
  void [saver, session, Saver2, Session2];
  store.close();
  await daemon.stop();
}
