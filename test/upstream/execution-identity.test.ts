import assert from 'node:assert/strict';
import { chmodSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, it } from 'node:test';
import { serverSchema, type ServerConfig } from '../../src/config/schema.js';
import { executionIdentityOf, type IdentityContext } from '../../src/upstream/execution-identity.js';
import { canonicalJson } from '../../src/util/canonical-json.js';
import { resolveCommand } from '../../src/upstream/measured-spawn.js';
import { PLACEHOLDER_PIN } from '../../src/util/tls-pins.js';

/** Identity of DESIGN.md invariant 1 / issue 4 §1: equal exactly when two entries may share pools and children. */

const PIN_A = `SHA256:${Buffer.alloc(32, 1).toString('base64')}`;
const PIN_B = `SHA256:${Buffer.alloc(32, 2).toString('base64')}`;
const SPKI = `sha256/${Buffer.alloc(32, 3).toString('base64')}`;
const URL_A = 'https://mcp.example.com/mcp';

const dir = mkdtempSync(join(tmpdir(), 'mcpgate-identity-'));
after(() => rmSync(dir, { recursive: true, force: true }));

function server(raw: Record<string, unknown>): ServerConfig {
  return serverSchema.parse(raw);
}

function hash(name: string, raw: Record<string, unknown>, context?: IdentityContext): string {
  return executionIdentityOf(name, server(raw), context).hash;
}

function executable(path: string): string {
  writeFileSync(path, '#!/bin/sh\nexit 0\n');
  chmodSync(path, 0o755);
  return path;
}

describe('execution identity: network servers', () => {
  it('folds the name into an unpinned identity: two unrelated unpinned entries never match', () => {
    const raw = { transport: 'http', url: URL_A };
    assert.notEqual(hash('one', raw), hash('two', raw));
    assert.equal(hash('one', raw), hash('one', { ...raw }), 'the same entry gives the same identity');
  });

  it('treats the placeholder pin as no pin at all', () => {
    const raw = { transport: 'http', url: URL_A, tls: { pin: PLACEHOLDER_PIN } };
    assert.notEqual(hash('one', raw), hash('two', raw));
    assert.equal(hash('one', raw), hash('one', { transport: 'http', url: URL_A }));
    assert.match(executionIdentityOf('one', server(raw)).canonical, /"unpinned":"one"/);
  });

  it('gives entries with the same URL and the same real pin the same identity, whatever their names', () => {
    const a = hash('one', { transport: 'http', url: URL_A, tls: { pin: [PIN_A, PIN_B] } });
    assert.equal(a, hash('two', { transport: 'http', url: URL_A, tls: { pin: [PIN_B, PIN_A] } }), 'pin order does not matter');
    assert.equal(a, hash('three', { transport: 'http', url: URL_A, tls: { pin: [PIN_A, PLACEHOLDER_PIN, PIN_B] } }), 'a placeholder beside real pins adds nothing');
    assert.equal(a, hash('four', { transport: 'http', url: 'https://MCP.Example.com:443/mcp#frag', tls: { pin: [PIN_A, PIN_B] } }), 'URL normalised');
    assert.doesNotMatch(executionIdentityOf('one', server({ transport: 'http', url: URL_A, tls: { pin: PIN_A } })).canonical, /"unpinned":"one"/);
  });

  it('an SPKI pin alone is a real pin', () => {
    const raw = { transport: 'http', url: URL_A, tls: { spkiPin: SPKI } };
    assert.equal(hash('one', raw), hash('two', raw));
  });

  it('differs on pin, URL, transport, SPIFFE id and the other TLS settings', () => {
    const base = { transport: 'http', url: URL_A, tls: { pin: PIN_A } };
    const reference = hash('x', base);
    const variants: Array<Record<string, unknown>> = [
      { ...base, tls: { pin: PIN_B } },
      { ...base, tls: { pin: PIN_A, spkiPin: SPKI } },
      { ...base, url: 'https://mcp.example.com/other' },
      { ...base, url: 'https://mcp.example.com:8443/mcp' },
      { ...base, transport: 'sse' },
      { ...base, spiffeId: 'spiffe://example.org/mcp' },
      { ...base, tls: { pin: PIN_A, ca: '/etc/ca.pem' } },
      { ...base, tls: { pin: PIN_A, cert: '/etc/c.pem', key: '/etc/k.pem' } },
      { ...base, tls: { pin: PIN_A, servername: 'other.example.com' } },
    ];
    const hashes = variants.map((variant) => hash('x', variant));
    for (const [index, value] of hashes.entries()) assert.notEqual(value, reference, `variant ${index}`);
    assert.equal(new Set(hashes).size, hashes.length, 'every variant is distinct from the others too');
  });

  it('ignores headers and pool limits, which are per request or per pool', () => {
    const base = { transport: 'http', url: URL_A, tls: { pin: PIN_A } };
    assert.equal(hash('x', base), hash('y', { ...base, headers: { Authorization: 'Bearer t' }, http: { connections: 2 }, timeoutMs: 5 }));
  });
});

