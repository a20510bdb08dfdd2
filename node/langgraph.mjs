// ESM entry of "@agentstate/node/langgraph".
import m from './lib/langgraph.js';

export const { AgentStateSaver } = m;
