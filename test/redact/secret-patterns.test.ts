import assert from 'node:assert/strict';
import { test } from 'node:test';
import {
  credentialKeySpellings,
  findSecrets,
  isCredentialKey,
  mayContainSecret,
  redactText,
  redactValue,
  redactValueWithReport,
} from '../../src/redact/secret-patterns.js';
import { generateApiKey } from '../../src/authn/api-keys.js';
import { guardsSchema } from '../../src/config/governance-schema.js';
import { guardResult } from '../../src/guards/response-guard.js';

// Built at runtime so that the repository itself holds no credential-shaped literals for scanners to flag.
const b64 = (n: number, seed = 'Ab3'): string => seed.repeat(Math.ceil(n / seed.length)).slice(0, n);
const jwt = `eyJhbGciOiJFUzI1NiJ9.eyJzdWIiOiJ1c2VyLTEifQ.${b64(43, 'sIg_9')}`;
const pem = [
  '-----BEGIN PRIVATE KEY-----',
  'MC4CAQAwBQYDK2VwBCIEIFZ3Mq0GvA4X9l1Hq7J+Ya2Yxz8wq3s0k7xTtY1Z8d3u',
  '-----END PRIVATE KEY-----',
].join('\n');

const positives: Array<[kind: string, secret: string, context: (s: string) => string]> = [
  ['bearer', `${b64(32)}.x_y`, (s) => `Authorization: Bearer ${s}`],
  ['jwt', jwt, (s) => `session ${s} expired`],
  ['mcpgate-key', `mcpg_${b64(43, 'k9_-Q')}`, (s) => `key=${s}`.replace('key=', 'using ')],
  ['aws-access-key-id', `AKIA${'ABCDEFGH23456789'}`, (s) => `id ${s} here`],
  ['aws-access-key-id', `ASIA${'QWERTYUIOP234567'}`, (s) => `(${s})`],
  ['aws-secret-key', `wJalrXUtnFEMI/K7MDENG/bPxRfiCY${'EXAMPLEKE'}Y`, (s) => `aws secret is ${s}`],
  ['github-token', `ghp_${b64(36, 'aZ09')}`, (s) => `token ${s}`.replace('token ', 'gh: ')],
  ['github-token', `gho_${b64(36, 'aZ09')}`, (s) => s],
  ['github-token', `ghs_${b64(36, 'aZ09')}`, (s) => s],
  ['github-token', `github_pat_${b64(22, 'aZ09')}_${b64(59, 'Zz1')}`, (s) => `pat: ${s}`.replace('pat: ', 'fine grained ')],
  ['gitlab-token', `glpat-${b64(20, 'xY-1')}`, (s) => `gitlab ${s}`],
  ['slack-token', `xoxb-1234567890-${b64(24, 'aB1')}`, (s) => `slack ${s}`],
  ['stripe-key', `sk_live_${b64(24, 'aB1')}`, (s) => `stripe ${s}`],
  ['stripe-key', `rk_live_${b64(24, 'aB1')}`, (s) => s],
  ['stripe-key', `sk_test_${b64(24, 'aB1')}`, (s) => s],
  ['google-api-key', `AIza${b64(35, 'Sy_-9')}`, (s) => `google ${s}`],
  ['openai-key', `sk-${b64(48, 'aB1')}`, (s) => `openai ${s}`],
  ['openai-key', `sk-proj-${b64(64, 'aB1_-')}`, (s) => `openai ${s}`],
  ['anthropic-key', `sk-ant-api03-${b64(80, 'aB1_-')}`, (s) => `claude ${s}`],
  ['private-key', pem, (s) => `here:\n${s}\nthere`],
  ['credential-assignment', 'hunter22', (s) => `db password=${s} host=x`],
  ['credential-assignment', 'opensesame', (s) => `secret=${s}`],
  ['credential-assignment', 'abc123', (s) => `https://x.test/cb?token=${s}&state=1`],
  ['credential-assignment', 's3cr3t value', (s) => `{"api_key": "${s}"}`],
  ['url-credentials', 'pa55word', (s) => `postgres://admin:${s}@db.internal:5432/app`],
  ['basic-auth', Buffer.from('user:pass').toString('base64'), (s) => `Authorization: Basic ${s}`],
];

