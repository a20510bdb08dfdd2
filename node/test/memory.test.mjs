// Long-term memory from Node: the Store's memory methods and the LangGraph.js AgentStateStore
// on a private redis-server: argument errors that name the argument and write nothing, 4
// worker processes writing one namespace, Redis losing everything with a real `agentstate
// spill` daemon running (items and search results come back), and forgetUser erasing a
// user's items from both tiers.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { fork, spawn } from 'node:child_process';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { Store, InvalidInput } from '@agentstate/node';
import { AgentStateStore } from '@agentstate/node/langgraph';
import { startRedis, tempDir, letterEmbeddings } from './helpers.mjs';

const BIN = path.resolve('node_modules/.bin/agentstate');
let redis, dir, daemon;

const embeddings = letterEmbeddings();

/** The package's `agentstate spill` command as a process, started (its first pass done). */
async function spillDaemon() {
  const child = spawn(BIN, ['spill', '--redis', redis.url, '--db', path.join(dir, 'memory.db'), '--interval-ms', '200'], {
    stdio: ['ignore', 'ignore', 'pipe'],
  });
  let err = '';
  await new Promise((resolve, reject) => {
    child.stderr.on('data', (d) => {
      err += d;
      if (/spill daemon started/.test(err)) resolve();
    });
    child.once('exit', (code) => reject(new Error(`agentstate spill exited ${code}: ${err}`)));
  });
  return child;
}

before(async () => {
  redis = await startRedis();
  dir = tempDir();
  daemon = await spillDaemon();
});
after(async () => {
  const exited = new Promise((r) => daemon.once('exit', r));
  daemon.kill('SIGTERM');
  await exited;
  await redis.stop();
});

/** Waits, bounded, until `check()` resolves truthy. */
async function eventually(what, check) {
  for (let i = 0; i < 400; i++) {
    if (await check()) return;
    await new Promise((r) => setTimeout(r, 50));
  }
  throw new Error(`timed out waiting until ${what}`);
}

/** Every key of the namespace, to show a refused call wrote nothing. */
const keys = () => redis.cli('--scan', '--pattern', 'as:*').split('\n').filter(Boolean).sort();

test('the Store memory methods: put, get, search ranked by a vector, list, delete', async () => {
  const store = await Store.connect({ url: redis.url });
  await store.putMemory(['docs', 'a'], 'one', { text: 'cat', n: 1 }, { vectors: { text: [1, 0] } });
  await store.putMemory(['docs', 'b'], 'two', { text: 'dog', n: 2 }, { vectors: { text: [0, 1] }, ttlMinutes: 5 });
  const one = await store.getMemory(['docs', 'a'], 'one');
  assert.deepEqual(one.value, { text: 'cat', n: 1 });
  assert.equal(one.expiresAt, null);
  const two = await store.getMemory(['docs', 'b'], 'two');
  assert.equal(two.ttlMinutes, 5);
  assert.ok(Math.abs(two.expiresAt - two.updatedAt - 5 * 60_000) < 1000, 'expires 5 minutes after its put');
  const ranked = await store.searchMemory({ prefix: ['docs'], query: [0.1, 1] });
  assert.deepEqual(ranked.map((r) => r.key), ['two', 'one']);
  assert.ok(ranked[0].score > ranked[1].score);
  assert.deepEqual((await store.searchMemory({ filter: { n: { $gt: 1 } } })).map((r) => r.key), ['two']);
  assert.deepEqual(await store.listMemoryNamespaces({ prefix: ['docs'] }), [['docs', 'a'], ['docs', 'b']]);
  assert.deepEqual(await store.listMemoryNamespaces({ suffix: ['*'], maxDepth: 1 }), [['docs']]);
  await store.deleteMemory(['docs', 'a'], 'one');
  assert.equal(await store.getMemory(['docs', 'a'], 'one'), null);
  await store.deleteMemory(['docs', 'b'], 'two');
});

