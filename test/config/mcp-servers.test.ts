import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { loadConfig } from '../../src/config/load.js';
import { convertMcpServers, toMcpServersPath } from '../../src/config/mcp-servers.js';
import { issueAt, makeTempDir, rejectsConfig, type TempDir } from './helpers.js';

let dir: TempDir;
before(async () => {
  dir = await makeTempDir();
});
after(async () => {
  await dir.cleanup();
});

async function load(text: string, env: NodeJS.ProcessEnv = {}) {
  return loadConfig(await dir.write(`mcp-${Math.random().toString(36).slice(2)}.json`, text), { env });
}

const CLAUDE_DESKTOP = `{
  "mcpServers": {
    "filesystem": {
      "command": "npx",
      "args": ["-y", "@modelcontextprotocol/server-filesystem", "/Users/me/Desktop"],
      "env": { "DEBUG": "1" },
      "cwd": "/tmp",
      "autoApprove": ["read_file"],
      "alwaysAllow": ["list_directory"]
    },
    "remote": { "url": "https://mcp.example.com/mcp", "headers": { "Authorization": "Bearer \${TOKEN}" } },
    "streamable": { "type": "streamable-http", "url": "https://s.example.com/mcp" },
    "plain-http": { "type": "http", "url": "https://h.example.com/mcp" },
    "legacy": { "type": "sse", "url": "http://localhost:3001/sse", "disabled": true },
    "claude-code": { "type": "stdio", "command": "mcp-git", "disabled": false }
  }
}
`;

