import type { IncomingMessage } from 'node:http';
import type { SecurityConfig } from '../config/schema.js';
import { GatewayError } from '../errors/gateway-error.js';

const LOOPBACK_NAMES = ['localhost', '127.0.0.1', '[::1]'];

export function isLoopbackHost(host: string): boolean {
  return host === 'localhost' || host === '::1' || host === '[::1]' || host.startsWith('127.');
}

/**
 * DNS-rebinding protection (spec 2025-11-25, transports §security warning): a present Origin must be one the
 * gateway serves, and the Host header must name the gateway. When bound to loopback, the loopback names of the
 * listening port are allowed; anything else must be listed in `gateway.security`.
 */
export class RequestGuard {
  private readonly hosts = new Set<string>();
  private readonly origins = new Set<string>();
  private readonly checkHost: boolean;
  private readonly enabled: boolean;

  constructor(security: SecurityConfig, listenHost: string, port: number) {
    this.enabled = security.dnsRebindingProtection;
    const loopback = isLoopbackHost(listenHost);
    if (loopback) {
      for (const name of LOOPBACK_NAMES) {
        this.hosts.add(`${name}:${port}`);
        if (port === 80) this.hosts.add(name);
        this.origins.add(`http://${name}:${port}`);
        this.origins.add(`https://${name}:${port}`);
      }
    }
    for (const host of security.allowedHosts) this.hosts.add(host.toLowerCase());
    for (const origin of security.allowedOrigins) this.origins.add(origin.toLowerCase());
    // Bound to a public address with no host list, the operator has not said which names are ours.
    this.checkHost = loopback || security.allowedHosts.length > 0;
  }

  /** Returns the rejection for this request, or undefined when it may proceed. */
  check(request: IncomingMessage): GatewayError | undefined {
    if (!this.enabled) return undefined;
    const host = request.headers.host?.toLowerCase();
    if (this.checkHost && (host === undefined || !this.hosts.has(host))) {
      return new GatewayError('MCPGATE_ERR_HOST_REJECTED', 'Host header not allowed');
    }
    const origin = request.headers.origin;
    if (origin !== undefined && !this.origins.has(origin.toLowerCase())) {
      return new GatewayError('MCPGATE_ERR_ORIGIN_REJECTED', 'Origin not allowed');
    }
    return undefined;
  }
}

/**
 * Headers the gateway reads one value of. Node keeps the first Host, Content-Type and Content-Length and joins
 * repeated others with ", ", so a second line is either unseen by the checks or merged into a value no check
 * was written for: RFC 9112 §3.2 answers a second Host with 400, and the gateway does the same for the rest.
 * llhttp already refuses a repeated Content-Length; it stays listed so that no parser option can undo that.
 * `Authorization` and `X-Mcpgate-Key` are not here: the authenticator refuses their repetition with 401.
 */
const SINGLE_VALUE_HEADERS = ['host', 'origin', 'content-type', 'content-length', 'mcp-session-id', 'mcp-protocol-version'] as const;

export type SingleValueHeader = (typeof SINGLE_VALUE_HEADERS)[number];

interface Matcher {
  readonly header: SingleValueHeader;
  readonly bit: number;
  /** Case-insensitive and anchored: `test` neither lower-cases the name nor builds a match. */
  readonly pattern: RegExp;
}

/** Matchers by name length: a name of any other length (most of a request's) is passed over at once. */
const MATCHERS_BY_LENGTH: Array<Matcher[] | undefined> = [];
SINGLE_VALUE_HEADERS.forEach((header, index) => {
  const matcher: Matcher = { header, bit: 1 << index, pattern: new RegExp(`^${header}$`, 'i') };
  (MATCHERS_BY_LENGTH[header.length] ??= []).push(matcher);
});

/**
 * The first header of {@link SINGLE_VALUE_HEADERS} that `rawHeaders` (name, value, name, value, …) holds more
 * than once, or undefined. Runs on every request, so it allocates nothing: about what Node spends lower-casing
 * the same names for `request.headers`.
 */
export function repeatedHeader(rawHeaders: readonly string[]): SingleValueHeader | undefined {
  let seen = 0;
  for (let index = 0; index < rawHeaders.length; index += 2) {
    const name = rawHeaders[index] as string;
    const candidates = MATCHERS_BY_LENGTH[name.length];
    if (candidates === undefined) continue;
    for (let at = 0; at < candidates.length; at++) {
      const matcher = candidates[at] as Matcher;
      if (!matcher.pattern.test(name)) continue;
      if ((seen & matcher.bit) !== 0) return matcher.header;
      seen |= matcher.bit;
      break;
    }
  }
  return undefined;
}

/** The refusal of a request that repeats a header of {@link SINGLE_VALUE_HEADERS}. */
export function repeatedHeaderError(header: SingleValueHeader): GatewayError {
  return new GatewayError('MCPGATE_ERR_REPEATED_HEADER', `Bad Request: the ${header} header must appear at most once`, { data: { header } });
}
