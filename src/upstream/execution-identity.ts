import { createHash } from 'node:crypto';
import { isAbsolute, resolve } from 'node:path';
import type { HttpServerConfig, ServerConfig, StdioServerConfig } from '../config/schema.js';
import { isPlaceholderPin } from '../util/tls-pins.js';
import { resolveCommand } from './measured-spawn.js';
import { canonicalJson } from '../util/canonical-json.js';

/**
 * The execution identity of an upstream (issue 4 §1, DESIGN.md invariant 1): everything that decides WHICH peer
 * or WHICH program the gateway talks to. Every per-upstream cache that could carry state from one upstream to
 * another (HTTP dispatcher, shared stdio child, and later list and drift caches) is keyed by it and never by
 * anything coarser, so two entries share such state only when their identities are equal.
 */
export interface ExecutionIdentity {
  /** Canonical JSON (sorted keys) of the identity's fields; never logged (it names files and env keys). */
  readonly canonical: string;
  /** SHA-256 hex of `canonical`: the key the caches use. */
  readonly hash: string;
}

/** What the identity of a stdio server depends on outside its config entry. */
export interface IdentityContext {
  /** The gateway's environment: its PATH resolves bare commands and its HOME is the default child HOME. */
  readonly env?: NodeJS.ProcessEnv;
  /** The gateway's working directory: relative `cwd`, `measure` and TLS file paths resolve against it. */
  readonly cwd?: string;
}

/**
 * Derives the execution identity of the server configured as `name`. The one function for it: callers never
 * build keys of their own.
 *
 * - Network (`http`, `sse`, `auto`): transport, normalised URL, certificate and SPKI pins (sorted), the other
 *   TLS settings (CA, client certificate, SNI: a pool connects with one set of them), SPIFFE id. A server
 *   without a real pin (none, or only the placeholder) is "unpinned", which is not an identity: its configured
 *   name is folded in, so two unrelated unpinned entries never share a pool or its cookies (the bug issue 4
 *   cites). Two entries with the same URL and the same real pin do share one.
 * - stdio: the command resolved to an absolute path like execvp (PATH from `env.set.PATH` or the gateway's;
 *   an unresolvable command keeps its literal name), args, the measured file, digest, resolved cwd, HOME, the
 *   env allowlist, and the `env.set` keys each with a SHA-256 of its value: two entries that differ only in a
 *   token they set are two programs as far as isolation goes, yet the value itself stays out of the string.
 */
export function executionIdentityOf(name: string, server: ServerConfig, context: IdentityContext = {}): ExecutionIdentity {
  const fields = server.transport === 'stdio' ? stdioFields(server, context) : networkFields(name, server, context);
  const canonical = canonicalJson(fields);
  return { canonical, hash: createHash('sha256').update(canonical).digest('hex') };
}

/** True when the server names at least one pin that identifies a verified peer (issue 4 §3). */
export function hasRealPin(server: HttpServerConfig): boolean {
  const certPins = (server.tls?.pin ?? []).filter((pin) => !isPlaceholderPin(pin));
  return certPins.length > 0 || (server.tls?.spkiPin ?? []).length > 0;
}

function networkFields(name: string, server: HttpServerConfig, context: IdentityContext): Record<string, unknown> {
  const url = new URL(server.url);
  url.hash = '';
  const tls = server.tls;
  const base = context.cwd ?? process.cwd();
  const file = (path: string | undefined): string | null => (path === undefined ? null : resolve(base, path));
  return {
    transport: server.transport,
    // WHATWG URL serialisation lower-cases scheme and host and drops a default port.
    url: url.href,
    pins: sortedUnique((tls?.pin ?? []).filter((pin) => !isPlaceholderPin(pin))),
    spkiPins: sortedUnique(tls?.spkiPin ?? []),
    tls: { ca: file(tls?.ca), cert: file(tls?.cert), key: file(tls?.key), servername: tls?.servername ?? null },
    spiffeId: server.spiffeId ?? null,
    unpinned: hasRealPin(server) ? null : name,
  };
}

function stdioFields(server: StdioServerConfig, context: IdentityContext): Record<string, unknown> {
  const env = context.env ?? process.env;
  const cwd = resolve(context.cwd ?? process.cwd(), server.cwd ?? '.');
  const path = Object.hasOwn(server.env.set, 'PATH') ? server.env.set['PATH'] : env['PATH'];
  const measure = server.measure === undefined ? null : isAbsolute(server.measure) ? server.measure : resolve(cwd, server.measure);
  const set = Object.entries(server.env.set).map(([key, value]) => [key, createHash('sha256').update(value).digest('hex')]);
  return {
    transport: 'stdio',
    command: resolveCommand(server.command, cwd, path) ?? server.command,
    args: server.args,
    measure,
    digest: server.digest?.toLowerCase() ?? null,
    cwd,
    home: server.home ?? env['HOME'] ?? null,
    envAllow: sortedUnique(server.env.allow),
    envSet: Object.fromEntries(set),
  };
}

function sortedUnique(values: readonly string[]): string[] {
  return [...new Set(values)].sort();
}
