// The node:test hooks every test file shares (kept out of helpers.mjs, which vitest and the
// benchmark import too).
import { before, after } from 'node:test';
import { startRedis, startDaemon, tempDir } from './helpers.mjs';

/**
 * The private redis-server and spill daemon of one test file: started before its first test,
 * stopped after its last. The returned object's `redis` and `daemon` are set once started.
 */
export function serverForThisFile({ skip = false } = {}) {
  const env = { redis: undefined, daemon: undefined, dir: undefined };
  before(async () => {
    if (skip) return;
    env.redis = await startRedis();
    env.dir = tempDir();
    env.daemon = await startDaemon(env.redis.url, env.dir);
  });
  after(async () => {
    if (skip) return;
    await env.daemon.stop();
    await env.redis.stop();
  });
  return env;
}
