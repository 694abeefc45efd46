// W4: 1 MiB tool results. MB/s at c=1 and c=8, the contender's CPU per MB, and its peak memory per call in
// flight. Node frees memory lazily (GC slack dwarfs one call at c=1), so the per-call figure is marginal:
// (peak RSS at c=8 − peak RSS at c=1) / 7, peaks from VmHWM reset before each point, taken in one process and
// reported as the median of the rounds' figures. Every round starts every contender afresh and primes it (decision
// 0028): a process kept alive across rounds carried the heap of its earlier points into its later peaks, and the
// lean forwarder read anywhere from −1.9 to 2.9 MiB per extra call. Contenders take their turns in W1's balanced
// order.
// mcpgate is also run against an upstream that answers in SSE, which it must parse event by event, and in dev
// mode. A JSON answer's 1 MiB result is kept as bytes (issue 29 §3); an SSE event's is parsed.
// Each contender's CPU per MB is also set against the lean forwarder's in the same round: issue 29 §3's figure is
// the median of those per-round ratios, since the forwarder's own CPU per MB moves ×2 between runs.

import * as starters from '../lib/contenders.mjs';
import { round } from '../lib/load.mjs';
import { median, spread, spreadOf } from '../lib/stats.mjs';
import { turnOrder } from '../lib/turn-order.mjs';
import { point } from './w1.mjs';

/** What W4 runs, in this order: each starter is given the run's context and the SSE-answering mock. */
export const W4_PLAN = {
  direct: (ctx) => starters.directHttp(ctx),
  bare: (ctx) => starters.bareForwarder(ctx),
  // The A/A check (as W1's, decision 0022): a second, identical lean forwarder. Its per-round ratio against `bare`
  // is how far apart the instrument reads two equal processes, the error bar of every `×bare` figure below.
  'bare (again)': (ctx) => starters.bareForwarder(ctx, { name: 'bare (again)' }),
  mcpgate: (ctx) => starters.startMcpgate(ctx, { urls: [ctx.mockUrl] }),
  // Dev mode keeps no audit log, so no result is hashed: the difference to `mcpgate` is the hash's cost.
  'mcpgate (dev)': (ctx) => starters.startMcpgate(ctx, { urls: [ctx.mockUrl], name: 'mcpgate (dev)', dev: true }),
  // Dev mode with the secret scan off as well: a result's bytes are gathered, checked, given the client's id and
  // written, and nothing reads them for credentials. Against `mcpgate (dev)`, what the scan costs per MB; against
  // `bare`, what the byte path itself costs (issue 29 §3).
  'mcpgate (dev, scan off)': (ctx) => starters.startMcpgate(ctx, { urls: [ctx.mockUrl], name: 'mcpgate (dev, scan off)', dev: true, serverFields: 'guards: { secretScan: off }' }),
  'mcpgate (SSE upstream)': (ctx, sseMock) => starters.startMcpgate(ctx, { urls: [sseMock.urls[0]], name: 'mcpgate (SSE upstream)' }),
  'mcp-hub': (ctx) => starters.mcpHub(ctx),
};

/** How many contenders W4 starts: the run's time estimate (lib/main.mjs) counts them. */
export const W4_CONTENDER_COUNT = Object.keys(W4_PLAN).length;

