// AgentStateSession (the OpenAI Agents JS Session) on a private redis-server: the Session
// contract, exactness across processes, typed refusals that write nothing.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { fork } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { AgentStateSession, InvalidInput } from '@agentstate/node';
import { serverForThisFile } from './per-file.mjs';

const env = serverForThisFile();

const user = (text) => ({ role: 'user', content: text });
const call = (id) => ({ type: 'function_call', callId: id, name: 'lookup', arguments: '{"q":1}', status: 'completed' });

test('the Session contract: getSessionId, addItems, getItems(limit), popItem, clearSession', async () => {
  const s = new AgentStateSession('conv-1', { url: env.redis.url });
  assert.equal(await s.getSessionId(), 'conv-1');
  assert.deepEqual(await s.getItems(), []);
  assert.equal(await s.popItem(), undefined);
  await s.addItems([user('a'), call('c1'), { type: 'function_call_result', callId: 'c1', output: { type: 'text', text: 'r' } }]);
  await s.addItems([]);
  assert.deepEqual(await s.getItems(2), [call('c1'), { type: 'function_call_result', callId: 'c1', output: { type: 'text', text: 'r' } }]);
  assert.equal((await s.getItems()).length, 3);
  assert.deepEqual(await s.getItems(0), []);
  assert.deepEqual((await s.popItem()).type, 'function_call_result');
  assert.deepEqual(await s.getItems(), [user('a'), call('c1')]);
  await s.clearSession();
  assert.deepEqual(await s.getItems(), []);
  await s.addItems([user('again')]);
  assert.deepEqual(await s.getItems(), [user('again')]);
});

test('bad items are refused before anything is written', async () => {
  const s = new AgentStateSession('conv-bad', { url: env.redis.url });
  await s.addItems([user('kept')]);
  for (const bad of [[user('x'), 'not an object'], [user('x'), { big: 10n }], 'no array']) {
    await assert.rejects(s.addItems(bad), InvalidInput);
  }
  await assert.rejects(s.getItems(-1), InvalidInput);
  assert.deepEqual(await s.getItems(), [user('kept')]);
});

test('four processes adding to one session: every item once, each batch contiguous', async () => {
  const script = fileURLToPath(new URL('./session-worker.mjs', import.meta.url));
  await Promise.all(
    [0, 1, 2, 3].map(
      (w) =>
        new Promise((resolve, reject) => {
          const c = fork(script, [env.redis.url, 'shared-conv', String(w)]);
          c.on('exit', (code) => (code === 0 ? resolve() : reject(new Error(`worker ${w}: ${code}`))));
        })
    )
  );
  const items = await new AgentStateSession('shared-conv', { url: env.redis.url }).getItems();
  assert.equal(items.length, 4 * 20 * 3);
  for (let i = 0; i < items.length; i += 3) {
    const [a, b, c] = items.slice(i, i + 3).map((x) => x.content);
    assert.deepEqual([b, c], [a + '/2', a + '/3'], 'a batch of addItems is contiguous');
  }
  assert.equal(new Set(items.map((x) => x.content)).size, items.length);
});
