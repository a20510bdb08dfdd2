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

/** A free port for a cluster node (12000-19999: its bus port, +10000, stays below the ephemeral range). */
async function clusterPort() {
  for (;;) {
    const port = 12000 + Math.floor(Math.random() * 8000);
    const free = (p) =>
      new Promise((resolve) => {
        const srv = net.createServer();
        srv.once('error', () => resolve(false));
        srv.listen(p, '127.0.0.1', () => srv.close(() => resolve(true)));
      });
    if ((await free(port)) && (await free(port + 10000))) return port;
  }
}

/** Three `redis-server --cluster-enabled yes` masters joined with `redis-cli --cluster create`; `url` names every node. */
export async function startCluster() {
  const nodes = [];
  for (let i = 0; i < 3; i++) {
    const port = await clusterPort();
    const dir = tempDir('agentstate-cluster-');
    const child = spawn('redis-server', ['--port', String(port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no', '--dir', dir,
      '--cluster-enabled', 'yes', '--cluster-config-file', 'nodes.conf', '--cluster-node-timeout', '5000'], { stdio: 'ignore' });
    process.on('exit', () => child.exitCode === null && child.kill('SIGKILL'));
    nodes.push({ port, child });
  }
  for (const n of nodes) {
    for (let i = 0; ; i++) {
      try {
        if (redisCli(n.port, 'PING') === 'PONG') break;
      } catch {}
      if (i > 200) throw new Error(`cluster node ${n.port} did not answer`);
      await new Promise((r) => setTimeout(r, 25));
    }
  }
  execFileSync('redis-cli', ['--cluster', 'create', ...nodes.map((n) => `127.0.0.1:${n.port}`), '--cluster-replicas', '0', '--cluster-yes'], { stdio: 'ignore' });
  for (let i = 0; !nodes.every((n) => redisCli(n.port, 'CLUSTER', 'INFO').includes('cluster_state:ok')); i++) {
    if (i > 400) throw new Error('the cluster did not reach cluster_state:ok');
    await new Promise((r) => setTimeout(r, 50));
  }
  return {
    nodes,
    url: 'redis+cluster://' + nodes.map((n) => `127.0.0.1:${n.port}`).join(','),
    stop: async () => {
      for (const n of nodes) {
        const exited = new Promise((r) => n.child.once('exit', r));
        n.child.kill('SIGKILL');
        await exited;
      }
    },
  };
}

/** A started spill daemon of the package on a fresh SQLite file in `dir`. */
export async function startDaemon(url, dir, prefix) {
  const db = path.join(dir, 'agentstate.db');
  const daemon = new SpillDaemon({ url, db, prefix, interval: 0.2, lease: 2 });
  await daemon.start();
  return daemon;
}


/**
 * A deterministic embedder with LangChain's Embeddings methods: a text's letter counts over
 * 16 buckets (a model's shape without a model or network), 16 dimensions.
 */
export function letterEmbeddings() {
  const letters = (text) => {
    const v = new Array(16).fill(0);
    for (const ch of text.toLowerCase()) v[ch.charCodeAt(0) % 16] += 1;
    return v;
  };
  return { embedDocuments: async (texts) => texts.map(letters), embedQuery: async (t) => letters(t) };
}