test('bad memory arguments: one InvalidInput naming the argument, and nothing written', async () => {
  const store = await Store.connect({ url: redis.url });
  const before = keys();
  const cases = [
    [() => store.putMemory('docs', 'k', {}), /namespace must be an array of strings/],
    [() => store.putMemory(['docs', 3], 'k', {}), /namespace\[1\] must be a string/],
    [() => store.putMemory(['docs'], 7, {}), /key must be a string/],
    [() => store.putMemory(['docs'], 'k', [1]), /value must be a JSON object/],
    [() => store.putMemory(['do.cs'], 'k', {}), /contains '\.'/],
    [() => store.putMemory(['docs'], 'k', {}, { ttlMinutes: 1.5 }), /options\.ttlMinutes must be a non-negative integer/],
    [() => store.putMemory(['docs'], 'k', {}, { vectors: { text: [1, 'x'] } }), /options\.vectors\["text"\] must be an array of finite numbers/],
    [() => store.putMemory(['docs'], 'k', {}, { ttl: 5 }), /options has no option "ttl"/],
    [() => store.searchMemory({ limit: -1 }), /search\.limit must be a non-negative integer/],
    [() => store.searchMemory({ filter: { n: { $in: [1] } } }), /unknown filter operator "\$in"/],
    [() => store.listMemoryNamespaces({ maxDepth: 'x' }), /listing\.maxDepth must be a non-negative integer/],
    [() => store.getMemory(['docs'], ''), /item key/],
    [() => store.getMemory(['docs'], 'k', { refreshTtl: 'yes' }), /options\.refreshTtl must be true or false/],
  ];
  for (const [call, text] of cases) {
    await assert.rejects(call(), (e) => {
      assert.ok(e instanceof InvalidInput, `${e.constructor.name}: ${e.message}`);
      assert.match(e.message, text);
      return true;
    });
  }
  const lg = new AgentStateStore({ url: redis.url });
  await assert.rejects(lg.put(['docs'], 'k', { a: 1 }, undefined, { ttl: 0.5 }), /ttl must be a positive whole number of minutes/);
  await assert.rejects(lg.batch([{ namespace: ['docs'], key: 'k', value: 'text' }]), /operations\[0\]\.value must be an object/);
  assert.throws(() => new AgentStateStore({ index: { dims: 0, embeddings } }), /index\.dims must be a positive integer/);
  assert.throws(() => new AgentStateStore({ ttl: { sweepIntervalMinutes: 1 } }), /ttl has no option sweepIntervalMinutes/);
  assert.deepEqual(keys(), before, 'no key was added or removed');
});

test('AgentStateStore: items, semantic search with scores, filters, namespaces and TTL', async () => {
  const lg = new AgentStateStore({ url: redis.url, index: { dims: 16, embeddings, fields: ['text'] }, ttl: { defaultTtl: 60 } });
  assert.equal(lg.supportsTtl, true);
  await lg.put(['lg', 'notes'], 'a', { text: 'apples and pears', kind: 'fruit', rank: 1 });
  await lg.put(['lg', 'notes'], 'b', { text: 'zebra zoo', kind: 'animal', rank: 2 });
  await lg.put(['lg', 'notes'], 'c', { text: 'no vector', kind: 'fruit', rank: 3 }, false);
  await lg.put(['lg', 'other'], 'd', { text: 'pears' }, undefined, { ttl: null });
  const item = await lg.get(['lg', 'notes'], 'a');
  assert.deepEqual(Object.keys(item).sort(), ['createdAt', 'key', 'namespace', 'updatedAt', 'value']);
  assert.ok(item.createdAt instanceof Date && item.updatedAt >= item.createdAt);
  const found = await lg.search(['lg', 'notes'], { query: 'apple pear' });
  assert.deepEqual(found.map((r) => r.key), ['a', 'b', 'c'], 'ranked; the item without vectors last');
  assert.ok(found[0].score > found[1].score);
  assert.equal(found[2].score, undefined);
  assert.deepEqual((await lg.search(['lg'], { filter: { kind: 'fruit', rank: { $gte: 2 } } })).map((r) => r.key), ['c']);
  assert.deepEqual((await lg.search(['lg'], { filter: { kind: { $ne: 'fruit' } } })).map((r) => r.key).sort(), ['b', 'd']);
  assert.deepEqual(await lg.listNamespaces({ prefix: ['lg'] }), [['lg', 'notes'], ['lg', 'other']]);
  const raw = await Store.connect({ url: redis.url });
  assert.equal((await raw.getMemory(['lg', 'notes'], 'a')).ttlMinutes, 60, 'the default TTL');
  assert.equal((await raw.getMemory(['lg', 'other'], 'd')).ttlMinutes, null, 'ttl: null puts without one');
  const [got, , listed] = await lg.batch([
    { namespace: ['lg', 'notes'], key: 'b' },
    { namespace: ['lg', 'notes'], key: 'b', value: null },
    { matchConditions: [{ matchType: 'suffix', path: ['*'] }], maxDepth: 1, limit: 10, offset: 0 },
  ]);
  assert.equal(got.key, 'b', "a batch's reads see the state before its writes");
  assert.deepEqual(listed, [['lg']]);
  assert.equal(await lg.get(['lg', 'notes'], 'b'), null);
  for (const [ns, k] of [[['lg', 'notes'], 'a'], [['lg', 'notes'], 'c'], [['lg', 'other'], 'd']]) await lg.delete(ns, k);
});

