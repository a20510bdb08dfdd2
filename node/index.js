'use strict';
// @agentstate/node: Store, SpillDaemon, the error classes, AgentStateSaver and AgentStateStore
// (LangGraph.js) and AgentStateSession (OpenAI Agents JS); the adapters need their framework
// installed beside.
const native = require('./lib/native');
const errors = require('./lib/errors');
const { Store } = require('./lib/store');
const { SpillDaemon } = require('./lib/daemon');
const { AgentStateSaver, AgentStateStore } = require('./lib/langgraph');
const { AgentStateSession } = require('./lib/openai-agents');

const { fromNative, ...errorClasses } = errors;

module.exports = {
  Store,
  SpillDaemon,
  AgentStateSaver,
  AgentStateStore,
  AgentStateSession,
  ...errorClasses,
  /** [url, prefix] a front end uses: the arguments, else AGENTSTATE_REDIS_URL / AGENTSTATE_PREFIX, else the defaults. */
  resolved: (url, prefix) => native.resolved(url ?? null, prefix ?? null),
  /** The addon's version. */
  version: native.version(),
};
