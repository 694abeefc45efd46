// W9: the cost of governance (issue 7 "Benchmark"). One run starts two mcpgate processes on the same upstream:
//   off — audit disabled, no policies, no response scanning;
//   on  — audit on in `sync` durability (each answer waits for its record's group commit to the SQLite store),
//         a Cedar policy set evaluated at ingress and egress, and secret scanning of results (`redact`);
//   on (queue) — the same with `queue` durability (records durable shortly after the answer, never dropped).
// Both take tools/call at the same concurrency, alternating per round so drifts of the machine land on both.
// Goal: on reaches at least 0.9× the throughput of off.

import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { startMcpgate } from '../lib/contenders.mjs';
import { point } from './w1.mjs';

export const W9_DEFAULTS = { concurrency: [8, 32], rounds: 3 };

const POLICY = `// Deny-list style: each rule names what is refused; everything else passes.
forbid(principal, action == Mcpgate::Action::"call_tool", resource)
when { resource has zone && resource.zone == "external" && context.sessionSensitivityRank >= 2 };
forbid(principal, action, resource)
when { context.phase == "egress" && context has result && context.result.bytes > 10000000 };
`;

export async function runW9(ctx, profile) {
  const settings = { ...W9_DEFAULTS, ...profile.w9 };
  const policyFile = join(ctx.workDir, 'w9-policy.cedar');
  writeFileSync(policyFile, POLICY);
  const off = await startMcpgate(ctx, {
    urls: [ctx.mockUrl],
    name: 'mcpgate (governance off)',
    extraGateway: '  audit: { enabled: false }\n  receipts: { enabled: false }',
  });
  const governed = (durability) => [
    `  audit: { enabled: true, durability: ${durability} }`,
    `  policies: [{ id: w9, files: [${JSON.stringify(policyFile)}], mode: enforce }]`,
  ].join('\n');
  const on = await startMcpgate(ctx, { urls: [ctx.mockUrl], name: 'mcpgate (governance on)', extraGateway: governed('sync') });
  const queued = await startMcpgate(ctx, { urls: [ctx.mockUrl], name: 'mcpgate (governance on, queue)', extraGateway: governed('queue') });
  // The parts alone, so a regression can be pinned on one of them.
  const auditOnly = await startMcpgate(ctx, { urls: [ctx.mockUrl], name: 'mcpgate (audit only)', extraGateway: '  audit: { enabled: true, durability: sync }' });
  const policyOnly = await startMcpgate(ctx, {
    urls: [ctx.mockUrl],
    name: 'mcpgate (policies only)',
    extraGateway: `  audit: { enabled: false }\n  receipts: { enabled: false }\n  policies: [{ id: w9, files: [${JSON.stringify(policyFile)}], mode: enforce }]`,
  });
  const rows = [];
  try {
    for (const contender of [off, on, queued, auditOnly, policyOnly]) {
      await contender.prepare(profile.sessions);
      await point(contender, 8, { ...profile, warmupSeconds: 0 }, { durationMs: profile.primeSeconds * 1000 });
    }
    for (const concurrency of settings.concurrency) {
      const samples = { off: [], on: [], queued: [], auditOnly: [], policyOnly: [] };
      const all = [['off', off], ['on', on], ['queued', queued], ['auditOnly', auditOnly], ['policyOnly', policyOnly]];
      for (let round = 0; round < settings.rounds; round += 1) {
        const order = [...all.slice(round % all.length), ...all.slice(0, round % all.length)];
        for (const [key, contender] of order) samples[key].push(await point(contender, concurrency, profile));
      }
      const median = (values) => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)];
      const summary = (list) => ({
        throughput: median(list.map((result) => result.throughput)),
        p50: median(list.map((result) => result.latencyMs.p50)),
        p99: median(list.map((result) => result.latencyMs.p99)),
        cpuUsPerCall: median(list.map((result) => result.cpuUsPerCall ?? NaN)),
        errors: list.reduce((sum, result) => sum + result.errors, 0),
      });
      const offSummary = summary(samples.off);
      const onSummary = summary(samples.on);
      const queuedSummary = summary(samples.queued);
      const auditSummary = summary(samples.auditOnly);
      const policySummary = summary(samples.policyOnly);
      const ratioOf = (value) => Math.round((value.throughput / offSummary.throughput) * 1000) / 1000;
      rows.push({
        concurrency,
        off: offSummary,
        on: onSummary,
        queued: queuedSummary,
        auditOnly: auditSummary,
        policyOnly: policySummary,
        ratio: ratioOf(onSummary),
        queuedRatio: ratioOf(queuedSummary),
        auditOnlyRatio: ratioOf(auditSummary),
        policyOnlyRatio: ratioOf(policySummary),
      });
      ctx.log(`W9: c=${concurrency} off ${offSummary.throughput}/s, on ${onSummary.throughput}/s (×${rows.at(-1).ratio}), queue ${queuedSummary.throughput}/s (×${rows.at(-1).queuedRatio})`);
    }
  } finally {
    await off.stop();
    await on.stop();
    await queued.stop();
    await auditOnly.stop();
    await policyOnly.stop();
  }
  return { goal: 'on ≥ 0.9 × off throughput', met: rows.every((row) => row.ratio >= 0.9), rows };
}

export function renderW9(result) {
  if (result.error) return `### W9: governance on vs off\n\nFailed: ${result.error}`;
  const lines = [
    '### W9: governance on vs off (audit sync + Cedar policy + result scanning)',
    '',
    `Goal: ${result.goal} — ${result.met ? 'met' : 'NOT met'}.`,
    '',
    '| c | mode | calls/s | ×off | p50 / p99 ms | CPU µs/call | errors |',
    '|---|---|---|---|---|---|---|',
  ];
  for (const row of result.rows) {
    const line = (mode, value, ratio) =>
      `| ${row.concurrency} | ${mode} | ${value.throughput} | ${ratio === undefined ? '–' : `×${ratio.toFixed(2)}`} | ${value.p50} / ${value.p99} | ${value.cpuUsPerCall} | ${value.errors} |`;
    lines.push(line('off', row.off, undefined), line('on (sync)', row.on, row.ratio), line('on (queue)', row.queued, row.queuedRatio));
    lines.push(line('audit only (sync)', row.auditOnly, row.auditOnlyRatio), line('policies only', row.policyOnly, row.policyOnlyRatio));
  }
  return lines.join('\n');
}
