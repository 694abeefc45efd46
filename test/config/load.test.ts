import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { loadConfig, parseConfig } from '../../src/config/load.js';
import { GatewayError } from '../../src/errors/gateway-error.js';
import { issueAt, makeTempDir, rejectsConfig, type TempDir } from './helpers.js';

let dir: TempDir;
before(async () => {
  dir = await makeTempDir();
});
after(async () => {
  await dir.cleanup();
});

async function load(name: string, text: string, env: NodeJS.ProcessEnv = {}) {
  return loadConfig(await dir.write(name, text), { env });
}

const COMPLETE = `gateway:
  name: corp-gateway
  mode: dev
  listen:
    host: 0.0.0.0
    port: 9090
  separator: "__"
  prefix: conditional
  limits:
    maxBodyBytes: 1048576
    callTimeoutMs: 30000
  security:
    allowedOrigins: [https://app.example.com]
  logLevel: debug
servers:
  fs:
    transport: stdio
    command: npx
    args: ["-y", "@modelcontextprotocol/server-filesystem", /srv]
    env:
      allow: [LANG]
      set:
        NODE_ENV: production
    cwd: /srv
    scope: shared
    tools:
      allow: ["read_*"]
      deny: [write_file]
      rename:
        read_file: read
      descriptions:
        read_file: Reads a file.
  github:
    transport: http
    url: https://api.githubcopilot.com/mcp/
    headers:
      Authorization: Bearer \${GITHUB_TOKEN}
    timeoutMs: 5000
  legacy:
    transport: sse
    url: http://localhost:3001/sse
    enabled: false
`;

