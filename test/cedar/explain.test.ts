import assert from 'node:assert/strict';
import { join } from 'node:path';
import { after, describe, it } from 'node:test';
import { EXIT_DENIED, runExplain } from '../../src/cli/explain.js';
import { runKeysCreate } from '../../src/cli/keys.js';
import type { KeyAccessExplanation, PrincipalAccessExplanation } from '../../src/control/explain.js';
import { PolicyDir } from './helpers.js';
import { CaptureIo } from '../fixtures/capture-io.js';

const dir = new PolicyDir();
after(() => dir.cleanup());
let counter = 0;

const ZONE = `@id("no-external-after-confidential")
forbid(principal, action == Mcpgate::Action::"call_tool", resource)
when { resource.zone == "external" && context.sessionSensitivityRank >= 2 };
`;
const ARGS = `@id("no-drop")
forbid(principal, action, resource) when { context.args has q && context.args.q like "*DROP*" };
`;

/**
 * A config with a temp SQLite store, two servers, and the given policies block. Its keys have no permission
 * document, so the config allows by default: these tests are about the Cedar section, not the grant.
 */
function setup(policies: string): string {
  const n = counter++;
  const config = dir.write(
    `config-${n}.yaml`,
    `gateway:
  store: ${JSON.stringify(join(dir.path, `store-${n}.db`))}
  auth: { defaultAccess: allow }
${policies}servers:
  web:
    transport: http
    url: http://127.0.0.1:9/mcp
    attributes: { zone: external }
  notes:
    transport: http
    url: http://127.0.0.1:9/mcp
`,
  );
  return join(dir.path, config);
}

async function keyFor(config: string, io: CaptureIo): Promise<string> {
  assert.equal(await runKeysCreate({ config, org: 'acme', user: 'ada', json: true }, io.reset()), 0, io.err.join('\n'));
  return io.json<{ record: { id: string } }>().record.id;
}

describe('mcpgate explain with Cedar policies', () => {
  it('shows the Cedar decision and the determining policy ids', async () => {
    const zone = join(dir.path, dir.write('zone.cedar', ZONE));
    const args = join(dir.path, dir.write('args.cedar', ARGS));
    const config = setup(`  policies:
    - id: guard
      files: [${JSON.stringify(zone)}]
    - id: trial
      mode: advisory
      files: [${JSON.stringify(args)}]
`);
    const io = new CaptureIo();
    const key = await keyFor(config, io);

    assert.equal(await runExplain({ config, key, tool: 'web__search' }, io.reset()), 0, io.err.join('\n') + io.text);
    assert.match(io.text, /^cedar {4}allows \(ingress, session sensitivity public, policy hash [0-9a-f]{16}\)$/m);
    assert.match(io.text, /^guard\s+enforce\s+1\s+\S+\s+ok$/m);
    assert.match(io.text, /^trial\s+advisory\s+1\s+\S+\s+ok$/m);

    assert.equal(await runExplain({ config, key, tool: 'web__search', sessionSensitivity: 'confidential' }, io.reset()), EXIT_DENIED, io.text);
    assert.match(io.text, /^cedar {4}DENIES \(ingress, session sensitivity confidential/m);
    assert.match(io.text, /^ {2}denied by {5}guard:no-external-after-confidential$/m);
    assert.match(io.text, /^DENIED: denied by Cedar policy guard:no-external-after-confidential$/m);

    // A server without a zone is not external.
    assert.equal(await runExplain({ config, key, tool: 'notes__read', sessionSensitivity: 'restricted' }, io.reset()), 0, io.text);

    // Advisory: allowed, but shown as would-have-denied.
    assert.equal(await runExplain({ config, key, tool: 'notes__query', args: '{"q":"1; DROP TABLE x"}', json: true }, io.reset()), 0, io.text);
    const advisory = io.json<KeyAccessExplanation>();
    assert.equal(advisory.allowed, true);
    assert.deepEqual(advisory.cedar?.advisoryDenies, ['trial:no-drop']);
    assert.deepEqual(advisory.cedar?.determining, []);
    assert.equal(advisory.cedar?.sets.length, 2);
    assert.equal(await runExplain({ config, key, tool: 'notes__query', args: '{"q":"1; DROP TABLE x"}' }, io.reset()), 0);
    assert.match(io.text, /^ {2}advisory deny trial:no-drop \(recorded, not enforced\)$/m);
  });

  it('judges a principal without a key by the same Cedar policies', async () => {
    const zone = join(dir.path, dir.write('zone-principal.cedar', ZONE));
    const config = setup(`  policies:
    - id: guard
      files: [${JSON.stringify(zone)}]
`);
    const io = new CaptureIo();
    assert.equal(await runKeysCreate({ config, org: 'acme', user: 'ada', json: true }, io.reset()), 0, io.err.join('\n'));
    const principal = io.json<{ record: { principalId: string } }>().record.principalId;

    assert.equal(await runExplain({ config, principal, tool: 'web__search', json: true }, io.reset()), 0, io.err.join('\n') + io.text);
    const allowed = io.json<PrincipalAccessExplanation>();
    assert.equal(allowed.principal.name, 'ada');
    assert.equal(allowed.cedar?.decision, 'allow');
    assert.equal(await runExplain({ config, principal, tool: 'web__search', sessionSensitivity: 'confidential', json: true }, io.reset()), EXIT_DENIED, io.text);
    const denied = io.json<PrincipalAccessExplanation>();
    assert.deepEqual(denied.cedar?.determining, ['guard:no-external-after-confidential']);
    assert.equal(denied.summary, 'denied by Cedar policy guard:no-external-after-confidential');
  });

  it('has no Cedar section without gateway.policies', async () => {
    const config = setup('');
    const io = new CaptureIo();
    const key = await keyFor(config, io);
    assert.equal(await runExplain({ config, key, tool: 'web__search', json: true }, io.reset()), 0, io.err.join('\n'));
    assert.equal(io.json<KeyAccessExplanation>().cedar, undefined);
  });

  it('reports a policy file with a syntax error, a bad label and bad --args with exit 1', async () => {
    const broken = join(dir.path, dir.write('broken.cedar', 'forbid(principal, action, resource) when { context.x == };\n'));
    const config = setup(`  policies:
    - id: broken
      files: [${JSON.stringify(broken)}]
`);
    const io = new CaptureIo();
    const key = await keyFor(config, io);
    assert.equal(await runExplain({ config, key, tool: 'web__search' }, io.reset()), 1);
    assert.match(io.err.join('\n'), /^mcpgate explain: policy set "broken": .*broken\.cedar:1:57: unexpected token/);

    const good = setup(`  policies:
    - id: guard
      files: [${JSON.stringify(join(dir.path, 'zone.cedar'))}]
`);
    const key2 = await keyFor(good, io);
    assert.equal(await runExplain({ config: good, key: key2, tool: 'web__search', sessionSensitivity: 'secret' }, io.reset()), 1);
    assert.match(io.err.join('\n'), /"secret" is not a sensitivity label \(public, internal, confidential, restricted\)/);
    assert.equal(await runExplain({ config: good, key: key2, tool: 'web__search', args: '{nope' }, io.reset()), 1);
    assert.match(io.err.join('\n'), /--args is not JSON/);
    assert.equal(await runExplain({ config: good, key: key2, tool: 'web__search', args: '[1]' }, io.reset()), 1);
    assert.match(io.err.join('\n'), /--args must be a JSON object/);
  });
});
