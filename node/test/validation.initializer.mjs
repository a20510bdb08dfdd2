// LangGraph.js' checkpointer validation suite (@langchain/langgraph-checkpoint-validation,
// run by its `validate-checkpointer` CLI) against AgentStateSaver on a private redis-server with
// the package's spill daemon. Each checkpointer the suite creates gets its own idPrefix, so
// instances share the namespace without seeing each other's threads.
import { AgentStateSaver } from '@agentstate/node';
import { startRedis, startDaemon, tempDir } from './helpers.mjs';

let redis, daemon;
let n = 0;

export default {
  checkpointerName: 'AgentStateSaver',
  beforeAllTimeout: 30000,
  async beforeAll() {
    redis = await startRedis();
    daemon = await startDaemon(redis.url, tempDir());
  },
  async afterAll() {
    await daemon.stop();
    await redis.stop();
  },
  createCheckpointer() {
    return new AgentStateSaver({ url: redis.url, idPrefix: `v${process.pid}-${n++}.` });
  },
};
