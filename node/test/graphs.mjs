// The graph the LangGraph tests share: n += 1 (node `inc`), then n doubled (node `double`),
// over the given checkpointer (crosslang.py builds the same one in Python).
import { StateGraph, Annotation, START, END } from '@langchain/langgraph';

/** The counter graph compiled with `saver`. */
export function counter(saver) {
  const State = Annotation.Root({ n: Annotation({ reducer: (a, b) => a + b, default: () => 0 }) });
  return new StateGraph(State)
    .addNode('inc', () => ({ n: 1 }))
    .addNode('double', (s) => ({ n: s.n }))
    .addEdge(START, 'inc')
    .addEdge('inc', 'double')
    .addEdge('double', END)
    .compile({ checkpointer: saver });
}
