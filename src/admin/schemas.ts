import { z } from 'zod';
import { FILTER_VALUES } from '../audit/filter-values.js';
import { parseTimeBound } from '../audit/query.js';
import { invalidRequest } from '../control/views.js';

/**
 * Request shapes of the admin API. Every object is strict: an unknown field is refused rather than ignored,
 * so a typo such as `server` for `servers` cannot silently widen a permission.
 */

const name = z.string().min(1).max(200);
const id = z.string().min(1).max(200);
const names = z.array(name).max(10_000);

export const createOrgBody = z.strictObject({ name });
export const createTeamInOrgBody = z.strictObject({ name });
export const createTeamBody = z.strictObject({ orgId: id, name });

export const createPrincipalBody = z.strictObject({
  kind: z.enum(['user', 'agent']),
  orgId: id,
  teamId: id.optional(),
  name,
});

export const createKeyBody = z.strictObject({
  principalId: id,
  teamId: id.optional(),
  label: z.string().max(200).optional(),
  /** ISO 8601 with an offset (`Z` or `+02:00`), so the instant never depends on the server's time zone. */
  expiresAt: z.iso.datetime({ offset: true }).optional(),
});

/** Revoking takes no input; an empty object is accepted for clients that always send one. */
export const emptyBody = z.strictObject({});

export const permissionDocumentBody = z.discriminatedUnion('kind', [
  z.strictObject({ kind: z.literal('none') }),
  z.strictObject({
    kind: z.literal('allow'),
    servers: names.optional(),
    tools: z.record(name, names).optional(),
    toolsets: names.optional(),
  }),
]);

export const putToolsetBody = z.strictObject({
  entries: z.array(z.strictObject({ server: name, toolGlob: name })).min(1).max(10_000),
});

/** `POST /catalog/approvals`: the tool as its upstream names it, and the live hash `GET /catalog/drift` showed. */
export const approveToolBody = z.strictObject({
  server: z.string().min(1).max(64),
  tool: z.string().min(1).max(256),
  hash: z.string().regex(/^[0-9a-f]{64}$/, 'must be the 64 lower-case hex digits of the live hash'),
});

/** The length and character rules are the vault's, so every front end refuses the same secrets the same way. */
export const putSecretBody = z.strictObject({ secret: z.string() });

export const permissionLevel = z.enum(['org', 'team', 'user', 'agent', 'key']);

export const noQuery = z.strictObject({});

/** `GET /audit/verify?chain=`: one chain, or every chain when absent. */
export const auditVerifyQuery = z.strictObject({ chain: z.string().regex(/^[A-Za-z0-9_.:-]{1,128}$/).optional() });
export const teamsQuery = z.strictObject({ org: id.optional() });
export const principalsQuery = z.strictObject({ org: id.optional(), kind: z.enum(['user', 'agent']).optional() });
export const keysQuery = z.strictObject({ org: id.optional(), team: id.optional(), principal: id.optional() });
/** Exactly one of `key` and `principal`; the explainer refuses neither and both, for the CLI as well. */
export const explainQuery = z.strictObject({
  key: id.optional(),
  principal: id.optional(),
  tool: name,
  server: name.optional(),
  ip: z.string().min(1).max(100).optional(),
});

/** `since`/`until`: an ISO 8601 date, a date-time with its offset, or a duration back from now (`24h`). */
const timeBound = z
  .string()
  .max(64)
  .transform((value, ctx) => {
    const date = parseTimeBound(value, new Date());
    if (date !== undefined) return date;
    ctx.addIssue({ code: 'custom', message: 'expected an ISO 8601 date, a date-time with an offset, or a duration such as 24h' });
    return z.NEVER;
  });

/** A `limit` query parameter: up to `digits` digits, 1 to `max`, `fallback` when absent. */
function limitParam(digits: number, max: number, fallback: number) {
  return z
    .string()
    .regex(new RegExp(`^[0-9]{1,${digits}}$`))
    .transform(Number)
    .pipe(z.number().int().min(1).max(max))
    .default(fallback);
}

export const MAX_AUDIT_LIMIT = 1000;
export const auditQuery = z.strictObject({
  since: timeBound.optional(),
  until: timeBound.optional(),
  keyId: FILTER_VALUES.id.optional(),
  /** A user's or an agent's id: records where it acted as either (issue 28). */
  principal: FILTER_VALUES.id.optional(),
  team: FILTER_VALUES.id.optional(),
  org: FILTER_VALUES.id.optional(),
  session: FILTER_VALUES.id.optional(),
  server: FILTER_VALUES.name.optional(),
  tool: FILTER_VALUES.name.optional(),
  /** The name the client used, e.g. `notes__add_note` (issue 22 B9). */
  exposed: FILTER_VALUES.name.optional(),
  /** A W3C trace id (32 lowercase hex, not all zero): every record of one distributed trace (issue 26). */
  traceId: FILTER_VALUES.traceId.optional(),
  decision: FILTER_VALUES.decision.optional(),
  kind: FILTER_VALUES.kind.optional(),
  chain: z.string().regex(/^[A-Za-z0-9_.:-]{1,128}$/).optional(),
  limit: limitParam(7, MAX_AUDIT_LIMIT, 100),
  cursor: z.string().min(1).max(1024).optional(),
});

/** `GET /catalog/approvals`: how many of the store's newest versions. */
export const catalogApprovalsQuery = z.strictObject({
  limit: limitParam(4, 1000, 20),
});

/** Parses `value` or throws ADMIN_INVALID naming the first problem and where it is. */
export function parseWith<T>(schema: z.ZodType<T>, value: unknown, what: string): T {
  const parsed = schema.safeParse(value);
  if (parsed.success) return parsed.data;
  const issue = parsed.error.issues[0];
  const at = issue === undefined || issue.path.length === 0 ? '' : ` at ${issue.path.map(String).join('.')}`;
  throw invalidRequest(`invalid ${what}${at}: ${issue?.message ?? 'invalid'}`);
}

/** Query parameters as an object; a repeated parameter is refused, never resolved by picking one. */
export function queryObject(params: URLSearchParams): Record<string, string> {
  for (const key of new Set(params.keys())) {
    if (params.getAll(key).length > 1) throw invalidRequest(`query parameter "${key}" is repeated`);
  }
  // fromEntries defines own properties, so a `__proto__` parameter stays data and the strict schema refuses it.
  return Object.fromEntries(params.entries());
}
