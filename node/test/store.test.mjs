// The Store through the installed package: capabilities, typed errors on bad input (with
// nothing written), the ESM and CommonJS entry points, and the CLI through the addon.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { createRequire } from 'node:module';
import { execFileSync } from 'node:child_process';
import * as pkg from '@agentstate/node';
import { startRedis, startDaemon, tempDir } from './helpers.mjs';

const { Store, InvalidInput, TooLarge, UnknownSession, Conflict, AlreadyExists, RedisUnavailable, AgentStateError } = pkg;
let redis, daemon, store;

before(async () => {
  redis = await startRedis();
  daemon = await startDaemon(redis.url, tempDir());
  store = await Store.connect({ url: redis.url, maxMessageBytes: 1024 });
});
after(async () => {
  await daemon.stop();
  await redis.stop();
});

test('createSession resolves to the id; append to gapless seqs; loadMessages to the messages', async () => {
  assert.equal(await store.createSession({ id: 'basic', user: 'u1' }), 'basic');
  assert.equal(await store.append('basic', 'user', 'hello'), 1);
  assert.equal(await store.append('basic', 'assistant', 'hi', { meta: { t: 1 }, idempotencyKey: 'k1' }), 2);
  assert.equal(await store.append('basic', 'assistant', 'hi', { idempotencyKey: 'k1' }), 2, 'a repeat returns the original seq');
  assert.deepEqual(await store.appendMany('basic', [{ role: 'tool', content: 'x', toolCallId: 'c1' }, { role: 'assistant', toolCalls: [{ id: 'c2' }] }]), [3, 4]);
  const ms = await store.loadMessages('basic');
  assert.deepEqual(ms.map((m) => [m.seq, m.role, m.content]), [[1, 'user', 'hello'], [2, 'assistant', 'hi'], [3, 'tool', 'x'], [4, 'assistant', undefined]]);
  assert.equal(ms[2].toolCallId, 'c1');
  assert.deepEqual(ms[1].meta, { t: 1 });
  assert.deepEqual(await store.contents('basic', { last: 2 }), ['x', null]);
  assert.equal((await store.popMessage('basic')).seq, 4);
  assert.equal((await store.session('basic')).userId, 'u1');
  assert.equal(await store.session('absent'), null);
  assert.deepEqual(await store.listSessions('u1'), ['basic']);
});

test('working state: versions and compare-and-set', async () => {
  await store.createSession({ id: 'work' });
  assert.equal(await store.setWorking('work', 'plan', { steps: [1, 2] }), 1);
  assert.deepEqual(await store.getWorking('work', 'plan'), { steps: [1, 2] });
  await assert.rejects(store.setWorking('work', 'plan', 1, 0), (e) => e instanceof Conflict && e.expected === 0 && e.current === 1);
  assert.deepEqual(await store.working('work'), { version: 1, values: { plan: { steps: [1, 2] } } });
  const id = await store.checkpoint('work', 'step');
  assert.equal((await store.checkpointLatest('work', 'step')).id, id);
});

/** Every key of the namespace, to show a refused call wrote nothing. */
const keys = () => redis.cli('--scan', '--pattern', 'as:*').split('\n').filter(Boolean).sort();

test('bad input: one typed error, with the next step, and nothing written', async () => {
  await store.createSession({ id: 'bad' });
  await store.append('bad', 'user', 'one');
  const before = keys();
  const snapshot = JSON.stringify(await store.loadMessages('bad'));
  const cases = [
    [() => store.append('bad', 'Not A Role', 'x'), InvalidInput, /role/],
    [() => store.append('bad', 'user', 'x'.repeat(2000)), TooLarge, /maxMessageBytes/],
    [() => store.append('bad id!', 'user', 'x'), InvalidInput, /id/],
    [() => store.append(42, 'user', 'x'), InvalidInput, /String/],
    [() => store.append('bad', 'user', 'x', { expectSeq: 7 }), Conflict, /expected 7/],
    [() => store.append('bad', 'user', 'x', { expectSeq: -1 }), InvalidInput, /expectSeq/],
    [() => store.appendMany('bad', [{ role: 'user', content: 'ok' }, { content: 'no role' }]), InvalidInput, /messages\[1\]/],
    [() => store.append('bad', 'user'), InvalidInput, /needs content or tool_calls/],
    [() => store.appendMany('bad', [{ role: 'user', content: 'ok' }, { role: 'user' }]), InvalidInput, /needs content or tool_calls/],
    [() => store.createSession({ id: 'bad' }), AlreadyExists, /choose another id/],
    [() => store.append('nobody', 'user', 'x'), UnknownSession, /createSession/],
  ];
  for (const [call, Cls, text] of cases) {
    await assert.rejects(call(), (e) => {
      assert.ok(e instanceof Cls, `${e.constructor.name}: ${e.message}`);
      assert.ok(e instanceof AgentStateError);
      assert.equal(e.code, Cls.name);
      assert.match(e.message, text);
      return true;
    });
  }
  const tooLarge = await store.append('bad', 'user', 'x'.repeat(2000)).catch((e) => e);
  assert.equal(tooLarge.limit, 1024);
  assert.equal(tooLarge.address, `127.0.0.1:${redis.port}`);
  assert.deepEqual(keys(), before, 'no key was added or removed');
  assert.equal(JSON.stringify(await store.loadMessages('bad')), snapshot, 'no message changed');
});

