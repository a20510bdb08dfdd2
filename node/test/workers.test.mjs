// Eight Node worker processes append to one session at once: every acknowledged seq exists
// exactly once, the seqs are gapless, and every reader sees one order.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { fork } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { Store } from '@agentstate/node';
import { serverForThisFile } from './per-file.mjs';
import { startRedis, startDaemon, tempDir } from './helpers.mjs';

const WORKERS = 8;
const EACH = 50;
const env = serverForThisFile();

/** Runs one worker process; resolves to the seqs it was acknowledged. */
function worker(url, sid, n) {
  return new Promise((resolve, reject) => {
    const child = fork(fileURLToPath(new URL('./append-worker.mjs', import.meta.url)), [url, sid, String(n), String(EACH)]);
    let seqs;
    child.on('message', (m) => (seqs = m));
    child.on('exit', (code) => (code === 0 && seqs ? resolve(seqs) : reject(new Error(`worker ${n} exited ${code}`))));
  });
}

test('8 processes appending to one session: every seq exactly once, one order', async () => {
  const store = await Store.connect({ url: env.redis.url });
  const sid = await store.createSession({ id: 'shared' });
  const acked = (await Promise.all(Array.from({ length: WORKERS }, (_, n) => worker(env.redis.url, sid, n)))).flat();
  const messages = await store.loadMessages(sid);
  assert.equal(messages.length, WORKERS * EACH);
  assert.deepEqual(messages.map((m) => m.seq), Array.from({ length: WORKERS * EACH }, (_, i) => i + 1), 'gapless, in order');
  assert.deepEqual([...acked].sort((a, b) => a - b), messages.map((m) => m.seq), 'every acknowledged seq once');
  for (const m of messages) {
    const { w, i } = JSON.parse(m.content);
    assert.equal(acked[w * EACH + i], m.seq, `worker ${w}'s append ${i} is where it was acknowledged`);
  }
  // Each worker's own appends keep their order.
  for (let w = 0; w < WORKERS; w++) {
    const mine = messages.filter((m) => JSON.parse(m.content).w === w).map((m) => JSON.parse(m.content).i);
    assert.deepEqual(mine, Array.from({ length: EACH }, (_, i) => i));
  }
  const again = await (await Store.connect({ url: env.redis.url })).loadMessages(sid);
  assert.deepEqual(again, messages, 'a second reader sees the same order');
});

/** Runs one worker process appending `each` messages; resolves to what it wrote on stderr. */
function workerStderr(url, sid, each) {
  return new Promise((resolve, reject) => {
    const child = fork(fileURLToPath(new URL('./append-worker.mjs', import.meta.url)), [url, sid, '0', String(each)], { silent: true });
    let stderr = '';
    child.stderr.on('data', (d) => (stderr += d));
    child.on('message', () => {});
    child.on('exit', (code) => (code === 0 ? resolve(stderr) : reject(new Error(`worker exited ${code}: ${stderr}`))));
  });
}

test('a process writing while no spill daemon runs is warned once; with one running, not at all', async () => {
  const redis = await startRedis();
  const daemon = await startDaemon(redis.url, tempDir());
  try {
    const store = await Store.connect({ url: redis.url });
    const sid = await store.createSession({ id: 'watched' });
    const told = 'AgentStateWarning: no spill daemon of namespace "as" is running: writes stay in Redis only (not durable) until one runs; start one with `agentstate --prefix as spill`';
    assert.equal((await workerStderr(redis.url, sid, 3)).includes('no spill daemon'), false);
    await daemon.stop();
    const stderr = await workerStderr(redis.url, sid, 3);
    assert.equal(stderr.split(told).length - 1, 1, stderr);
    assert.equal((await store.loadMessages(sid)).length, 6, 'the writes succeeded either way');
  } finally {
    await redis.stop();
  }
});
