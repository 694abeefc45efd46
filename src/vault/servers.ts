import type { GatewayConfig } from '../config/schema.js';
import { GatewayError } from '../errors/gateway-error.js';

/** Whether `server` is configured with `credentials.mode: per-user`, the only servers the vault keeps secrets for. */
export function isPerUserServer(config: GatewayConfig, server: string): boolean {
  // hasOwn: a server named like an Object.prototype member must not resolve to it.
  if (!Object.hasOwn(config.servers, server)) return false;
  const entry = config.servers[server];
  return entry !== undefined && entry.transport !== 'stdio' && entry.credentials?.mode === 'per-user';
}

/** The configured per-user servers, in configuration order. */
export function perUserServers(config: GatewayConfig): string[] {
  return Object.keys(config.servers).filter((name) => isPerUserServer(config, name));
}

/**
 * @throws GatewayError MCPGATE_ERR_VAULT_UNKNOWN_SERVER. An unknown server and one in another mode get the same
 * answer, so the refusal says nothing about how other servers authenticate.
 */
export function requirePerUserServer(config: GatewayConfig, server: string): void {
  if (isPerUserServer(config, server)) return;
  // A name no configuration could hold is not echoed: it came from a request path and could be anything.
  const named = PLAUSIBLE_NAME.test(server) ? `"${server}"` : 'of that name';
  throw new GatewayError(
    'MCPGATE_ERR_VAULT_UNKNOWN_SERVER',
    `no server ${named} takes per-user secrets (only servers with credentials mode per-user do)`,
    PLAUSIBLE_NAME.test(server) ? { data: { server } } : {},
  );
}

/** The config schema's server-name rule (1-64 of A-Z a-z 0-9 _ . -). */
const PLAUSIBLE_NAME = /^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$/;
