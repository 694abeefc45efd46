import type { InboundCredentials } from './inbound-credentials.js';

/**
 * Whom one upstream request acts for: the credentials its own downstream request carried (issue 24), which may
 * differ between two requests of one session. `inbound` undefined: that request carried none, and nothing of
 * another request's may stand in for it.
 */
export interface OnBehalf {
  readonly inbound: InboundCredentials | undefined;
}

/**
 * The contract between the credential modes (issue 6) and the upstream transports: a transport asks for the
 * headers of each request, and after an upstream 401 asks once whether renewing can help. Transports never
 * learn which mode produced the headers, so no mode can leak another's secret through them.
 */
export interface UpstreamCredentials {
  /**
   * The credential headers for one request to the upstream (lower-case names). Rejects with a `GatewayError`
   * the caller may see (it names the server, never a secret), e.g. when a per-user secret is not stored.
   * `onBehalf`: the downstream request this one serves; absent for the upstream session's own traffic (its
   * initialize, GET stream, DELETE), which acts for whoever opened the session.
   */
  headers(onBehalf?: OnBehalf): Promise<Readonly<Record<string, string>>>;
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