describe('mcpServers import', () => {
  it('converts stdio, url, http and sse entries', async () => {
    const config = await load(CLAUDE_DESKTOP, { TOKEN: 'abc' });
    const fs = config.servers['filesystem'];
    assert.ok(fs?.transport === 'stdio');
    assert.equal(fs.command, 'npx');
    assert.deepEqual(fs.args, ['-y', '@modelcontextprotocol/server-filesystem', '/Users/me/Desktop']);
    assert.deepEqual(fs.env, { allow: [], set: { DEBUG: '1' } }, 'the format\'s env record becomes env.set');
    assert.equal(fs.cwd, '/tmp');
    assert.equal(fs.enabled, true);
    const remote = config.servers['remote'];
    assert.ok(remote?.transport === 'auto');
    assert.equal(remote.headers['Authorization'], 'Bearer abc');
    assert.equal(config.servers['streamable']?.transport, 'http');
    assert.equal(config.servers['plain-http']?.transport, 'http');
    assert.equal(config.servers['legacy']?.transport, 'sse');
    assert.equal(config.servers['legacy']?.enabled, false);
    assert.equal(config.servers['claude-code']?.transport, 'stdio');
    assert.equal(config.servers['claude-code']?.enabled, true);
    assert.equal(config.gateway.listen.port, 8080);
    assert.ok(Object.isFrozen(config.servers['remote']));
  });

  it('keeps a gateway section beside mcpServers', async () => {
    const config = await load('{"gateway": {"listen": {"port": 0}}, "mcpServers": {"a": {"command": "x"}}}');
    assert.equal(config.gateway.listen.port, 0);
  });

  it('rejects an unknown key in an entry, naming it at its line', async () => {
    const text = '{\n  "mcpServers": {\n    "fs": {\n      "command": "x",\n      "transportType": "stdio"\n    }\n  }\n}\n';
    const error = await rejectsConfig(load(text));
    assert.deepEqual(issueAt(error, 'mcpServers.fs.transportType'), {
      path: 'mcpServers.fs.transportType',
      message: 'unknown key "transportType"',
      line: 5,
      column: 7,
    });
  });

  it('reports schema issues with paths in the mcpServers document', async () => {
    const text = '{"mcpServers": {"a b": {"command": "x"}, "fs": {"command": "x", "args": [1]}, "w": {"url": "ftp://x"}}}';
    const error = await rejectsConfig(load(text));
    assert.match(issueAt(error, 'mcpServers.a b').message, /invalid server name/);
    assert.match(issueAt(error, 'mcpServers.fs.args.0').message, /expected string/);
    assert.match(issueAt(error, 'mcpServers.w.url').message, /URL/);
    assert.equal(issueAt(error, 'mcpServers.w.url').line, 1);
  });

  it('rejects a type that does not fit the entry, and a malformed disabled', async () => {
    const text = `{"mcpServers": {
      "a": {"command": "x", "type": "sse"},
      "b": {"url": "https://x.example", "type": "websocket"},
      "c": {"command": "x", "disabled": "yes"},
      "d": {"command": "x", "url": "https://x.example"},
      "e": {"args": []},
      "f": {"url": "https://x.example", "env": {}}
    }}`;
    const error = await rejectsConfig(load(text));
    assert.match(issueAt(error, 'mcpServers.a.type').message, /"stdio" for a command server/);
    assert.match(issueAt(error, 'mcpServers.b.type').message, /must be one of/);
    assert.match(issueAt(error, 'mcpServers.c.disabled').message, /true or false/);
    assert.match(issueAt(error, 'mcpServers.d').message, /not both/);
    assert.match(issueAt(error, 'mcpServers.e').message, /needs "command"/);
    assert.equal(issueAt(error, 'mcpServers.f.env').line, 7);
    assert.equal(error.issues.length, 6);
  });

  it('rejects unknown top-level keys and mixing servers with mcpServers', async () => {
    const error = await rejectsConfig(load('{"mcpServers": {}, "servers": {}, "globalShortcut": "x"}'));
    assert.match(issueAt(error, 'servers').message, /either "servers" or "mcpServers"/);
    assert.match(issueAt(error, 'globalShortcut').message, /unknown key/);
  });

  it('names missing variables by their path in the source document', async () => {
    const error = await rejectsConfig(load(CLAUDE_DESKTOP));
    assert.equal(error.code, 'MCPGATE_ERR_CONFIG_ENV_MISSING');
    const issue = issueAt(error, 'mcpServers.remote.headers.Authorization');
    assert.match(issue.message, /TOKEN/);
    assert.equal(issue.line, 11);
  });

  it('maps schema paths back to the source keys', () => {
    assert.deepEqual(toMcpServersPath(['servers', 'a', 'transport']), ['mcpServers', 'a', 'type']);
    assert.deepEqual(toMcpServersPath(['servers', 'a', 'enabled']), ['mcpServers', 'a', 'disabled']);
    assert.deepEqual(toMcpServersPath(['servers', 'a', 'args', 0]), ['mcpServers', 'a', 'args', 0]);
    assert.deepEqual(toMcpServersPath(['gateway', 'listen']), ['gateway', 'listen']);
    assert.deepEqual(toMcpServersPath(['servers', 'a', 'env', 'set', 'DEBUG']), ['mcpServers', 'a', 'env', 'DEBUG']);
  });

  it('reads the format\'s env record as env.set, and reports a bad value where it was written', async () => {
    assert.deepEqual(convertMcpServers({ mcpServers: { a: { command: 'x', env: { A: '1' } } } }).config, {
      servers: { a: { transport: 'stdio', command: 'x', env: { set: { A: '1' } } } },
    });
    const error = await rejectsConfig(load('{\n  "mcpServers": {\n    "a": { "command": "x", "env": { "A": 1 } }\n  }\n}\n'));
    assert.equal(issueAt(error, 'mcpServers.a.env.A').line, 3);
    const notRecord = await rejectsConfig(load('{"mcpServers": {"a": {"command": "x", "env": ["A"]}}}'));
    assert.ok(notRecord.issues.some((issue) => issue.path === 'mcpServers.a.env'));
  });

  it('converts without touching values it does not own', () => {
    const result = convertMcpServers({ mcpServers: { a: { command: 'x', autoApprove: ['t'] } } });
    assert.deepEqual(result, { config: { servers: { a: { transport: 'stdio', command: 'x' } } }, issues: [] });
  });
});
