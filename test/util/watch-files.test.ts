import assert from 'node:assert/strict';
import { mkdtempSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, it } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { watchFiles, type FileWatch } from '../../src/util/watch-files.js';

const root = mkdtempSync(join(tmpdir(), 'mcpgate-watch-'));
after(() => rmSync(root, { recursive: true, force: true }));

/**
 * A directory with `names` written in it, and a watch of them under their own names as keys; `changes` starts
 * empty, after the report every key gets when the watch starts.
 */
async function setup(names: string[], debounceMs = 40): Promise<{ dir: string; changes: string[]; watch: FileWatch }> {
  const base = mkdtempSync(join(root, 'case-'));
  for (const name of names) writeFileSync(join(base, name), `${name} v1\n`);
  const changes: string[] = [];
  const watch = watchFiles(
    names.map((name) => [join(base, name), name] as const),
    { debounceMs, onChange: (key) => changes.push(key), onError: (where, error) => assert.fail(`${where}: ${error.message}`) },
  );
  await sleep(0);
  assert.deepEqual(changes, names, 'every key is reported once when the watch starts');
  changes.length = 0;
  return { dir: base, changes, watch };
}

describe('watchFiles', () => {
  it('reports an edit in place and a file renamed over the old one, once per burst, under its key only', async () => {
    const { dir, changes, watch } = await setup(['a.cedar', 'b.cedar']);
    try {
      writeFileSync(join(dir, 'a.cedar'), 'a v2, longer\n');
      writeFileSync(join(dir, 'a.cedar'), 'a v3, longer still\n');
      await sleep(250);
      assert.deepEqual(changes, ['a.cedar']);
      // As `mcpgate catalog approve` and editors write: a temporary file, then a rename over the watched one.
      writeFileSync(join(dir, 'b.tmp'), 'b v2\n');
      renameSync(join(dir, 'b.tmp'), join(dir, 'b.cedar'));
      await sleep(250);
      assert.deepEqual(changes, ['a.cedar', 'b.cedar']);
    } finally {
      watch.close();
    }
  });

  it('ignores other files of a busy directory, and still looks within ten quiet periods while it stays busy', async () => {
    const { dir, changes, watch } = await setup(['catalog.json']);
    try {
      // A database beside the file, written every 10 ms: never a 40 ms quiet period.
      let stop = false;
      const busy = (async () => {
        for (let index = 0; !stop; index += 1) {
          writeFileSync(join(dir, 'mcpgate.db-wal'), String(index));
          await sleep(10);
        }
      })();
      await sleep(300);
      assert.deepEqual(changes, [], 'no change of the watched file, no report');
      writeFileSync(join(dir, 'catalog.json'), 'catalog v2\n');
      await sleep(700);
      stop = true;
      await busy;
      assert.deepEqual(changes, ['catalog.json'], 'reported within 400 + 40 ms of the change despite the traffic');
    } finally {
      watch.close();
    }
  });

  it('reports a file that disappears and one that comes back; nothing after close', async () => {
    const { dir, changes, watch } = await setup(['policy.cedar']);
    rmSync(join(dir, 'policy.cedar'));
    await sleep(250);
    assert.deepEqual(changes, ['policy.cedar']);
    writeFileSync(join(dir, 'policy.cedar'), 'back\n');
    await sleep(250);
    assert.deepEqual(changes, ['policy.cedar', 'policy.cedar']);
    watch.close();
    writeFileSync(join(dir, 'policy.cedar'), 'after close, longer\n');
    await sleep(250);
    assert.equal(changes.length, 2);
  });
});

describe('watchFiles: a directory that cannot be watched', () => {
  it('reports a missing directory through onError and watches the others; it never throws', async () => {
    const base = mkdtempSync(join(root, 'missing-'));
    writeFileSync(join(base, 'here.cedar'), 'v1\n');
    const errors: string[] = [];
    const changes: string[] = [];
    const watch = watchFiles(
      [
        [join(base, 'not-yet', 'catalog.json'), 'catalog'],
        [join(base, 'here.cedar'), 'here'],
      ],
      { debounceMs: 20, onChange: (key) => changes.push(key), onError: (dir, error) => errors.push(`${dir} ${(error as NodeJS.ErrnoException).code}`) },
    );
    try {
      assert.deepEqual(errors, [`${join(base, 'not-yet')} ENOENT`]);
      await sleep(0);
      assert.deepEqual(changes, ['catalog', 'here'], 'the start report covers the unwatched key too: its caller still rereads once');
      writeFileSync(join(base, 'here.cedar'), 'v2, longer\n');
      await sleep(250);
      assert.deepEqual(changes, ['catalog', 'here', 'here']);
    } finally {
      watch.close();
    }
  });
});
