import type { Dispatcher } from 'undici';
import type { CredentialsConfig } from '../config/credentials-schema.js';
import { GatewayError } from '../errors/gateway-error.js';
import type { Logger } from '../observability/logger.js';
import { bearerHeaders } from './oauth-client-credentials.js';
import { resolveSecretValue } from './secret-value.js';
import { SingleFlightTokenCache } from './token-cache.js';
import {
  basicAuthorization,
  checkTokenEndpoint,
  postTokenRequest,
  readIssuedToken,
  tokenDispatcher,
  tokenError,
  type IssuedToken,
} from './token-endpoint.js';
import type { UpstreamCredentials } from '../model/upstream-credentials.js';

export type TokenExchangeConfig = Extract<CredentialsConfig, { mode: 'token-exchange' }>;

/** RFC 8693 §2.1 and §3. */
export const TOKEN_EXCHANGE_GRANT = 'urn:ietf:params:oauth:grant-type:token-exchange';
export const JWT_TOKEN_TYPE = 'urn:ietf:params:oauth:token-type:jwt';

/** Bounds the per-principal cache (DESIGN.md invariant 9); the least recently fetched go first. */
export const DEFAULT_MAX_CACHED_PRINCIPALS = 10_000;

export interface TokenExchangeOptions {
  readonly serverName: string;
  readonly config: TokenExchangeConfig;
  /** The resolved `clientSecret`, when the config has one. */
  readonly clientSecret?: string;
  readonly logger: Logger;
  readonly now?: () => number;
  readonly dispatcher?: Dispatcher;
  readonly maxCachedPrincipals?: number;
}

/**
 * RFC 8693 token exchange for one upstream server: the caller's validated gateway JWT goes to the STS as
 * `subject_token` (and nowhere else), and the STS's answer is that caller's token for the upstream. Tokens are
 * cached per principal until shortly before they expire, with one exchange in flight per principal.
 */
export class TokenExchanger {
  readonly serverName: string;
  readonly #config: TokenExchangeConfig;
  readonly #tokenEndpoint: URL;
  readonly #clientSecret: string | undefined;
  readonly #logger: Logger;
  readonly #dispatcher: Dispatcher;
  readonly #ownsDispatcher: boolean;
  readonly #cache: SingleFlightTokenCache;

  /** Throws `MCPGATE_ERR_CONFIG_INVALID` for a non-https, non-loopback STS, or a client secret without a client id. */
  constructor(options: TokenExchangeOptions) {
    const { serverName, config } = options;
    this.serverName = serverName;
    this.#config = config;
    this.#tokenEndpoint = checkTokenEndpoint(config.tokenEndpoint, serverName, 'tokenEndpoint');
    if (options.clientSecret !== undefined && config.clientId === undefined) {
      throw new GatewayError('MCPGATE_ERR_CONFIG_INVALID', `servers.${serverName}.credentials.clientSecret needs clientId`);
    }
    this.#clientSecret = options.clientSecret;
    this.#logger = options.logger;
    this.#ownsDispatcher = options.dispatcher === undefined;
    this.#dispatcher = options.dispatcher ?? tokenDispatcher();
    this.#cache = new SingleFlightTokenCache({
      now: options.now ?? Date.now,
      refreshSkewMs: config.refreshSkewMs,
      maxEntries: options.maxCachedPrincipals ?? DEFAULT_MAX_CACHED_PRINCIPALS,
    });
  }

  /** Resolves the config's `clientSecret` (a file relative to `baseDir`) and builds the exchanger. */
  static async fromConfig(
    options: Omit<TokenExchangeOptions, 'clientSecret'> & { readonly baseDir?: string },
  ): Promise<TokenExchanger> {
    const { config, serverName, baseDir } = options;
    const clientSecret =
      config.clientSecret === undefined
        ? undefined
        : await resolveSecretValue(config.clientSecret, baseDir, `servers.${serverName}.credentials.clientSecret`);
    return new TokenExchanger({ ...options, clientSecret });
  }

  /**
   * The upstream token for the principal `principalKey`, whose validated gateway JWT is `subjectToken`. The key
   * must identify the principal completely: two principals must never share one, or one would get the other's
   * token.
   */
  exchange(subjectToken: string, principalKey: string): Promise<string> {
    if (subjectToken.length === 0) {
      return Promise.reject(
        new GatewayError(
          'MCPGATE_ERR_UNAUTHENTICATED',
          `server "${this.serverName}" needs the caller's JWT to exchange, and the request carries none`,
          { data: { server: this.serverName } },
        ),
      );
    }
    return this.#cache.get(principalKey, () => this.#fetch(subjectToken));
  }

  /** Drops the principal's cached token (after an upstream 401), only if it is still `rejected` when given. */
  invalidate(principalKey: string, rejected?: string): void {
    this.#cache.invalidate(principalKey, rejected);
  }

  /** The credentials of one caller's requests, in the shape the upstream transports take. */
  forCaller(subjectToken: string, principalKey: string): UpstreamCredentials {
    return {
      headers: async () => bearerHeaders(await this.exchange(subjectToken, principalKey)),
      renew: () => {
        this.invalidate(principalKey);
        return Promise.resolve(true);
      },
    };
  }

  async close(): Promise<void> {
    this.#cache.clear();
    if (this.#ownsDispatcher) await this.#dispatcher.close();
  }

  async #fetch(subjectToken: string): Promise<IssuedToken> {
    const config = this.#config;
    const form = new URLSearchParams({
      grant_type: TOKEN_EXCHANGE_GRANT,
      subject_token: subjectToken,
      subject_token_type: JWT_TOKEN_TYPE,
      requested_token_type: config.requestedTokenType,
    });
    if (config.audience !== undefined) form.set('audience', config.audience);
    if (config.resource !== undefined) form.set('resource', config.resource);
    if (config.scopes.length > 0) form.set('scope', config.scopes.join(' '));
    const headers: Record<string, string> = {};
    if (config.clientId !== undefined) {
      if (this.#clientSecret !== undefined) headers.authorization = basicAuthorization(config.clientId, this.#clientSecret);
      else form.set('client_id', config.clientId);
    }
    try {
      const body = await postTokenRequest({
        url: this.#tokenEndpoint,
        form,
        headers,
        timeoutMs: config.timeoutMs,
        dispatcher: this.#dispatcher,
        serverName: this.serverName,
        label: 'STS',
      });
      // RFC 8693 §2.2.1: token_type is N_A when the issued token is not an access token; it is still what we send.
      const issued = readIssuedToken(body, ['bearer', 'n_a'], this.serverName, 'STS');
      const issuedType = body.issued_token_type;
      if (issuedType !== config.requestedTokenType) {
        const shown =
          typeof issuedType === 'string' && /^[A-Za-z0-9:._-]{1,128}$/.test(issuedType) ? `"${issuedType}"` : 'none or an unreadable one';
        throw tokenError(
          this.serverName,
          'STS',
          'malformed',
          `issued token type ${shown}, not the requested "${config.requestedTokenType}"`,
        );
      }
      this.#logger.debug({ server: this.serverName, expiresInMs: issued.lifetimeMs ?? null }, 'exchanged a caller token');
      return issued;
    } catch (error) {
      if (GatewayError.is(error)) {
        this.#logger.warn({ server: this.serverName, code: error.code, ...error.data }, error.message);
      }
      throw error;
    }
  }
}