test('a read with refreshTtl (or a store with ttl.refreshOnRead) moves the expiry to now + the TTL', async () => {
  const raw = await Store.connect({ url: redis.url });
  await raw.putMemory(['ttl'], 'a', { x: 1 }, { ttlMinutes: 5 });
  await raw.putMemory(['ttl'], 'b', { x: 2 });
  const put = (await raw.getMemory(['ttl'], 'a')).expiresAt;
  await new Promise((r) => setTimeout(r, 30));
  assert.equal((await raw.getMemory(['ttl'], 'a')).expiresAt, put, 'a plain read leaves it');
  const refreshed = (await raw.getMemory(['ttl'], 'a', { refreshTtl: true })).expiresAt;
  assert.ok(refreshed > put, `${refreshed} > ${put}`);
  assert.equal((await raw.getMemory(['ttl'], 'a')).expiresAt, refreshed, 'the moved expiry is stored');
  const lg = new AgentStateStore({ url: redis.url, ttl: { refreshOnRead: true } });
  await new Promise((r) => setTimeout(r, 30));
  const found = await lg.search(['ttl']);
  assert.deepEqual(found.map((r) => r.key).sort(), ['a', 'b']);
  const again = (await raw.getMemory(['ttl'], 'a')).expiresAt;
  assert.ok(again > refreshed, 'a search of a refreshOnRead store moves it');
  await new Promise((r) => setTimeout(r, 30));
  await lg.get(['ttl'], 'a', { refreshTtl: false });
  assert.equal((await raw.getMemory(['ttl'], 'a')).expiresAt, again, 'refreshTtl: false overrides the store');
  assert.equal((await raw.getMemory(['ttl'], 'b', { refreshTtl: true })).expiresAt, null, 'an item without a TTL keeps none');
  await raw.deleteMemory(['ttl'], 'a');
  await raw.deleteMemory(['ttl'], 'b');
});

test('4 processes writing one namespace: every item and every last write is there', async () => {
  const worker = fileURLToPath(new URL('./memory-worker.mjs', import.meta.url));
  const each = 25;
  const done = await Promise.all(
    [0, 1, 2, 3].map(
      (w) =>
        new Promise((resolve, reject) => {
          const child = fork(worker, [redis.url, String(w), String(each)]);
          child.once('message', resolve);
          child.once('exit', (code) => code !== 0 && reject(new Error(`worker ${w} exited ${code}`)));
        })
    )
  );
  assert.deepEqual(done, [each, each, each, each]);
  const lg = new AgentStateStore({ url: redis.url });
  const all = await lg.search(['shared', 'ns'], { limit: 1000 });
  const mine = all.filter((r) => r.key !== 'last');
  assert.equal(mine.length, 4 * each);
  for (let w = 0; w < 4; w++) {
    for (let i = 0; i < each; i++) {
      const it = mine.find((r) => r.key === `w${w}-${i}`);
      assert.deepEqual(it?.value, { w, i }, `w${w}-${i}`);
    }
  }
  const last = await lg.get(['shared', 'ns'], 'last');
  assert.equal(last.value.i, each - 1, "the shared item holds some worker's final write");
  assert.deepEqual(await lg.listNamespaces({ prefix: ['shared'] }), [['shared', 'ns']]);
});

