import assert from 'node:assert/strict';
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import { fileURLToPath } from 'node:url';
import { ESLint, type Linter } from 'eslint';

const ROOT = fileURLToPath(new URL('../../', import.meta.url));
const eslint = new ESLint({ cwd: ROOT, overrideConfigFile: join(ROOT, 'eslint.config.js') });

/** Lints a fixture's text as if it were `src/<path>` (the file need not exist): the per-folder rules apply by path. */
async function lintAs(fixture: string, path: string): Promise<Linter.LintMessage[]> {
  const filePath = join(ROOT, 'src', path);
  // An ignored path would come back with one "File ignored" warning and prove nothing.
  assert.equal(await eslint.isPathIgnored(filePath), false);
  const text = await readFile(join(ROOT, 'test/fixtures/lint', fixture), 'utf8');
  const [result] = await eslint.lintText(text, { filePath });
  assert.ok(result !== undefined);
  return result.messages;
}

function restricted(messages: readonly Linter.LintMessage[]): Array<{ line: number; message: string }> {
  return messages.filter((m) => m.ruleId === 'no-restricted-imports').map(({ line, message }) => ({ line, message }));
}

// Issue 24 §5: DESIGN.md §1's layers as per-folder no-restricted-imports rules in eslint.config.js.
describe('layer import rules', () => {
  it('refuses a transport importing policy', async () => {
    const messages = await lintAs('transport-imports-policy.ts.txt', 'transport/lint-fixture.ts');
    assert.deepEqual(restricted(messages), [
      {
        line: 2,
        message:
          "'../policy/decision.js' import is restricted from being used by a pattern. src/transport/ may not import src/policy/ (DESIGN.md §1 layers; the allowed imports are in eslint.config.js and src/transport/README.md).",
      },
    ]);
    assert.equal(messages.length, 1);
  });

  it('refuses policy importing the router', async () => {
    const messages = await lintAs('policy-imports-router.ts.txt', 'policy/lint-fixture.ts');
    assert.deepEqual(
      restricted(messages).map((m) => m.line),
      [2],
    );
    assert.match(messages[0]?.message ?? '', /src\/policy\/ may not import src\/router\//);
    assert.equal(messages.length, 1);
  });

  it('lets a transport import a layer to its right, the shared model and util', async () => {
    assert.deepEqual(await lintAs('transport-imports-right.ts.txt', 'transport/lint-fixture.ts'), []);
  });

  it('allows a known exception only for the files it names', async () => {
    const messages = await lintAs('credentials-imports-policy.ts.txt', 'credentials/lint-fixture.ts');
    assert.deepEqual(
      restricted(messages).map((m) => m.line),
      [3],
    );
    assert.match(messages[0]?.message ?? '', /src\/credentials\/ may not import src\/policy\/ beyond access-policy\.js/);
    assert.equal(messages.length, 1);
  });
  // Issue 26: the core publishes facts; only the metrics subscriber imports a metrics library.
  it('refuses prom-client outside src/observability/metrics/, and allows it there', async () => {
    const messages = await lintAs('imports-prom-client.ts.txt', 'router/lint-fixture.ts');
    assert.deepEqual(
      restricted(messages).map((m) => m.line),
      [2],
    );
    assert.match(messages[0]?.message ?? '', /prom-client lives in src\/observability\/metrics\/ only/);
    assert.deepEqual(await lintAs('imports-prom-client.ts.txt', 'observability/metrics/lint-fixture.ts'), []);
  });

  it('lets any layer import pipeline/events.js, and no more of pipeline/ than its rule allows', async () => {
    const messages = await lintAs('upstream-imports-pipeline.ts.txt', 'upstream/lint-fixture.ts');
    assert.deepEqual(
      restricted(messages).map((m) => m.line),
      [3],
    );
  });
});
