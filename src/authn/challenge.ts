/**
 * `WWW-Authenticate` values (RFC 6750 §3, RFC 9728 §5.1). With JWT mode the challenge points at the protected
 * resource metadata, which is how an MCP client discovers the authorization server (spec 2025-06-18
 * authorization §2.3); without it the plain realm form is kept.
 */

/** The challenge sent with every 401 when no resource metadata URL is configured. */
export const WWW_AUTHENTICATE = 'Bearer realm="mcpgate"';

/**
 * `invalid_token` is added only when a credential was presented: RFC 6750 §3.1 says a request without one gets
 * no error code, and a client seeing `invalid_token` knows to drop what it sent rather than retry it.
 */
export type BearerError = 'invalid_token' | 'insufficient_scope';

export interface ChallengeOptions {
  readonly resourceMetadataUrl?: string | undefined;
  readonly error?: BearerError;
  /** For `insufficient_scope`: every scope the resource needs (RFC 6750 §3). */
  readonly scope?: readonly string[];
}

/**
 * Builds a Bearer challenge. Values are quoted as-is: the metadata URL is a parsed `href` (a `"` in it is
 * percent-encoded) and scopes are checked to exclude `"` and `\` (auth-schema.ts), so no escaping is needed.
 */
export function bearerChallenge(options: ChallengeOptions = {}): string {
  const params: string[] = [];
  if (options.resourceMetadataUrl === undefined) params.push('realm="mcpgate"');
  if (options.error !== undefined) params.push(`error="${options.error}"`);
  if (options.scope !== undefined && options.scope.length > 0) params.push(`scope="${options.scope.join(' ')}"`);
  if (options.resourceMetadataUrl !== undefined) params.push(`resource_metadata="${options.resourceMetadataUrl}"`);
  return `Bearer ${params.join(', ')}`;
}
