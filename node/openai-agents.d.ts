// Types of @agentstate/node/openai-agents (structurally a Session of @openai/agents-core).
import type { Store } from './index';

/** AgentStateSession's options; url and prefix default to AGENTSTATE_REDIS_URL / AGENTSTATE_PREFIX. */
export interface AgentStateSessionOptions {
  url?: string;
  prefix?: string;
  partitions?: number;
  /** A connected Store to use instead of url. */
  store?: Store;
  /** Prepended to the session id to form the agentstate id (default "oai.", as in Python). */
  idPrefix?: string;
  /** getItems' default limit. */
  limit?: number;
}

/** An OpenAI Agents JS session stored in agentstate (readable by the Python AgentStateSession). */
export declare class AgentStateSession {
  constructor(sessionId: string, options?: AgentStateSessionOptions);
  readonly sessionId: string;
  /** The agentstate session id holding the conversation. */
  readonly agentstateId: string;
  getSessionId(): Promise<string>;
  getItems(limit?: number): Promise<any[]>;
  addItems(items: any[]): Promise<void>;
  popItem(): Promise<any | undefined>;
  clearSession(): Promise<void>;
  close(): void;
}
