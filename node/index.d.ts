// Types of @agentstate/node (hand-written over the addon; a test checks that every native
// method is declared here and `tsc --noEmit` checks test/types.ts against it).

/** A JSON value as the store keeps it. */
export type Json = null | boolean | number | string | Json[] | { [key: string]: Json };

/** `Store.connect`'s options; url and prefix default to AGENTSTATE_REDIS_URL / AGENTSTATE_PREFIX. */
export interface ConnectOptions {
  url?: string;
  prefix?: string;
  partitions?: number;
  /** Writes resolve once SQLite committed them (a spill daemon must run). */
  durable?: boolean;
  /** Idle TTL of new sessions, seconds. */
  sessionTtl?: number;
  poolSize?: number;
  /** How long a read waits for a spill daemon to restore a session Redis lost, seconds. */
  daemonWait?: number;
  maxMessageBytes?: number;
  maxWorkingValueBytes?: number;
  maxStateBytes?: number;
  /** The label position naming a user in a memory namespace, which forgetUser erases by (default 1: ["users", userId, ...]). */
  memoryUserLabel?: number;
}

/** `createSession`'s options. */
export interface SessionOptions {
  id?: string;
  user?: string;
  parent?: string;
  lifecycle?: 'ephemeral' | 'linked';
  ttl?: number;
  model?: string;
  systemPrompt?: string;
  config?: Json;
  metadata?: Json;
}

/** `append`'s options. */
export interface AppendOptions {
  name?: string;
  toolCalls?: Json;
  toolCallId?: string;
  roundIndex?: number;
  meta?: Json;
  /** A repeat with the same key resolves to the original seq and writes nothing. */
  idempotencyKey?: string;
  /** The seq the caller believes comes next (else Conflict). */
  expectSeq?: number;
}

/** A message to append (appendMany, replaceMessage, appendCheckpointed). */
export interface NewMessage {
  role: string;
  content?: string;
  name?: string;
  toolCalls?: Json;
  toolCallId?: string;
  roundIndex?: number;
  meta?: Json;
}

/** A stored message. */
export interface Message extends NewMessage {
  seq: number;
  state: 'active' | 'compacted';
  createdAt: number;
}

/** Which messages a read returns. */
export interface MessageQuery {
  /** Compacted-out messages too. */
  all?: boolean;
  after?: number;
  last?: number;
}

/** A checkpoint of `putCheckpoint` / `checkpoint`. */
export interface Checkpoint {
  id: string;
  sessionId: string;
  label: string;
  createdAt: number;
  payload: Json;
}

/** One checkpoint of a graph thread (the LangGraph saver's storage). */
export interface GraphPutInput {
  ns: string;
  id: string;
  parent?: string;
  checkpoint: Json;
  metadata: Json;
  channels: [string, string][];
  blobs: [string, string, string][];
}

/** A graph checkpoint with its values and pending writes. */
export interface GraphRecord {
  ns: string;
  id: string;
  parent?: string;
  checkpoint: Json;
  metadata: { [key: string]: Json };
  createdAt: number;
  values: { [channel: string]: string };
  writes: [string, string, string][];
}

/** A session's run lease. */
export interface Lease {
  owner: string;
  token: number;
  /** ms since the epoch */
  expiresAt: number;
}

/** A long-term memory item as stored (times in ms since the epoch, Redis' clock). */
export interface MemoryItem {
  namespace: string[];
  key: string;
  value: { [key: string]: Json };
  createdAt: number;
  updatedAt: number;
  /** When it expires (null: never). */
  expiresAt: number | null;
  ttlMinutes: number | null;
  /** Cosine similarity to a search's query vector (null outside a ranked search, or without vectors). */
  score: number | null;
}

/** `putMemory`'s options. */
export interface MemoryPutOptions {
  /** Embedding vectors by indexed field, computed by the caller. */
  vectors?: Record<string, number[]>;
  /** Whole minutes until the item expires. */
  ttlMinutes?: number;
}

/** `searchMemory`'s search. */
export interface MemorySearch {
  /** Namespace prefix (absent: every namespace). */
  prefix?: string[];
  /** `{ field: value }` (equality) or `{ field: { $eq | $ne | $gt | $gte | $lt | $lte: value } }` on the value's top-level fields. */
  filter?: { [field: string]: Json };
  /** A query vector: results ranked by cosine similarity, best first. */
  query?: number[];
  /** Most results (10). */
  limit?: number;
  offset?: number;
  /** Each result with a TTL expires that TTL from now. */
  refreshTtl?: boolean;
}

/** `listMemoryNamespaces`' listing. */
export interface NamespaceListing {
  /** Namespaces starting with these labels (`*` matches any one). */
  prefix?: string[];
  /** Namespaces ending with these labels (`*` matches any one). */
  suffix?: string[];
  /** Cut to this many labels, then deduplicated. */
  maxDepth?: number;
  /** Most namespaces (100). */
  limit?: number;
  offset?: number;
}

