'use strict';
// "@agentstate/node/langgraph" for CommonJS: AgentStateSaver (./saver) and AgentStateStore
// (./memory-store) over the application's CommonJS build of @langchain/langgraph-checkpoint;
// ../langgraph.mjs builds the same classes over its ESM build.
const { peer } = require('./peer');
const { saverClass } = require('./saver');
const { storeClass } = require('./memory-store');

const lg = peer('@langchain/langgraph-checkpoint');

module.exports = { AgentStateSaver: saverClass(lg), AgentStateStore: storeClass(lg) };
