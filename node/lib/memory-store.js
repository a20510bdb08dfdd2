'use strict';
// AgentStateStore: a LangGraph.js BaseStore (@langchain/langgraph-checkpoint) on the core's
// long-term memory items (store.putMemory, getMemory, deleteMemory, searchMemory,
// listMemoryNamespaces: docs/architecture-memory.md), the records the Python AgentStateStore
// reads and writes, so either language reads the other's items. Embeddings are computed in
// this process: a put embeds the texts at the index's fields (LangGraph.js' own path rules,
// its store utils) and stores them as the item's vectors, one per field ("<path>.<i>" when a
// path yields several texts, as InMemoryStore names them); a search embeds its query and the
// core ranks by exact cosine similarity. A batch answers its reads from the state before its
// writes, and of several writes to one item the last wins (InMemoryStore's order).
const path = require('node:path');
const { sharedStore } = require('./shared');
const { InvalidInput } = require('./errors');
const { missing, peerPath } = require('./peer');

const PKG = '@langchain/langgraph-checkpoint';
const TTL_OPTIONS = ['defaultTtl', 'refreshOnRead'];

/** LangGraph.js' text-at-path rules (getTextAtPath, tokenizePath), from the installed framework. */
function pathRules() {
  const entry = peerPath(PKG);
  try {
    return require(path.join(path.dirname(entry), 'store', 'utils.cjs'));
  } catch {
    throw new InvalidInput(
      `AgentStateStore's index embeds the texts at its fields by LangGraph.js' path rules (${PKG}'s dist/store/utils.cjs), which this install lacks — install ${PKG} 1.2 or later`
    );
  }
}

/** TTL minutes: a positive whole number, or null (no TTL). */
function minutes(name, v) {
  if (v === null) return null;
  if (!Number.isInteger(v) || v <= 0) {
    throw new InvalidInput(`${name} must be a positive whole number of minutes or null, not ${String(v)}`);
  }
  return v;
}

/** The embedder of an IndexConfig: `embeddings` (LangChain Embeddings) or `embed` (Embeddings or `texts => vectors`). */
function embedder(index) {
  const e = index.embeddings ?? index.embed;
  if (e && typeof e.embedDocuments === 'function' && typeof e.embedQuery === 'function') {
    return { documents: (texts) => e.embedDocuments(texts), query: (text) => e.embedQuery(text) };
  }
  if (typeof e === 'function') {
    return { documents: async (texts) => e(texts), query: async (text) => (await e([text]))[0] };
  }
  throw new InvalidInput('index.embeddings must be a LangChain Embeddings (embedDocuments, embedQuery) or a function from texts to vectors');
}

/** The operation kind of `op` (operations[i]), as BaseStore tells them apart. */
function kind(op, i) {
  if (op === null || typeof op !== 'object') throw new InvalidInput(`operations[${i}] must be an operation object`);
  if ('namespacePrefix' in op) return 'search';
  if ('matchConditions' in op || ('limit' in op && !('namespace' in op))) return 'list';
  if ('namespace' in op && 'key' in op) return 'value' in op ? 'put' : 'get';
  throw new InvalidInput(`operations[${i}] is no Get, Put, Search or ListNamespaces operation`);
}

/** A stored item as LangGraph.js has it (times as Dates; `score` on search results). */
function asItem(r, scored) {
  const it = { value: r.value, key: r.key, namespace: r.namespace, createdAt: new Date(r.createdAt), updatedAt: new Date(r.updatedAt) };
  if (scored) it.score = r.score ?? undefined;
  return it;
}

/**
 * The AgentStateStore class over `lg`, one load of @langchain/langgraph-checkpoint (null when
 * it is not installed): each entry point passes the build its importer gets, so the class
 * extends the application's own BaseStore.
 */
