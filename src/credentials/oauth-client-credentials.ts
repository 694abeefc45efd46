import { randomUUID } from 'node:crypto';
import { importPKCS8, SignJWT, type CryptoKey } from 'jose';
import type { Dispatcher } from 'undici';
import type { CredentialsConfig } from '../config/credentials-schema.js';
import { GatewayError } from '../errors/gateway-error.js';
import type { Logger } from '../observability/logger.js';
import { resolveSecretValue } from './secret-value.js';
import { SingleFlightTokenCache } from './token-cache.js';
import {
  basicAuthorization,
  checkTokenEndpoint,
  postTokenRequest,
  readIssuedToken,
  tokenDispatcher,
  type IssuedToken,
} from './token-endpoint.js';
import type { UpstreamCredentials } from '../model/upstream-credentials.js';

export type ClientCredentialsConfig = Extract<CredentialsConfig, { mode: 'oauth-client-credentials' }>;

/** RFC 7521 §4.2. */
const JWT_BEARER_ASSERTION = 'urn:ietf:params:oauth:client-assertion-type:jwt-bearer';

/** The assertion only has to survive one round trip; a short life limits what a captured one is worth. */
const ASSERTION_LIFETIME_S = 60;

/** One key: client-credentials tokens belong to the server, not to a caller. */
const SERVER_KEY = 'server';

/** The secret values of the config, already resolved (see {@link resolveSecretValue}). */
export interface ClientCredentialsSecrets {
  readonly clientSecret?: string;
  /** PKCS#8 PEM, for `authMethod: private_key_jwt`. */
  readonly privateKeyPem?: string;
}

export interface ClientCredentialsOptions {
  readonly serverName: string;
  readonly config: ClientCredentialsConfig;
  readonly secrets: ClientCredentialsSecrets;
  readonly logger: Logger;
  /** Clock for the cache and the assertion's `iat`/`exp` (tests move it). */
  readonly now?: () => number;
  /** For a token endpoint behind a private CA; by default the instance has its own pool, closed by `close()`. */
  readonly dispatcher?: Dispatcher;
}

export function bearerHeaders(token: string): { authorization: string } {
  return { authorization: `Bearer ${token}` };
}

/**
 * OAuth 2.0 client credentials (RFC 6749 §4.4) for one upstream server: the gateway's own machine identity there.
 * Tokens are cached until `refreshSkewMs` before they expire, and concurrent callers share one fetch. Nothing
 * from a caller goes into these requests, so an upstream in this mode never sees a caller's token.
 *
 * It is also the server's {@link UpstreamCredentials}: `headers()` carries the token, `renew()` (after an upstream
 * 401) drops it so the retry fetches a new one.
 */
export class ClientCredentialsTokens implements UpstreamCredentials {
  readonly serverName: string;
  readonly #config: ClientCredentialsConfig;
  readonly #tokenEndpoint: URL;
  readonly #clientSecret: string | undefined;
  readonly #privateKeyPem: string | undefined;
  readonly #logger: Logger;
  readonly #now: () => number;
  readonly #dispatcher: Dispatcher;
  readonly #ownsDispatcher: boolean;
  readonly #cache: SingleFlightTokenCache;
  #signingKey: Promise<CryptoKey> | undefined;

  /**
   * Throws `MCPGATE_ERR_CONFIG_INVALID` for a token endpoint that is neither https nor loopback http, or when the
   * secret the auth method needs is missing.
   */
  constructor(options: ClientCredentialsOptions) {
    const { serverName, config, secrets } = options;
    this.serverName = serverName;
    this.#config = config;
    this.#tokenEndpoint = checkTokenEndpoint(config.tokenEndpoint, serverName, 'tokenEndpoint');
    const where = `servers.${serverName}.credentials`;
    if (config.authMethod === 'private_key_jwt') {
      if (config.privateKeyJwt === undefined || secrets.privateKeyPem === undefined || secrets.privateKeyPem === '') {
        throw new GatewayError('MCPGATE_ERR_CONFIG_INVALID', `${where}.privateKeyJwt.key is needed for authMethod private_key_jwt`);
      }
    } else if (secrets.clientSecret === undefined || secrets.clientSecret === '') {
      throw new GatewayError('MCPGATE_ERR_CONFIG_INVALID', `${where}.clientSecret is needed for authMethod ${config.authMethod}`);
    }
    this.#clientSecret = secrets.clientSecret;
    this.#privateKeyPem = secrets.privateKeyPem;
    this.#logger = options.logger;
    this.#now = options.now ?? Date.now;
    this.#ownsDispatcher = options.dispatcher === undefined;
    this.#dispatcher = options.dispatcher ?? tokenDispatcher();
    this.#cache = new SingleFlightTokenCache({ now: this.#now, refreshSkewMs: config.refreshSkewMs, maxEntries: 1 });
  }

