import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { parse, stringify } from 'yaml';
import { runCheck } from '../../src/cli/check.js';
import { ConfigError, formatConfigIssue } from '../../src/config/config-error.js';
import { parseConfig } from '../../src/config/load.js';
import { makeTempDir, type TempDir } from './helpers.js';

/**
 * Issue 22 B5: generated configurations, fed both to the loader in process and to `mcpgate check` through a
 * file. Whatever the input, the only failure allowed is a ConfigError whose every issue prints as one
 * `file:line:col: path: message` line; any other exception, or a check that throws, is a bug.
 *
 * The corpus starts from every YAML block of the README and every examples/*.yaml, and mutates them both as data
 * (deleted keys, swapped types, huge values, unicode, deep nesting, odd keys) and as text (truncation, stray
 * characters, duplicated lines, anchors, alias bombs, tags, several documents). The PRNG is seeded, so a failure
 * names the case that reproduces it.
 */

// MCPGATE_FUZZ_SEED explores other corpora; the default keeps every run the same.
const SEED = Number(process.env['MCPGATE_FUZZ_SEED'] ?? 0x22b5);
const CASES = 3000;
const ROOT = join(import.meta.dirname, '..', '..');

function mulberry32(seed: number): () => number {
  let state = seed >>> 0;
  return () => {
    state = (state + 0x6d2b79f5) >>> 0;
    let t = state;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

class Random {
  private readonly next: () => number;
  constructor(seed: number) {
    this.next = mulberry32(seed);
  }
  float(): number {
    return this.next();
  }
  int(below: number): number {
    return Math.floor(this.next() * below);
  }
  chance(p: number): boolean {
    return this.next() < p;
  }
  pick<T>(items: readonly T[]): T {
    const item = items[this.int(items.length)];
    if (item === undefined) throw new Error('pick from an empty list');
    return item;
  }
}

/** The README's YAML blocks (the complete example first) and the example files. */
function seedTexts(): string[] {
  const readme = readFileSync(join(ROOT, 'README.md'), 'utf8');
  const blocks = [...readme.matchAll(/^```yaml\n([\s\S]*?)^```$/gm)].map((match) => match[1] ?? '');
  const examples = readdirSync(join(ROOT, 'examples'))
    .filter((name) => name.endsWith('.yaml'))
    .map((name) => readFileSync(join(ROOT, 'examples', name), 'utf8'));
  const complete = blocks.find((block) => block.includes('gateway:') && block.includes('servers:'));
  assert.ok(complete !== undefined, 'the README has a complete example');
  return [complete, ...blocks, ...examples];
}

/** Plausible values for the variables the seeds refer to, so that mutations reach the schema rather than stop at interpolation. */
function envFor(texts: readonly string[]): Record<string, string> {
  const env: Record<string, string> = {};
  for (const text of texts) {
    for (const match of text.matchAll(/\$\{([A-Za-z_][A-Za-z0-9_]*)/g)) {
      const name = match[1] ?? '';
      env[name] = /URL|URI/.test(name) ? 'https://upstream.example/mcp' : /PORT/.test(name) ? '8080' : 'x'.repeat(40);
    }
  }
  return env;
}

const UNICODE = ['é', '日本語', '🙂', '\u202e', '\u0000', '\u200b', '\ud800', 'Ω\u0301', '\u{10ffff}', '\t', '\r\n'];

function randomString(random: Random): string {
  switch (random.int(6)) {
    case 0:
      return '';
    case 1:
      return 'x'.repeat(random.pick([1, 65, 129, 10_000, 200_000]));
    case 2:
      return Array.from({ length: 1 + random.int(8) }, () => random.pick(UNICODE)).join('');
    case 3:
      return random.pick(['https://', 'http://10.0.0.1/mcp', 'file:///etc/passwd', 'SHA256:', 'sha256/', 'sha256:zz', '${X}', '$${X}', '${', 'mcpg_abc', '*', '../..', '0x10', '1e3', '-1']);
    case 4:
      return String(random.int(100_000));
    default:
      return random.pick(['dev', 'production', 'stdio', 'http', 'sse', 'auto', 'none', 'apiKey', 'pinned', 'off', 'file', 'store', 'per-user', 'passthrough', 'static', 'deny', 'allow']);
  }
}

function randomScalar(random: Random): unknown {
  switch (random.int(7)) {
    case 0:
      return null;
    case 1:
      return random.chance(0.5);
    case 2:
      return random.pick([0, -1, 1, 65_536, 2 ** 53, -(2 ** 31), 1e308, 0.5, Number.MAX_SAFE_INTEGER + 2]);
    default:
      return randomString(random);
  }
}

function randomValue(random: Random, depth = 0): unknown {
  const kind = depth > 3 ? 0 : random.int(4);
  if (kind === 0 || kind === 1) return randomScalar(random);
  if (kind === 2) return Array.from({ length: random.int(4) }, () => randomValue(random, depth + 1));
  const object: Record<string, unknown> = {};
  for (let i = random.int(4); i > 0; i--) object[randomKey(random)] = randomValue(random, depth + 1);
  return object;
}

function randomKey(random: Random): string {
  return random.pick(['x', '__proto__', 'constructor', 'toString', '', ' ', 'servers', 'gateway', 'mode', 'tls', 'pin', 'transport', 'url', 'command', 'credentials', 'catalog', 'audit', '日本', 'a.b', '0']);
}

function deepNest(random: Random, depth: number): unknown {
  let value: unknown = randomScalar(random);
  for (let i = 0; i < depth; i++) value = random.chance(0.5) ? [value] : { a: value };
  return value;
}

/** Every container in `value` with the path to it. */
function containers(value: unknown, path: (string | number)[] = [], out: { path: (string | number)[]; node: object }[] = []) {
  if (typeof value === 'object' && value !== null) {
    out.push({ path, node: value });
    for (const [key, child] of Object.entries(value)) containers(child, [...path, Array.isArray(value) ? Number(key) : key], out);
  }
  return out;
}

function mutateData(random: Random, data: unknown): unknown {
  if (typeof data !== 'object' || data === null || random.chance(0.02)) return randomValue(random);
  const root = structuredClone(data) as object;
  for (let steps = 1 + random.int(3); steps > 0; steps--) {
    const targets = containers(root);
    const { node } = random.pick(targets);
    const keys = Object.keys(node);
    const record = node as Record<string, unknown>;
    const key = keys.length > 0 ? random.pick(keys) : randomKey(random);
    switch (random.int(9)) {
      case 0:
        if (Array.isArray(node)) node.splice(Number(key), 1);
        else Reflect.deleteProperty(record, key);
        break;
      case 1:
      case 2:
        record[key] = randomScalar(random);
        break;
      case 3:
        record[key] = randomValue(random);
        break;
      case 4:
        // A scalar turned into a list of itself, or a list into its first item: the shapes the schema accepts both of.
        {
          // Own properties only: `constructor` and the like would otherwise bring in Object's own.
          const current = Object.hasOwn(record, key) ? record[key] : null;
          record[key] = Array.isArray(current) ? (current as unknown[])[0] : [current];
        }
        break;
      case 5:
        record[key] = deepNest(random, random.pick([10, 100, 300]));
        break;
      case 6:
        if (!Array.isArray(node)) record[randomKey(random)] = randomValue(random);
        break;
      case 7:
        // A subtree moved somewhere it does not belong.
        record[key] = structuredClone(random.pick(targets).node);
        break;
      default:
        record[key] = randomString(random);
    }
  }
  return root;
}

const TEXT_SNIPPETS = [
  '\n  x: 1\n',
  ': :',
  '\t',
  '- ',
  '&a ',
  '*a',
  '*undefined_alias',
  '<<: *a\n',
  '!!binary AAAA',
  '!!js/function "f"',
  '!custom x',
  '!!set {a, b}',
  '!!omap [a: 1]',
  '? [complex, key]\n: v\n',
  '\n---\nservers: {}\n',
  '%YAML 1.1\n---\n',
  '"unterminated',
  "'",
  '{',
  ']',
  '\u0000',
  '\ufeff',
  '#',
  '|\n  block\n',
  '>-\n',
  '@',
  '`',
  '0o17',
  '.nan',
  '.inf',
  '~',
];

const ALIAS_BOMB = [
  'a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]',
  'b: &b [*a,*a,*a,*a,*a,*a,*a,*a,*a]',
  'c: &c [*b,*b,*b,*b,*b,*b,*b,*b,*b]',
  'd: &d [*c,*c,*c,*c,*c,*c,*c,*c,*c]',
  'e: &e [*d,*d,*d,*d,*d,*d,*d,*d,*d]',
  'f: &f [*e,*e,*e,*e,*e,*e,*e,*e,*e]',
  'servers: { x: { command: *f } }',
].join('\n');

function mutateText(random: Random, text: string): string {
  switch (random.int(10)) {
    case 0:
      return text.slice(0, random.int(text.length + 1));
    case 1: {
      const at = random.int(text.length + 1);
      return text.slice(0, at) + random.pick(TEXT_SNIPPETS) + text.slice(at);
    }
    case 2: {
      // A line repeated: a duplicate key, or a list item twice.
      const lines = text.split('\n');
      const at = random.int(lines.length);
      lines.splice(at, 0, lines[at] ?? '');
      return lines.join('\n');
    }
    case 3:
      return random.chance(0.5) ? ALIAS_BOMB : `${text}\n${ALIAS_BOMB.replace('servers:', 'zz:')}\n`;
    case 4: {
      const depth = random.pick([100, 1000, 20_000]);
      const [open, close] = random.pick([['[', ']'], ['{"a": ', '}'], ['{a: ', '}'], ['- ', '']]);
      const inner = `${(open ?? '').repeat(depth)}1${(close ?? '').repeat(random.chance(0.8) ? depth : random.int(depth))}`;
      return random.chance(0.5) ? inner : `{"servers": {"a": ${inner}}}`;
    }
    case 5:
      return `${'a:\n '.repeat(0)}${Array.from({ length: random.pick([50, 500]) }, (_, i) => `${' '.repeat(i)}k${i}:`).join('\n')} v\n`;
    case 6:
      return text.replaceAll('\n', '\r\n');
    case 7: {
      const lines = text.split('\n');
      const at = random.int(lines.length);
      lines[at] = ` ${lines[at] ?? ''}`;
      return lines.join('\n');
    }
    case 8:
      return Array.from({ length: random.int(200) }, () => String.fromCharCode(random.int(0x3000))).join('');
    default:
      return `anchors: &base { transport: stdio, command: x }\n${text}`.replace('servers:', 'servers:\n  merged:\n    <<: *base');
  }
}

function serialise(random: Random, data: unknown): { text: string; json: boolean } {
  if (random.chance(0.25)) {
    try {
      return { text: JSON.stringify(data, null, random.chance(0.5) ? 2 : 0) ?? 'null', json: true };
    } catch {
      // Too deep for JSON.stringify: fall through to YAML.
    }
  }
  return { text: stringify(data, { aliasDuplicateObjects: false, lineWidth: 0 }), json: false };
}

interface Case {
  readonly text: string;
  readonly json: boolean;
  /** In production mode, where more rules apply (placeholder pins, digests). */
  readonly production: boolean;
}

function makeCase(random: Random, seeds: readonly { text: string; data: unknown }[]): Case {
  const seed = random.pick(seeds);
  const production = random.chance(0.5);
  let data: unknown = structuredClone(seed.data);
  if (production && typeof data === 'object' && data !== null && !Array.isArray(data)) {
    const gateway = (data as Record<string, unknown>)['gateway'];
    if (typeof gateway === 'object' && gateway !== null) (gateway as Record<string, unknown>)['mode'] = 'production';
  }
  const structural = random.chance(0.8);
  if (structural) data = mutateData(random, data);
  let { text, json } = structural || production ? serialise(random, data) : { text: seed.text, json: false };
  if (random.chance(0.35)) {
    text = mutateText(random, text);
    json = json && random.chance(0.5);
  }
  return { text, json, production };
}

const LINE = /^[^\n]+?(?::\d+(?::\d+)?)?: (?:[^\n]*?: )?[^\n]+$/;

function assertOnlyConfigIssues(label: string, outcome: unknown, fileName: string): void {
  if (outcome === undefined) return;
  assert.ok(outcome instanceof ConfigError, `${label}: expected a ConfigError, got ${outcome instanceof Error ? (outcome.stack ?? outcome.message) : String(outcome)}`);
  assert.ok(outcome.issues.length > 0, `${label}: a ConfigError without issues`);
  for (const issue of outcome.issues) {
    const line = formatConfigIssue(fileName, issue);
    assert.ok(!line.includes('\n'), `${label}: an issue on more than one line: ${JSON.stringify(line)}`);
    assert.match(line, LINE, `${label}: not a file:line:col: path: message line`);
    assert.ok(issue.message.trim().length > 0, `${label}: an empty message`);
  }
}

let dir: TempDir;
before(async () => {
  dir = await makeTempDir();
});
after(async () => {
  await dir.cleanup();
});

describe('generated configurations (issue 22 B5)', () => {
  it(`gives ${CASES} random and mutated configs only file:line:col: path: message errors, never an exception`, async () => {
    const texts = seedTexts();
    const env = envFor(texts);
    const seeds = texts.map((text) => {
      try {
        return { text, data: parse(text) as unknown };
      } catch {
        return { text, data: null };
      }
    });
    const random = new Random(SEED);
    const outcomes = { ok: 0, invalid: 0 };
    // Collected rather than stopping at the first, so one run shows every distinct defect.
    const failures: string[] = [];
    for (let index = 0; index < CASES; index++) {
      try {
        await runCase(index);
      } catch (error) {
        failures.push(error instanceof Error ? error.message : String(error));
      }
    }
    assert.deepEqual(failures.slice(0, 10), [], `${failures.length} of ${CASES} cases failed`);
    // The corpus must reach both sides of the schema, or it tests nothing but the parser.
    assert.ok(outcomes.ok > CASES / 50, `only ${outcomes.ok} valid cases`);
    assert.ok(outcomes.invalid > CASES / 2, `only ${outcomes.invalid} invalid cases`);

    async function runCase(index: number): Promise<void> {
      const testCase = makeCase(random, seeds);
      const fileName = `case-${index}.${testCase.json ? 'json' : 'yaml'}`;
      const label = `case ${index} (seed ${SEED}, ${testCase.production ? 'production' : 'as written'}): ${JSON.stringify(testCase.text.slice(0, 300))}`;

      let thrown: unknown;
      try {
        parseConfig(testCase.text, { env, fileName });
      } catch (error) {
        thrown = error;
      }
      assertOnlyConfigIssues(label, thrown, fileName);
      // `check` adds its own rules to a config that loads (spawn policy, approvals); for one that does not it only
      // prints the loader's issues, so a sample of those is enough and keeps the run short.
      if (thrown !== undefined && index % 10 !== 0) {
        outcomes.invalid++;
        return;
      }

      const file = await dir.write(fileName, testCase.text);
      const stdout: string[] = [];
      const stderr: string[] = [];
      let code: number;
      try {
        code = await runCheck(file, { env, stdout: (line) => stdout.push(line), stderr: (line) => stderr.push(line) });
      } catch (error) {
        assert.fail(`${label}: check threw ${error instanceof Error ? (error.stack ?? error.message) : String(error)}`);
      }
      if (code === 0) {
        outcomes.ok++;
        assert.equal(stderr.length, 0, label);
        assert.match(stdout.join('\n'), /^ok: \d+ servers?/, label);
      } else {
        outcomes.invalid++;
        assert.equal(code, 1, `${label}: exit ${code}`);
        assert.ok(stderr.length > 0, `${label}: exit 1 without a line`);
        for (const line of stderr) {
          assert.ok(line.startsWith(`${file}`), `${label}: ${line}`);
          assert.match(line, LINE, `${label}: ${JSON.stringify(line)}`);
        }
      }
    }
  });
});
