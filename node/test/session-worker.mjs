// One process of openai-agents.test.mjs: 20 addItems of 3 items each to one session.
import { AgentStateSession } from '@agentstate/node';

const [url, id, w] = process.argv.slice(2);
const s = new AgentStateSession(id, { url });
for (let i = 0; i < 20; i++) {
  const base = `w${w}-${i}`;
  await s.addItems([base, base + '/2', base + '/3'].map((content) => ({ role: 'user', content })));
}
