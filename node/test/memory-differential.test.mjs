// AgentStateStore against LangGraph.js' InMemoryStore on generated operation sequences (a
// seeded generator: a failure names its seed and step): puts (some unindexed), deletes, gets,
// searches with filters, queries, limits and offsets, and namespace listings with prefixes,
// suffixes, wildcards and depths; every answer is compared. Where the two differ by design the
// comparison says so: a search without a query is ordered newest first here and by insertion
// in InMemoryStore (compared as sets, and by length under limit and offset); scores are equal
// to 1e-5 (vectors are stored as 32-bit floats); values compare with their keys sorted (the
// core stores an object's keys sorted); InMemoryStore keeps listing a namespace whose
// last item was deleted, which the reference is told (its namespace map entry removed), as
// this store and LangGraph's Python stores drop it.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { InMemoryStore } from '@langchain/langgraph-checkpoint';
import { Store } from '@agentstate/node';
import { AgentStateStore } from '@agentstate/node/langgraph';
import { startRedis, startDaemon, tempDir, letterEmbeddings } from './helpers.mjs';

const index = { dims: 16, embeddings: letterEmbeddings(), fields: ['text'] };
const WORDS = ['apple', 'zebra', 'quiet', 'river', 'mango', 'pixel', 'ocean', 'fjord'];
let redis, daemon;

before(async () => {
  redis = await startRedis();
  daemon = await startDaemon(redis.url, tempDir());
});
after(async () => {
  await daemon.stop();
  await redis.stop();
});

/** mulberry32: a small seeded generator. */
function generator(seed) {
  let a = seed >>> 0;
  const next = () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
  const int = (n) => Math.floor(next() * n);
  const pick = (xs) => xs[int(xs.length)];
  return { next, int, pick };
}

/** One generated operation (a BaseStore call), given the items put so far. */
function operation(g, used) {
  const ns = () => Array.from({ length: 1 + g.int(3) }, () => g.pick(['a', 'b', 'c']));
  const prefix = (wild) => Array.from({ length: g.int(3) }, () => g.pick(wild ? ['a', 'b', 'c', '*'] : ['a', 'b', 'c']));
  const r = g.next();
  if (r < 0.5) {
    const namespace = ns();
    const key = `k${g.int(5)}`;
    const value = { text: `${g.pick(WORDS)} ${g.pick(WORDS)}`, n: g.int(10) };
    if (g.next() < 0.5) value.s = g.pick(['x', 'y', 'z']);
    const id = JSON.stringify([namespace, key]);
    // An unindexed put only on an item never put before: InMemoryStore keeps the vectors of
    // an item's earlier puts (and of a deleted one) where this store replaces them.
    const unindexed = !used.has(id) && g.next() < 0.2;
    used.add(id);
    return { kind: 'put', namespace, key, value, index: unindexed ? false : undefined };
  }
  if (r < 0.6) return { kind: 'delete', namespace: ns(), key: `k${g.int(5)}` };
  if (r < 0.7) return { kind: 'get', namespace: ns(), key: `k${g.int(5)}` };
  if (r < 0.88) {
    const filters = [undefined, { s: 'x' }, { n: { $gt: g.int(10) } }, { n: { $lte: g.int(10) }, s: { $ne: 'y' } }, { n: g.int(10) }, { s: { $eq: 'z' } }, { n: { $gte: 3, $lt: 7 } }];
    const query = g.next() < 0.5 ? `${g.pick(WORDS)} ${g.pick(WORDS)}` : undefined;
    return { kind: 'search', prefix: prefix(false), filter: g.pick(filters), query, limit: 1 + g.int(6), offset: query ? 0 : g.int(4) };
  }
  const options = { limit: 1 + g.int(8), offset: g.int(3) };
  if (g.next() < 0.5) options.prefix = prefix(true);
  if (g.next() < 0.4) options.suffix = prefix(true).slice(0, 2);
  if (g.next() < 0.4) options.maxDepth = 1 + g.int(3);
  return { kind: 'list', options };
}

