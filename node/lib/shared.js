'use strict';
// One connected Store per (url, prefix, partitions) in the process, so every adapter object (a
// session per conversation, a saver per graph) shares one connection pool; url and prefix
// resolve as Store.connect's do.
const native = require('./native');
const { Store } = require('./store');

const stores = new Map();

/** The process-wide store of this namespace (connecting on first use). */
function sharedStore(url, prefix, partitions = 16) {
  const [u, p] = native.resolved(url ?? null, prefix ?? null);
  const key = JSON.stringify([u, p, partitions]);
  let store = stores.get(key);
  if (!store) {
    store = Store.connect({ url: u, prefix: p, partitions });
    stores.set(key, store);
    store.catch(() => stores.delete(key)); // a failed connect is retried by the next caller
  }
  return store;
}

module.exports = { sharedStore };
