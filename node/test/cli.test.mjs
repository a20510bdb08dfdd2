// The package's `agentstate` command as real processes: signalled, it stops as the wheel's
// and the binary's do (the daemon drains and releases its partition leases, the server stops
// the redis-server it started), exits 0 and leaves no process behind; idle, it sleeps; and
// under npx, stopping npx stops it.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { startRedis, tempDir } from './helpers.mjs';

const BIN = path.resolve('node_modules/.bin/agentstate');
const PARTITIONS = 16;
// A command that ignores its signal never exits: each test fails after this instead.
const BOUND = { timeout: 60_000 };
const started = [];
let redis, dir;

before(async () => {
  redis = await startRedis();
  dir = tempDir();
});
after(async () => {
  for (const pid of started) if (alive(pid)) process.kill(pid, 'SIGKILL');
  await redis.stop();
});

/** `child` with its stdout and stderr collected; `waitFor(re)` resolves with the first match in either. */
function watch(child) {
  const seen = { out: '', err: '' };
  const waiters = [];
  const check = () => {
    for (const w of [...waiters]) {
      const m = (seen.out + seen.err).match(w.re);
      if (m) {
        waiters.splice(waiters.indexOf(w), 1);
        w.resolve(m);
      }
    }
  };
  child.stdout.on('data', (d) => ((seen.out += d), check()));
  child.stderr.on('data', (d) => ((seen.err += d), check()));
  const exited = new Promise((resolve) => child.once('close', (code, signal) => resolve({ code, signal })));
  exited.then(() => waiters.forEach((w) => w.reject(new Error(`exited before ${w.re}: ${seen.out}${seen.err}`))));
  return {
    seen,
    exited,
    waitFor: (re) =>
      new Promise((resolve, reject) => {
        waiters.push({ re, resolve, reject });
        check();
      }),
  };
}

/** Whether process `pid` exists. */
function alive(pid) {
  try {
    process.kill(pid, 0);
    return true;
  } catch (e) {
    if (e.code === 'ESRCH') return false;
    throw e;
  }
}

/** Waits, bounded, until process `pid` is gone. */
async function gone(pid) {
  for (let i = 0; alive(pid); i++) {
    if (i > 600) throw new Error(`process ${pid} is still running`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

/** CPU time process `pid` has used, in clock ticks (utime + stime of /proc/PID/stat). */
function cpuTicks(pid) {
  const fields = fs.readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1].split(' ');
  return Number(fields[11]) + Number(fields[12]);
}

/** How many partition leases of namespace `prefix` Redis holds. */
function leasesHeld(prefix) {
  const keys = Array.from({ length: PARTITIONS }, (_, p) => `${prefix}:{${p}}:lease`);
  return Number(redis.cli('EXISTS', ...keys));
}

/** A spill daemon of the package's command on namespace `prefix`, started (its leases taken). */
async function spillDaemon(prefix, command = [BIN]) {
  const child = spawn(command[0], [...command.slice(1), 'spill', '--redis', redis.url, '--prefix', prefix, '--db', path.join(dir, `${prefix}.db`)], {
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  const w = watch(child);
  const [, pid] = await w.waitFor(/spill daemon started .*owner=(\d+)-/);
  started.push(child.pid, Number(pid));
  for (let i = 0; leasesHeld(prefix) < PARTITIONS; i++) {
    if (i > 600) throw new Error(`the daemon took ${leasesHeld(prefix)} leases: ${w.seen.err}`);
    await new Promise((r) => setTimeout(r, 50));
  }
  return { child, pid: Number(pid), ...w };
}

for (const signal of ['SIGTERM', 'SIGINT']) {
  test(`spill: ${signal} drains, releases every lease and exits 0; idle, it sleeps`, BOUND, async () => {
    const prefix = `sig${signal.toLowerCase()}`;
    const d = await spillDaemon(prefix);
    assert.equal(d.pid, d.child.pid, 'the daemon is the command process itself');
    // Idle: sleeping, not spinning (a spinning process uses about 100 ticks a second).
    const ticks = cpuTicks(d.pid);
    await new Promise((r) => setTimeout(r, 1000));
    assert.ok(cpuTicks(d.pid) - ticks < 30, `idle daemon used ${cpuTicks(d.pid) - ticks} ticks in a second`);
    d.child.kill(signal);
    assert.deepEqual(await d.exited, { code: 0, signal: null }, d.seen.err);
    assert.match(d.seen.err, /spill daemon stopped; leases released/);
    assert.equal(leasesHeld(prefix), 0);
    assert.equal(alive(d.pid), false);
  });
}

test('server: SIGINT stops the redis-server it started and exits 0', BOUND, async () => {
  const data = path.join(dir, 'server');
  const child = spawn(BIN, ['server', '--port', '0', '--dir', data, '--json'], { stdio: ['ignore', 'pipe', 'pipe'] });
  const w = watch(child);
  const [line] = await w.waitFor(/\{.*"url".*\}/);
  const { pid, url } = JSON.parse(line);
  started.push(child.pid, pid);
  assert.ok(alive(pid), `redis-server ${pid} of ${url} runs`);
  child.kill('SIGINT');
  assert.deepEqual(await w.exited, { code: 0, signal: null }, w.seen.err);
  assert.match(w.seen.err, /redis-server stopped/);
  await gone(pid);
});

test('npx: stopping npx stops the daemon it started, which releases its leases', BOUND, async () => {
  const prefix = 'npx';
  const d = await spillDaemon(prefix, ['npx', '--no-install', 'agentstate']);
  assert.notEqual(d.pid, d.child.pid, 'npx runs the command as a descendant');
  d.child.kill('SIGTERM');
  await d.exited;
  await gone(d.pid);
  assert.match(d.seen.err, /spill daemon stopped; leases released/);
  assert.equal(leasesHeld(prefix), 0);
});
