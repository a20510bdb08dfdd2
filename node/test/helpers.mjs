// What every test file uses: a private redis-server on a free loopback port (never 6379),
// started per file and killed at its end, a temp directory for SQLite files, and a spill
// daemon from the package under test.
import { spawn, execFileSync } from 'node:child_process';
import fs from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { SpillDaemon } from '@agentstate/node';

/** A free TCP port on 127.0.0.1 (never 6379). */
export async function freePort() {
  for (;;) {
    const port = await new Promise((resolve, reject) => {
      const srv = net.createServer();
      srv.once('error', reject);
      srv.listen(0, '127.0.0.1', () => {
        const { port } = srv.address();
        srv.close(() => resolve(port));
      });
    });
    if (port !== 6379) return port;
  }
}

/** A temp directory removed at exit. */
export function tempDir(name = 'agentstate-node-') {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), name));
  process.on('exit', () => fs.rmSync(dir, { recursive: true, force: true }));
  return dir;
}

/** redis-cli against `port`, returning its trimmed output. */
export function redisCli(port, ...args) {
  return execFileSync('redis-cli', ['-h', '127.0.0.1', '-p', String(port), ...args], { encoding: 'utf8' }).trim();
}

/** A private redis-server; `stop()` kills it, `restart()` starts an empty one on the same port. */
export async function startRedis() {
  const port = await freePort();
  const dir = tempDir('agentstate-redis-');
  let child;
  const start = async () => {
    child = spawn('redis-server', ['--port', String(port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no', '--dir', dir], {
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let log = '';
    child.stdout.on('data', (d) => (log += d));
    for (let i = 0; i < 200; i++) {
      try {
        if (redisCli(port, 'PING') === 'PONG') return;
      } catch {}
      if (child.exitCode !== null) throw new Error(`redis-server exited: ${log}`);
      await new Promise((r) => setTimeout(r, 25));
    }
    throw new Error(`redis-server did not answer on ${port}: ${log}`);
  };
  await start();
  const stop = async () => {
    if (child && child.exitCode === null) {
      const exited = new Promise((r) => child.once('exit', r));
      child.kill('SIGKILL');
      await exited;
    }
  };
  process.on('exit', () => child && child.exitCode === null && child.kill('SIGKILL'));
  return {
    port,
    url: `redis://127.0.0.1:${port}`,
    stop,
    restart: async () => {
      await stop();
      await start();
    },
    cli: (...args) => redisCli(port, ...args),
  };
}

/** A started spill daemon of the package on a fresh SQLite file in `dir`. */
export async function startDaemon(url, dir, prefix) {
  const db = path.join(dir, 'agentstate.db');
  const daemon = new SpillDaemon({ url, db, prefix, interval: 0.2, lease: 2 });
  await daemon.start();
  return daemon;
}
