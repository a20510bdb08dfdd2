// LangGraph.js' store tests (fetched by scripts/test-node.sh, never committed) import
// InMemoryStore from "../store/memory.js"; lgjs-store.vitest.config.mjs points that import
// here, so every test runs against AgentStateStore on this test file's private redis-server
// with the package's spill daemon. Each store a test makes starts with no items (the
// namespace's items are deleted first), as a new InMemoryStore does.
import { Store } from '@agentstate/node';
import { AgentStateStore } from '@agentstate/node/langgraph';
import { startRedis, startDaemon, tempDir } from './helpers.mjs';

const redis = await startRedis();
await startDaemon(redis.url, tempDir());
const admin = await Store.connect({ url: redis.url });

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
    this.#ready = deleteEverything();
  }

  async batch(operations) {
    await this.#ready;
    return super.batch(operations);
  }
}
