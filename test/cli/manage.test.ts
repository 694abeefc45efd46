import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { after, describe, it } from 'node:test';
import { runOrgsCreate, runOrgsList, runPrincipalsCreate, runPrincipalsList, runTeamsCreate, runTeamsList } from '../../src/cli/directory.js';
import { EXIT_DENIED, runExplain } from '../../src/cli/explain.js';
import { runKeysCreate } from '../../src/cli/keys.js';
import { documentFromOptions, runPermissionsClear, runPermissionsGet, runPermissionsSet } from '../../src/cli/permissions.js';
import { parseToolsetEntry, runToolsetsDelete, runToolsetsList, runToolsetsPut, runToolsetsShow } from '../../src/cli/toolsets.js';
import { CaptureIo } from '../fixtures/capture-io.js';

const root = mkdtempSync(join(tmpdir(), 'mcpgate-manage-'));
let counter = 0;
after(() => rmSync(root, { recursive: true, force: true }));

const SERVERS = `servers:
  notes:
    transport: http
    url: http://127.0.0.1:9/mcp
    tools:
      deny: [drop_*]
      rename: { add_note: create_note }
  ops:
    transport: http
    url: http://127.0.0.1:9/mcp
    visibility: internal
    allowedCidrs: [10.0.0.0/8]
`;

/** A temp YAML config whose store is a temp SQLite file. */
function setup(gateway = ''): string {
  const dir = join(root, `case-${counter++}`);
  const config = join(root, `config-${counter}.yaml`);
  writeFileSync(config, `gateway:\n  store: ${JSON.stringify(join(dir, 'mcpgate.db'))}\n${gateway}${SERVERS}`);
  return config;
}

