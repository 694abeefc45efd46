import { isForwardableAuthorization } from '../authn/credentials.js';
import type { InboundCredentials } from '../model/inbound-credentials.js';
import { GatewayError } from '../errors/gateway-error.js';
import type { OnBehalf, UpstreamCredentials } from '../model/upstream-credentials.js';

/** Reads a principal's own secret for a server (the vault, issue 6 §2). */
export interface SecretReader {
  get(principalId: string, server: string): Promise<string | undefined>;
}

/** RFC 8693 exchange of the caller's gateway JWT, cached per principal (issue 6 §4). */
export interface TokenExchange {
  exchange(subjectToken: string, principalKey: string): Promise<string>;
  invalidate(principalKey: string): void;
}

/** One server's credential mode, with its secrets resolved and its clients built (see build-broker.ts). */
export type PreparedCredentials =
  | { readonly mode: 'static'; readonly headers: Readonly<Record<string, string>> }
  | { readonly mode: 'per-user'; readonly header: string; readonly template: string; readonly vault: SecretReader }
  /** The server's own machine token (issue 6 §3): the same credentials for every session. */
  | { readonly mode: 'oauth-client-credentials'; readonly tokens: UpstreamCredentials }
  | { readonly mode: 'token-exchange'; readonly exchanger: TokenExchange }
  | { readonly mode: 'passthrough' };

/** Who an upstream session acts for: the downstream session's principal, and what the request that opened it carried. */
export interface SessionCredentialContext {
  /** Undefined only with auth off. */
  readonly principalId: string | undefined;
  /** The credential id (API key id or JWT subject id): the cache key of exchanged tokens. */
  readonly principalKey: string | undefined;
  /**
   * What the request that opened the upstream session carried: used only for the session's own traffic
   * (initialize, GET stream, DELETE). Every forwarded request uses its own (`headers(onBehalf)`, issue 24).
   */
  readonly opener: InboundCredentials | undefined;
}

const NOTHING: Readonly<Record<string, string>> = Object.freeze({});

/**
 * Builds each upstream session's `UpstreamCredentials` from its server's mode (issue 6). Every mode reads
 * only what belongs to it: per-user reads the session principal's own vault entry and nobody else's, the
 * client-credentials token is the server's and never the caller's, and only pass-through forwards the
 * client's `Authorization`. The gateway's own key is in no mode's input, so it cannot reach an upstream.
 */
export class CredentialBroker {
  readonly #servers: ReadonlyMap<string, PreparedCredentials>;

  constructor(servers: ReadonlyMap<string, PreparedCredentials>) {
    this.#servers = servers;
  }

  modeOf(server: string): PreparedCredentials['mode'] | undefined {
    return this.#servers.get(server)?.mode;
  }

  /** The credentials of one upstream session of `server`; undefined when the server has none configured. */
  forSession(server: string, context: SessionCredentialContext): UpstreamCredentials | undefined {
    const prepared = this.#servers.get(server);
    if (prepared === undefined) return undefined;
    switch (prepared.mode) {
      case 'static': {
        const headers = prepared.headers;
        return { headers: () => Promise.resolve(headers), renew: () => Promise.resolve(false) };
      }
      case 'per-user':
        return {
          headers: async () => {
            const secret = context.principalId === undefined ? undefined : await prepared.vault.get(context.principalId, server);
            if (secret === undefined) throw missingSecret(server);
            return { [prepared.header.toLowerCase()]: prepared.template.replace('{secret}', secret) };
          },
          renew: () => Promise.resolve(false),
        };
      case 'oauth-client-credentials':
        return prepared.tokens;
      case 'token-exchange':
        return {
          headers: async (onBehalf) => {
            const subject = inboundOf(context, onBehalf)?.gatewayJwt;
            if (subject === undefined || context.principalKey === undefined) throw needsToken(server);
            return { authorization: `Bearer ${await prepared.exchanger.exchange(subject, context.principalKey)}` };
          },
          renew: () => {
            if (context.principalKey === undefined) return Promise.resolve(false);
            prepared.exchanger.invalidate(context.principalKey);
            return Promise.resolve(true);
          },
        };
      case 'passthrough':
        return {
          headers: (onBehalf) => {
            const authorization = inboundOf(context, onBehalf)?.upstreamAuthorization;
            if (authorization === undefined) return Promise.resolve(NOTHING);
            // Fail closed on the last step before the wire: nothing but a canonical `Bearer <token68>` free of
            // gateway keys is ever forwarded, whatever a future caller of the broker hands in (issue 22 A1).
            if (!isForwardableAuthorization(authorization)) return Promise.reject(notForwardable(server));
            return Promise.resolve({ authorization });
          },
          renew: () => Promise.resolve(false),
        };
    }
  }
}

/** A request's own credentials; the opener's only for the upstream session's own traffic, never as a fallback. */
function inboundOf(context: SessionCredentialContext, onBehalf: OnBehalf | undefined): InboundCredentials | undefined {
  return onBehalf === undefined ? context.opener : onBehalf.inbound;
}

function notForwardable(server: string): GatewayError {
  return new GatewayError('MCPGATE_ERR_UNAUTHENTICATED', `the Authorization for pass-through server "${server}" must be exactly "Bearer <token>"`, {
    data: { server },
  });
}

function missingSecret(server: string): GatewayError {
  return new GatewayError(
    'MCPGATE_ERR_CREDENTIAL_MISSING',
    `server "${server}" needs your personal secret; store it with \`mcpgate secrets set --server ${server}\` or PUT /v1/secrets/${server}`,
    { data: { server } },
  );
}

function needsToken(server: string): GatewayError {
  return new GatewayError(
    'MCPGATE_ERR_CREDENTIAL_MISSING',
    `server "${server}" is reached by exchanging your OAuth access token; authenticate to the gateway with a bearer token (JWT), not an API key`,
    { data: { server } },
  );
}
