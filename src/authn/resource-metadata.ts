/**
 * OAuth 2.0 Protected Resource Metadata (RFC 9728) for JWT resource-server mode (issue 5 §8). An MCP client
 * that gets a 401 follows `resource_metadata` from the challenge to this document, and from it to the
 * authorization server that issues tokens for the gateway (spec 2025-06-18 authorization §2.3).
 */

const WELL_KNOWN = '/.well-known/oauth-protected-resource';

export interface ProtectedResourceMetadataOptions {
  /** The gateway's canonical MCP URL: the `aud` every token must carry, and the `resource` advertised. */
  readonly audience: string;
  readonly authorizationServers: readonly string[];
  readonly scopesSupported?: readonly string[] | undefined;
}

/** The RFC 9728 §2 document, with snake_case members as they go on the wire. */
export interface ProtectedResourceMetadata {
  readonly resource: string;
  readonly authorization_servers: readonly string[];
  readonly scopes_supported?: readonly string[];
  /** Tokens are accepted in the Authorization header only: never in a query string or a form body. */
  readonly bearer_methods_supported: readonly ['header'];
  readonly resource_name: string;
}

/** The metadata document to serve at {@link resourceMetadataUrl}. */
export function protectedResourceMetadata(options: ProtectedResourceMetadataOptions): ProtectedResourceMetadata {
  return {
    resource: options.audience,
    authorization_servers: [...options.authorizationServers],
    ...(options.scopesSupported === undefined ? {} : { scopes_supported: [...options.scopesSupported] }),
    bearer_methods_supported: ['header'],
    resource_name: 'mcpgate',
  };
}

/**
 * The metadata URL for a resource identifier (RFC 9728 §3.1): `/.well-known/oauth-protected-resource` goes
 * between the host and the path, and a lone `/` path is dropped, so `https://gw/mcp` gives
 * `https://gw/.well-known/oauth-protected-resource/mcp` and `https://gw/` gives `https://gw/.well-known/…`.
 * A query is kept after the path, as the RFC says.
 * @throws TypeError for a value that is not an http(s) URL, or that has a fragment (RFC 9728 §1.2 forbids one).
 */
export function resourceMetadataUrl(audience: string): string {
  let url: URL;
  try {
    url = new URL(audience);
  } catch {
    throw new TypeError('the audience must be an absolute http(s) URL');
  }
  if (url.protocol !== 'https:' && url.protocol !== 'http:') throw new TypeError('the audience must be an http(s) URL');
  if (url.hash !== '' || audience.includes('#')) throw new TypeError('the audience must not contain a fragment');
  const path = url.pathname === '/' ? '' : url.pathname;
  return `${url.origin}${WELL_KNOWN}${path}${url.search}`;
}