describe('execution identity: stdio servers', () => {
  const bin = join(dir, 'bin');
  mkdirSync(bin, { recursive: true });
  const tool = executable(join(bin, 'mcp-tool'));
  const context: IdentityContext = { env: { PATH: `/nonexistent:${bin}`, HOME: '/home/gw' }, cwd: dir };

  it('resolves a bare command on PATH like execvp, and keeps an unresolvable one literal', () => {
    assert.equal(resolveCommand('mcp-tool', dir, `/nonexistent:${bin}`), tool);
    assert.equal(resolveCommand('mcp-tool', dir, '/nonexistent'), undefined);
    assert.equal(resolveCommand('./bin/mcp-tool', dir, ''), tool, 'a name with a slash is relative to cwd, not PATH');
    const canonical = executionIdentityOf('s', server({ transport: 'stdio', command: 'mcp-tool' }), context).canonical;
    assert.match(canonical, new RegExp(`"command":${JSON.stringify(tool).replace(/[.*+?^${}()|[\]\\/]/g, '\\$&')}`));
    assert.match(executionIdentityOf('s', server({ transport: 'stdio', command: 'no-such-tool-xyz' }), context).canonical, /"command":"no-such-tool-xyz"/);
  });

  it('skips a PATH entry whose file is not executable, as execvp does', () => {
    const first = join(dir, 'first');
    mkdirSync(first, { recursive: true });
    writeFileSync(join(first, 'mcp-tool'), 'not executable');
    chmodSync(join(first, 'mcp-tool'), 0o644);
    assert.equal(resolveCommand('mcp-tool', dir, `${first}:${bin}`), tool);
  });

  it('is the same for the bare name and the absolute path it resolves to, and the same whatever the entry name', () => {
    assert.equal(hash('a', { transport: 'stdio', command: 'mcp-tool' }, context), hash('b', { transport: 'stdio', command: tool }, context));
    assert.equal(hash('a', { transport: 'stdio', command: 'mcp-tool', cwd: '.' }, context), hash('a', { transport: 'stdio', command: 'mcp-tool', cwd: dir }, context), 'cwd resolved');
  });

  it('uses env.set.PATH to resolve the command, as the spawn does', () => {
    const other = join(dir, 'other');
    mkdirSync(other, { recursive: true });
    const shadow = executable(join(other, 'mcp-tool'));
    const canonical = executionIdentityOf('s', server({ transport: 'stdio', command: 'mcp-tool', env: { set: { PATH: other } } }), context).canonical;
    assert.ok(canonical.includes(JSON.stringify(shadow)));
  });

  it('differs on args, digest, measure, cwd, HOME, env allowlist and env.set values, without holding the values', () => {
    const base = { transport: 'stdio', command: 'mcp-tool', env: { allow: ['LANG', 'TZ'], set: { TOKEN: 'first-secret' } } };
    const reference = hash('s', base, context);
    assert.equal(reference, hash('s', { ...base, env: { allow: ['TZ', 'LANG', 'TZ'], set: { TOKEN: 'first-secret' } } }, context), 'allowlist order and repeats do not matter');
    const variants: Array<Record<string, unknown>> = [
      { ...base, args: ['--x'] },
      { ...base, digest: `sha256:${'a'.repeat(64)}` },
      { ...base, digest: `sha256:${'a'.repeat(64)}`, measure: 'server.js' },
      { ...base, cwd: '/srv' },
      { ...base, home: '/srv/home' },
      { ...base, env: { allow: ['LANG'], set: { TOKEN: 'first-secret' } } },
      { ...base, env: { allow: ['LANG', 'TZ'], set: { TOKEN: 'second-secret' } } },
      { ...base, env: { allow: ['LANG', 'TZ'], set: { TOKEN: 'first-secret', EXTRA: '' } } },
    ];
    const hashes = variants.map((variant) => hash('s', variant, context));
    for (const [index, value] of hashes.entries()) assert.notEqual(value, reference, `variant ${index}`);
    assert.equal(new Set(hashes).size, hashes.length);
    assert.doesNotMatch(executionIdentityOf('s', server(base), context).canonical, /first-secret/);
    assert.equal(hash('s', { ...base, digest: `sha256:${'A'.repeat(64)}` }, context), hash('s', { ...base, digest: `sha256:${'a'.repeat(64)}` }, context), 'digest case');
  });
});

describe('canonicalJson', () => {
  it('sorts keys at every level and keeps array order', () => {
    assert.equal(canonicalJson({ b: 1, a: { d: [2, 1], c: null } }), '{"a":{"c":null,"d":[2,1]},"b":1}');
    assert.equal(canonicalJson({ a: undefined, b: 'x' }), '{"b":"x"}');
  });
});
