// The ESM entry point: the CommonJS module's exports (one addon, one set of classes), but the
// LangGraph.js adapters of ./langgraph.mjs, which extend the application's ESM classes.
import m from './index.js';
import { AgentStateSaver, AgentStateStore } from './langgraph.mjs';

export { AgentStateSaver, AgentStateStore };

export const {
  Store,
  SpillDaemon,
  AgentStateSession,
  AgentStateError,
  UnknownSession,
  NotLive,
  Conflict,
  InvalidInput,
  TooLarge,
  AlreadyExists,
  Fenced,
  Leased,
  RedisUnavailable,
  Backpressure,
  NamespaceMismatch,
  DurabilityTimeout,
  WriteLost,
  resolved,
  version,
} = m;
export default { ...m, AgentStateSaver, AgentStateStore };
