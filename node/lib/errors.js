'use strict';
// The error classes and the one function (fromNative) turning the addon's rejections into
// them. Every class has `.code` (its kind, the class name) and `.address` (the Redis address,
// when known); the message is the CLI's kind of line: what failed, then after " — " the next
// step in this package's words.

const MARKER = 'agentstate-error:';

/** Base class of every agentstate error. */
class AgentStateError extends Error {
  constructor(message, fields = {}) {
    super(message);
    this.name = new.target.name;
    this.code = new.target.name;
    Object.assign(this, fields);
  }
}
/** The session exists neither in Redis nor in the durable tier. */
class UnknownSession extends AgentStateError {}
/** Not live in Redis and no spill daemon restored it within the wait (retryable). */
class NotLive extends AgentStateError {}
/** An optimistic-concurrency check failed: `.expected` was passed, `.current` is stored. */
class Conflict extends AgentStateError {}
/** A rejected argument (id, JSON, role, seq range, option); nothing was written. */
class InvalidInput extends AgentStateError {}
/** A payload over its limit (`.size`, `.limit` in bytes); nothing was written. */
class TooLarge extends InvalidInput {}
/** The session (or other object) to create exists already. */
class AlreadyExists extends AgentStateError {}
/** A write under a run lease token no longer the session's; nothing was written. */
class Fenced extends AgentStateError {}
/** The session's run lease is another owner's (`.holder`, `.token`, `.expiresAt`). */
class Leased extends AgentStateError {}
/** Redis cannot be reached or the connection failed (retryable). */
class RedisUnavailable extends AgentStateError {}
/** The live tier is full (Redis at maxmemory, noeviction) and refused the write; nothing was written. */
class Backpressure extends AgentStateError {}
/** The prefix/partitions differ from what Redis or SQLite recorded. */
class NamespaceMismatch extends AgentStateError {}
/** A durable write was not committed to SQLite within the wait. */
class DurabilityTimeout extends AgentStateError {}
/** Redis lost a durable write before a spill daemon committed it: repeat it. */
class WriteLost extends AgentStateError {}

const classes = {
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
};

/** The agentstate error of an addon failure (`what` names the call, for argument errors). */
function fromNative(e, what) {
  if (e instanceof AgentStateError) return e;
  const text = e && typeof e.message === 'string' ? e.message : String(e);
  const at = text.indexOf(MARKER);
  if (at >= 0) {
    let parsed;
    try {
      parsed = JSON.parse(text.slice(at + MARKER.length));
    } catch {
      parsed = undefined;
    }
    if (parsed) {
      const { kind, message, ...fields } = parsed;
      const Cls = classes[kind] || AgentStateError;
      return new Cls(message, fields);
    }
  }
  // napi's own argument conversion (a number where a string goes, a missing argument).
  return new InvalidInput(
    `${what ? what + ': ' : ''}${text} — pass the arguments and option types index.d.ts declares`
  );
}

module.exports = { ...classes, fromNative };
