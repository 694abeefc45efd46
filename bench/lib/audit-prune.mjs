// Audit retention's cost: `records` call records written through the gateway's own audit path (audit-setup.mjs)
// with times ten days back, then pruned with `pruneAudit` at its defaults (250 records per transaction, 10 ms
// apart), as `audit.retention` runs it in a gateway. Reports the CPU per pruned record and how long the event
// loop was held (monitorEventLoopDelay). Run it pinned to one core after `npm run build`:
//   taskset -c 0 node bench/lib/audit-prune.mjs . /tmp 100000
// Prints one JSON line.

import { generateKeyPairSync } from 'node:crypto';
import { join } from 'node:path';
import { monitorEventLoopDelay, performance } from 'node:perf_hooks';
import { pathToFileURL } from 'node:url';
import { openAuditPath } from './audit-setup.mjs';

const [root = '.', workDir = '/tmp', recordsArg = '100000'] = process.argv.slice(2);
const records = Number(recordsArg);
const load = (path) => import(pathToFileURL(join(root, 'dist/src', path)).href);
const { pruneAudit } = await load('audit/retention.js');
const { ReceiptSigner } = await load('receipts/receipt.js');

const path = await openAuditPath(root, workDir, 'audit-prune');
const start = Date.now() - 10 * 86_400_000;
for (let n = 0; n < records; n += 1000) {
  const batch = [];
  for (let i = n; i < Math.min(n + 1000, records); i += 1) batch.push(path.log.append({ ...path.callRecord(i, 100), time: new Date(start + i) }));
  await Promise.all(batch);
}
await path.log.flush();

const signer = new ReceiptSigner(generateKeyPairSync('ed25519').privateKey);
const delay = monitorEventLoopDelay({ resolution: 1 });
delay.enable();
const cpuBefore = process.cpuUsage();
const wallBefore = performance.now();
const result = await pruneAudit(path.store, { before: new Date(start + records), signer });
const wallMs = performance.now() - wallBefore;
const cpu = process.cpuUsage(cpuBefore);
delay.disable();
await path.close();
const cpuMicros = cpu.user + cpu.system;
console.log(
  JSON.stringify({
    records,
    pruned: result.pruned,
    wallMs: Math.round(wallMs),
    recordsPerSecond: Math.round(result.pruned / (wallMs / 1000)),
    cpuUsPerRecord: Math.round((cpuMicros / result.pruned) * 10) / 10,
    loopHeldP99Ms: Math.round((delay.percentile(99) / 1e6) * 10) / 10,
    loopHeldMaxMs: Math.round((delay.max / 1e6) * 10) / 10,
  }),
);
