// ESM entry of "@agentstate/node/openai-agents".
import m from './lib/openai-agents.js';

export const { AgentStateSession } = m;
