'use strict';
// Store: every capability of the addon's NativeStore as a promise, its failures as the error
// classes of ./errors.js. The methods are the native ones, wrapped one by one below, so a
// capability added to the addon appears here without a second list (index.d.ts types them;
// a test checks the two agree).
const native = require('./native');
const { fromNative, AgentStateError } = require('./errors');

/** Calls `fn`, turning a synchronous throw or a rejection into an agentstate error; then
 * emits what the core says once per process (no spill daemon runs: writes are not durable)
 * as a process warning. */
async function call(what, fn) {
  try {
    return await fn();
  } catch (e) {
    throw fromNative(e, what);
  } finally {
    const warning = native.takeDurabilityWarning();
    if (warning) process.emitWarning(warning, 'AgentStateWarning');
  }
}

/** A client of one agentstate namespace in one Redis; build it with `Store.connect()`. */
class Store {
  #native;
  #closed = false;

  /** @internal use Store.connect */
  constructor(nativeStore) {
    if (!(nativeStore instanceof native.NativeStore)) {
      throw new TypeError('use `await Store.connect({ url, prefix })` to make a Store');
    }
    this.#native = nativeStore;
  }

  /** Connects to Redis (`url`, else AGENTSTATE_REDIS_URL) and checks the namespace. */
  static async connect(options = {}) {
    if (options === null || typeof options !== 'object') {
      throw fromNative(new Error('options must be an object'), 'Store.connect');
    }
    return new Store(await call('Store.connect', () => native.connect(options)));
  }

  /** @internal the native store, for the adapters. */
  get _native() {
    if (this.#closed) {
      throw new AgentStateError('this Store is closed — connect a new one with Store.connect()');
    }
    return this.#native;
  }

  /** A store sharing this one's pool whose writes resolve once SQLite committed them (durable) or once Redis has them. */
  withDurability(durable) {
    return new Store(this._native.withDurability(Boolean(durable)));
  }

  /** A store sharing this one's pool whose transcript, state and tool-effect ledger writes carry run lease token `token` (null: none): once another process took the lease they reject with Fenced. */
  fenced(token) {
    try {
      return new Store(this._native.fenced(token ?? undefined));
    } catch (e) {
      throw fromNative(e, 'store.fenced');
    }
  }

  /** The run lease token this store's writes carry, or null. */
  get fence() {
    return this.#native.fence ?? null;
  }

  /** True when writes wait for SQLite. */
  get durable() {
    return this.#native.durable;
  }
  /** The namespace prefix. */
  get prefix() {
    return this.#native.prefix;
  }
  /** The namespace's partition count. */
  get partitions() {
    return this.#native.partitions;
  }
  /** The Redis URL (password shown as ***). */
  get url() {
    return this.#native.url;
  }
  /** Payload limits in bytes: { message, workingValue, state }. */
  get limits() {
    return this.#native.limits;
  }

  /** Marks the store closed: later calls reject; the pool closes once nothing holds it. */
  close() {
    this.#closed = true;
  }

  toString() {
    return `Store(url=${this.url}, prefix=${this.prefix}, partitions=${this.partitions}, durable=${this.durable})`;
  }
}

const SKIP = new Set(['constructor', 'withDurability', 'fenced']);
for (const name of Object.getOwnPropertyNames(native.NativeStore.prototype)) {
  const d = Object.getOwnPropertyDescriptor(native.NativeStore.prototype, name);
  if (SKIP.has(name) || typeof d.value !== 'function') continue;
  const what = `store.${name}`;
  Object.defineProperty(Store.prototype, name, {
    value: async function (...args) {
      const n = this._native;
      return call(what, () => n[name](...args));
    },
    writable: true,
    configurable: true,
  });
}

module.exports = { Store, call };
