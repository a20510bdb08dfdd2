'use strict';
// AgentStateSaver: a LangGraph.js checkpointer (BaseCheckpointSaver of
// @langchain/langgraph-checkpoint) on the core's per-thread checkpoint log (store.graph*),
// stored exactly as the Python AgentStateSaver stores it (agentstate/langgraph.py), so both
// languages read one timeline: a thread is one agentstate session (id mapped by ./ids.part
// after the idPrefix); values and pending writes are "json:<text>" for plain JSON (with the
// default serializer) and "<type>:<base64>" of the serializer's output otherwise ("json" typed
// output stored as "serde-json"); a channel versioned without a value is "empty:"; the
// checkpoint document (without channel values) and each metadata value are stored as JSON,
// a value that is not plain JSON as {"$agentstate.typed": "<type>:<base64>"}. Versions follow
// the Python saver's "<32-digit counter>.<16-char hash>" scheme.
const crypto = require('node:crypto');
const ids = require('./ids');
const { sharedStore } = require('./shared');
const { InvalidInput } = require('./errors');
const { missing } = require('./peer');

const EMPTY = 'empty:';
const TYPED = '$agentstate.typed';
const FIRST_PAGE = 100;
const MAX_PAGE = 1000;
const nonce = `${process.pid}.${process.hrtime.bigint()}`;
let versionSeq = 0;

/** True for a value made only of plain objects, arrays, strings, finite numbers, booleans and null. */
function plain(v) {
  if (v === null || typeof v === 'string' || typeof v === 'boolean') return true;
  if (typeof v === 'number') return Number.isFinite(v);
  if (Array.isArray(v)) return v.every(plain);
  if (typeof v === 'object') {
    const proto = Object.getPrototypeOf(v);
    if (proto !== Object.prototype && proto !== null) return false;
    return Object.values(v).every(plain);
  }
  return false;
}

/** The LangGraph `configurable` of `config`, checked: InvalidInput naming what is missing. */
function conf(config, name = 'config', needThread = true) {
  if (config === null || typeof config !== 'object') {
    throw new InvalidInput(`${name} must be a RunnableConfig object`);
  }
  const c = config.configurable;
  if (c === null || typeof c !== 'object') {
    throw new InvalidInput(`${name}.configurable is missing: LangGraph's config holds its ids there`);
  }
  if (needThread && (c.thread_id === undefined || c.thread_id === null)) {
    throw new InvalidInput(`${name}.configurable.thread_id is missing — pass { configurable: { thread_id } }`);
  }
  if (c.thread_id !== undefined && typeof c.thread_id !== 'string' && typeof c.thread_id !== 'number') {
    throw new InvalidInput(`${name}.configurable.thread_id must be a string or number`);
  }
  for (const k of ['checkpoint_ns', 'checkpoint_id']) {
    if (c[k] !== undefined && c[k] !== null && typeof c[k] !== 'string') {
      throw new InvalidInput(`${name}.configurable.${k} must be a string`);
    }
  }
  return c;
}

/**
 * The AgentStateSaver class over `lg`, one load of @langchain/langgraph-checkpoint (null when it
 * is not installed): each entry point passes the build its importer gets, so the class extends
 * the application's own BaseCheckpointSaver.
 */
