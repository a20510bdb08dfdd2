// AgentStateSaver under a real LangGraph.js graph: interrupt in one process, resume in
// another; the state history; an updateState fork; and the thread surviving a Redis loss.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { counter } from './graphs.mjs';
import { MemorySaver } from '@langchain/langgraph-checkpoint';
import { AgentStateSaver, Store } from '@agentstate/node';
import { serverForThisFile } from './per-file.mjs';
import { startCluster, startDaemon, redisCli, tempDir } from './helpers.mjs';

const env = serverForThisFile();

const worker = (...args) =>
  JSON.parse(execFileSync('node', [fileURLToPath(new URL('./graph-worker.mjs', import.meta.url)), env.redis.url, ...args], { encoding: 'utf8' }));

test('interrupt in one process, resume in another', () => {
  const first = worker('start', 'hitl-1');
  assert.deepEqual(first.next, ['wait']);
  assert.equal(first.values.log.length, 2);
  const second = worker('resume', 'hitl-1', 'ship it');
  assert.deepEqual(second.next, []);
  assert.deepEqual(second.values.log.slice(2), ['answer: ship it', 'done']);
  assert.equal(second.values.log[0], 'start');
});

test('getStateHistory and an updateState fork', async () => {
  const saver = new AgentStateSaver({ url: env.redis.url });
  const graph = counter(saver);
  const config = { configurable: { thread_id: 'history-1' } };
  await graph.invoke({ n: 1 }, config);
  assert.equal((await graph.getState(config)).values.n, 4);
  const history = [];
  for await (const s of graph.getStateHistory(config)) history.push(s);
  assert.deepEqual(history.map((s) => s.values.n), [4, 2, 1, 0]);
  // Fork from the checkpoint after `inc` (n = 2): set n to 10 there and run the rest.
  const afterInc = history.find((s) => s.next[0] === 'double');
  const forked = await graph.updateState(afterInc.config, { n: 8 }, 'inc');
  await graph.invoke(null, forked);
  assert.equal((await graph.getState(config)).values.n, 20, 'the fork ran on (2 + 8) * 2');
  const all = [];
  for await (const s of graph.getStateHistory(config)) all.push(s.values.n);
  assert.deepEqual(all.slice(0, 2), [20, 10]);
  assert.ok(all.includes(4), 'the original branch is still in the history');
});

test('a thread survives FLUSHALL (restored by the daemon)', async () => {
  const { Store } = await import('@agentstate/node');
  const store = await Store.connect({ url: env.redis.url, durable: true });
  const saver = new AgentStateSaver({ store });
  const graph = counter(saver);
  const config = { configurable: { thread_id: 'lost-1' } };
  await graph.invoke({ n: 5 }, config);
  env.redis.cli('FLUSHALL');
  assert.equal((await graph.getState(config)).values.n, 12);
});

test('on a 3-master cluster: the run matches MemorySaver, and the thread lives in one slot', async () => {
  const cluster = await startCluster();
  const daemon = await startDaemon(cluster.url, tempDir(), 'gc');
  try {
    const store = await Store.connect({ url: cluster.url, prefix: 'gc' });
    const config = { configurable: { thread_id: 'cluster-1' } };
    const ours = counter(new AgentStateSaver({ store }));
    const reference = counter(new MemorySaver());
    for (const g of [ours, reference]) {
      await g.invoke({ n: 1 }, config);
      await g.invoke({ n: 2 }, config);
    }
    const history = async (g) => {
      const out = [];
      for await (const s of g.getStateHistory(config)) out.push([s.values, s.next, s.metadata.step, s.metadata.source]);
      return out;
    };
    assert.deepEqual(await history(ours), await history(reference));
    const slots = new Set();
    for (const node of cluster.nodes) {
      for (const key of redisCli(node.port, '--scan', '--pattern', 'gc:*cluster-1*').split('\n').filter(Boolean)) {
        slots.add(redisCli(node.port, 'CLUSTER', 'KEYSLOT', key));
      }
    }
    assert.equal(slots.size, 1, `the thread's keys are in one slot: ${[...slots]}`);
  } finally {
    await daemon.stop();
    await cluster.stop();
  }
});
