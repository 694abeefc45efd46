import { lookup as dnsLookup } from 'node:dns/promises';
import { isIP, isIPv4, isIPv6, type LookupFunction } from 'node:net';
import { Agent, buildConnector } from 'undici';
import { GatewayError } from '../errors/gateway-error.js';
import type { Logger } from '../observability/logger.js';

/**
 * SSRF guards for URLs the gateway fetches on its own behalf, today the upstreams' protected-resource metadata
 * (issue 6 §5 "Per-server metadata"). The address checked is the address connected to: the hostname is
 * resolved once per connection inside the connector and the socket goes to those answers, never to a second
 * resolution an attacker's DNS could change in between (DNS rebinding).
 */

/**
 * - `public`: globally reachable unicast.
 * - `private`: loopback, RFC 1918, CGNAT, link-local (cloud metadata lives at 169.254.169.254), IPv6 ULA. An
 *   operator may allow these per server (`allowPrivateMetadata`).
 * - `reserved`: nothing a metadata fetch should ever reach (unspecified, multicast, broadcast, documentation,
 *   benchmarking, deprecated transition ranges), even when private addresses are allowed.
 */
export type AddressClass = 'public' | 'private' | 'reserved';

interface Range {
  readonly prefix: readonly number[];
  readonly bits: number;
  readonly class: Exclude<AddressClass, 'public'>;
}

function range(cidr: string, cls: Range['class']): Range {
  const [address = '', bits = ''] = cidr.split('/');
  const bytes = parseAddress(address);
  if (bytes === undefined) throw new TypeError(`bad CIDR ${cidr}`);
  return { prefix: bytes, bits: Number(bits), class: cls };
}

/** IANA IPv4 special-purpose registry, the entries that are not globally reachable. */
const IPV4_RANGES: readonly Range[] = [
  range('0.0.0.0/8', 'reserved'),
  range('10.0.0.0/8', 'private'),
  range('100.64.0.0/10', 'private'),
  range('127.0.0.0/8', 'private'),
  range('169.254.0.0/16', 'private'),
  range('172.16.0.0/12', 'private'),
  range('192.0.0.0/24', 'reserved'),
  range('192.0.2.0/24', 'reserved'),
  range('192.88.99.0/24', 'reserved'),
  range('192.168.0.0/16', 'private'),
  range('198.18.0.0/15', 'reserved'),
  range('198.51.100.0/24', 'reserved'),
  range('203.0.113.0/24', 'reserved'),
  range('224.0.0.0/4', 'reserved'),
  range('240.0.0.0/4', 'reserved'),
];

/**
 * IPv6 is checked as an allowlist: only 2000::/3 is global unicast today, so anything outside it is refused
 * unless it embeds an IPv4 address (mapped, NAT64), which is then judged as IPv4. These are the holes in 2000::/3.
 */
const IPV6_RANGES: readonly Range[] = [
  range('::1/128', 'private'),
  range('fc00::/7', 'private'),
  range('fe80::/10', 'private'),
  range('2001::/23', 'reserved'),
  range('2001:db8::/32', 'reserved'),
  range('3fff::/20', 'reserved'),
  range('5f00::/16', 'reserved'),
];
const GLOBAL_UNICAST_V6 = range('2000::/3', 'reserved');
const MAPPED_V4 = range('::ffff:0:0/96', 'reserved');
const NAT64_V4 = range('64:ff9b::/96', 'reserved');
const SIX_TO_FOUR = range('2002::/16', 'reserved');

function inRange(bytes: readonly number[], r: Range): boolean {
  if (bytes.length !== r.prefix.length) return false;
  let bits = r.bits;
  for (let i = 0; bits > 0; i += 1, bits -= 8) {
    const mask = bits >= 8 ? 0xff : (0xff << (8 - bits)) & 0xff;
    if (((bytes[i] ?? 0) & mask) !== ((r.prefix[i] ?? 0) & mask)) return false;
  }
  return true;
}

/** 4 or 16 bytes of a literal address (an IPv6 zone id is ignored), or undefined for anything else. */
function parseAddress(text: string): number[] | undefined {
  const bare = text.startsWith('[') && text.endsWith(']') ? text.slice(1, -1) : text;
  const address = bare.split('%')[0] ?? '';
  if (isIPv4(address)) return address.split('.').map(Number);
  if (!isIPv6(address)) return undefined;
  let hex = address;
  const lastColon = hex.lastIndexOf(':');
  if (hex.indexOf('.', lastColon) !== -1) {
    const v4 = hex.slice(lastColon + 1).split('.').map(Number);
    hex = `${hex.slice(0, lastColon + 1)}${(((v4[0] ?? 0) << 8) | (v4[1] ?? 0)).toString(16)}:${(((v4[2] ?? 0) << 8) | (v4[3] ?? 0)).toString(16)}`;
  }
  const [head = '', tail] = hex.split('::');
  const groupsOf = (part: string): string[] => (part === '' ? [] : part.split(':'));
  const headGroups = groupsOf(head);
  const tailGroups = tail === undefined ? [] : groupsOf(tail);
  const zeros = tail === undefined ? 0 : 8 - headGroups.length - tailGroups.length;
  const groups = [...headGroups, ...Array.from({ length: zeros }, () => '0'), ...tailGroups];
  if (groups.length !== 8) return undefined;
  return groups.flatMap((group) => {
    const value = Number.parseInt(group, 16);
    return [value >> 8, value & 0xff];
  });
}