/** A client of one agentstate namespace in one Redis. */
export declare class Store {
  private constructor();
  /** Connects to Redis and checks the namespace. */
  static connect(options?: ConnectOptions): Promise<Store>;
  /** A store sharing this one's pool with the other durability. */
  withDurability(durable: boolean): Store;
  readonly durable: boolean;
  readonly prefix: string;
  readonly partitions: number;
  readonly url: string;
  readonly limits: { message: number; workingValue: number; state: number };
  /** A store whose transcript, state and tool-effect ledger writes carry run lease token `token` (Fenced once another process took the lease). */
  fenced(token: number | null): Store;
  /** The run lease token this store's writes carry, or null. */
  readonly fence: number | null;
  /** Marks the store closed (later calls reject). */
  close(): void;

  // sessions
  createSession(options?: SessionOptions): Promise<string>;
  session(sid: string): Promise<{ [key: string]: Json } | null>;
  requireSession(sid: string): Promise<{ [key: string]: Json }>;
  listSessions(user?: string): Promise<string[]>;
  listSessionsPage(limit: number, user?: string, after?: string, prefix?: string): Promise<{ ids: string[]; next?: string }>;
  children(sid: string): Promise<string[]>;
  touch(sid: string): Promise<void>;
  archive(sid: string): Promise<void>;
  closeSession(sid: string, cascade?: boolean): Promise<number>;
  setPending(sid: string, pending?: Json): Promise<void>;
  pending(sid: string): Promise<Json | null>;

  // messages
  append(sid: string, role: string, content?: string, options?: AppendOptions): Promise<number>;
  appendMany(sid: string, messages: NewMessage[], expectSeq?: number): Promise<number[]>;
  popMessage(sid: string): Promise<Message | null>;
  replaceMessage(sid: string, seq: number, message: NewMessage): Promise<void>;
  loadMessages(sid: string, query?: MessageQuery): Promise<Message[]>;
  contents(sid: string, query?: MessageQuery): Promise<(string | null)[]>;
  message(sid: string, seq: number): Promise<Message | null>;
  compact(sid: string, fromSeq: number, toSeq: number, note: string, options?: { beforeTokens?: number; afterTokens?: number; roundIndex?: number }): Promise<{ compactSeq: number; noteSeq: number }>;
  compactions(sid: string): Promise<{ [key: string]: Json }[]>;
  recordUsage(sid: string, roundIndex: number, promptTokens: number, completionTokens: number, totalTokens?: number, model?: string): Promise<void>;
  usage(sid: string): Promise<{ [key: string]: Json }[]>;

  // working state and checkpoints
  setWorking(sid: string, key: string, value: Json, ifVersion?: number): Promise<number>;
  getWorking(sid: string, key: string): Promise<Json | null>;
  working(sid: string): Promise<{ version: number; values: { [key: string]: Json } }>;
  deleteWorking(sid: string, key: string): Promise<number>;
  clearWorking(sid: string): Promise<number>;
  checkpoint(sid: string, label: string, includeKeys?: string[]): Promise<string>;
  putCheckpoint(sid: string, label: string, payload: Json): Promise<string>;
  checkpointsLatestOf(sids: string[], label: string): Promise<(Checkpoint | null)[]>;
  appendCheckpointed(sid: string, message: NewMessage, label: string, payload: Json, expectSeq?: number): Promise<{ seq: number; checkpoint: string }>;
  checkpointLatest(sid: string, label: string): Promise<Checkpoint | null>;
  checkpoints(sid: string): Promise<Checkpoint[]>;

  // users and rounds
  setUserValue(user: string, key: string, value: Json): Promise<void>;
  userValue(user: string, key: string): Promise<Json | null>;
  userValues(user: string): Promise<{ [key: string]: Json }>;
  deleteUserValue(user: string, key: string): Promise<boolean>;
  forgetUser(user: string): Promise<{ [key: string]: Json }>;
  saveState(userId: string, state: Json, sessionId?: string, roundId?: number): Promise<number>;
  exportState(userId: string, sessionId?: string, roundId?: number): Promise<Json | null>;

  // long-term memory
  putMemory(namespace: string[], key: string, value: { [key: string]: Json }, options?: MemoryPutOptions): Promise<void>;
  /** `refreshTtl`: an item with a TTL expires that TTL from now. */
  getMemory(namespace: string[], key: string, options?: { refreshTtl?: boolean }): Promise<MemoryItem | null>;
  deleteMemory(namespace: string[], key: string): Promise<void>;
  searchMemory(search?: MemorySearch): Promise<MemoryItem[]>;
  listMemoryNamespaces(listing?: NamespaceListing): Promise<string[][]>;

