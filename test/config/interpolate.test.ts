import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { interpolate } from '../../src/config/interpolate.js';
import { loadConfig } from '../../src/config/load.js';
import { issueAt, makeTempDir, rejectsConfig, type TempDir } from './helpers.js';

let dir: TempDir;
before(async () => {
  dir = await makeTempDir();
});
after(async () => {
  await dir.cleanup();
});

describe('interpolate', () => {
  it('replaces variables in string values, never in keys', () => {
    const result = interpolate({ '${A}': '${A}', list: ['x${A}y', 3, true, null] }, { A: 'v' });
    assert.deepEqual(result.issues, []);
    assert.deepEqual(result.value, { '${A}': 'v', list: ['xvy', 3, true, null] });
  });

  it('uses the default when the variable is unset or empty', () => {
    const result = interpolate(['${X:-fallback}', '${E:-fallback}', '${S:-fallback}', '${X:-}'], { E: '', S: 'set' });
    assert.deepEqual(result.value, ['fallback', 'fallback', 'set', '']);
    assert.deepEqual(result.issues, []);
  });

  it('treats $${VAR} as a literal ${VAR}', () => {
    const result = interpolate('echo $${HOME} and ${HOME} and $HOME', { HOME: '/root' });
    assert.equal(result.value, 'echo ${HOME} and /root and $HOME');
    assert.deepEqual(result.issues, []);
  });

  it('accepts an empty variable without a default', () => {
    assert.deepEqual(interpolate('a${E}b', { E: '' }), { value: 'ab', issues: [] });
  });

  it('reports every missing variable with its path', () => {
    const result = interpolate({ a: { b: ['${ONE}', 'x ${TWO} ${ONE}'] } }, {});
    assert.deepEqual(result.issues, [
      { path: ['a', 'b', 0], variable: 'ONE', message: 'environment variable ONE is not set' },
      { path: ['a', 'b', 1], variable: 'TWO', message: 'environment variable TWO is not set' },
      { path: ['a', 'b', 1], variable: 'ONE', message: 'environment variable ONE is not set' },
    ]);
  });

  it('rejects malformed references instead of passing them through', () => {
    const result = interpolate({ a: '${not valid}', b: 'x ${OPEN', c: '${}' }, {});
    assert.deepEqual(
      result.issues.map((issue) => [issue.path.join('.'), issue.variable]),
      [
        ['a', undefined],
        ['b', undefined],
        ['c', undefined],
      ],
    );
    assert.match(result.issues[1]?.message ?? '', /unterminated/);
  });

  it('reads only own properties of the env object', () => {
    const result = interpolate('${constructor}', {});
    assert.equal(result.issues[0]?.variable, 'constructor');
  });
});

describe('loadConfig: environment variables', () => {
  const text = `servers:
  github:
    url: https://api.example.com/mcp
    headers:
      Authorization: Bearer \${GITHUB_TOKEN}
      X-Team: \${TEAM}
  fs:
    command: \${FS_BIN:-mcp-fs}
    args: ["$\${NOT_INTERPOLATED}"]
`;

  it('names a missing variable and the path where it is used', async () => {
    const file = await dir.write('env.yaml', text);
    const error = await rejectsConfig(loadConfig(file, { env: { TEAM: 'core' } }));
    assert.equal(error.code, 'MCPGATE_ERR_CONFIG_ENV_MISSING');
    assert.deepEqual(error.issues, [
      {
        path: 'servers.github.headers.Authorization',
        message: 'environment variable GITHUB_TOKEN is not set',
        line: 5,
        column: 22,
      },
    ]);
  });

  it('reports two missing variables together', async () => {
    const file = await dir.write('env2.yaml', text);
    const error = await rejectsConfig(loadConfig(file, { env: {} }));
    assert.match(issueAt(error, 'servers.github.headers.Authorization').message, /GITHUB_TOKEN/);
    assert.match(issueAt(error, 'servers.github.headers.X-Team').message, /TEAM/);
    assert.equal(error.issues.length, 2);
  });

  it('applies defaults and escapes', async () => {
    const file = await dir.write('env3.yaml', text);
    const config = await loadConfig(file, { env: { GITHUB_TOKEN: 't0k', TEAM: 'core' } });
    const fs = config.servers['fs'];
    assert.ok(fs?.transport === 'stdio');
    assert.equal(fs.command, 'mcp-fs');
    assert.deepEqual(fs.args, ['${NOT_INTERPOLATED}']);
    const github = config.servers['github'];
    assert.ok(github?.transport === 'http');
    assert.equal(github.headers['Authorization'], 'Bearer t0k');
  });

  it('reports malformed references as invalid configuration', async () => {
    const file = await dir.write('env4.yaml', 'servers:\n  fs:\n    command: ${BIN\n');
    const error = await rejectsConfig(loadConfig(file, { env: {} }));
    assert.equal(error.code, 'MCPGATE_ERR_CONFIG_INVALID');
    assert.equal(issueAt(error, 'servers.fs.command').line, 3);
  });
});
