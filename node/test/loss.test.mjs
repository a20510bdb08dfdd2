// Redis loses everything (FLUSHALL, then a kill and an empty restart): every acknowledged
// durable write comes back through the Node API, restored by the package's spill daemon from
// its SQLite file.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { Store, SpillDaemon } from '@agentstate/node';
import { startRedis, tempDir } from './helpers.mjs';
import path from 'node:path';

let redis, daemon, dir;

before(async () => {
  redis = await startRedis();
  dir = tempDir();
  daemon = await new SpillDaemon({ url: redis.url, db: path.join(dir, 'a.db'), interval: 0.2, lease: 2 }).start();
});
after(async () => {
  await daemon.stop();
  await redis.stop();
});

test('FLUSHALL: every acknowledged durable append is restored', async () => {
  const store = await Store.connect({ url: redis.url, durable: true });
  const sid = await store.createSession({ id: 'flushed' });
  const acked = [];
  for (let i = 0; i < 40; i++) acked.push(await store.append(sid, 'user', `m${i}`));
  const cp = await store.putCheckpoint(sid, 'plan', { v: 1 }); // working state is live only; checkpoints are durable
  redis.cli('FLUSHALL');
  const back = await store.loadMessages(sid);
  assert.deepEqual(back.map((m) => m.seq), acked);
  assert.deepEqual(back.map((m) => m.content), acked.map((_, i) => `m${i}`));
  assert.deepEqual(await store.checkpointLatest(sid, 'plan').then((c) => [c.id, c.payload]), [cp, { v: 1 }]);
  assert.equal(await store.append(sid, 'user', 'after'), 41, 'the next seq follows the restored ones');
});

test('kill and restart empty: the session and its graph thread come back', async () => {
  const store = await Store.connect({ url: redis.url, durable: true });
  const sid = await store.createSession({ id: 'killed' });
  for (let i = 0; i < 10; i++) await store.append(sid, 'assistant', `a${i}`);
  await store.graphPut('thread-k', { ns: '', id: 'c1', checkpoint: { v: 4 }, metadata: { step: 1 }, channels: [['x', '1']], blobs: [['x', '1', 'json:1']] });
  await daemon.stop();
  await redis.restart();
  assert.equal(redis.cli('DBSIZE'), '0');
  daemon = await new SpillDaemon({ url: redis.url, db: path.join(dir, 'a.db'), interval: 0.2, lease: 2 }).start();
  const back = await store.loadMessages(sid);
  assert.deepEqual(back.map((m) => m.content), Array.from({ length: 10 }, (_, i) => `a${i}`));
  const g = await store.graphGet('thread-k', '');
  assert.equal(g.id, 'c1');
  assert.deepEqual(g.values, { x: 'json:1' });
});
