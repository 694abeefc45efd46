import type { GatewayConfig } from '../config/schema.js';
import { GatewayError } from '../errors/gateway-error.js';
import type { Logger } from '../observability/logger.js';
import type { Vault } from '../vault/vault.js';
import { CredentialBroker, type PreparedCredentials } from './credential-broker.js';
import { ClientCredentialsTokens } from './oauth-client-credentials.js';
import { resolveSecretValue } from './secret-value.js';
import { TokenExchanger } from './token-exchange.js';

export interface CredentialDeps {
  /** The per-user vault; undefined without `gateway.vault` or with `auth.mode: none` (no principal owns a secret). */
  readonly vault: Vault | undefined;
  readonly logger: Logger;
}

export interface BuiltCredentials {
  readonly broker: CredentialBroker;
  close(): Promise<void>;
}

/**
 * Resolves every server's credential secrets and builds its token clients once, at start (issue 6): a missing
 * secret file or a malformed master key stops the start rather than the first call.
 */
export async function buildCredentialBroker(config: GatewayConfig, deps: CredentialDeps): Promise<BuiltCredentials> {
  const { vault } = deps;
  const prepared = new Map<string, PreparedCredentials>();
  const closers: Array<() => Promise<void>> = [];
  for (const [name, server] of Object.entries(config.servers)) {
    if (server.transport === 'stdio' || server.credentials === undefined) continue;
    const credentials = server.credentials;
    const field = `servers.${name}.credentials`;
    switch (credentials.mode) {
      case 'static': {
        const headers: Record<string, string> = {};
        for (const [header, value] of Object.entries(credentials.headers)) {
          headers[header.toLowerCase()] = await resolveSecretValue(value, undefined, `${field}.headers.${header}`);
        }
        prepared.set(name, { mode: 'static', headers: Object.freeze(headers) });
        break;
      }
      case 'per-user':
        if (vault === undefined) {
          throw new GatewayError(
            'MCPGATE_ERR_CONFIG_INVALID',
            `${field}: per-user credentials need gateway.vault and a principal store (auth.mode "apiKey")`,
          );
        }
        prepared.set(name, { mode: 'per-user', header: credentials.header, template: credentials.template, vault });
        break;
      case 'oauth-client-credentials': {
        const tokens = await ClientCredentialsTokens.fromConfig({ serverName: name, config: credentials, logger: deps.logger });
        closers.push(() => tokens.close());
        prepared.set(name, { mode: 'oauth-client-credentials', tokens });
        break;
      }
      case 'token-exchange': {
        const exchanger = await TokenExchanger.fromConfig({ serverName: name, config: credentials, logger: deps.logger });
        closers.push(() => exchanger.close());
        prepared.set(name, { mode: 'token-exchange', exchanger });
        break;
      }
      case 'passthrough':
        prepared.set(name, { mode: 'passthrough' });
        break;
    }
  }
  return {
    broker: new CredentialBroker(prepared),
    async close() {
      await Promise.all(closers.map((close) => close()));
    },
  };
}