export async function runW4(ctx, profile) {
  const settings = profile.w4;
  const sseMock = await ctx.mock({ sse: true });
  const names = Object.keys(W4_PLAN);
  const runs = new Map(names.map((name) => [name, new Map()]));
  const failures = new Map();
  const [low, high] = [Math.min(...settings.levels), Math.max(...settings.levels)];
  for (let index = 0; index < profile.rounds; index += 1) {
    const started = await startAll(ctx, profile, settings, sseMock, names.filter((name) => !failures.has(name)), failures);
    try {
      for (const concurrency of [...settings.levels].sort((a, b) => a - b)) {
        // The balanced order of W1 (lib/turn-order.mjs), not a rotation: in a rotation a contender always follows the
        // same one, and the megabytes of garbage that one leaves to be collected on the shared core land on it.
        for (const contender of turnOrder(started.length, index).map((at) => started[at])) {
          const result = await point(contender, concurrency, profile, { paramsJson: w4Params(contender, settings.sizeBytes), durationMs: settings.seconds * 1000 });
          result.round = index;
          const byLevel = runs.get(contender.name);
          byLevel.set(concurrency, [...(byLevel.get(concurrency) ?? []), result]);
          ctx.log(`W4 r${index} c=${concurrency} ${contender.name}: ${result.mbPerSec} MB/s, ${result.cpuUsPerMB} µs/MB, p99 ${result.latencyMs.p99} ms, err ${result.errors}`);
        }
      }
    } finally {
      await Promise.all(started.map((contender) => contender.stop().catch(() => undefined)));
    }
  }
  const bare = runs.get('bare');
  const contenders = names
    .filter((name) => runs.get(name).size > 0)
    .map((name) => {
      const byRound = marginalByRound(runs.get(name), low, high);
      return {
        name,
        marginalMiBPerCall: median(byRound.filter(Number.isFinite)),
        marginalMiBPerCallByRound: byRound,
        points: Object.fromEntries(
          [...runs.get(name)].map(([level, rounds]) => [
            level,
            {
              rounds,
              summary: {
                mbPerSec: spreadOf(rounds, 'mbPerSec'),
                cpuUsPerMB: spreadOf(rounds, 'cpuUsPerMB'),
                p99: spreadOf(rounds, 'latencyMs.p99'),
                rssPeakBytes: spreadOf(rounds, 'rssPeakBytes'),
                cpuPerMBxBare: spread(rounds.map((result) => result.cpuUsPerMB / (bare?.get(level)?.find((other) => other.round === result.round)?.cpuUsPerMB ?? Number.NaN))),
                errors: rounds.reduce((sum, result) => sum + result.errors, 0),
              },
            },
          ]),
        ),
      };
    });
  return { sizeBytes: settings.sizeBytes, contenders, failures: [...failures].map(([name, error]) => ({ name, error })) };
}

/** The `tools/call` params of one W4 call: a result of `sizeBytes`. */
export function w4Params(contender, sizeBytes) {
  return `{"name":"${contender.toolName}","arguments":{"size":${sizeBytes}}}`;
}

/** Extra peak RSS per extra call in flight, in MiB: (peak at `high` − peak at `low`) / (high − low), one process's two points. */
export function marginalMiB(lowResult, highResult, low, high) {
  return round((highResult.rssPeakBytes - lowResult.rssPeakBytes) / (high - low) / 2 ** 20, 2);
}

/** Each round's {@link marginalMiB}, from the two points that round's process served. */
function marginalByRound(byLevel, low, high) {
  if (high === low) return [];
  return (byLevel.get(low) ?? []).map((result) => {
    const other = byLevel.get(high)?.find((candidate) => candidate.round === result.round);
    return other === undefined ? Number.NaN : marginalMiB(result, other, low, high);
  });
}

/**
 * Prepares a started W4 contender and primes it as W4 does (decision 0032): `primeCalls` small calls at c=8, then
 * `primeSeconds` of `sizeBytes` results at c=2. The small calls bring the code every call runs to V8's optimising
 * tier, which 1 MiB results, at a hundred or so a second, take minutes to do; the large ones then bring the heap and
 * the byte path to the state they keep under that load.
 */
export async function primeW4(contender, profile, sizeBytes, sessions) {
  await contender.prepare(sessions);
  const calls = profile.primeCalls ?? 0;
  if (calls > 0) await point(contender, 8, { ...profile, warmupSeconds: 0, maxCallsPerPoint: calls }, { durationMs: PRIME_CALLS_MAX_MS });
  await point(contender, 2, { ...profile, warmupSeconds: 0 }, { paramsJson: w4Params(contender, sizeBytes), durationMs: profile.primeSeconds * 1000 });
}

/** The small-call prime stops at its count or after this long, whichever comes first, on however slow a host. */
const PRIME_CALLS_MAX_MS = 60_000;

/** W4's small-call prime (decision 0032): about as many calls as W1's 10 s prime gives production mcpgate. */
export const W4_PRIME_CALLS = 30_000;

/** Starts, prepares and primes the named contenders for one round; one that fails is left out of every later round. */
async function startAll(ctx, profile, settings, sseMock, names, failures) {
  const started = [];
  for (const name of names) {
    let contender;
    try {
      contender = await W4_PLAN[name](ctx, sseMock);
      await primeW4(contender, { ...profile, primeCalls: settings.primeCalls }, settings.sizeBytes, Math.max(...settings.levels));
      started.push(contender);
    } catch (error) {
      failures.set(name, String(error.message).slice(0, 500));
      await contender?.stop().catch(() => undefined);
    }
  }
  return started;
}
