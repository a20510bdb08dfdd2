// One worker process of memory.test.mjs: puts `each` items of its own (w<w>-<i>) into the
// shared namespace, each followed by the shared item "last", through AgentStateStore, and
// sends its count to its parent.
import { AgentStateStore } from '@agentstate/node/langgraph';

const [url, w, each] = process.argv.slice(2);
const store = new AgentStateStore({ url });
for (let i = 0; i < Number(each); i++) {
  await store.put(['shared', 'ns'], `w${w}-${i}`, { w: Number(w), i });
  await store.put(['shared', 'ns'], 'last', { w: Number(w), i });
}
process.send(Number(each), () => process.exit(0));