test('FLUSHALL with `agentstate spill` running: items and search results come back', async () => {
  const durable = await Store.connect({ url: redis.url, durable: true });
  const lg = new AgentStateStore({ store: durable, index: { dims: 16, embeddings, fields: ['text'] } });
  const texts = ['blue whale', 'red fox', 'green frog', 'yellow bee', 'black cat'];
  for (const [i, text] of texts.entries()) await lg.put(['zoo', 'animals'], `a${i}`, { text, i });
  await lg.put(['users', 'kim', 'prefs'], 'tone', { text: 'short answers' });
  const search = () => lg.search(['zoo'], { query: 'a fox, red', limit: 3 });
  const before = await search();
  const items = await lg.search([], { limit: 1000 });
  redis.cli('FLUSHALL');
  assert.equal(await lg.get(['zoo', 'animals'], 'a1'), null, 'Redis lost the item');
  await eventually('the items are back', async () => (await lg.search([], { limit: 1000 })).length === items.length);
  const key = (r) => JSON.stringify([r.namespace, r.key, r.value, r.createdAt, r.updatedAt]);
  assert.deepEqual((await lg.search([], { limit: 1000 })).map(key).sort(), items.map(key).sort());
  const after = await search();
  assert.deepEqual(after.map((r) => [r.key, r.score]), before.map((r) => [r.key, r.score]));
  assert.equal(after[0].key, 'a1');
});

test('forgetUser erases the memory namespaces naming the user from Redis and the durable tier', async () => {
  const durable = await Store.connect({ url: redis.url, durable: true });
  const lg = new AgentStateStore({ store: durable });
  await lg.put(['users', 'ann', 'prefs'], 'food', { likes: 'soup' });
  await lg.put(['users', 'ann', 'facts'], 'pet', { pet: 'cat' });
  await lg.put(['users', 'bob', 'prefs'], 'food', { likes: 'rice' });
  await lg.put(['teams', 'ann'], 'x', { kept: true }); // "ann" at position 1 of another root: erased too
  await lg.put(['ann', 'notes'], 'y', { kept: true }); // "ann" at position 0: kept
  await durable.forgetUser('ann');
  const kept = [['ann', 'notes'], ['shared', 'ns'], ['users', 'bob', 'prefs'], ['users', 'kim', 'prefs'], ['zoo', 'animals']];
  assert.deepEqual(await lg.listNamespaces({}), kept);
  // The durable tier erased them too: after Redis loses everything, they do not come back.
  redis.cli('FLUSHALL');
  await eventually('the kept items are back', async () => (await lg.get(['users', 'bob', 'prefs'], 'food')) !== null);
  await eventually('every kept namespace is back', async () => (await lg.listNamespaces({})).length === kept.length);
  assert.deepEqual(await lg.listNamespaces({}), kept);
  assert.equal(await lg.get(['users', 'ann', 'prefs'], 'food'), null);
  assert.equal(await lg.get(['teams', 'ann'], 'x'), null);
});

test('memoryUserLabel: forgetUser erases by the label position the store was connected with', async () => {
  const first = await Store.connect({ url: redis.url, memoryUserLabel: 0 });
  await first.putMemory(['zed', 'notes'], 'n', { a: 1 });
  await first.putMemory(['users', 'zed'], 'n', { a: 2 });
  await first.forgetUser('zed');
  assert.equal(await first.getMemory(['zed', 'notes'], 'n'), null);
  assert.deepEqual((await first.getMemory(['users', 'zed'], 'n')).value, { a: 2 }, 'position 1 is not the user here');
  await first.deleteMemory(['users', 'zed'], 'n');
});
