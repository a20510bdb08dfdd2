// One worker process of workers.test.mjs: appends `each` messages to `sid` one after another
// and sends the acknowledged seqs to its parent.
import { Store } from '@agentstate/node';

const [url, sid, w, each] = process.argv.slice(2);
const store = await Store.connect({ url });
const seqs = [];
for (let i = 0; i < Number(each); i++) {
  seqs.push(await store.append(sid, 'user', JSON.stringify({ w: Number(w), i })));
}
process.send(seqs, () => process.exit(0));
