import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { ConfigError } from '../../src/config/config-error.js';
import { parseConfig } from '../../src/config/load.js';
import { PLACEHOLDER_PIN } from '../../src/util/tls-pins.js';

/** Config rules of issue 4 §3: pin formats, the placeholder in production, tls on http://, plain http off loopback. */

const GOOD_PIN = `SHA256:${Buffer.alloc(32, 7).toString('base64')}`;
const GOOD_SPKI = `sha256/${Buffer.alloc(32, 9).toString('base64')}`;

function parse(server: Record<string, unknown>, mode: 'dev' | 'production' = 'production') {
  return parseConfig(JSON.stringify({ gateway: { mode }, servers: { api: { transport: 'http', ...server } } }), { env: {}, fileName: 'c.json' });
}

function issuesOf(server: Record<string, unknown>, mode: 'dev' | 'production' = 'production'): ConfigError['issues'] {
  try {
    parse(server, mode);
  } catch (error) {
    assert.ok(error instanceof ConfigError, String(error));
    assert.equal(error.code, 'MCPGATE_ERR_CONFIG_INVALID');
    return error.issues;
  }
  assert.fail('expected a config error');
}

describe('tls config', () => {
  it('accepts both pin forms, one or a rotation list, and normalises them to lists', () => {
    const config = parse({ url: 'https://api.example/mcp', tls: { pin: GOOD_PIN, spkiPin: [GOOD_SPKI, `sha256/${Buffer.alloc(32, 1).toString('base64')}`], ca: '/etc/ca.pem', servername: 'api.internal' } });
    const server = config.servers['api'];
    assert.ok(server !== undefined && server.transport !== 'stdio');
    assert.deepEqual(server.tls?.pin, [GOOD_PIN]);
    assert.equal(server.tls?.spkiPin?.length, 2);
    assert.equal(server.allowInsecureHttp, false);
  });

  it('refuses malformed pins at their path, saying why', () => {
    const cases: Array<[Record<string, unknown>, string, RegExp]> = [
      [{ pin: GOOD_SPKI }, 'servers.api.tls.pin', /starts with "SHA256:"/],
      [{ pin: 'sha1:abc' }, 'servers.api.tls.pin', /malformed TLS pin/],
      [{ pin: 'SHA256:' + Buffer.alloc(20).toString('base64') }, 'servers.api.tls.pin', /32-byte/],
      [{ pin: [GOOD_PIN, 'SHA256:not base64!'] }, 'servers.api.tls.pin.1', /32-byte/],
      [{ spkiPin: GOOD_PIN }, 'servers.api.tls.spkiPin', /starts with "sha256\/"/],
      // Non-canonical base64 (the last character carries stray bits) could never match a computed pin.
      [{ pin: `SHA256:${'A'.repeat(42)}B=` }, 'servers.api.tls.pin', /32-byte/],
      [{ pin: [] }, 'servers.api.tls.pin', /.+/],
    ];
    for (const [tls, path, message] of cases) {
      const issues = issuesOf({ url: 'https://api.example/mcp', tls }, 'dev');
      const issue = issues.find((candidate) => candidate.path === path);
      assert.ok(issue !== undefined, `${JSON.stringify(tls)}: no issue at ${path}: ${JSON.stringify(issues)}`);
      assert.match(issue.message, message);
    }
  });

  it('accepts the placeholder pin in dev mode and refuses it in production, naming the server', () => {
    assert.doesNotThrow(() => parse({ url: 'https://api.example/mcp', tls: { pin: PLACEHOLDER_PIN } }, 'dev'));
    const issues = issuesOf({ url: 'https://api.example/mcp', tls: { pin: PLACEHOLDER_PIN } }, 'production');
    assert.equal(issues.length, 1);
    assert.equal(issues[0]?.path, 'servers.api.tls.pin.0');
    assert.match(issues[0]?.message ?? '', /server "api" has the placeholder TLS pin.*dev/);
  });

  it('refuses tls on an http:// URL', () => {
    const issues = issuesOf({ url: 'http://127.0.0.1:9/mcp', tls: { pin: GOOD_PIN } });
    assert.deepEqual(issues.map((issue) => issue.path), ['servers.api.tls']);
    assert.match(issues[0]?.message ?? '', /server "api" sets tls but its URL is plain http/);
  });

  it('allows plain http:// only to loopback unless allowInsecureHttp', () => {
    for (const url of ['http://127.0.0.1:9/mcp', 'http://127.8.9.10/mcp', 'http://localhost:3000/mcp', 'http://[::1]:3000/mcp']) {
      assert.doesNotThrow(() => parse({ url }), url);
    }
    for (const url of ['http://10.0.0.5/mcp', 'http://api.example/mcp', 'http://[::ffff:127.0.0.1]/mcp', 'http://localhost.example/mcp']) {
      const issues = issuesOf({ url });
      assert.equal(issues[0]?.path, 'servers.api.url', url);
      assert.match(issues[0]?.message ?? '', /server "api" uses plain http:\/\/ to a non-loopback host.*allowInsecureHttp/, url);
      assert.doesNotThrow(() => parse({ url, allowInsecureHttp: true }), url);
    }
  });

  it('refuses an mTLS certificate without its key, and unknown tls keys', () => {
    const issues = issuesOf({ url: 'https://api.example/mcp', tls: { cert: '/c.pem' } });
    assert.equal(issues[0]?.path, 'servers.api.tls.key');
    const unknown = issuesOf({ url: 'https://api.example/mcp', tls: { pins: GOOD_PIN } });
    assert.equal(unknown[0]?.path, 'servers.api.tls.pins');
  });

  it('reports a malformed single-string pin in production mode instead of crashing (issue 22 B5)', () => {
    // The README's example writes `pin: "SHA256:…"`; the cross-field rules used to see the unconverted string.
    const issues = issuesOf({ url: 'https://api.example/mcp', tls: { pin: 'SHA256:…' } });
    assert.deepEqual(issues.map((issue) => issue.path), ['servers.api.tls.pin']);
    assert.match(issues[0]?.message ?? '', /malformed TLS pin "SHA256:…"/);
    // Next to an issue elsewhere, so that both rules run on the same document.
    const both = issuesOf({ url: 'https://api.example/mcp', tls: { pin: 'SHA256:…', key: '/k.pem' } });
    assert.deepEqual(both.map((issue) => issue.path).sort(), ['servers.api.tls.cert', 'servers.api.tls.pin']);
  });

  it('reports an unparsable URL once, without the trust rules throwing (issue 22 B5)', () => {
    const issues = issuesOf({ url: '', tls: { pin: GOOD_PIN } });
    assert.deepEqual(issues.map((issue) => issue.path), ['servers.api.url']);
  });
});