function classifyV4(bytes: readonly number[]): AddressClass {
  return IPV4_RANGES.find((r) => inRange(bytes, r))?.class ?? 'public';
}

/** Classifies a literal IP address; anything that is not one is `reserved`, so a parsing gap fails closed. */
export function classifyAddress(ip: string): AddressClass {
  const bytes = parseAddress(ip);
  if (bytes === undefined) return 'reserved';
  if (bytes.length === 4) return classifyV4(bytes);
  if (inRange(bytes, MAPPED_V4) || inRange(bytes, NAT64_V4)) return classifyV4(bytes.slice(12));
  if (inRange(bytes, SIX_TO_FOUR)) {
    // 6to4 tunnels to the embedded IPv4 address: a private one there is as private as it is natively.
    return classifyV4(bytes.slice(2, 6)) === 'public' ? 'public' : 'reserved';
  }
  const hole = IPV6_RANGES.find((r) => inRange(bytes, r));
  if (hole !== undefined) return hole.class;
  return inRange(bytes, GLOBAL_UNICAST_V6) ? 'public' : 'reserved';
}

/** True only for a globally reachable unicast address (see {@link AddressClass}). */
export function isPublicAddress(ip: string): boolean {
  return classifyAddress(ip) === 'public';
}

/** 127/8, ::1, and their IPv4-mapped forms. */
export function isLoopbackAddress(ip: string): boolean {
  const bytes = parseAddress(ip);
  if (bytes === undefined) return false;
  const v4 = bytes.length === 4 ? bytes : inRange(bytes, MAPPED_V4) ? bytes.slice(12) : undefined;
  if (v4 !== undefined) return v4[0] === 127;
  return bytes.every((byte, i) => byte === (i === 15 ? 1 : 0));
}

export interface GuardOptions {
  /** Permits `private` addresses (loopback, RFC 1918, link-local, ULA); `reserved` ones stay refused. */
  readonly allowPrivate: boolean;
  /** Permits plain http:, and only when every address connected to is loopback (issue 6 §5: "HTTPS or loopback"). */
  readonly allowLoopbackHttp: boolean;
}

export interface ResolvedAddress {
  readonly address: string;
  readonly family: number;
}

/** A DNS resolver answering every address of a name; injectable so tests can play a hostile DNS. */
export type Resolver = (hostname: string) => Promise<readonly ResolvedAddress[]>;

const systemResolver: Resolver = (hostname) => dnsLookup(hostname, { all: true, verbatim: true });

/**
 * The refusal. The message may reach a client, so it names the host and never the addresses (those would map
 * the gateway's internal network for whoever controls a DNS name); the addresses go in `cause` for the log.
 */
export function ssrfError(host: string, reason: string, addresses: readonly string[] = []): GatewayError {
  return new GatewayError('MCPGATE_ERR_SSRF_BLOCKED', `refusing to connect to "${host}": ${reason}`, {
    data: { host },
    ...(addresses.length === 0 ? {} : { cause: new Error(`resolved to ${addresses.join(', ')}`) }),
  });
}

/** The first refusal among `addresses` under `options`, or undefined when every one may be connected to. */
function refusal(host: string, addresses: readonly string[], protocol: string, options: GuardOptions): GatewayError | undefined {
  for (const address of addresses) {
    const cls = classifyAddress(address);
    if (cls === 'reserved' || (cls === 'private' && !options.allowPrivate)) {
      return ssrfError(host, 'it resolves to a private or reserved address', addresses);
    }
    if (protocol === 'http:' && !(options.allowLoopbackHttp && isLoopbackAddress(address))) {
      return ssrfError(host, 'plain http is allowed only to loopback', addresses);
    }
  }
  return undefined;
}

/**
 * A `net.connect` lookup that resolves once, refuses the whole answer when any address is refused (a name that
 * mixes public and private answers is a rebinding attempt, not a choice), and hands the checked answers
 * straight to the socket. Honours `family` and `all` (Node's happy-eyeballs asks for every address).
 */