function saverClass(lg) {
  const Base = lg ? lg.BaseCheckpointSaver : missing('AgentStateSaver', '@langchain/langgraph-checkpoint');
  const WRITES_IDX_MAP = lg ? lg.WRITES_IDX_MAP : {};
  const TASKS = lg ? lg.TASKS : '__pregel_tasks';

  /** A LangGraph checkpoint saver storing threads in agentstate. */
  class AgentStateSaver extends Base {
    #store;

    /**
     * Options: `url`, `prefix` (default AGENTSTATE_REDIS_URL / AGENTSTATE_PREFIX), `partitions`,
     * `store` (a connected Store to use instead), `idPrefix` (prepended to every thread_id to
     * form the agentstate id; default "lg.", as the Python saver's, so LangGraph threads have an
     * id space of their own), `serde` (a LangGraph serializer; default JsonPlusSerializer).
     */
    constructor(options = {}) {
      const { url, prefix, partitions = 16, store, idPrefix = 'lg.', serde } = options ?? {};
      super(serde);
      if (typeof idPrefix !== 'string') throw new InvalidInput('idPrefix must be a string');
      this.idPrefix = idPrefix;
      this.#store = store ? Promise.resolve(store) : null;
      this._connect = () => sharedStore(url, prefix, partitions);
      this._jsonShortcut = serde === undefined;
    }

    #open() {
      if (!this.#store) this.#store = this._connect();
      return this.#store;
    }

    /** The agentstate session id holding a LangGraph thread. */
    agentstateId(threadId) {
      return ids.part(this.idPrefix + String(threadId));
    }

    async #dumps(value) {
      if (this._jsonShortcut && plain(value)) return 'json:' + JSON.stringify(value);
      let [kind, data] = await this.serde.dumpsTyped(value);
      if (kind === 'json') kind = 'serde-json';
      return `${kind}:${Buffer.from(data).toString('base64')}`;
    }

    async #loads(stored) {
      if (stored.startsWith('json:')) return JSON.parse(stored.slice(5));
      const at = stored.indexOf(':');
      let kind = stored.slice(0, at);
      if (kind === 'serde-json') kind = 'json';
      return this.serde.loadsTyped(kind, new Uint8Array(Buffer.from(stored.slice(at + 1), 'base64')));
    }

    async #dumpDoc(value) {
      if (plain(value)) return value;
      const [kind, data] = await this.serde.dumpsTyped(value);
      return { [TYPED]: `${kind}:${Buffer.from(data).toString('base64')}` };
    }

    async #loadDoc(value) {
      if (value && typeof value === 'object' && !Array.isArray(value) && Object.keys(value).length === 1 && TYPED in value) {
        const s = value[TYPED];
        const at = s.indexOf(':');
        return this.serde.loadsTyped(s.slice(0, at), new Uint8Array(Buffer.from(s.slice(at + 1), 'base64')));
      }
      return value;
    }

    async #dumpMetadata(metadata) {
      const out = {};
      for (const [k, v] of Object.entries(metadata ?? {})) {
        if (v !== undefined) out[k] = await this.#dumpDoc(v);
      }
      return out;
    }

    async #tuple(threadId, r, store, sid) {
      let checkpoint = r.checkpoint;
      if (checkpoint && TYPED in checkpoint) checkpoint = await this.#loadDoc(checkpoint);
      const values = {};
      for (const [ch, v] of Object.entries(r.values)) {
        if (v !== EMPTY) values[ch] = await this.#loads(v);
      }
      checkpoint = { ...checkpoint, channel_values: values };
      if (checkpoint.v < 4 && r.parent) await this.#migratePendingSends(checkpoint, store, sid, r);
      const metadata = {};
      for (const [k, v] of Object.entries(r.metadata ?? {})) metadata[k] = await this.#loadDoc(v);
      const tuple = {
        config: { configurable: { thread_id: threadId, checkpoint_ns: r.ns, checkpoint_id: r.id } },
        checkpoint,
        metadata,
        pendingWrites: await Promise.all(
          r.writes.map(async ([task, channel, value]) => [task, channel, await this.#loads(value)])
        ),
      };
      if (r.parent) {
        tuple.parentConfig = { configurable: { thread_id: threadId, checkpoint_ns: r.ns, checkpoint_id: r.parent } };
      }
      return tuple;
    }

    /**
     * A checkpoint of format < 4 keeps its pending sends as the parent's TASKS writes; the
     * current format holds them in channel_values[TASKS] (what MemorySaver does on read).
     */
    async #migratePendingSends(checkpoint, store, sid, r) {
      const parent = await store.graphGet(sid, r.ns, r.parent);
      const sends = [];
      for (const [, channel, value] of parent?.writes ?? []) {
        if (channel === TASKS) sends.push(await this.#loads(value));
      }
      checkpoint.channel_values[TASKS] = sends;
      const versions = Object.values(checkpoint.channel_versions ?? {});
      checkpoint.channel_versions = {
        ...checkpoint.channel_versions,
        [TASKS]: versions.length > 0 ? lg.maxChannelVersion(...versions) : this.getNextVersion(undefined),
      };
    }

    /** The checkpoint `config` names (its checkpoint_id, else the newest of its namespace), with its pending writes. */
    async getTuple(config) {
      const c = conf(config, 'config', false);
      if (c.thread_id === undefined || c.thread_id === null) return undefined; // as MemorySaver
      const store = await this.#open();
      const sid = this.agentstateId(c.thread_id);
      const r = await store.graphGet(sid, c.checkpoint_ns ?? '', c.checkpoint_id || undefined);
      return r ? this.#tuple(c.thread_id, r, store, sid) : undefined;
    }

    /**
     * The thread's checkpoints, newest first (one namespace when config has a checkpoint_ns),
     * a page per round trip. Without a thread_id, every thread of this saver's idPrefix (a
     * round trip per session of the namespace: an administrative scan, not a hot path).
     */
    async *list(config, options = {}) {
      const c = conf(config ?? { configurable: {} }, 'config', false);
      const { before, limit, filter } = options ?? {};
      if (limit !== undefined && limit !== null && (!Number.isInteger(limit) || limit < 0)) {
        throw new InvalidInput(`limit must be a non-negative integer, not ${String(limit)}`);
      }
      if (limit === 0) return;
      const beforeId = before ? conf(before, 'before', false).checkpoint_id ?? undefined : undefined;
      const flt = filter ? await this.#dumpMetadata(filter) : undefined;
      const store = await this.#open();
      let threads;
      if (c.thread_id !== undefined && c.thread_id !== null) {
        threads = [[c.thread_id, this.agentstateId(c.thread_id)]];
      } else {
        threads = (await store.listSessions()).filter((sid) => sid.startsWith(this.idPrefix)).map((sid) => [sid.slice(this.idPrefix.length), sid]);
      }
      let left = limit ?? Infinity;
      for (const [threadId, sid] of threads) {
        if (c.checkpoint_id) {
          const r = await store.graphGet(sid, c.checkpoint_ns ?? '', c.checkpoint_id);
          if (r && (beforeId === undefined || r.id < beforeId) && matches(r.metadata, flt)) {
            yield await this.#tuple(threadId, r, store, sid);
            left -= 1;
          }
          if (left <= 0) return;
          continue;
        }
        let after = beforeId;
        let size = Math.min(left, FIRST_PAGE);
        for (;;) {
          const page = await store.graphList(sid, c.checkpoint_ns ?? undefined, after, flt, size);
          for (const r of page) {
            yield await this.#tuple(threadId, r, store, sid);
            left -= 1;
            if (left <= 0) return;
          }
          if (page.length < size) break;
          after = page[page.length - 1].id;
          size = Math.min(left, MAX_PAGE);
        }
      }
    }

    /** Stores a checkpoint, its metadata and its new channel values: one round trip. */
    async put(config, checkpoint, metadata, newVersions) {
      const c = conf(config);
      if (!checkpoint || typeof checkpoint.id !== 'string') throw new InvalidInput('checkpoint.id must be a string');
      const ns = c.checkpoint_ns ?? '';
      const { channel_values: values = {}, ...doc } = checkpoint;
      const blobs = [];
      for (const [ch, v] of Object.entries(newVersions ?? {})) {
        blobs.push([ch, String(v), ch in values ? await this.#dumps(values[ch]) : EMPTY]);
      }
      const store = await this.#open();
      await store.graphPut(this.agentstateId(c.thread_id), {
        ns,
        id: checkpoint.id,
        parent: c.checkpoint_id ?? undefined,
        checkpoint: await this.#dumpDoc(doc),
        metadata: await this.#dumpMetadata(metadata),
        channels: Object.entries(checkpoint.channel_versions ?? {}).map(([ch, v]) => [ch, String(v)]),
        blobs,
      });
      return { configurable: { thread_id: c.thread_id, checkpoint_ns: ns, checkpoint_id: checkpoint.id } };
    }

    /** Stores a task's pending writes for the checkpoint `config` names (a repeated (task, idx) is kept; special writes overwrite). */
    async putWrites(config, writes, taskId, taskPath = '') {
      const c = conf(config);
      if (!c.checkpoint_id) throw new InvalidInput('config.configurable.checkpoint_id is missing: writes belong to a checkpoint');
      if (!Array.isArray(writes)) throw new InvalidInput('writes must be an array of [channel, value] pairs');
      const out = [];
      for (const [idx, pair] of writes.entries()) {
        if (!Array.isArray(pair) || pair.length !== 2 || typeof pair[0] !== 'string') {
          throw new InvalidInput(`writes[${idx}] must be a [channel, value] pair`);
        }
        const [channel, value] = pair;
        out.push({ idx: WRITES_IDX_MAP[channel] ?? idx, channel, value: await this.#dumps(value) });
      }
      const store = await this.#open();
      await store.graphPutWrites(this.agentstateId(c.thread_id), c.checkpoint_ns ?? '', c.checkpoint_id, String(taskId), taskPath ?? '', out);
    }

    /** Deletes every checkpoint, value and write of the thread (Redis and SQLite). */
    async deleteThread(threadId) {
      const store = await this.#open();
      await store.graphDelete(this.agentstateId(threadId));
    }

    /** Deletes the checkpoints whose metadata run_id is listed, in every thread of the namespace. */
    async deleteForRuns(runIds) {
      if (!Array.isArray(runIds)) throw new InvalidInput('runIds must be an array of strings');
      if (runIds.length === 0) return;
      const store = await this.#open();
      await store.graphDeleteRuns(runIds.map(String));
    }

    /** Copies every checkpoint, value and write of a thread to another. */
    async copyThread(sourceThreadId, targetThreadId) {
      const store = await this.#open();
      await store.graphCopy(this.agentstateId(sourceThreadId), this.agentstateId(targetThreadId));
    }

    /** "keep_latest" keeps each namespace's newest checkpoint; "delete" drops every one. */
    async prune(threadIds, strategy = 'keep_latest') {
      if (strategy !== 'keep_latest' && strategy !== 'delete') {
        throw new InvalidInput(`unknown prune strategy ${strategy} (expected 'keep_latest' or 'delete')`);
      }
      const store = await this.#open();
      for (const t of threadIds) await store.graphPrune(this.agentstateId(t), strategy === 'keep_latest');
    }

    /** The Python saver's version scheme: a 32-digit counter, "." and a hash telling forks apart. */
    getNextVersion(current) {
      const n = current === undefined || current === null ? 0 : parseInt(String(current).split('.')[0], 10);
      const digest = crypto.createHash('blake2b512').update(`${nonce}.${versionSeq++}`).digest();
      const h = Number(digest.readBigUInt64BE(0) >> 8n) / 2 ** 56;
      return `${String(n + 1).padStart(32, '0')}.${String(h).padStart(16, '0')}`;
    }
  }
  return AgentStateSaver;
}

function matches(metadata, flt) {
  if (!flt) return true;
  return Object.entries(flt).every(([k, v]) => k in (metadata ?? {}) && JSON.stringify(metadata[k]) === JSON.stringify(v));
}

module.exports = { saverClass };