describe('loadConfig: valid files', () => {
  it('loads a complete YAML configuration', async () => {
    const config = await load('complete.yaml', COMPLETE, { GITHUB_TOKEN: 'ghp_secret' });
    assert.equal(config.gateway.name, 'corp-gateway');
    assert.equal(config.gateway.mode, 'dev');
    assert.deepEqual(config.gateway.listen, { host: '0.0.0.0', port: 9090 });
    assert.equal(config.gateway.prefix, 'conditional');
    assert.equal(config.gateway.limits.maxBodyBytes, 1_048_576);
    assert.deepEqual(config.gateway.security.allowedOrigins, ['https://app.example.com']);
    assert.deepEqual(Object.keys(config.servers), ['fs', 'github', 'legacy']);
    const fs = config.servers['fs'];
    assert.ok(fs?.transport === 'stdio');
    assert.deepEqual(fs.args, ['-y', '@modelcontextprotocol/server-filesystem', '/srv']);
    assert.equal(fs.scope, 'shared');
    assert.deepEqual(fs.env, { allow: ['LANG'], set: { NODE_ENV: 'production' } });
    assert.deepEqual(fs.tools.rename, { read_file: 'read' });
    const github = config.servers['github'];
    assert.ok(github?.transport === 'http');
    assert.equal(github.headers['Authorization'], 'Bearer ghp_secret');
    assert.equal(github.timeoutMs, 5000);
    assert.equal(config.servers['legacy']?.enabled, false);
  });

  it('applies the schema defaults and infers transport from command or url', async () => {
    const config = await load('minimal.yaml', 'servers:\n  fs:\n    command: mcp-fs\n  web:\n    url: https://mcp.example.com/mcp\n');
    assert.deepEqual(config.gateway.listen, { host: '127.0.0.1', port: 8080 });
    assert.equal(config.gateway.mode, 'production');
    assert.equal(config.gateway.separator, '__');
    assert.equal(config.gateway.prefix, 'always');
    assert.equal(config.gateway.limits.callTimeoutMs, 60_000);
    assert.equal(config.gateway.limits.heapGrowthPercent, 200);
    assert.equal(config.gateway.audit.resultHash, 'blake3');
    assert.equal(config.gateway.security.dnsRebindingProtection, true);
    const fs = config.servers['fs'];
    assert.ok(fs?.transport === 'stdio');
    assert.deepEqual(fs.args, []);
    assert.deepEqual(fs.env, { allow: [], set: {} });
    assert.equal(fs.scope, 'session');
    assert.equal(fs.enabled, true);
    assert.equal(fs.connectTimeoutMs, 10_000);
    assert.deepEqual(fs.tools, { deny: [], rename: {}, descriptions: {} });
    assert.equal(config.servers['web']?.transport, 'http');
  });

  it('takes heapGrowthPercent from 0 to 400 and refuses a negative, fractional or larger one', async () => {
    const text = (value: string) => `gateway:\n  limits:\n    heapGrowthPercent: ${value}\nservers:\n  fs:\n    command: mcp-fs\n`;
    assert.equal((await load('growth-0.yaml', text('0'))).gateway.limits.heapGrowthPercent, 0);
    assert.equal((await load('growth-400.yaml', text('"400"'))).gateway.limits.heapGrowthPercent, 400);
    for (const bad of ['-1', '12.5', '401']) {
      const error = await rejectsConfig(load(`growth-bad.yaml`, text(bad)));
      assert.ok(issueAt(error, 'gateway.limits.heapGrowthPercent'), bad);
    }
  });

  it('takes audit.resultHash blake3 or sha256 and refuses any other digest', async () => {
    const text = (value: string) => `gateway:\n  audit:\n    resultHash: ${value}\nservers:\n  fs:\n    command: mcp-fs\n`;
    assert.equal((await load('digest-sha256.yaml', text('sha256'))).gateway.audit.resultHash, 'sha256');
    for (const bad of ['md5', 'SHA256', 'blake2b', '""']) {
      const error = await rejectsConfig(load('digest-bad.yaml', text(bad)));
      assert.ok(issueAt(error, 'gateway.audit.resultHash'), bad);
    }
  });

  it('loads the native form from JSON, with positions in issues', async () => {
    const config = await load('native.json', '{ "servers": { "fs": { "command": "mcp-fs" } } }');
    assert.equal(config.servers['fs']?.transport, 'stdio');
    const error = await rejectsConfig(load('bad.json', '{\n  "servers": {\n    "fs": { "command": 42 }\n  }\n}\n'));
    assert.deepEqual(issueAt(error, 'servers.fs.command'), {
      path: 'servers.fs.command',
      message: 'invalid input: expected string, received number',
      line: 3,
      column: 24,
    });
  });

  it('returns a deeply frozen result', async () => {
    const config = await load('frozen.yaml', 'servers:\n  fs:\n    command: mcp-fs\n    args: [a]\n');
    assert.ok(Object.isFrozen(config));
    assert.ok(Object.isFrozen(config.gateway.listen));
    assert.ok(Object.isFrozen(config.servers['fs']?.tools.deny));
    // ESM modules run in strict mode, where writing to a frozen object throws instead of being ignored.
    assert.throws(() => {
      (config.gateway.listen as { port: number }).port = 1;
    }, TypeError);
    assert.throws(() => {
      const fs = config.servers['fs'];
      if (fs?.transport === 'stdio') fs.args.push('b');
    }, TypeError);
  });
});

