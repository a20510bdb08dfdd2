'use strict';
// AgentStateSession: the OpenAI Agents JS `Session` (@openai/agents-core) on agentstate, with
// the Python package's mapping (agentstate/openai_agents.py), so either language reads the
// other's conversation: each item is one agentstate message whose role is the item's `role`
// (or its `type` for tool calls and outputs; "item" when neither is a valid role) and whose
// content is the item's exact JSON text. addItems is the core's appendMany (one script:
// consecutive seqs, no other writer's item between them), popItem its popMessage,
// clearSession closes the agentstate session (Redis and SQLite); the next addItems starts it
// again. A namespace needs a spill daemon that checked it before sessions can be created.
const ids = require('./ids');
const { sharedStore } = require('./shared');
const { UnknownSession, AlreadyExists, InvalidInput, AgentStateError } = require('./errors');

/** The agentstate message of `items[index]` (InvalidInput naming it when it is no object or no JSON). */
function encode(index, item) {
  if (item === null || typeof item !== 'object' || Array.isArray(item)) {
    throw new InvalidInput(
      `items[${index}] must be an object (an AgentInputItem), not ${Array.isArray(item) ? 'an array' : typeof item} — nothing was written`
    );
  }
  let content;
  try {
    content = JSON.stringify(item);
  } catch (e) {
    throw new InvalidInput(`items[${index}] is not JSON-serializable: ${e.message} — nothing was written`);
  }
  return { role: ids.role(item.role ?? item.type), content };
}

/** The item of one stored message: its content parsed; other tools' messages become { role, content }. */
function decode(message) {
  const content = message.content;
  if (content === undefined || content === null) return null;
  try {
    return JSON.parse(content);
  } catch {
    return { role: message.role, content };
  }
}

/** An OpenAI Agents JS session stored in agentstate. */
class AgentStateSession {
  #store;
  #closed = false;

  /**
   * `sessionId`: the conversation's id (the agentstate session of the same id when it is 1-128
   * chars of [A-Za-z0-9._+-], else a stable digest). Options: `url`, `prefix` (default
   * AGENTSTATE_REDIS_URL / AGENTSTATE_PREFIX), `partitions`, `store` (a connected Store to
   * use instead), `idPrefix` (prepended to form the agentstate id; default "oai.", as the
   * Python session's, so these sessions have an id space of their own), `limit` (getItems'
   * default).
   */
  constructor(sessionId, options = {}) {
    if (typeof sessionId !== 'string' || sessionId === '') {
      throw new InvalidInput('sessionId must be a non-empty string — pass the conversation id');
    }
    const { url, prefix, partitions = 16, store, idPrefix = 'oai.', limit } = options ?? {};
    if (typeof idPrefix !== 'string') throw new InvalidInput('idPrefix must be a string');
    checkLimit('limit', limit);
    this.sessionId = sessionId;
    this.agentstateId = ids.part(idPrefix + sessionId);
    this.limit = limit;
    this.#store = store ? Promise.resolve(store) : null;
    this._connect = () => sharedStore(url, prefix, partitions);
  }

  async #open() {
    if (this.#closed) throw new AgentStateError('this AgentStateSession is closed');
    if (!this.#store) this.#store = this._connect();
    return this.#store;
  }

  /** The conversation id. */
  async getSessionId() {
    return this.sessionId;
  }

  /** The latest `limit` items in chronological order (all when no limit; none for 0). One round trip. */
  async getItems(limit) {
    checkLimit('limit', limit);
    limit = limit ?? this.limit;
    if (limit === 0) return [];
    const store = await this.#open();
    const query = limit === undefined || limit === null ? {} : { last: limit };
    let contents;
    try {
      contents = await store.contents(this.agentstateId, query);
    } catch (e) {
      if (e instanceof UnknownSession) return [];
      throw e;
    }
    const items = [];
    for (const c of contents) {
      if (c === null) continue;
      try {
        items.push(JSON.parse(c));
      } catch {
        // A message another agentstate tool wrote (a compaction note) is no JSON.
        return (await store.loadMessages(this.agentstateId, query)).map(decode).filter((i) => i !== null);
      }
    }
    return items;
  }

  /** Appends the items in order in one atomic step (the session is created on first use). */
  async addItems(items) {
    if (!Array.isArray(items)) {
      throw new InvalidInput('items must be an array of AgentInputItem objects — nothing was written');
    }
    const messages = items.map((item, i) => encode(i, item));
    if (messages.length === 0) return;
    const store = await this.#open();
    try {
      await store.appendMany(this.agentstateId, messages);
    } catch (e) {
      if (!(e instanceof UnknownSession)) throw e;
      await this.#create(store);
      await store.appendMany(this.agentstateId, messages);
    }
  }

  async #create(store) {
    try {
      await store.createSession({
        id: this.agentstateId,
        metadata: { framework: 'openai-agents', session_id: this.sessionId },
      });
    } catch (e) {
      if (!(e instanceof AlreadyExists)) throw e; // another writer created it first
    }
  }

  /** Removes and returns the newest item, or undefined when the session is empty. */
  async popItem() {
    const store = await this.#open();
    let message;
    try {
      message = await store.popMessage(this.agentstateId);
    } catch (e) {
      if (e instanceof UnknownSession) return undefined;
      throw e;
    }
    return message === null ? undefined : decode(message) ?? undefined;
  }

  /** Deletes every item: the agentstate session is closed (Redis and SQLite). */
  async clearSession() {
    const store = await this.#open();
    try {
      await store.closeSession(this.agentstateId, true);
    } catch (e) {
      if (!(e instanceof UnknownSession)) throw e;
    }
  }

  /** Marks this object closed (later calls reject); the shared pool stays open. */
  close() {
    this.#closed = true;
  }
}

function checkLimit(what, limit) {
  if (limit === undefined || limit === null) return;
  if (!Number.isInteger(limit) || limit < 0) {
    throw new InvalidInput(`${what} must be a non-negative integer or undefined, not ${String(limit)}`);
  }
}

module.exports = { AgentStateSession };
