// One session, one thread, two languages: the Python package (AGENTSTATE_PYTHON names a
// Python with it installed; scripts/test-node.sh builds the wheel into a venv when asked)
// reads what the Node adapters wrote and the other way round. Skipped without it.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { counter } from './graphs.mjs';
import { AgentStateSaver, AgentStateSession, AgentStateStore } from '@agentstate/node';
import { serverForThisFile } from './per-file.mjs';
import { letterEmbeddings } from './helpers.mjs';

const PYTHON = process.env.AGENTSTATE_PYTHON;
const skip = PYTHON ? false : 'AGENTSTATE_PYTHON is not set (a Python with the agentstate wheel)';
const env = serverForThisFile({ skip: Boolean(skip) });

const py = (...args) =>
  JSON.parse(execFileSync(PYTHON, [fileURLToPath(new URL('./crosslang.py', import.meta.url)), env.redis.url, ...args], { encoding: 'utf8' }));

test('an OpenAI Agents conversation written by Node is read item for item by Python, and back', { skip }, async () => {
  const node = new AgentStateSession('cross-conv', { url: env.redis.url });
  const written = [
    { role: 'user', content: 'from node' },
    { type: 'function_call', callId: 'js-1', name: 'lookup', arguments: '{"q":"é"}', status: 'completed' },
  ];
  await node.addItems(written);
  assert.deepEqual(py('session-read', 'cross-conv'), written);
  const both = py('session-add', 'cross-conv');
  assert.deepEqual(await node.getItems(), both);
  assert.deepEqual(both.slice(2), [
    { role: 'user', content: 'from python' },
    { type: 'function_call', call_id: 'py-1', name: 'lookup', arguments: '{}' },
  ]);
  assert.deepEqual((await node.popItem()).call_id, 'py-1');
  assert.equal(py('session-read', 'cross-conv').length, 3);
});

test('one LangGraph thread, two languages: Python runs it, Node continues it, Python reads on', { skip }, async () => {
  assert.deepEqual(py('graph', 'cross-thread').values, { n: 4 });
  const graph = counter(new AgentStateSaver({ url: env.redis.url }));
  const config = { configurable: { thread_id: 'cross-thread' } };
  assert.equal((await graph.getState(config)).values.n, 4, 'Node reads the Python checkpoint');
  await graph.invoke({ n: 1 }, config);
  assert.equal((await graph.getState(config)).values.n, 12, '(4 + 1 + 1) * 2');
  const read = py('graph-read', 'cross-thread');
  assert.deepEqual(read.values, { n: 12 });
  const history = [];
  for await (const s of graph.getStateHistory(config)) history.push(s);
  assert.equal(read.checkpoints, history.length, 'both languages see the same history');
});

// A Python whose wheel lacks AgentStateStore (an older build) skips this case, saying why.
const pyStore = (() => {
  if (!PYTHON) return 'AGENTSTATE_PYTHON is not set (a Python with the agentstate wheel)';
  try {
    execFileSync(PYTHON, ['-c', 'from agentstate.langgraph import AgentStateStore'], { stdio: 'ignore' });
    return false;
  } catch {
    return 'the Python agentstate package has no agentstate.langgraph.AgentStateStore yet';
  }
})();

test('one memory namespace, two languages: each reads and ranks the items the other put', { skip: pyStore }, async () => {
  const store = new AgentStateStore({ url: env.redis.url, index: { dims: 16, embeddings: letterEmbeddings(), fields: ['text'] } });
  await store.put(['cross', 'mem'], 'n1', { text: 'apple river', from: 'node' });
  const n1 = await store.get(['cross', 'mem'], 'n1');
  const seen = py('memory-put', 'mem');
  assert.deepEqual(seen.items, [
    { key: 'n1', namespace: ['cross', 'mem'], value: { text: 'apple river', from: 'node' }, createdAt: n1.createdAt.getTime() },
    { key: 'p1', namespace: ['cross', 'mem'], value: { text: 'zebra ocean', from: 'python' }, createdAt: seen.items[1].createdAt },
  ]);
  assert.deepEqual(seen.ranked.map(([k]) => k), ['n1', 'p1'], 'Python ranks the Node item by its stored vector');
  const ranked = await store.search(['cross', 'mem'], { query: 'zebra' });
  assert.deepEqual(ranked.map((r) => r.key), ['p1', 'n1'], 'Node ranks the Python item by its stored vector');
  const apple = await store.search(['cross', 'mem'], { query: 'apple' });
  for (const [i, [key, score]] of seen.ranked.entries()) {
    assert.equal(apple[i].key, key);
    assert.ok(Math.abs(apple[i].score - score) < 1e-6, 'one score in both languages');
  }
});
