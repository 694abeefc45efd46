/**
 * Every fenced YAML block of the README and docs/ is YAML a user can paste: it parses. The README's "Several
 * replicas" block once held `auth: { keySecret: ${MCPGATE_KEY_SECRET} }`, where `{` opens a flow mapping inside
 * the flow mapping, and `mcpgate check` refused the copy with a syntax error. `${VAR}` belongs in block style or
 * in quotes.
 */
import assert from 'node:assert/strict';
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import { fileURLToPath } from 'node:url';
import { parseAllDocuments } from 'yaml';
import { readmeBlocks } from './readme.js';

const ROOT = fileURLToPath(new URL('../../', import.meta.url));
const FILES = ['README.md', ...readdirSync(join(ROOT, 'docs')).filter((name) => name.endsWith('.md')).map((name) => `docs/${name}`)];

describe('YAML blocks in the README and docs/', () => {
  for (const file of FILES) {
    const blocks = readmeBlocks(readFileSync(join(ROOT, file), 'utf8')).filter((block) => block.lang === 'yaml' || block.lang === 'yml');
    if (blocks.length === 0) continue;
    it(`${file}: its ${blocks.length} YAML block(s) parse`, () => {
      for (const block of blocks) {
        const errors = parseAllDocuments(block.text).flatMap((document) => document.errors.map((error) => error.message.split('\n')[0]));
        assert.deepEqual(errors, [], `${file}:${block.line}`);
      }
    });
  }

  it('finds the flow mapping the README once had', () => {
    const errors = parseAllDocuments('gateway:\n  auth: { keySecret: ${MCPGATE_KEY_SECRET} }\n').flatMap((document) => document.errors);
    assert.ok(errors.length > 0);
  });
});
