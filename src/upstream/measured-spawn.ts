import { createHash } from 'node:crypto';
import { accessSync, constants, createReadStream, statSync } from 'node:fs';
import { delimiter, isAbsolute, resolve } from 'node:path';
import { pipeline } from 'node:stream/promises';
import { GatewayError } from '../errors/gateway-error.js';

/**
 * What a stdio child runs, resolved and measured before it is spawned (issue 4 §1 and §4, DESIGN.md invariant 8).
 * The gateway spawns the absolute path it resolved and measured, not the bare name, so that the program hashed
 * is the program started (short of someone rewriting the file in between, which a digest cannot prevent).
 */

/** `sha256:` followed by 64 hex digits; the config schema checks the same form. */
export const DIGEST_PATTERN = /^sha256:[0-9a-fA-F]{64}$/;

/**
 * Resolves `command` the way execvp(3) does, so that the identity and the digest name the file that actually
 * runs: a name with a slash is a path (relative to `cwd`, the child's working directory); a bare name is looked up
 * in each `PATH` entry in order (an empty entry means `cwd`), and the first regular file we may execute wins.
 * Returns undefined when nothing matches; the caller then keeps the literal name and the spawn fails as before.
 */
export function resolveCommand(command: string, cwd: string, path: string | undefined): string | undefined {
  if (command.includes('/')) {
    const candidate = resolve(cwd, command);
    return isExecutableFile(candidate) ? candidate : undefined;
  }
  for (const entry of (path ?? '').split(delimiter)) {
    const candidate = resolve(cwd, entry === '' ? '.' : entry, command);
    if (isExecutableFile(candidate)) return candidate;
  }
  return undefined;
}

function isExecutableFile(file: string): boolean {
  try {
    if (!statSync(file).isFile()) return false;
    accessSync(file, constants.X_OK);
    return true;
  } catch {
    return false;
  }
}

/** `sha256:<hex>` of a file, streamed so that a large binary is never held in memory at once. */
export async function digestOfFile(file: string): Promise<string> {
  const hash = createHash('sha256');
  await pipeline(createReadStream(file), hash);
  return `sha256:${hash.digest('hex')}`;
}

export interface Measurement {
  /** The server's configured name, for messages. */
  serverName: string;
  /** `sha256:<hex>` from the config, or undefined for an unmeasured server. */
  digest?: string;
  /** A script to hash instead of the executable (interpreted servers: `node server.js` measures server.js). */
  measure?: string;
  /** Whether a server without a digest may be spawned at all. */
  allowUnmeasured: boolean;
}

/**
 * Checks the spawn target against its configured digest, hashing it now (issue 4 §4: before EVERY spawn, so a
 * binary replaced after start-up is caught at its next spawn). `executable` is the resolved command, undefined
 * when it could not be resolved. Resolves when the spawn may proceed.
 *
 * @throws GatewayError MCPGATE_ERR_UPSTREAM_DIGEST_MISMATCH naming the server, the expected and the actual
 *   digest (or why none could be computed); MCPGATE_ERR_UPSTREAM_UNAVAILABLE when the server is unmeasured and
 *   `allowUnmeasured` is false. Both fail closed: nothing is spawned.
 */
export async function verifyMeasurement(measurement: Measurement, executable: string | undefined, cwd: string): Promise<string | undefined> {
  const { serverName: server, digest, measure } = measurement;
  if (digest === undefined) {
    if (measurement.allowUnmeasured) return undefined;
    throw new GatewayError(
      'MCPGATE_ERR_UPSTREAM_UNAVAILABLE',
      `upstream "${server}" is unavailable: it has no digest and allowUnmeasured is false, so it is not spawned (set digest: "sha256:<hex>", or allowUnmeasured: true)`,
      { data: { server, reason: 'unmeasured' } },
    );
  }
  const target = measure !== undefined ? (isAbsolute(measure) ? measure : resolve(cwd, measure)) : executable;
  const expected = digest.toLowerCase();
  let actual: string;
  if (target === undefined) {
    actual = 'none (the command was not found on PATH)';
  } else {
    try {
      actual = await digestOfFile(target);
    } catch (error) {
      const code = (error as { code?: unknown }).code;
      actual = `none (the file to measure could not be read${typeof code === 'string' ? `: ${code}` : ''})`;
    }
  }
  if (actual === expected) return target;
  // The measured path stays out of the message and data, which reach clients; the transport logs it.
  throw new GatewayError(
    'MCPGATE_ERR_UPSTREAM_DIGEST_MISMATCH',
    `upstream "${server}" was not spawned: its digest does not match (expected ${expected}, actual ${actual})`,
    { data: { server, expected, actual } },
  );
}
