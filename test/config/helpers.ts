import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import assert from 'node:assert/strict';
import { ConfigError } from '../../src/config/config-error.js';

/** A temp directory per test file, removed by `cleanup`. */
export interface TempDir {
  readonly path: string;
  /** Writes `text` to `name` inside the directory and returns the file's full path. */
  write(name: string, text: string): Promise<string>;
  cleanup(): Promise<void>;
}

export async function makeTempDir(): Promise<TempDir> {
  const path = await mkdtemp(join(tmpdir(), 'mcpgate-config-'));
  return {
    path,
    async write(name, text) {
      const file = join(path, name);
      await writeFile(file, text, 'utf8');
      return file;
    },
    cleanup: () => rm(path, { recursive: true, force: true }),
  };
}

/** Awaits `promise`, asserts it rejects with a ConfigError, and returns that error. */
export async function rejectsConfig(promise: Promise<unknown>): Promise<ConfigError> {
  try {
    await promise;
  } catch (error) {
    assert.ok(error instanceof ConfigError, `expected a ConfigError, got ${String(error)}`);
    return error;
  }
  assert.fail('expected the configuration to be rejected');
}

/** The one issue at `path`; fails listing every issue when there is not exactly one. */
export function issueAt(error: ConfigError, path: string): ConfigError['issues'][number] {
  const found = error.issues.filter((issue) => issue.path === path);
  assert.equal(found.length, 1, `expected one issue at ${path}, got: ${JSON.stringify(error.issues)}`);
  const [issue] = found;
  assert.ok(issue !== undefined);
  return issue;
}
