// "@agentstate/node/langgraph" for ESM: AgentStateSaver and AgentStateStore built over the
// application's ESM build of @langchain/langgraph-checkpoint, so they are instances of the
// BaseCheckpointSaver and BaseStore it imports (re-exporting lib/langgraph.js would extend
// the CommonJS build's classes: another identity). The implementation is the CommonJS one.
import { createRequire } from 'node:module';
import { pathToFileURL } from 'node:url';

const require = createRequire(import.meta.url);
const { peerEsmPath } = require('./lib/peer.js');
const { saverClass } = require('./lib/saver.js');
const { storeClass } = require('./lib/memory-store.js');

const file = peerEsmPath('@langchain/langgraph-checkpoint');
const lg = file ? await import(pathToFileURL(file).href) : null;

export const AgentStateSaver = saverClass(lg);
export const AgentStateStore = storeClass(lg);
