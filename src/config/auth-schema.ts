import { z } from 'zod';
import { isLoopbackHost } from '../util/tls-pins.js';

/**
 * `gateway.auth.defaultAccess` (issue 22 A3): what a caller gets when no permission document exists at any of
 * its levels (org, team, user or agent, key). A security gateway fails closed, so the default is `deny` in every
 * mode, dev included: a key's reach must not change between a developer's machine and production. `allow` is the
 * explicit opt-in to the old behaviour, and the gateway warns about it once at start-up.
 *
 * With `auth.mode: none` there is no principal and no permission to look up: every request may use every server
 * (dev mode on loopback only), so `defaultAccess` does not apply; an explicit `deny` there is refused by the
 * schema rather than silently ignored.
 */
export const DEFAULT_ACCESS = ['deny', 'allow'] as const;
export type DefaultAccess = (typeof DEFAULT_ACCESS)[number];
export const defaultAccessSchema = z.enum(DEFAULT_ACCESS).optional();

/** The configured `defaultAccess`, or `deny` when none is configured. */
export function defaultAccessOf(auth: { readonly defaultAccess?: DefaultAccess | undefined }): DefaultAccess {
  return auth.defaultAccess ?? 'deny';
}

/**
 * `gateway.auth.jwt`: JWT / OAuth resource-server mode (issue 5 §8). The rules live here as plain functions as
 * well, so `authn/jwt-verifier.ts` refuses the same inputs when it is built without a config file.
 */

/** Asymmetric JWS algorithms only: the keys come from a public JWKS, so an HMAC alg would let anyone sign. */
export const JWT_ALGORITHMS = ['RS256', 'RS384', 'RS512', 'PS256', 'PS384', 'PS512', 'ES256', 'ES384', 'ES512', 'EdDSA', 'Ed25519'] as const;
export type JwtAlgorithm = (typeof JWT_ALGORITHMS)[number];
export const DEFAULT_JWT_ALGORITHMS: readonly JwtAlgorithm[] = ['RS256', 'ES256', 'EdDSA', 'PS256'];

/** Largest clock skew accepted for exp/nbf: beyond five minutes a "tolerance" is a second lifetime. */
export const MAX_CLOCK_TOLERANCE_SECONDS = 300;

/**
 * Why a JWKS URL is refused, or undefined when it is fine. Signing keys fetched over plain HTTP could be
 * swapped by anyone on the path, so `http:` is allowed only to a loopback host (a sidecar or a test IdP).
 */
export function jwksUriProblem(value: string): string | undefined {
  let url: URL;
  try {
    url = new URL(value);
  } catch {
    return 'jwksUri must be an absolute URL';
  }
  if (url.username !== '' || url.password !== '') return 'jwksUri must not carry credentials';
  if (url.protocol === 'https:') return undefined;
  if (url.protocol === 'http:') {
    return isLoopbackHost(url.hostname)
      ? undefined
      : `jwksUri must use https: (plain http: is allowed only for a loopback host: 127.0.0.0/8, ::1, localhost), got host "${url.hostname}"`;
  }
  return `jwksUri must be an https: URL, got "${url.protocol}"`;
}

/**
 * Why a JWS algorithm is refused, or undefined when it is allowed. `none` and HS* are named explicitly: they are
 * the two classic ways a verifier is tricked into accepting a forged token.
 */
export function jwtAlgorithmProblem(alg: string): string | undefined {
  if (alg.toLowerCase() === 'none') return 'algorithm "none" is never accepted: it means an unsigned token';
  if (/^HS/i.test(alg)) {
    return `algorithm "${alg}" is refused: HMAC algorithms would let anyone holding the public JWKS key forge tokens (algorithm confusion)`;
  }
  if (!(JWT_ALGORITHMS as readonly string[]).includes(alg)) return `algorithm "${alg}" is not one of ${JWT_ALGORITHMS.join(', ')}`;
  return undefined;
}

/** Why an audience is refused: it is the gateway's canonical MCP URL, and RFC 9728 derives the metadata URL from it. */
export function audienceProblem(value: string): string | undefined {
  let url: URL;
  try {
    url = new URL(value);
  } catch {
    return 'audience must be the gateway\'s canonical MCP URL, e.g. https://gw.example.com/mcp';
  }
  if (url.protocol !== 'https:' && url.protocol !== 'http:') return 'audience must be an http(s) URL';
  if (url.hash !== '' || value.includes('#')) return 'audience must not contain a fragment (RFC 9728 §1.2)';
  return undefined;
}

function refineWith(check: (value: string) => string | undefined) {
  return (value: string, ctx: z.RefinementCtx) => {
    const problem = check(value);
    if (problem !== undefined) ctx.addIssue({ code: 'custom', message: problem });
  };
}

/** A claim name: what the token calls the field, not its value. */
const claimName = z.string().min(1).max(200);
/** RFC 6749 §3.3 scope-token: printable ASCII without space, `"` or `\`, so it can be quoted in a challenge as-is. */
export const SCOPE_TOKEN_PATTERN = /^[\x21\x23-\x5B\x5D-\x7E]+$/;
const scopeToken = z.string().regex(SCOPE_TOKEN_PATTERN, 'a scope is printable ASCII without spaces, quotes or backslashes');

const claimsSchema = z.strictObject({
  /** The user's name in the store (`principals.name`, kind user). */
  user: claimName.default('sub'),
  /** The org's name in the store; required in every token. */
  org: claimName.default('org'),
  /** The team's name within the org; optional in a token, but must exist when present. */
  team: claimName.default('team'),
  /** When set and present in a token, the token is an agent's: this claim names the agent instead of a user. */
  agent: claimName.optional(),
});

export const jwtSchema = z
  .strictObject({
    /** Compared exactly with the token's `iss`. */
    issuer: z.string().min(1).superRefine(refineWith((value) => (URL.canParse(value) ? undefined : 'issuer must be a URL'))),
    /** Compared exactly with the token's `aud` (RFC 8707: the token was minted for this gateway). */
    audience: z.string().min(1).superRefine(refineWith(audienceProblem)),
    jwksUri: z.string().min(1).superRefine(refineWith(jwksUriProblem)),
    algorithms: z
      .array(z.enum(JWT_ALGORITHMS, { error: (issue) => jwtAlgorithmProblem(String(issue.input)) ?? 'unsupported algorithm' }))
      .min(1)
      .default([...DEFAULT_JWT_ALGORITHMS]),
    claims: claimsSchema.prefault({}),
    /** Every token must carry all of these (`scope` or `scp`), else 403 insufficient_scope. */
    requiredScopes: z.array(scopeToken).default([]),
    /** Advertised in the protected-resource metadata. */
    scopesSupported: z.array(scopeToken).optional(),
    clockToleranceSeconds: z.number().int().min(0).max(MAX_CLOCK_TOLERANCE_SECONDS).default(30),
    /** Advertised in the protected-resource metadata; defaults to `[issuer]`. */
    authorizationServers: z
      .array(z.string().superRefine(refineWith((value) => (URL.canParse(value) ? undefined : 'authorizationServers entries must be URLs'))))
      .min(1)
      .optional(),
  })
  .transform((jwt) => ({ ...jwt, authorizationServers: jwt.authorizationServers ?? [jwt.issuer] }));

export type JwtConfig = z.infer<typeof jwtSchema>;
export type JwtClaimsConfig = z.infer<typeof claimsSchema>;
