// W9's "store writes beside the audit writer": the store's own connection writing (a key touch, a receipt) while
// the audit writer thread ingests records at a gateway's rate. SQLite's busy_timeout would wait inside the call,
// on the event loop; the store waits between attempts instead. Reports, per write, how long the call held the
// event loop (its synchronous part) and how long until it was done. Prints one JSON line.
// Usage: node store-beside-writer.mjs <repo root> <work dir> <records per second> <seconds>

import { openAuditPath } from './audit-setup.mjs';

const [root, workDir, rateArg = '16000', secondsArg = '5'] = process.argv.slice(2);
const rate = Number(rateArg);
const seconds = Number(secondsArg);
const path = await openAuditPath(root, workDir, 'store-beside-writer');
const { log, store } = path;

let appended = 0;
const appends = new Set();
// Records arrive a millisecond's worth at a time, as calls do.
const feeder = setInterval(() => {
  for (let index = 0; index < rate / 1000; index += 1) {
    const append = log.append(path.callRecord(appended++, 32));
    appends.add(append);
    void append.finally(() => appends.delete(append));
  }
}, 1);

const held = [];
const done = [];
const started = Date.now();
for (let n = 0; Date.now() - started < seconds * 1000; n += 1) {
  await new Promise((resolve) => setTimeout(resolve, 5));
  const before = process.hrtime.bigint();
  const write = store.createOrg(`org-${n}`);
  held.push(Number(process.hrtime.bigint() - before) / 1e6);
  await write;
  done.push(Number(process.hrtime.bigint() - before) / 1e6);
}
clearInterval(feeder);
await Promise.all(appends);
await path.close();

const figures = (list) => {
  const sorted = [...list].sort((a, b) => a - b);
  const at = (q) => Math.round(sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))] * 100) / 100;
  return { p50: at(0.5), p99: at(0.99), max: at(1) };
};
console.log(JSON.stringify({ rate, writes: held.length, records: appended, eventLoopMs: figures(held), doneMs: figures(done) }));