for (const [kind, secret, context] of positives) {
  test(`finds ${kind}: ${secret.slice(0, 12)}…`, () => {
    const text = context(secret);
    const findings = findSecrets(text);
    assert.ok(findings.some((f) => f.kind === kind), `expected ${kind} in ${JSON.stringify(findings)}`);
    const redacted = redactText(text);
    assert.equal(redacted.includes(secret), false, redacted);
    assert.match(redacted, new RegExp(`\\[REDACTED:${kind}\\]`));
    assert.equal(mayContainSecret(text), true);
    // The pre-check runs on serialised results: escaping must not hide the anchor.
    assert.equal(mayContainSecret(JSON.stringify({ content: [{ type: 'text', text: `x\n${text}\t"` }] })), true);
  });
}

test('finding offsets cover exactly the secret and leave context readable', () => {
  const token = `${b64(32)}zz`;
  const text = `Authorization: Bearer ${token}`;
  const [finding] = findSecrets(text);
  assert.ok(finding);
  assert.equal(text.slice(finding.start, finding.end), token);
  assert.equal(redactText(text), 'Authorization: Bearer [REDACTED:bearer]');
  assert.equal(redactText('password=hunter22 ok'), 'password=[REDACTED:credential-assignment] ok');
});

const nearMisses = [
  'commit 3f786850e387550fdab836ed7e6dc881de23001b merged', // git sha
  'request 123e4567-e89b-12d3-a456-426614174000 done', // UUID
  'sha256 e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855',
  'aws region us-east-1 bucket 3f786850e387550fdab836ed7e6dc881de23001b', // hex near "aws"
  'we use sk-learn-is-a-python-library for models',
  'WWW-Authenticate: Bearer realm="mcp", resource_metadata="https://x/y"',
  'Basic authentication is disabled',
  'listening on http://127.0.0.1:8080/mcp',
  'tokens=5 passwordless=true token=1',
  'the password: must be 8 characters',
  'mcpg_ alone and eyJ alone',
  '-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----',
];

for (const text of nearMisses) {
  test(`leaves alone: ${text.slice(0, 40)}`, () => {
    assert.deepEqual(findSecrets(text), []);
    assert.equal(redactText(text), text);
  });
}

test('an unterminated private key is still masked', () => {
  const text = `x\n-----BEGIN RSA PRIVATE KEY-----\nMIIEpAIBAAKCAQEA7\nabc+/=\n`;
  const out = redactText(text);
  assert.equal(out.includes('MIIEpAIBAAKCAQEA7'), false);
  assert.match(out, /\[REDACTED:private-key\]/);
});

test('redactValue: deep copy, credential keys wholly replaced, strings redacted, input untouched', () => {
  const input = {
    headers: { Authorization: 'Basic zzz', 'X-Api-Key': 'short', cookie: 'a=b', 'set-cookie': ['s=1'] },
    nested: [{ note: `use ${jwt} later`, count: 3, ok: true }],
    client_secret: 'plain',
    apiKey: 'k',
    private_key: 'p',
    'x-mcpgate-key': 'g',
    secret: false,
    token: null,
    keyboard: 'qwerty',
  };
  const snapshot = structuredClone(input);
  const out = redactValue(input) as typeof input;
  assert.deepEqual(input, snapshot);
  assert.equal(out.headers.Authorization, '[REDACTED:credential-field]');
  assert.equal(out.headers['X-Api-Key'], '[REDACTED:credential-field]');
  assert.equal(out.headers.cookie, '[REDACTED:credential-field]');
  assert.equal(out.headers['set-cookie'] as unknown, '[REDACTED:credential-field]');
  assert.equal(out.nested[0]?.note, 'use [REDACTED:jwt] later');
  assert.equal(out.nested[0]?.count, 3);
  assert.equal(out.client_secret, '[REDACTED:credential-field]');
  assert.equal(out.apiKey, '[REDACTED:credential-field]');
  assert.equal(out.private_key, '[REDACTED:credential-field]');
  assert.equal(out['x-mcpgate-key'], '[REDACTED:credential-field]');
  assert.equal(out.secret, false);
  assert.equal(out.token, null);
  assert.equal(out.keyboard, 'qwerty');
  const report = redactValueWithReport(input);
  assert.equal(report.kinds.filter((k) => k === 'jwt').length, 1);
  assert.equal(report.kinds.length, 9);
  assert.equal(isCredentialKey('ACCESS_TOKEN'), true);
  assert.equal(isCredentialKey('tokenizer'), false);
});

