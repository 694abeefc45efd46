// W9's "audit path alone": the CPU one audit record costs through the gateway's own path, with no HTTP around
// it: AuditLog (sync, group commit per event-loop turn) → SQLite journal → writer thread → table. `appenders`
// loops each wait a turn and append, as concurrent calls do. Run pinned to one core (whole process), so the
// figure is the total cost; the split comes from /proc per thread (main thread vs the others: the writer thread
// and V8's helpers). Prints one JSON line. Usage: node audit-path.mjs <repo root> <work dir> <records> <appenders>

import { mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { threadCpuMicros } from './proc.mjs';

const [root, workDir, recordsArg = '100000', appendersArg = '8'] = process.argv.slice(2);
const records = Number(recordsArg);
const appenders = Number(appendersArg);
const load = (path) => import(pathToFileURL(join(root, 'dist/src', path)).href);
const { SqliteStore } = await load('store/sqlite/sqlite-store.js');
const { AuditLog } = await load('audit/audit-log.js');
const { argumentsHash, sha256Hex } = await load('audit/record.js');

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

const dir = mkdtempSync(join(workDir, 'audit-path-'));
const store = new SqliteStore({ path: join(dir, 'audit.db') });
await store.migrate();
const silent = { info() {}, warn() {}, error() {}, debug() {}, child: () => silent };
const log = new AuditLog({ store, writer: store.openAuditWriter(), logger: silent, durability: 'sync', flushMs: 0 });
await log.ready();

// What the gateway records for a small tools/call (W1's echo): hashes of arguments and result, principal, session.
const resultHash = sha256Hex('{"content":[{"type":"text","text":"ok"}]}');
const input = (n) => ({
  kind: 'call',
  decision: 'allow',
  principal: { keyId: 'key_0123456789abcdef', userId: 'bench', orgId: 'bench' },
  sessionId: `00000000-0000-4000-8000-${String(n % appenders).padStart(12, '0')}`,
  server: 'mock',
  evidence: 'unpinned',
  tool: 'echo',
  argsHash: argumentsHash({ text: `call ${n}` }),
  latencyMs: 0.4,
  resultHash,
  resultBytes: 64,
});
const turn = () => new Promise((resolve) => setImmediate(resolve));
async function run(count) {
  let next = 0;
  await Promise.all(
    Array.from({ length: appenders }, async () => {
      while (next < count) {
        const n = next++;
        await turn();
        await log.append(input(n));
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
await log.close();
await store.close();
rmSync(dir, { recursive: true, force: true });
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
