// One process of langgraph.test.mjs: builds the same graph (ask -> interrupt -> answer) over an
// AgentStateSaver and either starts thread `thread` (stopping at the interrupt) or resumes it
// with `value`; prints the graph's state values as JSON.
import { StateGraph, Annotation, interrupt, Command, START, END } from '@langchain/langgraph';
import { AgentStateSaver } from '@agentstate/node';

const [url, mode, thread, value] = process.argv.slice(2);
const State = Annotation.Root({
  log: Annotation({ reducer: (a, b) => a.concat(b), default: () => [] }),
});
const graph = new StateGraph(State)
  .addNode('ask', () => ({ log: [`asked by ${process.pid}`] }))
  .addNode('wait', () => ({ log: [`answer: ${interrupt('what next?')}`] }))
  .addNode('done', () => ({ log: ['done'] }))
  .addEdge(START, 'ask')
  .addEdge('ask', 'wait')
  .addEdge('wait', 'done')
  .addEdge('done', END)
  .compile({ checkpointer: new AgentStateSaver({ url }) });
const config = { configurable: { thread_id: thread } };
if (mode === 'start') await graph.invoke({ log: ['start'] }, config);
else await graph.invoke(new Command({ resume: value }), config);
const state = await graph.getState(config);
console.log(JSON.stringify({ values: state.values, next: state.next }));