test('an unreachable Redis is RedisUnavailable, saying how to start one', async () => {
  const e = await Store.connect({ url: 'redis://127.0.0.1:1' }).catch((e) => e);
  assert.ok(e instanceof RedisUnavailable, e.message);
  assert.match(e.message, /cannot reach Redis at 127\.0\.0\.1:1: .* — start one with `npx agentstate server`/);
  const bad = await Store.connect({ url: 'http://x' }).catch((e) => e);
  assert.ok(bad instanceof InvalidInput, bad.message);
  assert.match(bad.message, /is not a Redis URL/);
});

test('AGENTSTATE_REDIS_URL and AGENTSTATE_PREFIX are read like the Python package', async () => {
  process.env.AGENTSTATE_REDIS_URL = redis.url;
  process.env.AGENTSTATE_PREFIX = 'envns';
  try {
    const s = await Store.connect();
    assert.equal(s.prefix, 'envns');
    assert.equal(s.url, redis.url);
  } finally {
    delete process.env.AGENTSTATE_REDIS_URL;
    delete process.env.AGENTSTATE_PREFIX;
  }
});

test('the CommonJS entry point is the same module as the ESM one, but for the LangGraph.js adapters', () => {
  const require = createRequire(import.meta.url);
  const cjs = require('@agentstate/node');
  assert.equal(cjs.Store, Store);
  assert.equal(cjs.InvalidInput, InvalidInput);
  // Each entry's adapters extend the LangGraph build its importer gets (identity.test.mjs).
  assert.notEqual(cjs.AgentStateSaver, pkg.AgentStateSaver);
});

test('index.d.ts declares every method of the native store', async () => {
  const require = createRequire(import.meta.url);
  const fs = await import('node:fs');
  const path = await import('node:path');
  const dts = fs.readFileSync(path.join(path.dirname(require.resolve('@agentstate/node/package.json')), 'index.d.ts'), 'utf8');
  const native = require(path.join(path.dirname(require.resolve('@agentstate/node/package.json')), 'lib', 'native.js'));
  const missing = Object.getOwnPropertyNames(native.NativeStore.prototype)
    .filter((n) => n !== 'constructor' && typeof Object.getOwnPropertyDescriptor(native.NativeStore.prototype, n).value === 'function')
    .filter((n) => !new RegExp(`\\b${n}\\(`).test(dts));
  assert.deepEqual(missing, []);
});

test('npx agentstate runs the CLI through the addon', () => {
  const out = execFileSync('npx', ['--no-install', 'agentstate', 'msg', 'list', 'basic', '--redis', redis.url], { encoding: 'utf8' });
  assert.match(out, /hello/);
  const version = execFileSync('npx', ['--no-install', 'agentstate', '--version'], { encoding: 'utf8' });
  assert.match(version, /agentstate/);
});

test('a run lease fences a stale writer: Fenced, and nothing written', async () => {
  const { Fenced, Leased } = pkg;
  await store.createSession({ id: 'leased' });
  const first = await store.acquireLease('leased', 'run-a', 100);
  const a = store.fenced(first.token);
  assert.equal(a.fence, first.token);
  assert.equal(await a.append('leased', 'assistant', 'by a'), 1);
  await assert.rejects(store.acquireLease('leased', 'run-b', 10000), Leased);
  await new Promise((r) => setTimeout(r, 150)); // a's lease lapses; b takes the session over
  const second = await store.acquireLease('leased', 'run-b', 10000);
  assert.ok(second.token > first.token);
  const takenOver = (e) => e instanceof Fenced && e.token === first.token && /taken over by run-b/.test(e.message);
  await assert.rejects(a.append('leased', 'assistant', 'late a'), takenOver);
  // The ledger and the inbox are fenced too: a's intent, its result on b's call, its claim and delivery.
  assert.equal((await store.fenced(second.token).effectBegin('leased', 'call-b', { by: 'b' })).state, 'started');
  await assert.rejects(a.effectBegin('leased', 'call-a', { by: 'a' }), takenOver);
  await assert.rejects(a.effectFinish('leased', 'call-b', { by: 'a' }), takenOver);
  await store.inboxPut('leased', [{ itemId: 'mail-1', role: 'user', content: 'mail' }]);
  await assert.rejects(store.inboxClaim('leased', 'run-a', first.token), takenOver);
  await assert.rejects(store.inboxDeliver('leased', 'run-a', first.token, ['mail-1']), takenOver);
  assert.deepEqual((await store.effects('leased')).map((e) => [e.callId, e.state]), [['call-b', 'running']]);
  assert.deepEqual((await store.inbox('leased')).map((i) => i.state), ['pending']);
  await assert.rejects(store.acquireLease('leased', 'run-c', 10000), (e) => e instanceof Leased && / UTC \(in \d+ s\)/.test(e.message));
  assert.deepEqual((await store.loadMessages('leased')).map((m) => m.content), ['by a']);
  assert.equal((await store.leaseHolder('leased')).owner, 'run-b');
});

test('the tool-effect ledger and decisions', async () => {
  await store.createSession({ id: 'effects' });
  assert.equal((await store.effectBegin('effects', 'call-1', { q: 1 })).state, 'started');
  assert.equal((await store.effectBegin('effects', 'call-1', { q: 1 })).state, 'running');
  await assert.rejects(store.effectBegin('effects', 'call-1', { q: 2 }), InvalidInput);
  assert.equal(await store.effectFinish('effects', 'call-1', { ok: true }), true);
  assert.deepEqual((await store.effectBegin('effects', 'call-1', { q: 1 })).result, { ok: true });
  const d = await store.recordDecision('effects', 'ship', 'tests pass', { action: 'deploy' });
  assert.deepEqual((await store.incompleteDecisions('effects')).map((x) => x.id), [d]);
  assert.equal(await store.recordOutcome(d, 'shipped'), true);
  assert.deepEqual(await store.incompleteDecisions('effects'), []);
});
