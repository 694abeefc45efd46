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