const id = (it) => JSON.stringify([it.namespace, it.key]);
/** A JSON value with its object keys sorted: the core keeps a value's keys sorted, not as put. */
const canon = (v) =>
  Array.isArray(v) ? v.map(canon) : v && typeof v === 'object' ? Object.fromEntries(Object.keys(v).sort().map((k) => [k, canon(v[k])])) : v;
const entry = (it) => JSON.stringify([it.namespace, it.key, canon(it.value)]);

/** How many non-empty answers of each kind were compared (the sequences must reach them). */
const seen = { got: 0, found: 0, scored: 0, listed: 0 };

/** Both stores' answers to `op`, compared; `where` names the seed and step. */
async function compare(ours, ref, op, where) {
  switch (op.kind) {
    case 'put':
      await ours.put(op.namespace, op.key, op.value, op.index);
      await ref.put(op.namespace, op.key, op.value, op.index);
      return;
    case 'delete': {
      await ours.delete(op.namespace, op.key);
      await ref.delete(op.namespace, op.key);
      const nsKey = op.namespace.join(':');
      if (ref.data.get(nsKey)?.size === 0) ref.data.delete(nsKey);
      return;
    }
    case 'get': {
      const [a, b] = [await ours.get(op.namespace, op.key), await ref.get(op.namespace, op.key)];
      assert.equal(a && entry(a), b && entry(b), where);
      if (a) seen.got += 1;
      return;
    }
    case 'list': {
      const listed = await ours.listNamespaces(op.options);
      assert.deepEqual(listed, await ref.listNamespaces(op.options), where);
      if (listed.length > 0) seen.listed += 1;
      return;
    }
    default: {
      const { prefix, filter, query, limit, offset } = op;
      const paged = [await ours.search(prefix, { filter, query, limit, offset }), await ref.search(prefix, { filter, query, limit, offset })];
      assert.equal(paged[0].length, paged[1].length, `${where}: the page's length`);
      const [a, b] = [await ours.search(prefix, { filter, query, limit: 1000 }), await ref.search(prefix, { filter, query, limit: 1000 })];
      assert.deepEqual(a.map(entry).sort(), b.map(entry).sort(), `${where}: the items found`);
      if (a.length > 0) seen.found += 1;
      if (!query) return;
      if (a.some((it) => it.score !== undefined)) seen.scored += 1;
      const theirs = new Map(b.map((it) => [id(it), it.score]));
      for (const [i, it] of a.entries()) {
        const want = theirs.get(id(it));
        if (want === undefined) assert.equal(it.score, undefined, `${where}: ${id(it)} is unscored`);
        else assert.ok(Math.abs(it.score - want) < 1e-5, `${where}: ${id(it)} scores ${it.score}, InMemoryStore ${want}`);
        if (i > 0 && it.score !== undefined) assert.ok(a[i - 1].score >= it.score - 1e-6, `${where}: ranked best first`);
      }
    }
  }
}

test('generated operation sequences: AgentStateStore answers as InMemoryStore does', async () => {
  const admin = await Store.connect({ url: redis.url });
  for (const seed of [1, 2, 3, 4, 5, 6]) {
    for (const ns of await admin.listMemoryNamespaces({ limit: 100000 })) {
      for (const it of await admin.searchMemory({ prefix: ns, limit: 100000 })) await admin.deleteMemory(it.namespace, it.key);
    }
    const g = generator(seed);
    const ours = new AgentStateStore({ url: redis.url, index });
    const ref = new InMemoryStore({ index });
    const used = new Set();
    for (let step = 0; step < 150; step++) {
      const op = operation(g, used);
      await compare(ours, ref, op, `seed ${seed} step ${step}: ${JSON.stringify(op)}`);
    }
  }
  for (const [kind, n] of Object.entries(seen)) assert.ok(n >= 20, `only ${n} non-empty answers of kind ${kind}`);
});
