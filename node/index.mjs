// The ESM entry point: the CommonJS module's exports (one addon, one set of classes).
import m from './index.js';

export const {
  Store,
  SpillDaemon,
  AgentStateSaver,
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
export default m;
