import { keySecretOptions, resolveKeySecret } from '../authn/key-secret.js';
import { announce } from '../cluster/announce.js';
import type { Invalidation } from '../cluster/invalidation-bus.js';
import { loadConfig } from '../config/load.js';
import type { GatewayConfig } from '../config/schema.js';
import { ControlPlane, type ControlChange } from '../control/control-plane.js';
import { createStore } from '../store/create-store.js';
import { reportError } from './report-error.js';

/** Streams and environment of the management commands, injected so they stay testable. */
export interface ControlIo {
  /** Variables for `${VAR}` interpolation (normally `process.env`), e.g. `MCPGATE_KEY_SECRET`. */
  readonly env: NodeJS.ProcessEnv;
  readonly stdout: (line: string) => void;
  readonly stderr: (line: string) => void;
  /** The clock for expiries and key states (tests fix it). */
  readonly now?: () => Date;
  /** `--debug`: a failure prints its stack after its one line. */
  readonly debug?: boolean;
}

/** Options every management command takes. */
export interface CommonOptions {
  readonly config: string;
  readonly json?: boolean;
}

export { UsageError } from './report-error.js';

/**
 * Loads the config, opens its store and hands a control plane over it to `use`; the store is closed after.
 * `withSecret` resolves the API-key secret first (only key creation needs it), so a PostgreSQL config without
 * `auth.keySecret` fails before any connection is tried.
 */
export async function withControl<T>(
  options: { readonly file: string; readonly withSecret?: boolean },
  io: ControlIo,
  use: (control: ControlPlane, config: GatewayConfig) => Promise<T>,
): Promise<T> {
  const config = await loadConfig(options.file, { env: io.env });
  let keySecret: string | undefined;
  if (options.withSecret === true) {
    ({ secret: keySecret } = await resolveKeySecret(keySecretOptions(config.gateway)));
  }
  const store = await createStore(config.gateway.store);
  const changes = new Set<ControlChange>();
  try {
    const control = new ControlPlane({
      store,
      config,
      onChange: (change) => changes.add(change),
      ...(keySecret === undefined ? {} : { keySecret }),
      ...(io.now === undefined ? {} : { now: io.now }),
    });
    const result = await use(control, config);
    await announceChanges(config, changes, io);
    return result;
  } finally {
    await store.close();
  }
}

/**
 * Tells running replicas about changes made here, over their invalidation bus (`gateway.cluster.redis`), so that a
 * revocation or an edit applies at once rather than within their caches' TTLs (issue 27 §2).
 */
export async function announceChanges(config: GatewayConfig, changes: ReadonlySet<Invalidation>, io: ControlIo): Promise<void> {
  const problem = await announce(config.gateway.cluster, changes);
  if (problem !== undefined) io.stderr(`warning: running gateways were not told over Redis (${problem}); they apply the change within their cache TTLs (1 s)`);
}

/**
 * Runs a subcommand and turns every failure into its report ({@link reportError}): one stderr line and exit code 1
 * for an expected one, EXIT_INTERNAL for a bug. The body returns its own exit code when 0 is not the only success
 * (explain answers 2 for "denied").
 */
export async function runCommand(io: ControlIo, command: string, body: () => Promise<number | void>): Promise<number> {
  try {
    return (await body()) ?? 0;
  } catch (error) {
    const report = reportError(command, error, io.debug === true);
    for (const line of report.lines) io.stderr(line);
    return report.exitCode;
  }
}

/** Columns padded to their widest cell, two spaces apart: readable in a terminal, `--json` for scripts. */
export function printTable(io: ControlIo, header: readonly string[], rows: readonly (readonly string[])[]): void {
  const widths = header.map((title, column) => Math.max(title.length, ...rows.map((row) => (row[column] ?? '').length)));
  const line = (cells: readonly string[]): string =>
    cells
      .map((cell, column) => (column === cells.length - 1 ? cell : cell.padEnd(widths[column] ?? 0)))
      .join('  ')
      .trimEnd();
  io.stdout(line(header));
  for (const row of rows) io.stdout(line(row));
}

/** Machine output: one JSON document on stdout (dates as ISO strings). */
export function printJson(io: ControlIo, value: unknown): void {
  io.stdout(JSON.stringify(value, null, 2));
}

export const showDate = (value: Date | undefined): string => (value === undefined ? '-' : value.toISOString());

/** `a,b,c` → `['a','b','c']`; an empty string is an empty list (which, in a permission, allows nothing). */
export function splitList(value: string): string[] {
  return value === '' ? [] : value.split(',').map((item) => item.trim());
}

/** Commander's collector for repeatable options. */
export function collect(value: string, previous: readonly string[] = []): string[] {
  return [...previous, value];
}
