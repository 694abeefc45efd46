import assert from 'node:assert/strict';
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { after, describe, it } from 'node:test';
import { fetchLiveTools } from '../../src/approvals/live-catalog.js';
import { parseConfig } from '../../src/config/load.js';
import { createLogger } from '../../src/observability/logger.js';

// Built by `npm run build` (npm test builds first): spawned as a real child, as the gateway would.
const FIXTURE = fileURLToPath(new URL('../../dist/test/fixtures/approvals/tools-server.js', import.meta.url));
const root = mkdtempSync(join(tmpdir(), 'mcpgate-live-catalog-'));
after(() => rmSync(root, { recursive: true, force: true }));
const logger = createLogger({ level: 'silent' });

function toolsFile(name: string, tools: unknown[], pageSize?: number): string {
  const file = join(root, `${name}.json`);
  writeFileSync(file, JSON.stringify({ tools, ...(pageSize === undefined ? {} : { pageSize }) }));
  return file;
}

function stdio(file: string, extra = ''): string {
  return `    transport: stdio\n    command: ${JSON.stringify(process.execPath)}\n    args: [${JSON.stringify(FIXTURE)}, ${JSON.stringify(file)}]\n${extra}`;
}

/** Processes still running the fixture with this tools file: each must have been reaped. */
function running(file: string): number[] {
  return readdirSync('/proc')
    .filter((entry) => /^[0-9]+$/.test(entry))
    .filter((pid) => {
      try {
        return readFileSync(`/proc/${pid}/cmdline`, 'utf8').includes(file);
      } catch {
        return false;
      }
    })
    .map(Number);
}

const tool = (name: string) => ({ name, description: `Tool ${name}.`, inputSchema: { type: 'object' } });

describe('fetchLiveTools', () => {
  it('lists every page of every enabled server through the gateway transports and reaps the children', async () => {
    assert.ok(existsSync(FIXTURE), 'run `npm run build` first');
    const paged = toolsFile('paged', [tool('a'), tool('b'), tool('c')], 1);
    const single = toolsFile('single', [tool('x')]);
    const config = parseConfig(
      `gateway:\n  mode: dev\n  auth: { mode: none }\nservers:\n  paged:\n${stdio(paged)}  single:\n${stdio(single)}  off:\n${stdio(single, '    enabled: false\n')}`,
      { env: {} },
    );
    const { tools, failed } = await fetchLiveTools(config, logger);
    assert.deepEqual(Object.fromEntries(failed), {});
    assert.deepEqual([...tools.keys()].sort(), ['paged', 'single']);
    assert.deepEqual(tools.get('paged')?.map((item) => item.name), ['a', 'b', 'c']);
    assert.deepEqual(tools.get('single'), [tool('x')]);
    assert.deepEqual(running(paged), []);
    assert.deepEqual(running(single), []);

    const named = await fetchLiveTools(config, logger, ['single', 'off', 'missing']);
    assert.deepEqual([...named.tools.keys()], ['single']);
    assert.deepEqual(Object.fromEntries(named.failed), { off: 'disabled (enabled: false)', missing: 'not configured' });
  });

  it('reports a server that cannot be reached and still lists the others', async () => {
    const good = toolsFile('good', [tool('ok')]);
    const config = parseConfig(
      `gateway:\n  mode: dev\n  auth: { mode: none }\nservers:\n  good:\n${stdio(good)}  broken:\n    transport: stdio\n    command: /nonexistent/mcp-server\n  dead:\n    transport: http\n    url: http://127.0.0.1:9/mcp\n    connectTimeoutMs: 2000\n`,
      { env: {} },
    );
    const { tools, failed } = await fetchLiveTools(config, logger);
    assert.deepEqual([...tools.keys()], ['good']);
    assert.deepEqual([...failed.keys()].sort(), ['broken', 'dead']);
    assert.match(failed.get('broken') ?? '', /MCPGATE_ERR_UPSTREAM/);
    assert.match(failed.get('dead') ?? '', /MCPGATE_ERR_UPSTREAM/);
  });

  it('refuses to spawn an unmeasured stdio server in production mode, as the gateway does', async () => {
    const file = toolsFile('prod', [tool('a')]);
    const config = parseConfig(`gateway:\n  mode: production\nservers:\n  prod:\n${stdio(file)}`, { env: {} });
    const { tools, failed } = await fetchLiveTools(config, logger);
    assert.equal(tools.size, 0);
    assert.match(failed.get('prod') ?? '', /digest|unmeasured/i);
    assert.deepEqual(running(file), []);
  });

  it('refuses a server that lists one tool name twice', async () => {
    const file = toolsFile('twice', [tool('a'), { ...tool('a'), description: 'The other a.' }]);
    const config = parseConfig(`gateway:\n  mode: dev\n  auth: { mode: none }\nservers:\n  twice:\n${stdio(file)}`, { env: {} });
    const { failed } = await fetchLiveTools(config, logger);
    assert.match(failed.get('twice') ?? '', /tool "a" twice/);
  });
});
