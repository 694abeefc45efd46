/**
 * The contract between the credential modes (issue 6) and the upstream transports: a transport asks for the
 * headers of each request, and after an upstream 401 asks once whether renewing can help. Transports never
 * learn which mode produced the headers, so no mode can leak another's secret through them.
 */
export interface UpstreamCredentials {
  /**
   * The credential headers for one request to the upstream (lower-case names). Rejects with a `GatewayError`
   * the caller may see (it names the server, never a secret), e.g. when a per-user secret is not stored.
   */
  headers(): Promise<Readonly<Record<string, string>>>;
  /**
   * Called after the upstream answered 401 to headers from this source. Drops what can be renewed (a cached
   * token) and resolves true when a retry with fresh `headers()` may succeed. A request retries at most once.
   */
  renew(): Promise<boolean>;
}

/** No credential: the upstream gets only the protocol headers. */
export const NO_CREDENTIALS: UpstreamCredentials = {
  headers: () => Promise.resolve({}),
  renew: () => Promise.resolve(false),
};
