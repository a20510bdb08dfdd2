// The LangGraph.js adapters are instances of the application's own LangGraph classes, from an
// ESM application and from a CommonJS one: each is a separate node process in this project
// (its node_modules holding @agentstate/node and @langchain/langgraph-checkpoint), importing
// or requiring both packages as an application does, and printing what instanceof says.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';

const EXPECTED = {
  saver: true,
  store: true,
  rootSaver: true,
  rootStore: true,
  memorySaverToo: true,
};

/** Runs `code` as a node program of `type` ("module" or "commonjs"); prints its JSON. */
const run = (type, code) => JSON.parse(execFileSync('node', [`--input-type=${type}`, '-e', code], { encoding: 'utf8' }));

test('from an ESM application: AgentStateSaver and AgentStateStore are instanceof its BaseCheckpointSaver and BaseStore', () => {
  const out = run(
    'module',
    `
    import { BaseCheckpointSaver, BaseStore, MemorySaver } from '@langchain/langgraph-checkpoint';
    import { AgentStateSaver, AgentStateStore } from '@agentstate/node/langgraph';
    import * as root from '@agentstate/node';
    console.log(JSON.stringify({
      saver: new AgentStateSaver({ url: 'redis://127.0.0.1:1' }) instanceof BaseCheckpointSaver,
      store: new AgentStateStore({ url: 'redis://127.0.0.1:1' }) instanceof BaseStore,
      rootSaver: new root.AgentStateSaver() instanceof BaseCheckpointSaver,
      rootStore: new root.default.AgentStateStore() instanceof BaseStore,
      memorySaverToo: new MemorySaver() instanceof BaseCheckpointSaver,
    }));`
  );
  assert.deepEqual(out, EXPECTED);
});

test('from a CommonJS application: AgentStateSaver and AgentStateStore are instanceof its BaseCheckpointSaver and BaseStore', () => {
  const out = run(
    'commonjs',
    `
    const { BaseCheckpointSaver, BaseStore, MemorySaver } = require('@langchain/langgraph-checkpoint');
    const { AgentStateSaver, AgentStateStore } = require('@agentstate/node/langgraph');
    const root = require('@agentstate/node');
    console.log(JSON.stringify({
      saver: new AgentStateSaver({ url: 'redis://127.0.0.1:1' }) instanceof BaseCheckpointSaver,
      store: new AgentStateStore({ url: 'redis://127.0.0.1:1' }) instanceof BaseStore,
      rootSaver: new root.AgentStateSaver() instanceof BaseCheckpointSaver,
      rootStore: new root.AgentStateStore() instanceof BaseStore,
      memorySaverToo: new MemorySaver() instanceof BaseCheckpointSaver,
    }));`
  );
  assert.deepEqual(out, EXPECTED);
});
