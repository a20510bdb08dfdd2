// Types of @agentstate/node/langgraph.
import type { BaseCheckpointSaver, Checkpoint, CheckpointListOptions, CheckpointMetadata, CheckpointTuple, ChannelVersions, PendingWrite, SerializerProtocol } from '@langchain/langgraph-checkpoint';
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