test('redactValue passes primitives through', () => {
  assert.equal(redactValue(42), 42);
  assert.equal(redactValue(null), null);
  assert.equal(redactValue('plain'), 'plain');
});

test('issue 22 A1: a gateway key is masked whatever precedes it, in plain and in JSON-escaped text', () => {
  const { key } = generateApiKey('s'.repeat(32));
  const other = generateApiKey('s'.repeat(32)).key;
  const forms = [
    `Bearer\t${key}`,
    other,
    `Bearer ${other}, Bearer x`,
    `Bearer x,${other}`,
    `x${key}`,
    `0${key}`,
    `_${key}`,
    `-${key}`,
    `id=${key}&b=1`,
    `"${key}"`,
    `${key}${other}`,
  ];
  for (const form of forms) {
    for (const text of [form, `authorization: ${form}`, JSON.stringify({ authorization: form }), JSON.stringify(JSON.stringify({ headers: { authorization: form } }))]) {
      const out = redactText(text);
      assert.equal(out.includes(key.slice(5)) || out.includes(other.slice(5)), false, `${text} -> ${out}`);
      assert.equal(mayContainSecret(text), true);
    }
  }
});

test('issue 22 A1: the response guard masks a key an upstream echoes back inside stringified JSON text', () => {
  const { key } = generateApiKey('s'.repeat(32));
  const echo = (authorization: string) => ({ content: [{ type: 'text', text: JSON.stringify({ authorization, 'x-mcpgate-key': key }) }], structuredContent: { seen: [authorization] } });
  for (const authorization of [`Bearer\t${key}`, key, `Bearer ${key}, Bearer x`, `Bearer\tupstream-token-${b64(12)}`]) {
    const outcome = guardResult(echo(authorization), guardsSchema.parse({}), 'pt');
    assert.ok(outcome.ok);
    assert.equal(outcome.text.includes(key.slice(5)), false, outcome.text);
    assert.equal(outcome.text.includes(b64(12)), false, outcome.text);
    assert.ok(outcome.redactions > 0);
  }
});

test('bounded work on huge and adversarial inputs', () => {
  const cases: Array<[string, string]> = [
    ['prose', 'the quick brown fox jumps over the lazy dog token password secret '.repeat(80_000)],
    ['one base64 run', 'A'.repeat(5_000_000)],
    ['repeated jwt headers', '-eyJ'.repeat(1_250_000)],
    ['repeated bearer', 'Bearer '.repeat(700_000)],
    ['unterminated PEM headers', '-----BEGIN RSA PRIVATE KEY-----x'.repeat(150_000)],
    ['password= runs', 'password='.repeat(550_000)],
    ['url-ish', 'a://b:c'.repeat(700_000)],
    ['aws hex', `aws ${'ab12'.repeat(1_250_000)}`],
    ['sk- runs', 'sk-'.repeat(1_600_000)],
    ['short mcpg_ tails', 'mcpg_abc '.repeat(550_000)],
    ['escaped bearer tabs', 'Bearer\\t'.repeat(550_000)],
  ];
  for (const [name, text] of cases) {
    const started = performance.now();
    findSecrets(text);
    const elapsed = performance.now() - started;
    assert.ok(elapsed < 1500, `${name}: ${elapsed.toFixed(0)} ms`);
  }
});

test('every credential field name trips the pre-check, in any spelling', () => {
  for (const key of credentialKeySpellings()) {
    for (const spelling of [key, key.toUpperCase(), key.replace(/[-_]/g, '')]) {
      assert.equal(isCredentialKey(spelling), true, spelling);
      assert.equal(mayContainSecret(JSON.stringify({ [spelling]: 'v' })), true, spelling);
    }
  }
});