function storeClass(lg) {
  const Base = lg ? lg.BaseStore : missing('AgentStateStore', PKG);
  const validate = (ns, options) => lg.validateNamespace(ns, options);

  /** A LangGraph.js store keeping its items in agentstate (readable by the Python store). */
  class AgentStateStore extends Base {
    #store;
    #index = undefined;
    #embed = null;
    #fields = null;
    #rules = null;
    #dims = null;
    #defaultTtl = null;
    #refreshOnRead = false;

    /**
     * Options: `url`, `prefix` (default AGENTSTATE_REDIS_URL / AGENTSTATE_PREFIX),
     * `partitions`, `store` (a connected Store to use instead), `index` (LangGraph.js'
     * IndexConfig: `dims`, `embeddings` or `embed`, `fields`, default ["$"]), `ttl`
     * (`defaultTtl` minutes for every put, `refreshOnRead`: a read moves the expiry).
     */
    constructor(options = {}) {
      const { url, prefix, partitions = 16, store, index, ttl } = options ?? {};
      super();
      if (index !== undefined && index !== null) {
        if (typeof index !== 'object') throw new InvalidInput('index must be an IndexConfig object: { dims, embeddings, fields }');
        if (!Number.isInteger(index.dims) || index.dims <= 0) throw new InvalidInput(`index.dims must be a positive integer, not ${String(index.dims)}`);
        this.#index = index;
        this.#embed = embedder(index);
        this.#dims = index.dims;
        this.#rules = pathRules();
        const fields = index.fields ?? ['$'];
        if (!Array.isArray(fields) || !fields.every((f) => typeof f === 'string')) throw new InvalidInput('index.fields must be an array of paths (strings)');
        this.#fields = fields;
      }
      if (ttl !== undefined && ttl !== null) {
        if (typeof ttl !== 'object') throw new InvalidInput('ttl must be an object: { defaultTtl, refreshOnRead }');
        const unknown = Object.keys(ttl).find((k) => !TTL_OPTIONS.includes(k));
        if (unknown) throw new InvalidInput(`ttl has no option ${unknown}: use ${TTL_OPTIONS.join(', ')}`);
        this.#defaultTtl = ttl.defaultTtl === undefined ? null : minutes('ttl.defaultTtl', ttl.defaultTtl);
        this.#refreshOnRead = Boolean(ttl.refreshOnRead);
      }
      this.#store = store ? Promise.resolve(store) : null;
      this._connect = () => sharedStore(url, prefix, partitions);
    }

    /** Items take a TTL (PutOperation `ttl`, minutes) and expire. */
    get supportsTtl() {
      return true;
    }

    /** The `index` option as given (undefined without one), as InMemoryStore's indexConfig. */
    get indexConfig() {
      return this.#index;
    }

    #open() {
      if (!this.#store) this.#store = this._connect();
      return this.#store;
    }

    /** The vectors of each put to embed, by op index: { field: vector }. */
    async #vectors(puts) {
      const wanted = new Map(); // text -> [[op index, field]]
      for (const [i, op] of puts) {
        if (op.value === null || op.index === false) continue;
        const paths = op.index ?? this.#fields;
        for (const p of paths) {
          const texts = this.#rules.getTextAtPath(op.value, p === '$' ? p : this.#rules.tokenizePath(p));
          texts.forEach((t, n) => {
            if (!wanted.has(t)) wanted.set(t, []);
            wanted.get(t).push([i, texts.length > 1 ? `${p}.${n}` : p]);
          });
        }
      }
      const out = new Map();
      if (wanted.size === 0) return out;
      const texts = [...wanted.keys()];
      const vectors = await this.#embed.documents(texts);
      texts.forEach((t, n) => {
        const v = this.#checked(vectors[n], `the embedding of ${JSON.stringify(t.slice(0, 40))}`);
        for (const [i, field] of wanted.get(t)) {
          if (!out.has(i)) out.set(i, {});
          out.get(i)[field] = v;
        }
      });
      return out;
    }

    #checked(v, what) {
      if (!Array.isArray(v) && !ArrayBuffer.isView(v)) throw new InvalidInput(`${what} is not an array of numbers`);
      if (v.length !== this.#dims) throw new InvalidInput(`${what} has ${v.length} numbers; index.dims is ${this.#dims}`);
      return Array.from(v);
    }

    /**
     * Runs Get, Put (value null: delete; `index` false or paths; `ttl` minutes, null: none),
     * Search (`filter` with $eq $ne $gt $gte $lt $lte, `query` ranked by similarity with
     * `score`, `limit`, `offset`) and ListNamespaces operations; answers in their order. A
     * Get or Search with `refreshTtl` (default the store's `ttl.refreshOnRead`) moves the
     * expiry of each item it returns that has a TTL to now + that TTL.
     */
    async batch(operations) {
      if (!Array.isArray(operations)) throw new InvalidInput('operations must be an array');
      const kinds = operations.map(kind);
      const puts = new Map(); // "ns\0key" -> [op index, op], the last write of each item
      operations.forEach((op, i) => {
        if (kinds[i] === 'get' || kinds[i] === 'put') validate(op.namespace, { allowReservedRoot: true });
        if (kinds[i] === 'search' && op.namespacePrefix.length > 0) validate(op.namespacePrefix, { allowReservedRoot: true });
        if ((kinds[i] === 'get' || kinds[i] === 'search') && op.refreshTtl !== undefined && op.refreshTtl !== null && typeof op.refreshTtl !== 'boolean') {
          throw new InvalidInput(`operations[${i}].refreshTtl must be true or false`);
        }
        if (kinds[i] === 'put') {
          if (op.value !== null && (typeof op.value !== 'object' || Array.isArray(op.value))) {
            throw new InvalidInput(`operations[${i}].value must be an object, or null to delete`);
          }
          if (op.index !== undefined && op.index !== null && op.index !== false && !(Array.isArray(op.index) && op.index.every((p) => typeof p === 'string'))) {
            throw new InvalidInput(`operations[${i}].index must be false or an array of paths`);
          }
          if (op.ttl !== undefined) minutes(`operations[${i}].ttl`, op.ttl);
          puts.set(JSON.stringify([op.namespace, op.key]), [i, op]);
        }
        if (kinds[i] === 'list') {
          for (const c of op.matchConditions ?? []) {
            if (c.matchType !== 'prefix' && c.matchType !== 'suffix') throw new InvalidInput(`operations[${i}]: unknown matchType ${c.matchType} (prefix or suffix)`);
          }
          for (const t of ['prefix', 'suffix']) {
            if ((op.matchConditions ?? []).filter((c) => c.matchType === t).length > 1) {
              throw new InvalidInput(`operations[${i}] has more than one ${t} condition: give one`);
            }
          }
        }
      });
      const vectors = this.#embed ? await this.#vectors(puts.values()) : new Map();
      const queries = new Map();
      if (this.#embed) {
        for (const [i, op] of operations.entries()) {
          if (kinds[i] === 'search' && op.query) queries.set(i, this.#checked(await this.#embed.query(op.query), 'the query embedding'));
        }
      }
      const store = await this.#open();
      const results = await Promise.all(
        operations.map(async (op, i) => {
          switch (kinds[i]) {
            case 'get': {
              const r = await store.getMemory(op.namespace, op.key, { refreshTtl: op.refreshTtl ?? this.#refreshOnRead });
              return r ? asItem(r, false) : null;
            }
            case 'search': {
              const found = await store.searchMemory({
                prefix: op.namespacePrefix,
                filter: op.filter ?? undefined,
                query: queries.get(i),
                limit: op.limit ?? 10,
                offset: op.offset ?? 0,
                refreshTtl: op.refreshTtl ?? this.#refreshOnRead,
              });
              return found.map((r) => asItem(r, true));
            }
            case 'list': {
              const cond = (t) => (op.matchConditions ?? []).find((c) => c.matchType === t)?.path;
              return store.listMemoryNamespaces({
                prefix: cond('prefix'),
                suffix: cond('suffix'),
                maxDepth: op.maxDepth ?? undefined,
                limit: op.limit ?? 100,
                offset: op.offset ?? 0,
              });
            }
            default:
              return undefined;
          }
        })
      );
      await Promise.all(
        [...puts.values()].map(([i, op]) => {
          if (op.value === null) return store.deleteMemory(op.namespace, op.key);
          const ttl = op.ttl === undefined ? this.#defaultTtl : op.ttl;
          return store.putMemory(op.namespace, op.key, op.value, { vectors: vectors.get(i), ttlMinutes: ttl ?? undefined });
        })
      );
      return results;
    }

    /** The item under `key` (BaseStore's get); `options.refreshTtl` as a GetOperation's. */
    async get(namespace, key, options = {}) {
      validate(namespace, { allowEmpty: true, allowReservedRoot: true });
      return (await this.batch([{ namespace, key, refreshTtl: options?.refreshTtl }]))[0];
    }

    /** The items under `namespacePrefix` (BaseStore's search); `options.refreshTtl` as a SearchOperation's. */
    async search(namespacePrefix, options = {}) {
      validate(namespacePrefix, { allowEmpty: true, allowReservedRoot: true });
      const { filter, limit = 10, offset = 0, query, refreshTtl } = options ?? {};
      return (await this.batch([{ namespacePrefix, filter, limit, offset, query, refreshTtl }]))[0];
    }

    /** Stores `value` under `key` (BaseStore's put); `options.ttl`: minutes (null: none; default the store's defaultTtl). */
    async put(namespace, key, value, index, options = {}) {
      validate(namespace);
      const op = { namespace, key, value, index };
      if (options && options.ttl !== undefined) op.ttl = options.ttl;
      await this.batch([op]);
    }
  }
  return AgentStateStore;
}

module.exports = { storeClass };
