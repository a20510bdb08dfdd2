// Benchmark (not a test) of the Node adapters beside the frameworks' in-memory stores:
// AgentStateSaver vs LangGraph.js' MemorySaver (put/s of a growing thread, getTuple and a
// 100-checkpoint list latency), AgentStateSession vs @openai/agents-core's MemorySession
// (addItems/s of one item, getItems latency of a 200-item session). A private redis-server
// and the package's spill daemon on a temp SQLite file; live writes (durable: false) and
// durable ones. Run from the project scripts/test-node.sh makes (BENCH=1), or by hand there:
// node bench.mjs. Prints a Markdown table.
import { MemorySaver, emptyCheckpoint, uuid6 } from '@langchain/langgraph-checkpoint';
import { MemorySession } from '@openai/agents-core';
import { AgentStateSaver, AgentStateSession, Store } from '@agentstate/node';
import { startRedis, startDaemon, tempDir } from './helpers.mjs';

const N = Number(process.env.BENCH_N || 1000);
const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];
const ms = (t0) => Number(process.hrtime.bigint() - t0) / 1e6;

async function saverBench(name, saver) {
  const thread = `bench-${name}-${process.pid}`;
  let config = { configurable: { thread_id: thread, checkpoint_ns: '' } };
  const t0 = process.hrtime.bigint();
  for (let i = 0; i < N; i++) {
    const cp = { ...emptyCheckpoint(), id: uuid6(i), channel_values: { messages: [`m${i}`], step: i }, channel_versions: { messages: i + 1, step: i + 1 } };
    config = await saver.put(config, cp, { source: 'loop', step: i, parents: {} }, { messages: i + 1, step: i + 1 });
  }
  const putsPerSec = N / (ms(t0) / 1000);
  const gets = [];
  for (let i = 0; i < 200; i++) {
    const t = process.hrtime.bigint();
    await saver.getTuple({ configurable: { thread_id: thread, checkpoint_ns: '' } });
    gets.push(ms(t));
  }
  const lists = [];
  for (let i = 0; i < 20; i++) {
    const t = process.hrtime.bigint();
    let n = 0;
    for await (const _ of saver.list({ configurable: { thread_id: thread } }, { limit: 100 })) n++;
    if (n !== 100) throw new Error(`list returned ${n}`);
    lists.push(ms(t));
  }
  return [name, putsPerSec.toFixed(0), median(gets).toFixed(3), median(lists).toFixed(2)];
}

async function sessionBench(name, session) {
  const t0 = process.hrtime.bigint();
  for (let i = 0; i < N; i++) await session.addItems([{ role: 'user', content: `message ${i}` }]);
  const addsPerSec = N / (ms(t0) / 1000);
  const gets = [];
  for (let i = 0; i < 200; i++) {
    const t = process.hrtime.bigint();
    const items = await session.getItems(200);
    if (items.length !== 200) throw new Error(`getItems returned ${items.length}`);
    gets.push(ms(t));
  }
  return [name, addsPerSec.toFixed(0), median(gets).toFixed(3)];
}

const redis = await startRedis();
const daemon = await startDaemon(redis.url, tempDir());
const live = await Store.connect({ url: redis.url });
const durable = live.withDurability(true);
console.log(`N = ${N} sequential writes, one client, node ${process.version}\n`);
console.log('| LangGraph.js saver | put/s | getTuple median ms | list(100) median ms |\n|---|---|---|---|');
for (const row of [
  await saverBench('MemorySaver', new MemorySaver()),
  await saverBench('AgentStateSaver (live)', new AgentStateSaver({ store: live })),
  await saverBench('AgentStateSaver (durable)', new AgentStateSaver({ store: durable })),
]) console.log(`| ${row.join(' | ')} |`);
console.log('\n| OpenAI Agents JS session | addItems/s (1 item) | getItems(200) median ms |\n|---|---|---|');
for (const row of [
  await sessionBench('MemorySession', new MemorySession()),
  await sessionBench('AgentStateSession (live)', new AgentStateSession(`bench-live-${process.pid}`, { store: live })),
  await sessionBench('AgentStateSession (durable)', new AgentStateSession(`bench-dur-${process.pid}`, { store: durable })),
]) console.log(`| ${row.join(' | ')} |`);
await daemon.stop();
await redis.stop();
