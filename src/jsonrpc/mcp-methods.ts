/**
 * The MCP request methods a client may send the gateway, in either era (the 2025-11-25 and 2026-07-28 schemas).
 * The router's method table is typed by this list and the metrics' `method` label is drawn from it, so that the
 * two cannot drift apart.
 */
export const CLIENT_REQUEST_METHODS = [
  'initialize',
  'ping',
  'tools/list',
  'tools/call',
  'prompts/list',
  'prompts/get',
  'resources/list',
  'resources/templates/list',
  'resources/read',
  'resources/subscribe',
  'resources/unsubscribe',
  'completion/complete',
  'logging/setLevel',
  'server/discover',
  'subscriptions/listen',
] as const;

export type ClientRequestMethod = (typeof CLIENT_REQUEST_METHODS)[number];
