// LangGraph.js' store tests (fetched by scripts/test-node.sh, never committed) import
// InMemoryStore from "../store/memory.js"; lgjs-store.vitest.config.mjs points that import
// here, so every test runs against AgentStateStore on this test file's private redis-server
// with the package's spill daemon. Each store a test makes starts with no items, as a new
// InMemoryStore does: the stores share the namespace, whose items are deleted before a new
// store's first operation, after the deletions for the stores made before it (a test that
// makes a second store uses the first no more).
import { Store } from '@agentstate/node';
import { AgentStateStore } from '@agentstate/node/langgraph';
import { startRedis, startDaemon, tempDir } from './helpers.mjs';

const redis = await startRedis();
await startDaemon(redis.url, tempDir());
const admin = await Store.connect({ url: redis.url });
let cleared = Promise.resolve();

/** Deletes every memory item of the namespace. */
async function deleteEverything() {
  for (const ns of await admin.listMemoryNamespaces({ limit: 100000 })) {
    for (const item of await admin.searchMemory({ prefix: ns, limit: 100000 })) {
      await admin.deleteMemory(item.namespace, item.key);
    }
  }
}

/** AgentStateStore under InMemoryStore's name and constructor. */
export class InMemoryStore extends AgentStateStore {
  #ready;

  constructor(options = {}) {
    super({ ...options, url: redis.url });
    this.#ready = cleared = cleared.then(deleteEverything);
  }

  async batch(operations) {
    await this.#ready;
    return super.batch(operations);
  }
}
