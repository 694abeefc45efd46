// Secret values of the credentials config (`clientSecret`, `privateKeyJwt.key`, static headers): inline or from
// a file, one trailing newline trimmed, and errors that name the field but never the value.
import assert from 'node:assert/strict';
import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, test } from 'node:test';
import { MAX_SECRET_FILE_BYTES, resolveSecretValue } from '../../src/credentials/secret-value.js';
import { ClientCredentialsTokens } from '../../src/credentials/oauth-client-credentials.js';
import { assertNothingLeaked, capturedLogger, clientCredentialsConfig, gatewayRejection } from '../fixtures/oauth/helpers.js';
import { OAuthFixture } from '../fixtures/oauth/oauth-server.js';

const WHAT = 'servers.billing.credentials.clientSecret';
let dir: string;

before(async () => {
  dir = await mkdtemp(join(tmpdir(), 'mcpgate-secret-'));
  await mkdir(join(dir, 'secrets'));
});

after(async () => {
  await rm(dir, { recursive: true, force: true });
});

test('an inline value is returned as is', async () => {
  assert.equal(await resolveSecretValue('  s3cret\n', dir, WHAT), '  s3cret\n');
});

test('a file is read relative to the config folder, and exactly one trailing newline is trimmed', async () => {
  await writeFile(join(dir, 'secrets/one'), 's3cret-one\n');
  await writeFile(join(dir, 'secrets/two'), 's3cret-two\n\n');
  await writeFile(join(dir, 'secrets/crlf'), 's3cret-crlf\r\n');
  await writeFile(join(dir, 'secrets/none'), 's3cret-none');
  assert.equal(await resolveSecretValue({ file: 'secrets/one' }, dir, WHAT), 's3cret-one');
  assert.equal(await resolveSecretValue({ file: 'secrets/two' }, dir, WHAT), 's3cret-two\n');
  assert.equal(await resolveSecretValue({ file: 'secrets/crlf' }, dir, WHAT), 's3cret-crlf');
  assert.equal(await resolveSecretValue({ file: join(dir, 'secrets/none') }, '/elsewhere', WHAT), 's3cret-none');
});

test('an empty file (or one holding only a newline) is a config error naming the field', async () => {
  await writeFile(join(dir, 'secrets/empty'), '\n');
  const error = await gatewayRejection(resolveSecretValue({ file: 'secrets/empty' }, dir, WHAT));
  assert.equal(error.code, 'MCPGATE_ERR_CONFIG_INVALID');
  assert.match(error.message, /^servers\.billing\.credentials\.clientSecret: the secret file .*secrets\/empty is empty$/);
  assert.deepEqual(error.data, { path: WHAT });
});

test('a missing file is a read error naming the field and the path, and a directory or oversized file is refused', async () => {
  const missing = await gatewayRejection(resolveSecretValue({ file: 'secrets/absent' }, dir, WHAT));
  assert.equal(missing.code, 'MCPGATE_ERR_CONFIG_READ');
  assert.match(missing.message, /clientSecret: cannot read the secret file .*secrets\/absent \(ENOENT\)/);
  const directory = await gatewayRejection(resolveSecretValue({ file: 'secrets' }, dir, WHAT));
  assert.match(directory.message, /is not a regular file/);
  const big = 'x'.repeat(MAX_SECRET_FILE_BYTES + 1);
  await writeFile(join(dir, 'secrets/big'), big);
  const oversized = await gatewayRejection(resolveSecretValue({ file: 'secrets/big' }, dir, WHAT));
  assert.equal(oversized.code, 'MCPGATE_ERR_CONFIG_INVALID');
  assert.match(oversized.message, /is larger than 65536 bytes/);
  assertNothingLeaked(['xxxxxxxx'], oversized);
});

test('ClientCredentialsTokens.fromConfig reads the client secret from a file and never shows it', async () => {
  const secret = 'file-secret-0123456789abcdef';
  await writeFile(join(dir, 'secrets/client'), `${secret}\n`);
  const fixture = await OAuthFixture.start({ clients: [{ clientId: 'c1', method: 'client_secret_basic', clientSecret: secret }] });
  const { logger, lines } = capturedLogger();
  const tokens = await ClientCredentialsTokens.fromConfig({
    serverName: 'billing',
    config: clientCredentialsConfig({ tokenEndpoint: fixture.tokenEndpoint, clientId: 'c1', clientSecret: { file: 'secrets/client' } }),
    logger,
    baseDir: dir,
  });
  try {
    assert.equal(fixture.issued.get(await tokens.token()), 'c1');
    assert.deepEqual(fixture.rejections, []);
    fixture.tokenOverride = () => ({ status: 401, json: { error: 'invalid_client', error_description: secret } });
    tokens.invalidate();
    const error = await gatewayRejection(tokens.token());
    assertNothingLeaked([secret], error, lines);
  } finally {
    await tokens.close();
    await fixture.close();
  }
});
