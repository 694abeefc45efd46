import assert from 'node:assert/strict';
import { renameSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { after, describe, it } from 'node:test';
import { CedarPolicies, type PolicyReloadEvent } from '../../src/cedar/policy-loader.js';
import { CaptureLogger, PolicyDir, request, set, waitFor } from './helpers.js';

const dir = new PolicyDir();
const open: CedarPolicies[] = [];
after(() => {
  for (const policies of open) policies.close();
  dir.cleanup();
});

const forbidTool = (tool: string, id = 'rule'): string =>
  `@id("${id}")\nforbid(principal, action == Mcpgate::Action::"call_tool", resource) when { resource.tool == "${tool}" };\n`;

async function watched(files: Record<string, string>, setId = 'live') {
  const names = Object.entries(files).map(([name, text]) => dir.write(name, text));
  const logger = new CaptureLogger();
  const events: PolicyReloadEvent[] = [];
  const policies = await CedarPolicies.load({
    sets: [set(setId, names)],
    baseDir: dir.path,
    watch: true,
    logger,
    onReload: (event) => events.push(event),
  });
  open.push(policies);
  return { policies, logger, events };
}

const deniesTool = (policies: CedarPolicies, tool: string): boolean => policies.evaluate(request({ tool })).decision === 'deny';

describe('CedarPolicies: hot reload', () => {
  it('applies an edit, keeps the old version over an invalid one, and recovers from the fix', async () => {
    const { policies, logger } = await watched({ 'hot.cedar': forbidTool('alpha') });
    const first = policies.policyHash;
    assert.equal(deniesTool(policies, 'alpha'), true);
    assert.equal(deniesTool(policies, 'beta'), false);

    writeFileSync(join(dir.path, 'hot.cedar'), forbidTool('beta'));
    await waitFor(() => deniesTool(policies, 'beta'), 3000, 'the edited policy');
    assert.equal(deniesTool(policies, 'alpha'), false);
    const second = policies.policyHash;
    assert.notEqual(second, first);
    assert.equal(policies.status()[0]?.lastError, undefined);

    writeFileSync(join(dir.path, 'hot.cedar'), 'forbid(principal, action, resource) when { resource.tool == };\n');
    await waitFor(() => policies.status()[0]?.lastError !== undefined, 3000, 'lastError');
    assert.match(policies.status()[0]?.lastError ?? '', /policy set "live": hot\.cedar:1:61: .*unexpected token/);
    // The previous version is still in force, unchanged.
    assert.equal(deniesTool(policies, 'beta'), true);
    assert.equal(deniesTool(policies, 'alpha'), false);
    assert.equal(policies.policyHash, second);
    const warning = logger.lines.find((line) => line.level === 'warn' && /not reloaded/.test(line.message));
    assert.ok(warning, JSON.stringify(logger.lines));
    assert.equal(warning.details.file, 'hot.cedar');
    assert.match(String(warning.details.err), /unexpected token/);

    writeFileSync(join(dir.path, 'hot.cedar'), forbidTool('gamma'));
    await waitFor(() => deniesTool(policies, 'gamma'), 3000, 'the fixed policy');
    assert.equal(policies.status()[0]?.lastError, undefined);
    assert.equal(deniesTool(policies, 'beta'), false);
    assert.notEqual(policies.policyHash, second);
  });

  it('follows editors that replace the file by renaming a new one over it', async () => {
    const { policies } = await watched({ 'renamed.cedar': forbidTool('one') }, 'renamer');
    for (const tool of ['two', 'three']) {
      const temp = join(dir.path, `.renamed.cedar.${tool}.tmp`);
      writeFileSync(temp, forbidTool(tool));
      renameSync(temp, join(dir.path, 'renamed.cedar'));
      await waitFor(() => deniesTool(policies, tool), 3000, `the renamed-in policy for ${tool}`);
    }
    assert.equal(deniesTool(policies, 'one'), false);
  });

  it('reloads a set atomically: one invalid file keeps every file of the set at its old version', async () => {
    const { policies, events } = await watched({ 'pair-a.cedar': forbidTool('a1', 'a'), 'pair-b.cedar': forbidTool('b1', 'b') }, 'pair');
    assert.equal(deniesTool(policies, 'a1') && deniesTool(policies, 'b1'), true);
    // One valid edit and one invalid edit in the same moment: neither may apply.
    writeFileSync(join(dir.path, 'pair-a.cedar'), forbidTool('a2', 'a'));
    writeFileSync(join(dir.path, 'pair-b.cedar'), 'forbid(principal, action, resource) when {\n');
    await waitFor(() => policies.status()[0]?.lastError !== undefined, 3000, 'lastError');
    assert.match(policies.status()[0]?.lastError ?? '', /pair-b\.cedar:1:43: unexpected end of input/);
    assert.equal(deniesTool(policies, 'a1'), true, 'file a stays at its old version');
    assert.equal(deniesTool(policies, 'a2'), false, 'the new version of file a is not applied alone');
    assert.equal(deniesTool(policies, 'b1'), true);

    writeFileSync(join(dir.path, 'pair-b.cedar'), forbidTool('b2', 'b'));
    await waitFor(() => deniesTool(policies, 'b2'), 3000, 'the repaired set');
    assert.equal(deniesTool(policies, 'a2'), true);
    assert.equal(deniesTool(policies, 'a1') || deniesTool(policies, 'b1'), false);
    assert.equal(policies.status()[0]?.lastError, undefined);
    assert.ok(events.some((event) => !event.ok) && events.at(-1)?.ok === true, JSON.stringify(events));
  });

  it('keeps the old version while a file is missing, and applies it again when it returns', async () => {
    const { policies } = await watched({ 'gone.cedar': forbidTool('kept') }, 'gone');
    const temp = join(dir.path, 'gone.cedar.bak');
    renameSync(join(dir.path, 'gone.cedar'), temp);
    await waitFor(() => policies.status()[0]?.lastError !== undefined, 3000, 'lastError');
    assert.match(policies.status()[0]?.lastError ?? '', /cannot read policy file "gone\.cedar"/);
    assert.equal(deniesTool(policies, 'kept'), true);
    renameSync(temp, join(dir.path, 'gone.cedar'));
    await waitFor(() => policies.status()[0]?.lastError === undefined, 3000, 'recovery');
    assert.equal(deniesTool(policies, 'kept'), true);
  });

  it('a reload handler that throws is logged, and reloads from file events go on (no unhandled rejection)', async () => {
    const name = dir.write('throwing.cedar', forbidTool('alpha'));
    const logger = new CaptureLogger();
    const policies = await CedarPolicies.load({
      sets: [set('throwing', [name])],
      baseDir: dir.path,
      watch: true,
      logger,
      onReload: () => {
        throw new Error('handler broke');
      },
    });
    open.push(policies);
    writeFileSync(join(dir.path, 'throwing.cedar'), forbidTool('beta'));
    await waitFor(() => deniesTool(policies, 'beta'), 3000, 'the first edit');
    writeFileSync(join(dir.path, 'throwing.cedar'), forbidTool('gamma'));
    await waitFor(() => deniesTool(policies, 'gamma'), 3000, 'the second edit, after a handler that threw');
    assert.ok(logger.lines.filter((line) => line.message === 'policy reload handler failed').length >= 2);
  });

  it('reloads on demand and ignores unchanged files; close stops watching', async () => {
    const { policies, events } = await watched({ 'manual.cedar': forbidTool('m1') }, 'manual');
    const hash = policies.policyHash;
    await policies.reload();
    assert.equal(policies.policyHash, hash);
    assert.equal(events.length, 0);
    policies.close();
    writeFileSync(join(dir.path, 'manual.cedar'), forbidTool('m2'));
    await new Promise((resolve) => setTimeout(resolve, 400));
    assert.equal(deniesTool(policies, 'm1'), true, 'closed: no reload from the watcher');
    await policies.reload();
    assert.equal(deniesTool(policies, 'm2'), true, 'an explicit reload still works');
  });
});
