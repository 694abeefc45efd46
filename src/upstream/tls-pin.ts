import { readFileSync } from 'node:fs';
import type { Socket } from 'node:net';
import { TLSSocket } from 'node:tls';
import { buildConnector } from 'undici';
import type { ServerConfig } from '../config/schema.js';
import type { TlsConfig } from '../config/tls-rules.js';
import { GatewayError } from '../errors/gateway-error.js';
import type { Logger } from '../observability/logger.js';
import { publishPinMismatch } from '../pipeline/events.js';
import { isLoopbackHost, isPlaceholderPin, pinsOfCertificate, toPinList, type CertificatePins } from '../util/tls-pins.js';

/**
 * TLS certificate pinning for HTTP upstreams (issue 4 §3, DESIGN.md invariant 2). The pin is checked inside the
 * undici connector, right after the handshake and before the connector hands the socket to undici, so on a
 * mismatch not one request byte is written. CA verification (`rejectUnauthorized`) is never turned off: a pin
 * narrows trust, it does not replace it, so an expired certificate with a correct pin still fails.
 */

export type UndiciConnector = buildConnector.connector;

export interface PinnedConnectorOptions {
  serverName: string;
  tls: TlsConfig;
  mode: 'dev' | 'production';
  logger: Logger;
  /** TCP + TLS connect timeout; undici ignores the Pool's `connectTimeout` once `connect` is a function. */
  timeoutMs?: number;
}


/** Servers already warned about, per logger: one warning per server, not per connection (issue 4 §3). */
const warned = new WeakMap<Logger, Set<string>>();

function warnOnce(logger: Logger, key: string, fields: Record<string, unknown>, message: string): void {
  let seen = warned.get(logger);
  if (seen === undefined) {
    seen = new Set();
    warned.set(logger, seen);
  }
  if (seen.has(key)) return;
  seen.add(key);
  logger.warn(fields, message);
}

function pinError(server: string, detail: string): GatewayError {
  return new GatewayError('MCPGATE_ERR_UPSTREAM_TLS_PIN', `upstream "${server}": the TLS pin did not match (${detail})`, { data: { server } });
}

/** Reads the PEM files named in `tls`; a failure becomes the reason every connection of this server fails. */
function readPemFiles(server: string, tls: TlsConfig): { ca?: Buffer; cert?: Buffer; key?: Buffer } | GatewayError {
  const files: { ca?: Buffer; cert?: Buffer; key?: Buffer } = {};
  for (const field of ['ca', 'cert', 'key'] as const) {
    const path = tls[field];
    if (path === undefined) continue;
    try {
      files[field] = readFileSync(path);
    } catch (error) {
      const reason = (error as NodeJS.ErrnoException).code ?? 'unreadable';
      // The path is in the log, never in the error: messages may reach clients, and paths are internal.
      return new GatewayError('MCPGATE_ERR_UPSTREAM_UNAVAILABLE', `upstream "${server}" is unavailable (cannot read its tls.${field} file: ${reason})`, {
        data: { server },
        cause: error,
      });
    }
  }
  return files;
}

/**
 * An undici `connect` function for one server: CA verification (custom `ca`, mTLS `cert`/`key`, `servername`)
 * always on, plus the pin check when real pins are configured. Several pins of either form are a rotation set:
 * any match passes. The placeholder pin alone means "no pin yet": in dev mode CA checks alone apply, with one
 * warning per server; in any other mode (which config validation already refuses) every connection fails.
 */
export function createPinnedConnector(options: PinnedConnectorOptions): UndiciConnector {
  const { serverName, tls, mode, logger } = options;
  const certPins = toPinList(tls.pin);
  const spkiPins = toPinList(tls.spkiPin);
  const expected = [...certPins, ...spkiPins].filter((pin) => !isPlaceholderPin(pin));
  const placeholderOnly = expected.length === 0 && certPins.some(isPlaceholderPin);
  const files = readPemFiles(serverName, tls);
  if (files instanceof GatewayError) {
    logger.error({ server: serverName, err: files.message, files: { ca: tls.ca, cert: tls.cert, key: tls.key } }, 'upstream TLS files cannot be read');
    const failure = files;
    return (_options, callback) => queueMicrotask(() => callback(failure, null));
  }
  if (placeholderOnly && mode === 'dev') {
    warnOnce(logger, serverName, { server: serverName }, 'upstream has the placeholder TLS pin: no pin is checked, CA verification alone applies (dev mode only)');
  }
  const base = buildConnector({
    ...files,
    servername: tls.servername,
    rejectUnauthorized: true,
    timeout: options.timeoutMs,
    // No TLS session resumption for pinned servers: every connection shows its certificate afresh, so the check
    // below never depends on what a cached session remembers.
    maxCachedSessions: expected.length > 0 ? 0 : undefined,
  });
  if (expected.length === 0 && (!placeholderOnly || mode === 'dev')) return base;
  return (connectOptions, callback) => {
    base(connectOptions, (error: Error | null, socket: Socket | TLSSocket | null) => {
      if (error !== null || socket === null) {
        callback(error ?? new Error('connector returned no socket'), null);
        return;
      }
      const seen = socket instanceof TLSSocket ? peerPins(socket) : undefined;
      const matched = seen !== undefined && (certPins.includes(seen.cert) || spkiPins.includes(seen.spki));
      if (matched) {
        callback(null, socket);
        return;
      }
      // Closed before undici sees the socket: it never writes a request on it (DESIGN.md invariant 2).
      socket.destroy();
      publishPinMismatch(serverName);
      const failure = pinError(serverName, placeholderOnly ? 'only the placeholder pin is configured' : 'certificate not in the pin list');
      logger.error({ server: serverName, code: failure.code, expected, seen: seen ?? null }, 'upstream TLS pin mismatch: connection closed');
      callback(failure, null);
    });
  };
}

/** Both pin forms of the socket's leaf certificate, or undefined when it presented none. */
function peerPins(socket: TLSSocket): CertificatePins | undefined {
  const raw = socket.getPeerCertificate(true).raw as Buffer | undefined;
  if (raw === undefined || raw.length === 0) return undefined;
  try {
    return pinsOfCertificate(raw);
  } catch {
    return undefined;
  }
}

/**
 * The undici Pool `connect` option for one configured server (issue 4 §3), or undefined when the default
 * connector is right: stdio servers, plain http:// (warned about once when it leaves loopback under
 * `allowInsecureHttp`), and https:// without a `tls` block (CA verification with Node's roots).
 */
export function connectOptionsFor(
  serverName: string,
  server: ServerConfig,
  mode: 'dev' | 'production',
  logger: Logger,
  timeoutMs: number | undefined = server.connectTimeoutMs,
): UndiciConnector | undefined {
  if (server.transport === 'stdio') return undefined;
  const url = new URL(server.url);
  if (url.protocol === 'http:') {
    if (!isLoopbackHost(url.hostname)) {
      warnOnce(logger, serverName, { server: serverName }, 'upstream uses plain http:// to a non-loopback host (allowInsecureHttp): traffic is unprotected');
    }
    return undefined;
  }
  if (server.tls === undefined) return undefined;
  return createPinnedConnector({ serverName, tls: server.tls, mode, logger, timeoutMs });
}
