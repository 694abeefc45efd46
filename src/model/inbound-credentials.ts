/**
 * Credentials a request carried for upstreams (issue 6), never for the gateway itself: the validated gateway JWT
 * (exchanged at an STS for token-exchange servers) and the client's `Authorization` when the gateway key came
 * in `X-Mcpgate-Key` (forwarded to pass-through servers only). Secret: never logged.
 */
export interface InboundCredentials {
  readonly gatewayJwt?: string;
  readonly upstreamAuthorization?: string;
}