  // run leases, the inbox, the tool-effect ledger, decisions
  acquireLease(sid: string, owner: string, ttlMs: number): Promise<Lease>;
  renewLease(sid: string, owner: string, token: number, ttlMs: number): Promise<boolean>;
  releaseLease(sid: string, owner: string, token: number): Promise<boolean>;
  leaseHolder(sid: string): Promise<Lease | null>;
  inboxPut(sid: string, items: (NewMessage & { itemId: string })[]): Promise<boolean[]>;
  inboxClaim(sid: string, owner: string, token: number, limit?: number): Promise<{ [key: string]: Json }[]>;
  inboxDeliver(sid: string, owner: string, token: number, itemIds: string[]): Promise<number[]>;
  inboxVoid(sid: string, itemIds: string[]): Promise<number>;
  inbox(sid: string): Promise<{ [key: string]: Json }[]>;
  effectBegin(sid: string, callId: string, args: Json): Promise<{ state: 'started' | 'running' | 'done'; callId: string; argsDigest: string; result?: Json }>;
  effectFinish(sid: string, callId: string, result: Json): Promise<boolean>;
  effect(sid: string, callId: string): Promise<{ [key: string]: Json } | null>;
  effects(sid: string): Promise<{ [key: string]: Json }[]>;
  unresolvedEffects(sid: string): Promise<{ [key: string]: Json }[]>;
  recordDecision(sid: string, decision: string, rationale: string, options?: { action?: string; meta?: Json }): Promise<string>;
  recordOutcome(decisionId: string, outcome: string): Promise<boolean>;
  incompleteDecisions(sid?: string): Promise<{ [key: string]: Json }[]>;
  deadLetters(count?: number): Promise<{ [key: string]: Json }[]>;

  // graph checkpoint logs
  graphPut(thread: string, put: GraphPutInput): Promise<void>;
  graphPutWrites(thread: string, ns: string, checkpointId: string, taskId: string, taskPath: string, writes: { idx: number; channel: string; value: string }[]): Promise<void>;
  graphGet(thread: string, ns: string, checkpointId?: string): Promise<GraphRecord | null>;
  graphList(thread: string, ns?: string, before?: string, filter?: { [key: string]: Json }, limit?: number): Promise<GraphRecord[]>;
  graphDelete(thread: string): Promise<boolean>;
  graphPrune(thread: string, keepLatest: boolean): Promise<number>;
  graphDeleteRuns(runIds: string[]): Promise<number>;
  graphCopy(source: string, target: string): Promise<number>;
}

/** `new SpillDaemon`'s options; url, db and prefix default to AGENTSTATE_REDIS_URL, AGENTSTATE_DB, AGENTSTATE_PREFIX. */
export interface SpillDaemonOptions {
  url?: string;
  /** SQLite file (or postgres:// URL); default ./agentstate.db. */
  db?: string;
  prefix?: string;
  partitions?: number;
  /** Longest time between full passes, seconds. */
  interval?: number;
  /** How long after this daemon dies others take its partitions, seconds. */
  lease?: number;
  /** Wal bytes in Redis past which the daemon moves the wal into its spool. */
  walBudget?: number;
  /** The spool's directory; default beside the SQLite file. */
  spool?: string;
}

/** The spill daemon in a background task of this process. */
export declare class SpillDaemon {
  constructor(options?: SpillDaemonOptions);
  /** Resolves once the first pass checked the namespace. */
  start(): Promise<this>;
  /** Drains, commits and releases its leases. */
  stop(): Promise<void>;
  close(): Promise<void>;
  readonly running: boolean;
  readonly owner: string | null;
  readonly db: string;
}

/** Base class of every agentstate error: `.code` is the class name, `.address` the Redis address when known. */
export declare class AgentStateError extends Error {
  readonly code: string;
  readonly address?: string;
}
export declare class UnknownSession extends AgentStateError {}
export declare class NotLive extends AgentStateError {}
export declare class Conflict extends AgentStateError {
  readonly expected: number;
  readonly current: number;
}
export declare class InvalidInput extends AgentStateError {}
export declare class TooLarge extends InvalidInput {
  readonly size: number;
  readonly limit: number;
}
export declare class AlreadyExists extends AgentStateError {}
export declare class Fenced extends AgentStateError {
  readonly token: number;
  readonly current: number;
  readonly holder: string | null;
}
export declare class Leased extends AgentStateError {
  readonly holder: string;
  readonly token: number;
  readonly expiresAt: number;
}
export declare class RedisUnavailable extends AgentStateError {}
/** The live tier is full (Redis at maxmemory, noeviction) and refused the write; nothing was written. */
export declare class Backpressure extends AgentStateError {}
export declare class NamespaceMismatch extends AgentStateError {}
export declare class DurabilityTimeout extends AgentStateError {}
export declare class WriteLost extends AgentStateError {}

/** [url, prefix]: the arguments, else AGENTSTATE_REDIS_URL / AGENTSTATE_PREFIX, else the defaults. */
export declare function resolved(url?: string, prefix?: string): [string, string];
/** The addon's version. */
export declare const version: string;

export { AgentStateSaver, AgentStateStore } from './langgraph';
export { AgentStateSession } from './openai-agents';
