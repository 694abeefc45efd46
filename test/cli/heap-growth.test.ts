import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { after, describe, it } from 'node:test';
import { cleanup, startGateway } from '../integration/harness.js';

/**
 * Decision 0030: `serve` and `stdio` fix V8's heap growing factor, so that a gateway passing large results does not
 * collect in full every dozen or so calls. Each case runs a real node process with V8's collector trace and reads the
 * factor V8 applied at a full collection made after the setting.
 */

const MODULE = fileURLToPath(new URL('../../dist/src/cli/heap-growth.js', import.meta.url));

function factorAfter(percent: number, nodeFlags: readonly string[] = []): { set: boolean; applied: string; own: string } {
  const code = `const { applyHeapGrowth } = await import(${JSON.stringify(MODULE)});
const set = applyHeapGrowth(${percent});
const kept = [];
for (let i = 0; i < 100000; i += 1) kept.push({ i });
console.log('mark');
globalThis.gc();
console.log(JSON.stringify({ set, kept: kept.length }));`;
  const run = spawnSync(process.execPath, ['--expose-gc', '--trace-gc', '--trace-gc-verbose', ...nodeFlags, '--input-type=module', '-e', code], { encoding: 'utf8' });
  assert.equal(run.status, 0, run.stderr);
  const after = run.stdout.slice(run.stdout.indexOf('mark\n'));
  const own = /\[HeapController\] factor ([0-9.]+) based on/.exec(after)?.[1];
  const applied = /\[HeapController\] Limit: old size: [0-9]+ KB, new limit: [0-9]+ KB \(([0-9.]+)\)/.exec(after)?.[1];
  const result = /^\{"set":(true|false)/m.exec(after)?.[1];
  assert.ok(own !== undefined && applied !== undefined && result !== undefined, after);
  return { set: result === 'true', applied, own };
}

describe('applyHeapGrowth', () => {
  it('makes V8 grow the heap by the set factor at the next full collection', () => {
    const run = factorAfter(150);
    assert.equal(run.set, true);
    assert.equal(run.applied, '2.5');
  });

  it('leaves V8 its own factor at 0', () => {
    const run = factorAfter(0);
    assert.equal(run.set, false);
    assert.equal(run.applied, run.own);
  });

  it('leaves a factor given to node on its command line', () => {
    const run = factorAfter(150, ['--heap-growing-percent=40']);
    assert.equal(run.set, false);
    assert.equal(run.applied, '1.4');
  });
});

describe('mcpgate serve', () => {
  after(cleanup);

  it('sets the configured factor and says so when it listens, or says node has it', async () => {
    const set = await startGateway({ gateway: { limits: { heapGrowthPercent: 150 } }, servers: {} }, { name: 'heap-growth-set' });
    const left = await startGateway({ gateway: { limits: { heapGrowthPercent: 0 } }, servers: {} }, { name: 'heap-growth-left' });
    const listening = (gateway: typeof set) => gateway.logLines().find((line) => line.msg === 'listening');
    assert.equal(listening(set)?.heapGrowthPercent, 150);
    assert.equal(listening(left)?.heapGrowthPercent, 'node');
    await Promise.all([set.stop(), left.stop()]);
  });
});
