import { BlockList, isIP } from 'node:net';
import { GatewayError } from '../errors/gateway-error.js';

/**
 * The client address used when none can be trusted (no peer address, or a malformed hop a trusted proxy
 * forwarded). It is not an IP, so it matches no CIDR: internal servers stay closed (issue 5 §5, fail closed).
 */
export const UNKNOWN_CLIENT_IP = 'unknown';

/**
 * Normalises one address: strips brackets, ports and IPv6 zone ids, lower-cases IPv6, and turns an
 * IPv4-mapped IPv6 address (`::ffff:a.b.c.d`, what a dual-stack socket reports) into plain IPv4 so IPv4 CIDRs
 * match it. Returns `undefined` when the text is not an IP address.
 */
export function normalizeIp(raw: string): string | undefined {
  let text = raw.trim();
  const bracketed = /^\[([^\]]+)\](?::\d+)?$/.exec(text);
  if (bracketed?.[1] !== undefined) text = bracketed[1];
  else if (/^\d{1,3}(?:\.\d{1,3}){3}:\d+$/.test(text)) text = text.slice(0, text.lastIndexOf(':'));
  const zone = text.indexOf('%');
  if (zone >= 0) text = text.slice(0, zone);
  const family = isIP(text);
  if (family === 4) return text;
  if (family !== 6) return undefined;
  text = text.toLowerCase();
  const mapped = /^(?:0{0,4}:){0,5}:?ffff:(\d{1,3}(?:\.\d{1,3}){3})$/.exec(text);
  if (mapped?.[1] !== undefined && isIP(mapped[1]) === 4) return mapped[1];
  return text;
}

/**
 * A set of addresses and CIDR ranges, IPv4 and IPv6, backed by `node:net` `BlockList`. A plain address counts
 * as a one-address range. Malformed entries are a configuration error, reported at construction, so a typo can
 * never silently widen or narrow access at request time.
 */
export class CidrSet {
  readonly #list = new BlockList();
  readonly size: number;

  constructor(entries: readonly string[], what: string) {
    for (const entry of entries) {
      const [address, prefixText, extra] = entry.trim().split('/');
      const ip = address === undefined ? undefined : normalizeIp(address);
      const family = ip === undefined ? 0 : isIP(ip);
      const prefix = prefixText === undefined ? undefined : Number(prefixText);
      const max = family === 4 ? 32 : 128;
      if (ip === undefined || extra !== undefined || (prefix !== undefined && (!/^\d{1,3}$/.test(prefixText ?? '') || prefix > max))) {
        throw new GatewayError('MCPGATE_ERR_CONFIG_INVALID', `${what}: "${entry}" is not an IP address or CIDR range`, {
          data: { entry },
        });
      }
      const type = family === 4 ? 'ipv4' : 'ipv6';
      if (prefix === undefined) this.#list.addAddress(ip, type);
      else this.#list.addSubnet(ip, prefix, type);
    }
    this.size = entries.length;
  }

  /** False for anything that is not an IP address (e.g. {@link UNKNOWN_CLIENT_IP}). */
  has(address: string): boolean {
    const ip = normalizeIp(address);
    if (ip === undefined) return false;
    return this.#list.check(ip, isIP(ip) === 4 ? 'ipv4' : 'ipv6');
  }
}

/**
 * The client IP that client-IP rules (issue 5 §5) apply to. `X-Forwarded-For` is honoured only when the direct
 * peer is a trusted proxy; otherwise anyone could claim an internal address by sending the header. The chain
 * is walked right to left (each proxy appends the address it saw), skipping trusted proxies; the first
 * untrusted hop is the client. If every hop is trusted, the leftmost one is the client. A malformed hop stops
 * the walk with {@link UNKNOWN_CLIENT_IP}, because nothing to its left can be trusted.
 *
 * @param remoteAddress the socket's peer address (`req.socket.remoteAddress`)
 * @param xForwardedFor the raw header value(s), as Node's `IncomingHttpHeaders` gives them
 * @param trustedProxies addresses or CIDR ranges, or a prebuilt {@link CidrSet}
 */
export function clientIpOf(
  remoteAddress: string | undefined,
  xForwardedFor: string | readonly string[] | undefined,
  trustedProxies: readonly string[] | CidrSet,
): string {
  const peer = remoteAddress === undefined ? undefined : normalizeIp(remoteAddress);
  if (peer === undefined) return UNKNOWN_CLIENT_IP;
  const trusted = trustedProxies instanceof CidrSet ? trustedProxies : new CidrSet(trustedProxies, 'trustedProxies');
  if (xForwardedFor === undefined || !trusted.has(peer)) return peer;
  const header = typeof xForwardedFor === 'string' ? xForwardedFor : xForwardedFor.join(',');
  const hops = header.split(',').map((hop) => hop.trim()).filter((hop) => hop.length > 0);
  let client = peer;
  for (let i = hops.length - 1; i >= 0; i--) {
    const hop = normalizeIp(hops[i] ?? '');
    if (hop === undefined) return UNKNOWN_CLIENT_IP;
    client = hop;
    if (!trusted.has(hop)) return hop;
  }
  return client;
}