  /**
   * Resolves the config's secret values (files relative to `baseDir`) and imports the signing key, so that a bad
   * secret fails at start-up rather than on the first call.
   */
  static async fromConfig(
    options: Omit<ClientCredentialsOptions, 'secrets'> & { readonly baseDir?: string },
  ): Promise<ClientCredentialsTokens> {
    const { config, serverName, baseDir } = options;
    const where = `servers.${serverName}.credentials`;
    const secrets: ClientCredentialsSecrets = {
      clientSecret:
        config.clientSecret === undefined ? undefined : await resolveSecretValue(config.clientSecret, baseDir, `${where}.clientSecret`),
      privateKeyPem:
        config.privateKeyJwt === undefined
          ? undefined
          : await resolveSecretValue(config.privateKeyJwt.key, baseDir, `${where}.privateKeyJwt.key`),
    };
    const tokens = new ClientCredentialsTokens({ ...options, secrets });
    await tokens.prepare();
    return tokens;
  }

  /** Imports the private key when the auth method needs one; a no-op otherwise. Idempotent. */
  async prepare(): Promise<void> {
    if (this.#config.authMethod === 'private_key_jwt') await this.#key();
  }

  /** A valid access token: the cached one, or one fetch shared by every concurrent caller. */
  token(): Promise<string> {
    return this.#cache.get(SERVER_KEY, () => this.#fetch());
  }

  /**
   * Drops the cached token so the next `token()` fetches a new one. Pass the token the upstream refused: when
   * another caller has already replaced it, the newer token is kept.
   */
  invalidate(rejected?: string): void {
    this.#cache.invalidate(SERVER_KEY, rejected);
  }

  async headers(): Promise<Readonly<Record<string, string>>> {
    return bearerHeaders(await this.token());
  }

  renew(): Promise<boolean> {
    this.invalidate();
    return Promise.resolve(true);
  }

  /** Closes the connection pool this instance created (not one passed in). */
  async close(): Promise<void> {
    this.#cache.clear();
    if (this.#ownsDispatcher) await this.#dispatcher.close();
  }

  #key(): Promise<CryptoKey> {
    const jwt = this.#config.privateKeyJwt;
    const pem = this.#privateKeyPem;
    if (jwt === undefined || pem === undefined) throw new Error('private_key_jwt without a key');
    this.#signingKey ??= importPKCS8(pem, jwt.alg).catch(() => {
      this.#signingKey = undefined;
      // jose's message is safe, but saying only what is wrong keeps any fragment of the PEM out of the error.
      throw new GatewayError(
        'MCPGATE_ERR_CONFIG_INVALID',
        `servers.${this.serverName}.credentials.privateKeyJwt.key is not a PKCS#8 PEM private key usable with ${jwt.alg}`,
      );
    });
    return this.#signingKey;
  }

  async #clientAssertion(): Promise<string> {
    const jwt = this.#config.privateKeyJwt;
    if (jwt === undefined) throw new Error('private_key_jwt without a key');
    const key = await this.#key();
    const issuedAt = Math.floor(this.#now() / 1000);
    return new SignJWT({})
      .setProtectedHeader(jwt.kid === undefined ? { alg: jwt.alg } : { alg: jwt.alg, kid: jwt.kid })
      .setIssuer(this.#config.clientId)
      .setSubject(this.#config.clientId)
      .setAudience(jwt.audience ?? this.#tokenEndpoint.href)
      .setJti(randomUUID())
      .setIssuedAt(issuedAt)
      .setExpirationTime(issuedAt + ASSERTION_LIFETIME_S)
      .sign(key);
  }

  async #fetch(): Promise<IssuedToken> {
    const config = this.#config;
    const form = new URLSearchParams({ grant_type: 'client_credentials' });
    if (config.scopes.length > 0) form.set('scope', config.scopes.join(' '));
    if (config.resource !== undefined) form.set('resource', config.resource);
    if (config.audience !== undefined) form.set('audience', config.audience);
    const headers: Record<string, string> = {};
    switch (config.authMethod) {
      case 'client_secret_basic':
        headers.authorization = basicAuthorization(config.clientId, this.#clientSecret ?? '');
        break;
      case 'client_secret_post':
        form.set('client_id', config.clientId);
        form.set('client_secret', this.#clientSecret ?? '');
        break;
      case 'private_key_jwt':
        form.set('client_id', config.clientId);
        form.set('client_assertion_type', JWT_BEARER_ASSERTION);
        form.set('client_assertion', await this.#clientAssertion());
        break;
    }
    try {
      const body = await postTokenRequest({
        url: this.#tokenEndpoint,
        form,
        headers,
        timeoutMs: config.timeoutMs,
        dispatcher: this.#dispatcher,
        serverName: this.serverName,
        label: 'token endpoint',
      });
      const issued = readIssuedToken(body, ['bearer'], this.serverName, 'token endpoint');
      this.#logger.debug(
        { server: this.serverName, expiresInMs: issued.lifetimeMs ?? null },
        'fetched an OAuth client-credentials token',
      );
      return issued;
    } catch (error) {
      if (GatewayError.is(error)) {
        this.#logger.warn({ server: this.serverName, code: error.code, ...error.data }, error.message);
      }
      throw error;
    }
  }
}
