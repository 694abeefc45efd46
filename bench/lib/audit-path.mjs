// W9's "audit path alone": the CPU one audit record costs through the gateway's own path, with no HTTP around
// it: AuditLog (sync, group commit per event-loop turn) → SQLite journal → writer thread → table. `appenders`
// loops each wait a turn and append, as concurrent calls do. Run pinned to one core (whole process), so the
// figure is the total cost; the split comes from /proc per thread (main thread vs the others: the writer thread
// and V8's helpers). Prints one JSON line. Usage: node audit-path.mjs <repo root> <work dir> <records> <appenders>

import { readdirSync } from 'node:fs';
import { openAuditPath } from './audit-setup.mjs';
import { threadCpuMicros } from './proc.mjs';

const [root, workDir, recordsArg = '100000', appendersArg = '8'] = process.argv.slice(2);
const records = Number(recordsArg);
const appenders = Number(appendersArg);

/** CPU (user + system, µs) per thread of this process: the main thread's tid is the pid. */
function threadMicros() {
  let main = 0;
  let others = 0;
  for (const tid of readdirSync('/proc/self/task')) {
    const micros = threadCpuMicros(tid) ?? 0;
    if (Number(tid) === process.pid) main += micros;
    else others += micros;
  }
  return { main, others };
}

const path = await openAuditPath(root, workDir, 'audit-path');
const { log } = path;
const turn = () => new Promise((resolve) => setImmediate(resolve));
async function run(count) {
  let next = 0;
  await Promise.all(
    Array.from({ length: appenders }, async () => {
      while (next < count) {
        const n = next++;
        await turn();
        await log.append(path.callRecord(n, appenders));
      }
    }),
  );
}

await run(Math.min(20_000, records));
const before = threadMicros();
const started = process.hrtime.bigint();
await run(records);
const wallUs = Number(process.hrtime.bigint() - started) / 1000;
// The rows still in the journal are ingested too: their cost belongs to these records.
await log.flush();
const after = threadMicros();
await path.close();
const perRecord = (micros) => Math.round((micros / records) * 10) / 10;
console.log(
  JSON.stringify({
    records,
    appenders,
    cpuUsPerRecord: perRecord(after.main - before.main + after.others - before.others),
    mainUsPerRecord: perRecord(after.main - before.main),
    otherThreadsUsPerRecord: perRecord(after.others - before.others),
    recordsPerSecond: Math.round(records / (wallUs / 1e6)),
  }),
);