describe('mcpgate orgs, teams, users, agents', () => {
  it('creates and lists by name, with --json for scripts', async () => {
    const config = setup();
    const io = new CaptureIo();
    assert.equal(await runOrgsCreate('acme', { config }, io), 0, io.err.join('\n'));
    assert.match(io.text, /created org "acme" \(id [0-9a-f-]{36}\)/);
    // With one org, --org may be left out.
    assert.equal(await runTeamsCreate('red', { config }, io.reset()), 0, io.err.join('\n'));
    assert.equal(await runPrincipalsCreate('user', 'ada', { config, org: 'acme', team: 'red' }, io.reset()), 0, io.err.join('\n'));
    assert.equal(await runPrincipalsCreate('agent', 'bot', { config, org: 'acme', json: true }, io.reset()), 0, io.err.join('\n'));
    assert.equal(io.json<{ kind: string; name: string }>().kind, 'agent');

    assert.equal(await runOrgsList({ config, json: true }, io.reset()), 0);
    const [org] = io.json<Array<{ id: string; name: string }>>();
    assert.equal(org?.name, 'acme');
    assert.equal(await runTeamsList({ config, org: org?.id }, io.reset()), 0);
    assert.deepEqual(io.out[0]?.split(/\s{2,}/), ['id', 'name', 'org', 'created']);
    assert.match(io.out[1] ?? '', /\sred\s+acme\s/);
    assert.equal(await runPrincipalsList('user', { config }, io.reset()), 0);
    assert.equal(io.out.length, 2);
    assert.match(io.out[1] ?? '', /\sada\s+acme\s+red\s/);
    assert.equal(await runPrincipalsList('agent', { config, json: true }, io.reset()), 0);
    assert.deepEqual(io.json<Array<{ name: string }>>().map((p) => p.name), ['bot']);

    assert.equal(await runOrgsCreate('acme', { config }, io.reset()), 1, 'duplicate');
    assert.match(io.err.join('\n'), /^mcpgate orgs: /);
    assert.equal(await runOrgsCreate('globex', { config }, io.reset()), 0);
    assert.equal(await runTeamsCreate('blue', { config }, io.reset()), 1);
    assert.match(io.err.join('\n'), /several orgs exist; give the org \(--org/);
    assert.equal(await runTeamsCreate('blue', { config, org: 'globex' }, io.reset()), 0);
    assert.equal(await runPrincipalsCreate('user', 'x', { config, org: 'globex', team: 'red' }, io.reset()), 1, 'red is acme\'s team');
    assert.match(io.err.join('\n'), /no team with id or name "red" in org "globex"/);
    assert.equal(await runTeamsList({ config, org: 'initech' }, io.reset()), 1);
  });
});

describe('mcpgate permissions', () => {
  it('builds documents from flags', () => {
    assert.deepEqual(documentFromOptions({ servers: 'a,b', tools: ['gh=read_*,list_*', 'gh=x', 'sl='], toolsets: 'basics' }), {
      kind: 'allow',
      servers: ['a', 'b'],
      tools: { gh: ['read_*', 'list_*', 'x'], sl: [] },
      toolsets: ['basics'],
    });
    assert.deepEqual(documentFromOptions({ servers: '' }), { kind: 'allow', servers: [] });
    assert.deepEqual(documentFromOptions({ none: true }), { kind: 'none' });
    assert.deepEqual(documentFromOptions({ unrestricted: true }), { kind: 'allow' });
    const proto = documentFromOptions({ tools: ['__proto__=x'] });
    assert.ok(proto.kind === 'allow' && Object.hasOwn(proto.tools ?? {}, '__proto__'));
    for (const bad of [{}, { none: true, servers: 'a' }, { none: true, unrestricted: true }, { tools: ['noequals'] }, { tools: ['=x'] }]) {
      assert.throws(() => documentFromOptions(bad), JSON.stringify(bad));
    }
  });

  it('sets, gets and clears documents, naming subjects by id or name', async () => {
    const config = setup();
    const io = new CaptureIo();
    await runKeysCreate({ config, org: 'acme', team: 'red', user: 'ada', json: true }, io);
    const { record } = io.json<{ record: { id: string; prefix: string } }>();

    assert.equal(await runPermissionsGet({ config, level: 'team', subject: 'red' }, io.reset()), 0, io.err.join('\n'));
    assert.match(io.text, /no permission document for team .*: this level does not restrict/);
    assert.equal(
      await runPermissionsSet({ config, level: 'team', subject: 'red', org: 'acme', servers: 'notes', tools: ['ops=read_*,list_*'] }, io.reset()),
      0,
      io.err.join('\n'),
    );
    assert.match(io.text, /servers {3}notes/);
    assert.match(io.text, /tools {5}ops: read_\*, list_\*/);
    assert.equal(await runPermissionsGet({ config, level: 'team', subject: 'red', json: true }, io.reset()), 0);
    assert.deepEqual(io.json<{ document: unknown }>().document, { kind: 'allow', servers: ['notes'], tools: { ops: ['read_*', 'list_*'] } });

    assert.equal(await runPermissionsSet({ config, level: 'key', subject: record.prefix, none: true }, io.reset()), 0, io.err.join('\n'));
    assert.match(io.text, /none: this level denies everything/);
    assert.equal(await runPermissionsSet({ config, level: 'user', subject: 'ada', unrestricted: true }, io.reset()), 0, io.err.join('\n'));
    assert.match(io.text, /restricts nothing/);
    assert.equal(await runPermissionsGet({ config, level: 'org', subject: 'acme', json: true }, io.reset()), 0);
    assert.equal(io.text, 'null');

    assert.equal(await runPermissionsClear({ config, level: 'key', subject: record.id }, io.reset()), 0);
    assert.match(io.text, /cleared the key document/);
    assert.equal(await runPermissionsClear({ config, level: 'key', subject: record.id }, io.reset()), 0);
    assert.match(io.text, /nothing to clear/);

    const failures: Array<[Parameters<typeof runPermissionsSet>[0], RegExp]> = [
      [{ config, level: 'galaxy', subject: 'red', none: true }, /--level must be one of org, team, user, agent, key/],
      [{ config, level: 'team', subject: 'red' }, /give --servers, --tools, --toolsets, --none or --unrestricted/],
      [{ config, level: 'team', subject: 'green', none: true }, /no team with id or name "green"/],
      [{ config, level: 'agent', subject: 'ada', none: true }, /no agent with id or name "ada"/],
      [{ config, level: 'team', subject: 'red', tools: ['ops'] }, /is not server=glob1,glob2/],
    ];
    for (const [options, message] of failures) {
      assert.equal(await runPermissionsSet(options, io.reset()), 1, JSON.stringify(options));
      assert.match(io.err.join('\n'), message);
      assert.equal(io.out.length, 0);
    }
    assert.equal(await runPermissionsGet({ config, level: 'team', subject: 'red', json: true }, io.reset()), 0);
    assert.deepEqual(io.json<{ document: unknown }>().document, { kind: 'allow', servers: ['notes'], tools: { ops: ['read_*', 'list_*'] } }, 'failed sets wrote nothing');
  });
});

describe('mcpgate toolsets', () => {
  it('puts, lists, shows and deletes toolsets', async () => {
    const config = setup();
    const io = new CaptureIo();
    assert.deepEqual(parseToolsetEntry('github:read_*'), { server: 'github', toolGlob: 'read_*' });
    assert.deepEqual(parseToolsetEntry('a:b:c'), { server: 'a', toolGlob: 'b:c' });
    for (const bad of ['github', ':x', 'x:']) assert.throws(() => parseToolsetEntry(bad));

    assert.equal(await runToolsetsPut('basics', { config, entry: ['notes:read_*', 'ops:list_*'] }, io), 0, io.err.join('\n'));
    assert.equal(await runToolsetsList({ config }, io.reset()), 0);
    assert.match(io.out[1] ?? '', /^basics\s+notes:read_\* ops:list_\*\s/);
    assert.equal(await runToolsetsShow('basics', { config, json: true }, io.reset()), 0);
    assert.deepEqual(io.json<{ entries: unknown }>().entries, [
      { server: 'notes', toolGlob: 'read_*' },
      { server: 'ops', toolGlob: 'list_*' },
    ]);
    assert.equal(await runToolsetsPut('basics', { config, entry: ['notes'] }, io.reset()), 1);
    assert.equal(await runToolsetsPut('basics', { config, entry: [] }, io.reset()), 1);
    assert.equal(await runToolsetsDelete('basics', { config }, io.reset()), 0);
    assert.equal(await runToolsetsShow('basics', { config }, io.reset()), 1);
    assert.match(io.err.join('\n'), /no toolset named "basics"/);
    assert.equal(await runToolsetsDelete('basics', { config }, io.reset()), 1);
  });
});

describe('mcpgate explain', () => {
  async function keyFor(config: string, io: CaptureIo): Promise<{ id: string; prefix: string }> {
    assert.equal(await runKeysCreate({ config, org: 'acme', team: 'red', user: 'ada', json: true }, io.reset()), 0, io.err.join('\n'));
    return io.json<{ record: { id: string; prefix: string } }>().record;
  }

  it('prints each level and exits 0 when allowed, 2 when denied', async () => {
    const config = setup();
    const io = new CaptureIo();
    const key = await keyFor(config, io);
    await runPermissionsSet({ config, level: 'team', subject: 'red', tools: ['notes=read_*,create_*'] }, io.reset());

    assert.equal(await runExplain({ config, key: key.id, tool: 'notes__read_note' }, io.reset()), 0, io.err.join('\n'));
    assert.match(io.text, /tool {5}notes__read_note -> server "notes", upstream tool "read_note"/);
    assert.match(io.text, /^level\s+subject\s+record\s+verdict\s+reason$/m);
    assert.match(io.text, /^org\s+acme \([0-9a-f-]{36}\)\s+absent\s+does-not-restrict\s+no record$/m);
    assert.match(io.text, /^team\s+red \([0-9a-f-]{36}\)\s+present\s+allows\s+tool matches glob read_\*$/m);
    assert.match(io.text, /^ALLOWED: /m);

    assert.equal(await runExplain({ config, key: key.prefix, tool: 'notes__write_note' }, io.reset()), EXIT_DENIED, io.err.join('\n'));
    assert.match(io.text, /^team \*\s+red .*denies\s+tool does not match globs read_\*,create_\*$/m);
    assert.match(io.text, /^DENIED: denied by the team level: tool does not match globs read_\*,create_\*$/m);

    // A rename: clients call create_note, the permission globs see the upstream add_note.
    assert.equal(await runExplain({ config, key: key.id, tool: 'notes__create_note', json: true }, io.reset()), EXIT_DENIED);
    const renamed = io.json<{ allowed: boolean; tool: { upstream: string; visible: boolean }; policy: { decidingLevel: string } }>();
    assert.deepEqual([renamed.tool.upstream, renamed.tool.visible, renamed.policy.decidingLevel], ['add_note', true, 'team']);

    assert.equal(await runExplain({ config, key: key.id, tool: 'notes__drop_db' }, io.reset()), EXIT_DENIED);
    assert.match(io.text, /^config {3}HIDDEN: hidden by servers\.notes\.tools\.deny glob drop_\*$/m);

    // No document left at any level: denied by default (issue 22 A3), before the network rule.
    await runPermissionsClear({ config, level: 'team', subject: 'red' }, io.reset());
    assert.equal(await runExplain({ config, key: key.id, tool: 'notes__read_note' }, io.reset()), EXIT_DENIED);
    assert.match(io.text, /^default \*\s+gateway\.auth\.defaultAccess\s+n\/a\s+denies\s+no document at any level: denied by default/m);
    assert.match(io.text, /^DENIED: no document at any level: denied by default/m);

    // A document with no list restricts nothing, so the internal-server rule decides.
    await runPermissionsSet({ config, level: 'team', subject: 'red', unrestricted: true }, io.reset());
    assert.equal(await runExplain({ config, key: key.id, tool: 'ops__status' }, io.reset()), EXIT_DENIED);
    assert.match(io.text, /^network \*\s+127\.0\.0\.1\s+n\/a\s+denies\s+internal server and IP not in allowedCidrs$/m);
    assert.equal(await runExplain({ config, key: key.id, tool: 'ops__status', ip: '10.9.8.7' }, io.reset()), 0, io.text);

    await runPermissionsSet({ config, level: 'key', subject: key.id, none: true }, io.reset());
    assert.equal(await runExplain({ config, key: key.id, tool: 'ops__status', ip: '10.9.8.7', json: true }, io.reset()), EXIT_DENIED);
    assert.equal(io.json<{ policy: { denial: string } }>().policy.denial, 'none');
  });

  it('explains a principal without a key with --principal', async () => {
    const config = setup();
    const io = new CaptureIo();
    const key = await keyFor(config, io);
    assert.equal(await runPrincipalsList('user', { config, json: true }, io.reset()), 0);
    const [ada] = io.json<Array<{ id: string }>>();
    assert.ok(ada);
    await runPermissionsSet({ config, level: 'team', subject: 'red', tools: ['notes=read_*'] }, io.reset());
    await runPermissionsSet({ config, level: 'key', subject: key.id, unrestricted: true }, io.reset());

    assert.equal(await runExplain({ config, principal: ada.id, tool: 'notes__read_note' }, io.reset()), 0, io.err.join('\n'));
    assert.match(io.text, new RegExp(`^caller {3}user ada \\(${ada.id}\\), without a key: no key-level document applies$`, 'm'));
    assert.doesNotMatch(io.text, /^key {6}\S+ \(mcpg_/m);
    assert.match(io.text, new RegExp(`^key\\s+principal:${ada.id}\\s+absent\\s+does-not-restrict`, 'm'));
    assert.equal(await runExplain({ config, principal: ada.id, tool: 'notes__write_note' }, io.reset()), EXIT_DENIED);
    assert.match(io.text, /^DENIED: denied by the team level/m);
  });

  it('reports bad input with exit 1', async () => {
    const config = setup();
    const io = new CaptureIo();
    const key = await keyFor(config, io);
    const cases: Array<[Parameters<typeof runExplain>[0], RegExp]> = [
      [{ config, tool: 'notes__x' }, /give exactly one of --key <key-id> and --principal <id>/],
      [{ config, key: key.id, principal: 'someone', tool: 'notes__x' }, /give exactly one of --key <key-id> and --principal <id>/],
      [{ config, principal: 'no-such-principal', tool: 'notes__x' }, /no principal with id "no-such-principal"/],
      [{ config, key: key.id, tool: 'read_note' }, /is not <server>__<tool> for any configured server/],
      [{ config, key: key.id, tool: 'x', server: 'nope' }, /no server "nope" in the configuration/],
      [{ config, key: key.id, tool: 'notes__x', ip: '300.1.1.1' }, /is not an IP address/],
      [{ config, key: 'no-such-key', tool: 'notes__x' }, /no key with id or prefix "no-such-key"/],
    ];
    for (const [options, message] of cases) {
      assert.equal(await runExplain(options, io.reset()), 1, JSON.stringify(options));
      assert.match(io.err.join('\n'), message);
    }
  });

  it('needs --server for unprefixed names in conditional mode', async () => {
    const config = setup('  prefix: conditional\n');
    const io = new CaptureIo();
    const key = await keyFor(config, io);
    await runPermissionsSet({ config, level: 'team', subject: 'red', unrestricted: true }, io.reset());
    assert.equal(await runExplain({ config, key: key.id, tool: 'read_note' }, io.reset()), 1);
    assert.match(io.err.join('\n'), /give the server/);
    assert.equal(await runExplain({ config, key: key.id, tool: 'read_note', server: 'notes', json: true }, io.reset()), 0, io.err.join('\n'));
    assert.equal(io.json<{ tool: { server: string } }>().tool.server, 'notes');
    // A collision-prefixed name still names its server.
    assert.equal(await runExplain({ config, key: key.id, tool: 'notes__read_note', json: true }, io.reset()), 0);
    assert.equal(io.json<{ tool: { upstream: string } }>().tool.upstream, 'read_note');
  });
});

describe('the built CLI', () => {
  // The real built CLI (npm test builds first): the commands are registered and exit codes reach the shell.
  const CLI = fileURLToPath(new URL('../../dist/src/cli/main.js', import.meta.url));
  const run = (args: readonly string[]): Promise<{ code: number; stdout: string; stderr: string }> =>
    new Promise((resolve) => {
      execFile(process.execPath, [CLI, ...args], { cwd: root, env: { PATH: process.env.PATH } }, (error, stdout, stderr) => {
        resolve({ code: error === null ? 0 : typeof error.code === 'number' ? error.code : 1, stdout, stderr });
      });
    });

  it('runs orgs, permissions, toolsets and explain end to end', async () => {
    const config = setup();
    assert.equal((await run(['orgs', 'create', 'acme', '-c', config])).code, 0);
    const created = await run(['keys', 'create', '-c', config, '--org', 'acme', '--user', 'ada', '--json']);
    assert.equal(created.code, 0, created.stderr);
    const { record } = JSON.parse(created.stdout) as { record: { id: string; principalId: string } };
    const put = await run(['toolsets', 'put', 'basics', '--entry', 'notes:read_*', '--entry', 'notes:list_*', '-c', config]);
    assert.equal(put.code, 0, put.stderr);
    const set = await run(['permissions', 'set', '--level', 'user', '--subject', 'ada', '--toolsets', 'basics', '-c', config]);
    assert.equal(set.code, 0, set.stderr);
    const allowed = await run(['explain', '--key', record.id, '--tool', 'notes__list_notes', '-c', config]);
    assert.equal(allowed.code, 0, allowed.stdout + allowed.stderr);
    const denied = await run(['explain', '--key', record.id, '--tool', 'notes__add_note', '-c', config]);
    assert.equal(denied.code, 2, denied.stdout + denied.stderr);
    assert.match(denied.stdout, /DENIED: denied by the user level/);
    const bad = await run(['explain', '--key', record.id, '--tool', 'nothing', '-c', config]);
    assert.equal(bad.code, 1);
    const byPrincipal = await run(['explain', '--principal', record.principalId, '--tool', 'notes__list_notes', '-c', config]);
    assert.equal(byPrincipal.code, 0, byPrincipal.stdout + byPrincipal.stderr);
    const nobody = await run(['explain', '--tool', 'notes__list_notes', '-c', config]);
    assert.equal(nobody.code, 1);
    assert.match(nobody.stderr, /give exactly one of --key <key-id> and --principal <id>/);
    const orgs = await run(['orgs', 'list', '--json', '-c', config]);
    assert.deepEqual((JSON.parse(orgs.stdout) as Array<{ name: string }>).map((o) => o.name), ['acme']);
  });
});
