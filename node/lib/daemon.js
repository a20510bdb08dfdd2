'use strict';
// SpillDaemon: the spill daemon of `agentstate spill` in a background task of this process
// (the addon's NativeSpillDaemon). It takes partitions through the same leases as every other
// daemon, so it runs beside `agentstate spill` processes and the Python package's daemons.
const native = require('./native');
const { fromNative } = require('./errors');

/** The spill daemon: flushes the namespace to SQLite, restores sessions Redis lost, trims. */
class SpillDaemon {
  #native;

  /** A daemon for `prefix` of the Redis at `url`, writing SQLite file `db` (nothing runs until start()). */
  constructor(options = {}) {
    try {
      this.#native = new native.NativeSpillDaemon(options);
    } catch (e) {
      throw fromNative(e, 'new SpillDaemon');
    }
  }

  /** Starts it: resolves once its first pass checked the namespace (creates are allowed from then on). */
  async start() {
    try {
      await this.#native.start();
    } catch (e) {
      throw fromNative(e, 'SpillDaemon.start');
    }
    return this;
  }

  /** Stops it: it drains the batch it took, commits it and releases its leases. */
  async stop() {
    try {
      await this.#native.stop();
    } catch (e) {
      throw fromNative(e, 'SpillDaemon.stop');
    }
  }

  /** Same as stop(). */
  close() {
    return this.stop();
  }

  /** True while it runs. */
  get running() {
    return this.#native.running;
  }
  /** Its owner id, once started. */
  get owner() {
    return this.#native.owner ?? null;
  }
  /** The durable tier it writes. */
  get db() {
    return this.#native.db;
  }
}

module.exports = { SpillDaemon };
