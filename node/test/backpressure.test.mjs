// A full live tier: a private Redis at maxmemory with noeviction refuses every write with
// `Backpressure` (one wording: what is full, what to do), from one call or from many
// concurrent calls sharing a round trip, and nothing is half-written.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { Store, Backpressure, AgentStateError } from '@agentstate/node';
import { startRedis, startDaemon, tempDir } from './helpers.mjs';

let redis, daemon, store;

before(async () => {
  redis = await startRedis();
  daemon = await startDaemon(redis.url, tempDir());
  store = await Store.connect({ url: redis.url });
});
after(async () => {
  await daemon.stop();
  await redis.stop();
});

test('a full Redis rejects with Backpressure and writes nothing', async () => {
  await store.createSession({ id: 'full' });
  assert.equal(await store.append('full', 'user', 'before'), 1);
  redis.cli('CONFIG', 'SET', 'maxmemory', '1');

  const refused = await store.append('full', 'user', 'refused').catch((e) => e);
  assert.ok(refused instanceof Backpressure, String(refused));
  assert.ok(refused instanceof AgentStateError);
  assert.equal(refused.code, 'Backpressure');
  assert.match(refused.message, new RegExp(`^backpressure: Redis at 127\\.0\\.0\\.1:${redis.port} is full`));
  assert.match(refused.message, /nothing was written/);
  assert.match(refused.message, /agentstate spill/, 'says what to do');
  await assert.rejects(store.createSession({ id: 'other' }), Backpressure);

  // Concurrent appends share round trips (group commit): each caller gets the same type.
  const all = await Promise.allSettled(Array.from({ length: 32 }, (_, i) => store.append('full', 'user', `c${i}`)));
  for (const r of all) assert.ok(r.status === 'rejected' && r.reason instanceof Backpressure, String(r.reason));

  assert.deepEqual((await store.loadMessages('full')).map((m) => m.seq), [1], 'nothing was half-written');
  redis.cli('CONFIG', 'SET', 'maxmemory', '0');
  assert.equal(await store.append('full', 'user', 'after'), 2, 'the next seq: nothing half-allocated');
});