export function createGuardedLookup(protocol: string, options: GuardOptions & { resolve?: Resolver; logger?: Logger }): LookupFunction {
  const resolve = options.resolve ?? systemResolver;
  return (hostname, lookupOptions, callback) => {
    resolve(hostname).then(
      (answers) => {
        const family = lookupOptions.family === 4 || lookupOptions.family === 6 ? lookupOptions.family : undefined;
        const usable = answers.filter((answer) => family === undefined || answer.family === family);
        if (usable.length === 0) {
          callback(Object.assign(new Error(`getaddrinfo ENOTFOUND ${hostname}`), { code: 'ENOTFOUND', hostname }), '', 0);
          return;
        }
        const refused = refusal(hostname, usable.map((answer) => answer.address), protocol, options);
        if (refused !== undefined) {
          options.logger?.warn({ host: hostname, addresses: usable.map((answer) => answer.address), reason: refused.message }, 'SSRF guard refused a connection');
          callback(refused, '', 0);
          return;
        }
        const first = usable[0] as ResolvedAddress;
        if (lookupOptions.all === true) callback(null, usable.map(({ address, family }) => ({ address, family })));
        else callback(null, first.address, first.family);
      },
      (error: unknown) => callback(error as NodeJS.ErrnoException, '', 0),
    );
  };
}

export interface GuardedDispatcherOptions extends GuardOptions {
  /** Bounds connect (DNS included), headers and body alike (DESIGN.md invariant 9). */
  readonly timeoutMs: number;
  readonly resolve?: Resolver;
  readonly logger?: Logger;
}

/**
 * An undici Agent that connects only where the guard allows. An IP literal never reaches `lookup` (Node
 * connects to it directly), so literals are checked in the connector before any socket exists. Redirects are
 * not followed (undici 7 follows none without an interceptor): a redirect target would otherwise escape the
 * checks made on the URL the caller validated.
 */
export function guardedDispatcher(options: GuardedDispatcherOptions): Agent {
  const connectors = new Map<string, buildConnector.connector>();
  const connectorFor = (protocol: string): buildConnector.connector => {
    let connector = connectors.get(protocol);
    if (connector === undefined) {
      connector = buildConnector({ timeout: options.timeoutMs, lookup: createGuardedLookup(protocol, options) });
      connectors.set(protocol, connector);
    }
    return connector;
  };
  const connect: buildConnector.connector = (connectOptions, callback) => {
    const { hostname, protocol } = connectOptions;
    if (protocol !== 'https:' && protocol !== 'http:') {
      queueMicrotask(() => callback(ssrfError(hostname, `protocol ${protocol} is not allowed`), null));
      return;
    }
    const literal = hostname.startsWith('[') && hostname.endsWith(']') ? hostname.slice(1, -1) : hostname;
    if (isIP(literal) !== 0) {
      const refused = refusal(hostname, [literal], protocol, options);
      if (refused !== undefined) {
        options.logger?.warn({ host: hostname, reason: refused.message }, 'SSRF guard refused a connection');
        queueMicrotask(() => callback(refused, null));
        return;
      }
    }
    connectorFor(protocol)(connectOptions, callback);
  };
  return new Agent({ connect, headersTimeout: options.timeoutMs, bodyTimeout: options.timeoutMs });
}

/**
 * Checks a metadata URL before it is fetched: https, or http to a loopback host when private addresses are
 * allowed. The host's addresses are checked again at connect time by {@link guardedDispatcher}; this check
 * gives a clear error early and refuses what no DNS answer could make acceptable.
 * @returns the parsed URL.
 */
export function checkMetadataUrl(url: string, options: { allowPrivate: boolean }): URL {
  let parsed: URL;
  try {
    parsed = new URL(url);
  } catch {
    throw ssrfError('(invalid URL)', 'the metadata URL is not an absolute URL');
  }
  if (parsed.username !== '' || parsed.password !== '') throw ssrfError(parsed.hostname, 'the metadata URL must not carry credentials');
  if (parsed.protocol === 'https:') return parsed;
  if (parsed.protocol === 'http:' && options.allowPrivate && isLoopbackHostname(parsed.hostname)) return parsed;
  throw ssrfError(parsed.hostname, 'metadata is fetched only over https, or over http from loopback when private addresses are allowed');
}

/** `localhost` (and its subdomains, RFC 6761 §6.3) or a loopback literal. */
function isLoopbackHostname(hostname: string): boolean {
  const host = hostname.toLowerCase();
  if (host === 'localhost' || host.endsWith('.localhost')) return true;
  const literal = host.startsWith('[') && host.endsWith(']') ? host.slice(1, -1) : host;
  return isIP(literal) !== 0 && isLoopbackAddress(literal);
}
