import { z } from 'zod';

/**
 * `servers.<name>.credentials` (issue 6): how the gateway authenticates to one HTTP upstream. Five modes, one
 * discriminated union, so a server has exactly one way in and a typo in `mode` is a config error. The
 * behaviour lives in `src/credentials/`; this file only shapes and bounds the input.
 */

function integer(schema: z.ZodNumber) {
  return z.preprocess((value) => (typeof value === 'string' && /^[0-9]{1,15}$/.test(value) ? Number(value) : value), schema);
}

/** RFC 9110 token characters: a header name that is not one would be refused by undici at call time. */
const HEADER_NAME = /^[!#$%&'*+.^_`|~0-9A-Za-z-]{1,128}$/;
const headerName = z.string().regex(HEADER_NAME, 'header names are RFC 9110 tokens (letters, digits, - and a few symbols)');

/** Headers the gateway owns on every upstream request; a credential must never replace them. */
export const RESERVED_UPSTREAM_HEADERS: ReadonlySet<string> = new Set([
  'host',
  'content-type',
  'content-length',
  'accept',
  'mcp-session-id',
  'mcp-protocol-version',
  'last-event-id',
  'connection',
  'transfer-encoding',
  'x-mcpgate-key',
]);

const upstreamHeaderName = headerName.refine((name) => !RESERVED_UPSTREAM_HEADERS.has(name.toLowerCase()), {
  message: 'this header is set by the gateway itself and cannot carry a credential',
});

/**
 * A secret value: inline (normally `${ENV}`, interpolated at load) or `{ file }`, read at start and trimmed of
 * one trailing newline. Either way it is redacted in logs and errors.
 */
export const secretValueSchema = z.union([z.string().min(1), z.strictObject({ file: z.string().min(1) })]);
export type SecretValue = z.infer<typeof secretValueSchema>;

/** Bounded like every outbound call (DESIGN.md invariant 9). */
const timeoutMs = integer(z.number().int().min(100).max(120_000));

const staticSchema = z.strictObject({
  mode: z.literal('static'),
  /** Header name → secret value, sent on every request to this server. */
  headers: z.record(upstreamHeaderName, secretValueSchema).refine((headers) => Object.keys(headers).length > 0, {
    message: 'static credentials need at least one header',
  }),
});

const perUserSchema = z.strictObject({
  mode: z.literal('per-user'),
  /** The header that carries the caller's own secret. */
  header: upstreamHeaderName.default('Authorization'),
  /** `{secret}` is replaced by the caller's stored secret, e.g. `token {secret}`. */
  template: z
    .string()
    .default('Bearer {secret}')
    .refine((template) => template.split('{secret}').length === 2, { message: 'the template must contain {secret} exactly once' }),
});

const privateKeyJwtSchema = z.strictObject({
  /** PEM private key (PKCS#8), inline or from a file. */
  key: secretValueSchema,
  alg: z.enum(['RS256', 'RS384', 'RS512', 'PS256', 'ES256', 'ES384', 'EdDSA']).default('RS256'),
  kid: z.string().min(1).optional(),
  /**
   * The assertion's `aud`. Default: the token endpoint URL (RFC 7523 §3). Some authorization servers want their
   * issuer identifier instead (draft-ietf-oauth-rfc7523bis, the MCP SDK and its conformance suite do).
   */
  audience: z.string().min(1).optional(),
});

const clientCredentialsSchema = z
  .strictObject({
    mode: z.literal('oauth-client-credentials'),
    tokenEndpoint: z.url({ protocol: /^https?$/ }),
    clientId: z.string().min(1),
    /** For `client_secret_basic` (default) or `client_secret_post`. */
    clientSecret: secretValueSchema.optional(),
    authMethod: z.enum(['client_secret_basic', 'client_secret_post', 'private_key_jwt']).default('client_secret_basic'),
    privateKeyJwt: privateKeyJwtSchema.optional(),
    scopes: z.array(z.string().min(1)).default([]),
    /** RFC 8707 resource indicator, usually the upstream's MCP URL. */
    resource: z.url().optional(),
    /** For token endpoints that want `audience` instead of (or besides) `resource`. */
    audience: z.string().min(1).optional(),
    timeoutMs: timeoutMs.default(5_000),
    /** A token is renewed this long before it expires. */
    refreshSkewMs: integer(z.number().int().nonnegative().max(600_000)).default(30_000),
  })
  .superRefine((value, ctx) => {
    if (value.authMethod === 'private_key_jwt' && value.privateKeyJwt === undefined) {
      ctx.addIssue({ code: 'custom', path: ['privateKeyJwt'], message: 'authMethod private_key_jwt needs privateKeyJwt { key, alg }' });
    }
    if (value.authMethod !== 'private_key_jwt' && value.clientSecret === undefined) {
      ctx.addIssue({ code: 'custom', path: ['clientSecret'], message: `authMethod ${value.authMethod} needs clientSecret` });
    }
  });

const tokenExchangeSchema = z.strictObject({
  mode: z.literal('token-exchange'),
  /** The security token service (RFC 8693). */
  tokenEndpoint: z.url({ protocol: /^https?$/ }),
  clientId: z.string().min(1).optional(),
  clientSecret: secretValueSchema.optional(),
  audience: z.string().min(1).optional(),
  resource: z.url().optional(),
  scopes: z.array(z.string().min(1)).default([]),
  requestedTokenType: z.string().min(1).default('urn:ietf:params:oauth:token-type:access_token'),
  timeoutMs: timeoutMs.default(5_000),
  refreshSkewMs: integer(z.number().int().nonnegative().max(600_000)).default(30_000),
});

const passthroughSchema = z.strictObject({
  mode: z.literal('passthrough'),
  probe: z
    .strictObject({
      /** Probe before the first response byte (issue 6 §5). */
      enabled: z.boolean().default(true),
      timeoutMs: timeoutMs.default(5_000),
      /** How long a probe outcome is reused per (token hash, server). */
      cacheMs: integer(z.number().int().nonnegative().max(600_000)).default(30_000),
    })
    .prefault({}),
  /** Where the upstream's own protected-resource metadata is; default derived from the server URL (RFC 9728 §3.1). */
  metadataUrl: z.url({ protocol: /^https?$/ }).optional(),
  /** Permits metadata discovery to private, loopback or link-local addresses (SSRF guard off for this server). */
  allowPrivateMetadata: z.boolean().default(false),
});

export const credentialsSchema = z.discriminatedUnion('mode', [
  staticSchema,
  perUserSchema,
  clientCredentialsSchema,
  tokenExchangeSchema,
  passthroughSchema,
]);

export type CredentialsConfig = z.infer<typeof credentialsSchema>;
export type CredentialMode = CredentialsConfig['mode'];

/**
 * `gateway.vault` (issue 6 §2): the AES-256-GCM master key for per-user secrets, 32 bytes as 64 hex characters
 * or base64, from `${ENV}` or a file. `mcpgate secrets rotate` re-encrypts every entry under a new key.
 */
export const vaultSchema = z.strictObject({
  masterKey: secretValueSchema,
});
export type VaultConfig = z.infer<typeof vaultSchema>;
