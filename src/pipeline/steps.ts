/**
 * The named steps every JSON-RPC request goes through, in order (issue 24, DESIGN.md §1). A method runs the
 * steps its entry in the method table names (router/method-table.ts) and skips the others; adding a step (a
 * rate limit, say) is one name here and one implementation per method family.
 *
 * - `authenticate`: who is calling; done at the transport's edge, before a body is read (issue 5 §6).
 * - `authorize`: the caller's one access decision for this request (issue 5 §7).
 * - `resolve`: the server, the upstream's own name and the route; params checked before any upstream contact.
 * - `limit`: the caller's rate limits for this server and tool (issue 27 §1), before any upstream contact.
 * - `admit`: the approved definition of a pinned tool (issue 7 §2). Bulkhead and breakers admit inside
 *   `upstream`, around the exchange they guard.
 * - `ingress`: Cedar policies before the upstream is contacted, and the audit log's lateness.
 * - `upstream`: the exchange with the upstream (or upstreams, for lists and logging/setLevel).
 * - `egress`: response guards and egress policies.
 * - `record`: the one terminal audit record, durable before the answer in `sync` durability.
 * - `respond`: the answer handed back to the transport.
 */
export const STEPS = ['authenticate', 'authorize', 'resolve', 'limit', 'admit', 'ingress', 'upstream', 'egress', 'record', 'respond'] as const;

export type StepName = (typeof STEPS)[number];
