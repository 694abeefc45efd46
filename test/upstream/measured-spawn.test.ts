import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { chmodSync, existsSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, it } from 'node:test';
import { GatewayError } from '../../src/errors/gateway-error.js';
import { digestOfFile, verifyMeasurement } from '../../src/upstream/measured-spawn.js';
import { StdioTransport } from '../../src/upstream/stdio-transport.js';
import { captureLogger } from '../fixtures/upstream/rpc-helper.js';

/** Measured spawn (issue 4 §4, DESIGN.md invariant 8): hashed before every spawn, a mismatch spawns nothing. */

const dir = mkdtempSync(join(tmpdir(), 'mcpgate-measure-'));
after(() => rmSync(dir, { recursive: true, force: true }));

const sha = (text: string | Buffer): string => `sha256:${createHash('sha256').update(text).digest('hex')}`;

/** An executable that leaves a marker file when it runs, so a test can tell whether anything was spawned. */
function markerScript(name: string): { file: string; marker: string; source: string } {
  const file = join(dir, name);
  const marker = join(dir, `${name}.ran`);
  const source = `#!${process.execPath}\nrequire('node:fs').writeFileSync(${JSON.stringify(marker)}, 'x');\nsetTimeout(() => {}, 30000);\n`;
  writeFileSync(file, source);
  chmodSync(file, 0o755);
  return { file, marker, source };
}

describe('digestOfFile', () => {
  it('streams a file larger than one read chunk into sha256:<hex>', async () => {
    const big = Buffer.alloc(3 * 1024 * 1024 + 17, 0x5a);
    writeFileSync(join(dir, 'big.bin'), big);
    assert.equal(await digestOfFile(join(dir, 'big.bin')), sha(big));
  });
});

describe('verifyMeasurement', () => {
  const script = join(dir, 'server.js');
  writeFileSync(script, 'console.log("hi")\n');

  it('passes a matching digest (case-insensitive) and returns what it measured', async () => {
    const digest = sha('console.log("hi")\n').toUpperCase().replace('SHA256:', 'sha256:');
    assert.equal(await verifyMeasurement({ serverName: 's', digest, measure: 'server.js', allowUnmeasured: false }, process.execPath, dir), script);
  });

  it('refuses a mismatch naming the server, the expected and the actual digest', async () => {
    const expected = `sha256:${'0'.repeat(64)}`;
    await assert.rejects(verifyMeasurement({ serverName: 'files', digest: expected, measure: script, allowUnmeasured: true }, undefined, dir), (error: unknown) => {
      assert.ok(GatewayError.is(error));
      assert.equal(error.code, 'MCPGATE_ERR_UPSTREAM_DIGEST_MISMATCH');
      assert.equal(error.httpStatus, 502);
      assert.equal(error.rpcCode, -32000);
      assert.deepEqual(error.data, { server: 'files', expected, actual: sha('console.log("hi")\n') });
      assert.match(error.message, /upstream "files".*expected sha256:0{64}, actual sha256:[0-9a-f]{64}/);
      assert.doesNotMatch(error.message, new RegExp(dir), 'no filesystem path reaches the client');
      return true;
    });
  });

  it('refuses when there is nothing to measure: unresolvable command or unreadable file', async () => {
    const digest = `sha256:${'1'.repeat(64)}`;
    await assert.rejects(verifyMeasurement({ serverName: 's', digest, allowUnmeasured: true }, undefined, dir), /actual none \(the command was not found/);
    await assert.rejects(verifyMeasurement({ serverName: 's', digest, measure: 'absent.js', allowUnmeasured: true }, process.execPath, dir), /actual none \(the file to measure could not be read: ENOENT\)/);
  });

  it('refuses an unmeasured server unless allowUnmeasured', async () => {
    assert.equal(await verifyMeasurement({ serverName: 's', allowUnmeasured: true }, process.execPath, dir), undefined);
    await assert.rejects(verifyMeasurement({ serverName: 'raw', allowUnmeasured: false }, process.execPath, dir), (error: unknown) => {
      assert.ok(GatewayError.is(error));
      assert.equal(error.code, 'MCPGATE_ERR_UPSTREAM_UNAVAILABLE');
      assert.deepEqual(error.data, { server: 'raw', reason: 'unmeasured' });
      assert.match(error.message, /"raw".*no digest and allowUnmeasured is false/);
      return true;
    });
  });
});

describe('StdioTransport measured spawn', () => {
  const open: StdioTransport[] = [];
  after(async () => {
    await Promise.all(open.map((transport) => transport.close()));
  });

  function transport(command: string, extra: Partial<ConstructorParameters<typeof StdioTransport>[0]>) {
    const { logger, lines } = captureLogger();
    const made = new StdioTransport({ serverName: 'm', command, logger, maxMessageBytes: 1024, killGraceMs: 100, ...extra });
    open.push(made);
    return { made, lines };
  }

  it('spawns the resolved executable when its digest matches', async () => {
    const { file, marker, source } = markerScript('ok.js');
    const { made } = transport(file, { digest: sha(source) });
    await made.start();
    for (let i = 0; i < 100 && !existsSync(marker); i += 1) await new Promise((resolve) => setTimeout(resolve, 20));
    assert.ok(existsSync(marker), 'the child ran');
  });

  it('spawns nothing on a mismatch, and logs the measured file', async () => {
    const { file, marker } = markerScript('bad.js');
    const { made, lines } = transport(file, { digest: `sha256:${'f'.repeat(64)}` });
    await assert.rejects(made.start(), { code: 'MCPGATE_ERR_UPSTREAM_DIGEST_MISMATCH' });
    assert.equal(made.pid, undefined);
    await new Promise((resolve) => setTimeout(resolve, 200));
    assert.equal(existsSync(marker), false, 'the child never ran');
    assert.ok(lines().some((line) => line.msg === 'upstream spawn refused' && line.executable === file));
  });

  it('spawns nothing when unmeasured and not allowed (the transport default fails closed)', async () => {
    const { file, marker } = markerScript('unmeasured.js');
    const { made } = transport(file, {});
    await assert.rejects(made.start(), { code: 'MCPGATE_ERR_UPSTREAM_UNAVAILABLE' });
    assert.equal(existsSync(marker), false);
  });

  it('measures the `measure` script, not the interpreter, and re-measures at every spawn', async () => {
    const { file, marker, source } = markerScript('interpreted.js');
    const first = transport(process.execPath, { args: [file], measure: file, digest: sha(source) }).made;
    await first.start();
    await first.close();
    writeFileSync(file, `${source}// changed after start-up\n`);
    rmSync(marker, { force: true });
    const second = transport(process.execPath, { args: [file], measure: file, digest: sha(source) }).made;
    await assert.rejects(second.start(), /upstream "m" was not spawned: its digest does not match/);
    await new Promise((resolve) => setTimeout(resolve, 200));
    assert.equal(existsSync(marker), false);
  });
});
