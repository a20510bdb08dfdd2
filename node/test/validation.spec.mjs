// Run by vitest (scripts/test-node.sh): LangGraph.js' checkpointer validation suite through
// its exported validate(), with the initializer of validation.initializer.mjs (the suite's
// own CLI refuses every initializer here: its schema check fails on zod 4's v3 entry).
import { validate } from '@langchain/langgraph-checkpoint-validation';
import initializer from './validation.initializer.mjs';

validate(initializer);