describe('loadConfig: invalid files', () => {
  it('names an unknown top-level key, at its line', async () => {
    const error = await rejectsConfig(load('top.yaml', 'servers: {}\nplugins: []\n'));
    assert.equal(error.code, 'MCPGATE_ERR_CONFIG_INVALID');
    assert.ok(GatewayError.is(error));
    assert.deepEqual(issueAt(error, 'plugins'), { path: 'plugins', message: 'unknown key "plugins"', line: 2, column: 1 });
  });

  it('names an unknown nested key, at its line', async () => {
    const text = 'servers:\n  fs:\n    command: mcp-fs\n    tools:\n      deny: []\n      hide: [x]\n';
    const error = await rejectsConfig(load('nested.yaml', text));
    const issue = issueAt(error, 'servers.fs.tools.hide');
    assert.match(issue.message, /"hide"/);
    assert.equal(issue.line, 6);
    assert.equal(issue.column, 7);
  });

  it('reports a wrong type at the value', async () => {
    const error = await rejectsConfig(load('type.yaml', 'gateway:\n  listen:\n    port: eighty\nservers: {}\n'));
    const issue = issueAt(error, 'gateway.listen.port');
    assert.match(issue.message, /expected number/);
    assert.equal(issue.line, 3);
    assert.equal(issue.column, 11);
  });

  it('reports every issue in one pass, in file order', async () => {
    const text = 'gateway:\n  logLevel: loud\nservers:\n  fs:\n    command: 1\n  both:\n    command: x\n    url: http://x\n';
    const error = await rejectsConfig(load('many.yaml', text));
    assert.deepEqual(
      error.issues.map((issue) => [issue.path, issue.line]),
      [
        ['gateway.logLevel', 2],
        ['servers.fs.command', 5],
        ['servers.both', 6],
      ],
    );
    assert.match(issueAt(error, 'servers.both').message, /either "command" .* or "url"/);
  });

  it('names a missing required key and a server with neither command nor url', async () => {
    const error = await rejectsConfig(load('missing.yaml', 'servers:\n  a:\n    transport: stdio\n  b:\n    args: []\n'));
    assert.deepEqual(issueAt(error, 'servers.a.command'), {
      path: 'servers.a.command',
      message: 'missing required key "command"',
      line: 2,
      column: 3,
    });
    assert.match(issueAt(error, 'servers.b').message, /missing transport/);
  });

  it('rejects an invalid server name', async () => {
    const error = await rejectsConfig(load('name.yaml', 'servers:\n  "my server":\n    command: x\n'));
    const issue = issueAt(error, 'servers.my server');
    assert.match(issue.message, /invalid server name "my server"/);
    assert.equal(issue.line, 2);
  });

  it('reports a YAML syntax error with its line', async () => {
    const error = await rejectsConfig(load('syntax.yaml', 'servers:\n  fs:\n    command: "unterminated\n    args: []\n'));
    assert.equal(error.code, 'MCPGATE_ERR_CONFIG_INVALID');
    assert.ok(error.issues.length >= 1);
    const [issue] = error.issues;
    assert.equal(issue?.path, '');
    assert.match(issue?.message ?? '', /quote/);
    assert.equal(typeof issue?.line, 'number');
    assert.ok((issue?.line ?? 0) >= 3);
  });

  it('reports a JSON syntax error with its line', async () => {
    const error = await rejectsConfig(load('syntax.json', '{\n  "servers": {\n    "fs": { "command": "x", }\n  }\n}\n'));
    const [issue] = error.issues;
    assert.match(issue?.message ?? '', /^invalid JSON/);
    assert.equal(issue?.line, 3);
  });

  it('rejects duplicate keys, naming the key and its line', async () => {
    const text = 'servers:\n  fs:\n    command: a\n    command: b\n';
    const error = await rejectsConfig(load('dup.yaml', text));
    assert.deepEqual(issueAt(error, 'servers.fs.command'), {
      path: 'servers.fs.command',
      message: 'duplicate key "command"',
      line: 4,
      column: 5,
    });
    const json = await rejectsConfig(load('dup.json', '{"servers": {"a": {"command": "x"}, "a": {"command": "y"}}}'));
    assert.match(issueAt(json, 'servers.a').message, /duplicate key "a"/);
  });

  it('names a duplicate key that follows an empty value, at the repeated key (issue 22 B5)', async () => {
    // yaml reports this one at the line break before the key; the message used to read `duplicate key "\n"`.
    const error = await rejectsConfig(load('dup-empty.yaml', 'servers:\n  fs:\n    command: x\n    env:\n      allow:\n      allow: [A]\n'));
    assert.deepEqual(issueAt(error, 'servers.fs.env.allow'), {
      path: 'servers.fs.env.allow',
      message: 'duplicate key "allow"',
      line: 6,
      column: 7,
    });
  });

  it('refuses a list or mapping used as a key, without a process warning (issue 22 B5)', async () => {
    const warnings: string[] = [];
    const onWarning = (warning: Error): void => {
      warnings.push(warning.message);
    };
    process.on('warning', onWarning);
    try {
      const error = await rejectsConfig(load('complex-key.yaml', 'servers:\n  ? [a, b]\n  : { command: x }\n'));
      assert.deepEqual(error.issues, [{ path: 'servers', message: 'a key must be a plain scalar, not a list, a mapping or an alias', line: 2, column: 5 }]);
      await new Promise((resolve) => setImmediate(resolve));
    } finally {
      process.off('warning', onWarning);
    }
    assert.deepEqual(warnings, []);
  });

  it('refuses a document nested thousands of levels deep with an issue, not a stack overflow (issue 22 B5)', async () => {
    const depth = 5000;
    const error = await rejectsConfig(load('deep.json', `{"servers": {"a": ${'{"a": '.repeat(depth)}1${'}'.repeat(depth)}}}`));
    assert.equal(error.issues.length, 1);
    assert.match(error.issues[0]?.message ?? '', /^nested more than 64 levels deep/);
  });

  it('keeps every issue on one line, escaping line breaks and bidi overrides from the file (issue 22 B5)', async () => {
    const error = await rejectsConfig(load('newline.json', '{"servers": {"a\\n\\u202eb": {"command": "x"}}}'));
    assert.equal(error.issues.length, 1);
    const [issue] = error.issues;
    assert.equal(issue?.path, 'servers.a\\u000a\\u202eb');
    assert.ok(!error.message.split('\n').slice(1).some((line) => !line.startsWith('  ')), error.message);
  });

  it('names the tool when a rename produces an invalid or too long tool name', async () => {
    const long = 'x'.repeat(125);
    const text = `servers:\n  gh:\n    command: x\n    tools:\n      rename:\n        search: ${long}\n`;
    const error = await rejectsConfig(load('rename.yaml', text));
    const issue = issueAt(error, 'servers.gh.tools.rename.search');
    assert.match(issue.message, new RegExp(`"gh__${long}"`));
    assert.equal(issue.line, 6);
    const bad = await rejectsConfig(load('rename2.yaml', 'servers:\n  gh:\n    command: x\n    tools: { rename: { search: "find it" } }\n'));
    assert.match(issueAt(bad, 'servers.gh.tools.rename.search').message, /tool names are/);
  });

  it('rejects a server name containing the separator', async () => {
    const error = await rejectsConfig(load('sep.yaml', 'servers:\n  my__fs:\n    command: x\n'));
    const issue = issueAt(error, 'servers.my__fs');
    assert.match(issue.message, /contains the separator "__"/);
    assert.equal(issue.line, 2);
    // With prefixing off there is nothing to be ambiguous about.
    const config = await load('sep-never.yaml', 'gateway:\n  prefix: never\nservers:\n  my__fs:\n    command: x\n');
    assert.ok(config.servers['my__fs']);
  });

  it('rejects a document that is not a mapping', async () => {
    const error = await rejectsConfig(load('list.yaml', '- a\n- b\n'));
    assert.match(error.issues[0]?.message ?? '', /must be a mapping/);
    await rejectsConfig(load('empty.yaml', ''));
  });

  it('fails with MCPGATE_ERR_CONFIG_READ when the file cannot be read', async () => {
    const error = await rejectsConfig(loadConfig(`${dir.path}/absent.yaml`, { env: {} }));
    assert.equal(error.code, 'MCPGATE_ERR_CONFIG_READ');
    assert.match(error.issues[0]?.message ?? '', /ENOENT/);
  });
});

describe('parseConfig', () => {
  it('detects JSON by content and ignores a byte-order mark', () => {
    const config = parseConfig('\uFEFF{"servers": {"a": {"url": "https://x.example"}}}', { env: {}, fileName: 'config' });
    assert.equal(config.servers['a']?.transport, 'http');
  });

  it('lists every issue in the error message', () => {
    assert.throws(
      () => parseConfig('servers: {}\nfoo: 1\nbar: 2\n', { env: {}, fileName: 'x.yaml' }),
      (error: unknown) => error instanceof Error && /x\.yaml:2:1: foo: unknown key "foo"\n.*x\.yaml:3:1: bar/s.test(error.message),
    );
  });
});
