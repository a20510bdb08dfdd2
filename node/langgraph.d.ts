// Types of @agentstate/node/langgraph.
import type { BaseCheckpointSaver, BaseStore, Checkpoint, IndexConfig, Item, Operation, OperationResults, SearchItem, CheckpointListOptions, CheckpointMetadata, CheckpointTuple, ChannelVersions, PendingWrite, SerializerProtocol } from '@langchain/langgraph-checkpoint';
import type { RunnableConfig } from '@langchain/core/runnables';
import type { Store } from './index';

/** AgentStateSaver's options; url and prefix default to AGENTSTATE_REDIS_URL / AGENTSTATE_PREFIX. */
export interface AgentStateSaverOptions {
  url?: string;
  prefix?: string;
  partitions?: number;
  /** A connected Store to use instead of url. */
  store?: Store;
  /** Prepended to every thread_id to form the agentstate session id (default "lg.", as in Python). */
  idPrefix?: string;
  serde?: SerializerProtocol;
}

/**
 * A LangGraph.js checkpoint saver storing threads in agentstate (readable by the Python saver).
 * Typed as `BaseCheckpointSaver` with its default version type, the one `graph.compile({
 * checkpointer })` takes; its channel versions are strings at run time (see getNextVersion).
 */
export declare class AgentStateSaver extends BaseCheckpointSaver {
  constructor(options?: AgentStateSaverOptions);
  readonly idPrefix: string;
  agentstateId(threadId: string | number): string;
  getTuple(config: RunnableConfig): Promise<CheckpointTuple | undefined>;
  list(config: RunnableConfig, options?: CheckpointListOptions): AsyncGenerator<CheckpointTuple>;
  put(config: RunnableConfig, checkpoint: Checkpoint, metadata: CheckpointMetadata, newVersions: ChannelVersions): Promise<RunnableConfig>;
  putWrites(config: RunnableConfig, writes: PendingWrite[], taskId: string, taskPath?: string): Promise<void>;
  deleteThread(threadId: string): Promise<void>;
  deleteForRuns(runIds: string[]): Promise<void>;
  copyThread(sourceThreadId: string, targetThreadId: string): Promise<void>;
  prune(threadIds: string[], strategy?: 'keep_latest' | 'delete'): Promise<void>;
  /**
   * The next channel version, in the Python saver's scheme: a string, `<32-digit counter>.<hash>`.
   * LangGraph allows string versions and compares them as it does numbers; its declarations
   * type a checkpointer's versions as numbers, hence `any` here rather than `string`.
   */
  getNextVersion(current: string | number | undefined): any;
}

/** LangGraph.js' IndexConfig, its embedder given as `embeddings` or as `embed` (the Python name; an Embeddings or a function from texts to vectors). */
export type AgentStateIndexConfig =
  | IndexConfig
  | (Omit<IndexConfig, 'embeddings'> & {
      embed: IndexConfig['embeddings'] | ((texts: string[]) => Promise<number[][]> | number[][]);
    });

/** AgentStateStore's options; url and prefix default to AGENTSTATE_REDIS_URL / AGENTSTATE_PREFIX. */
export interface AgentStateStoreOptions {
  url?: string;
  prefix?: string;
  partitions?: number;
  /** A connected Store to use instead of url. */
  store?: Store;
  /** Semantic search: the fields embedded on put (default ["$"], the whole value) and the query embedded on search, in this process. */
  index?: AgentStateIndexConfig;
  /** `defaultTtl`: minutes every put's item lives (default: no TTL); `refreshOnRead`: a read moves the expiry. */
  ttl?: { defaultTtl?: number | null; refreshOnRead?: boolean };
}

/**
 * A LangGraph.js store keeping its items in agentstate's long-term memory (readable by the
 * Python AgentStateStore). A PutOperation may carry `ttl` (minutes, null: none), a Get or
 * Search operation `refreshTtl`.
 */
export declare class AgentStateStore extends BaseStore {
  constructor(options?: AgentStateStoreOptions);
  readonly supportsTtl: true;
  /** The `index` option as given. */
  readonly indexConfig: AgentStateIndexConfig | undefined;
  batch<Op extends Operation[]>(operations: Op): Promise<OperationResults<Op>>;
  put(namespace: string[], key: string, value: Record<string, any>, index?: false | string[], options?: { ttl?: number | null }): Promise<void>;
  /** `refreshTtl` (default `ttl.refreshOnRead`): the item's expiry moves to now + its TTL. */
  get(namespace: string[], key: string, options?: { refreshTtl?: boolean }): Promise<Item | null>;
  search(namespacePrefix: string[], options?: { filter?: Record<string, any>; limit?: number; offset?: number; query?: string; refreshTtl?: boolean }): Promise<SearchItem[]>;
}
