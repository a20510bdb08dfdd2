// Runs LangGraph.js' own store tests (lgjs-suite/src/tests/, where scripts/test-node.sh puts
// them) against AgentStateStore: their "../store/memory.js" import is
// lgjs-store-swap.mjs, their "../store/base.js" and "../store/batch.js" the installed
// @langchain/langgraph-checkpoint. The tests lgjs_store_deselected.txt names (each with its
// reason) do not run.
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const here = path.dirname(fileURLToPath(import.meta.url));
const deselected = fs
  .readFileSync(path.join(here, 'lgjs_store_deselected.txt'), 'utf8')
  .split('\n')
  .map((l) => l.split(' # ')[0].trim())
  .filter((l) => l && !l.startsWith('#'));
const escape = (s) => s.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
const checkpoint = path.join(here, 'node_modules/@langchain/langgraph-checkpoint/dist/index.js');

export default {
  test: {
    include: ['lgjs-suite/src/tests/{store,vector,namespace}.test.ts'],
    testNamePattern: new RegExp(`^(?!(${deselected.map(escape).join('|')})( |$))`),
    testTimeout: 30000,
    hookTimeout: 30000,
    fileParallelism: false,
  },
  resolve: {
    alias: [
      { find: '../store/memory.js', replacement: path.join(here, 'lgjs-store-swap.mjs') },
      { find: '../store/base.js', replacement: checkpoint },
      { find: '../store/batch.js', replacement: checkpoint },
    ],
  },
};
