import type { AuditVerification } from '../audit/verify.js';
import type { CatalogGuard } from '../approvals/catalog-guard.js';
import type { ToolApproval } from '../approvals/compare.js';
import { readAuditPage } from '../audit/query.js';
import type { ControlPlane } from '../control/control-plane.js';
import { permissionsNotFound, secretNotFound, toolsetNotFound } from '../control/views.js';
import { GatewayError } from '../errors/gateway-error.js';
import type { JsonObject } from '../jsonrpc/message.js';
import type { CallHistorySnapshot } from '../observability/metrics/call-history.js';
import { storedReceiptFile } from '../receipts/issue.js';
import {
  approveToolBody,
  auditQuery,
  catalogApprovalsQuery,
  createKeyBody,
  createOrgBody,
  createPrincipalBody,
  createTeamBody,
  createTeamInOrgBody,
  emptyBody,
  explainQuery,
  keysQuery,
  noQuery,
  parseWith,
  permissionDocumentBody,
  permissionLevel,
  principalsQuery,
  putSecretBody,
  putToolsetBody,
  teamsQuery,
  auditVerifyQuery,
} from './schemas.js';
import type { ToolInventory } from './tool-inventory.js';

export type HttpMethod = 'GET' | 'POST' | 'PUT' | 'DELETE';

export interface RouteContext {
  /** Decoded path parameters, by the `:name` of the pattern. */
  readonly params: Readonly<Record<string, string>>;
  readonly query: Readonly<Record<string, string>>;
  /** The parsed JSON body, `undefined` when the request has none. Read only by routes that take one. */
  body(): Promise<unknown>;
  /** What the listener that mounts the API knows at request time. */
  readonly mount: AdminMount;
}

/**
 * The running listener's view, handed in with each request: it exists only once the listener does, after the
 * API is built.
 */
export interface AdminMount {
  /** The readiness detail that `/readyz` shows only in dev mode (upstream states and errors, sessions, process). */
  readonly status?: () => unknown;
  /** This replica's live legacy sessions (issue 28's sessions page). */
  readonly sessions?: () => readonly SessionView[];
  /** A server's tools as this replica's clients were last listed them (`Router.cachedTools`), for the inventory. */
  readonly cachedTools?: (server: string) => JsonObject[] | 'per-caller' | undefined;
  /** Calls and latency per server over the last minutes, from the metrics; undefined while metrics are off. */
  readonly calls?: () => CallHistorySnapshot | undefined;
}

/** A live session as the admin API shows it: who, which protocol, since when; never its wire id. */
export interface SessionView {
  readonly id: string;
  readonly transport: string;
  readonly protocolVersion: string;
  readonly clientName?: string;
  readonly clientVersion?: string;
  readonly keyId?: string;
  readonly principalId?: string;
  readonly createdAt: string;
  readonly lastSeenAt: string;
  readonly inflight: number;
  readonly stream: boolean;
}

export interface RouteResult {
  readonly status: number;
  readonly body: unknown;
  /** Set by mutations: what the admin log records. Ids and names only, never a key or a hash. */
  readonly audit?: { readonly action: string; readonly fields: Readonly<Record<string, unknown>> };
}

export type Handler = (context: RouteContext) => Promise<RouteResult>;

export interface Route {
  /** Path segments; `:name` matches any one segment. */
  readonly pattern: readonly string[];
  readonly methods: Readonly<Partial<Record<HttpMethod, Handler>>>;
}

const ok = (body: unknown): RouteResult => ({ status: 200, body });

function param(context: RouteContext, name: string): string {
  // The router only calls a handler after matching every `:name` of its pattern.
  return context.params[name] ?? '';
}

/** Gateway parts the admin API reads besides the control plane; each is optional. */
export interface RouteExtras {
  /** Drift of live tool definitions from their approvals (issue 7 §2); absent: catalog mode off. */
  readonly catalog?: CatalogGuard;
  /**
   * Makes every audit record of an answered call readable from the store (the SQLite journal is ingested a few
   * milliseconds later); run before an audit page is read, so the page holds every call answered before it.
   */
  readonly flushAudit?: () => Promise<void>;
  /**
   * Settles once the receipt of a session that just ended is stored: DELETE answers first, so a client that asks
   * for the receipt straight after would otherwise get 404.
   */
  readonly receiptSettled?: (sessionId: string) => Promise<void>;
  /** Checks a stored receipt's signature against the gateway's own key, as `mcpgate receipt verify` does. */
  readonly verifyReceipt?: (signedJson: string) => Promise<{ readonly valid: boolean; readonly reason?: string }>;
  /** Recomputes the audit chains (or one), as `mcpgate audit verify` does against the store (issue 28). */
  readonly verifyAudit?: (chainId: string | undefined) => Promise<AuditVerification>;
  /** Every configured server's tools with their approval state, from what the listener's clients were listed. */
  readonly inventory?: (cachedTools: NonNullable<AdminMount['cachedTools']>) => ToolInventory;
  /** Approves a drifting tool's reviewed live definition (governance's `approveTool`); absent: 404. */
  readonly approveTool?: (request: { readonly server: string; readonly tool: string; readonly hash: string }) => Promise<ToolApproval>;
}

/** The admin API's routes over one control plane (docs/admin-api.md lists them with examples). */
export function buildRoutes(control: ControlPlane, extras: RouteExtras = {}): Route[] {
  const route = (path: string, methods: Route['methods']): Route => ({ pattern: path.split('/').filter((s) => s !== ''), methods });
  /** A session's stored receipt in its canonical file form, once a session that just ended has settled it. */
  const storedReceipt = async (sessionId: string): Promise<string> => {
    await extras.receiptSettled?.(sessionId);
    const record = await control.store.getReceipt(sessionId);
    if (record === undefined) throw receiptNotFound(sessionId);
    return storedReceiptFile(record);
  };
  return [
    route('/orgs', {
      GET: async (c) => {
        parseWith(noQuery, c.query, 'query');
        return ok({ orgs: await control.listOrgs() });
      },
      POST: async (c) => {
        const { name } = parseWith(createOrgBody, await c.body(), 'body');
        const org = await control.createOrg(name);
        return { status: 201, body: { org }, audit: { action: 'org.create', fields: { orgId: org.id, name: org.name } } };
      },
    }),
    route('/orgs/:orgId/teams', {
      GET: async (c) => {
        parseWith(noQuery, c.query, 'query');
        return ok({ teams: await control.listTeams(param(c, 'orgId')) });
      },
      POST: async (c) => {
        const { name } = parseWith(createTeamInOrgBody, await c.body(), 'body');
        return createTeam(control, param(c, 'orgId'), name);
      },
    }),
    route('/teams', {
      GET: async (c) => {
        const { org } = parseWith(teamsQuery, c.query, 'query');
        return ok({ teams: await control.listTeams(org) });
      },
      POST: async (c) => {
        const { orgId, name } = parseWith(createTeamBody, await c.body(), 'body');
        return createTeam(control, orgId, name);
      },
    }),
    route('/principals', {
      GET: async (c) => {
        const { org, kind } = parseWith(principalsQuery, c.query, 'query');
        return ok({ principals: await control.listPrincipals({ ...(org === undefined ? {} : { orgId: org }), ...(kind === undefined ? {} : { kind }) }) });
      },
      POST: async (c) => {
        const body = parseWith(createPrincipalBody, await c.body(), 'body');
        const principal = await control.createPrincipal(body);
        const fields = { principalId: principal.id, kind: principal.kind, orgId: principal.orgId, teamId: principal.teamId, name: principal.name };
        return { status: 201, body: { principal }, audit: { action: 'principal.create', fields } };
      },
    }),
    route('/principals/:principalId/secrets', {
      GET: async (c) => {
        parseWith(noQuery, c.query, 'query');
        return ok({ secrets: await control.listSecrets(param(c, 'principalId')) });
      },
    }),
    route('/principals/:principalId/secrets/:server', {
      PUT: async (c) => {
        const { secret } = parseWith(putSecretBody, await c.body(), 'body');
        const view = await control.setSecret(param(c, 'principalId'), param(c, 'server'), secret);
        // The value went into the vault and nowhere else: the answer and the log carry metadata only.
        const fields = { principalId: view.principalId, server: view.server, keyId: view.keyId };
        return { status: 200, body: { secret: view }, audit: { action: 'secret.set', fields } };
      },
      DELETE: async (c) => {
        const principalId = param(c, 'principalId');
        const server = param(c, 'server');
        if (!(await control.deleteSecret(principalId, server))) throw secretNotFound(principalId, server);
        return { status: 200, body: { deleted: true }, audit: { action: 'secret.delete', fields: { principalId, server } } };
      },
    }),
    route('/keys', {
      GET: async (c) => {
        const { org, team, principal } = parseWith(keysQuery, c.query, 'query');
        const filter = { ...(org === undefined ? {} : { orgId: org }), ...(team === undefined ? {} : { teamId: team }), ...(principal === undefined ? {} : { principalId: principal }) };
        return ok({ keys: await control.listKeys(filter) });
      },
      POST: async (c) => {
        const body = parseWith(createKeyBody, await c.body(), 'body');
        const created = await control.createKey({
          principalId: body.principalId,
          ...(body.teamId === undefined ? {} : { teamId: body.teamId }),
          ...(body.label === undefined ? {} : { label: body.label }),
          ...(body.expiresAt === undefined ? {} : { expiresAt: new Date(body.expiresAt) }),
        });
        const { record } = created;
        const fields = { keyId: record.id, prefix: record.prefix, principalId: record.principalId, teamId: record.teamId, expiresAt: record.expiresAt };
        // The key text is in this one response body and nowhere else: not in the log, not in the store.
        return { status: 201, body: created, audit: { action: 'key.create', fields } };
      },
    }),
    route('/keys/:keyId', {
      GET: async (c) => ok({ record: await control.getKey(param(c, 'keyId')) }),
    }),
    route('/keys/:keyId/revoke', {
      POST: async (c) => {
        const body = await c.body();
        if (body !== undefined) parseWith(emptyBody, body, 'body');
        const record = await control.revokeKey(param(c, 'keyId'));
        return { status: 200, body: { record }, audit: { action: 'key.revoke', fields: { keyId: record.id, prefix: record.prefix } } };
      },
    }),
    route('/permissions/:level/:subjectId', {
      GET: async (c) => {
        const level = parseWith(permissionLevel, param(c, 'level'), 'permission level');
        const subjectId = param(c, 'subjectId');
        const permissions = await control.getPermissions(level, subjectId);
        if (permissions === undefined) throw permissionsNotFound(level, subjectId);
        return ok({ permissions });
      },
      PUT: async (c) => {
        const level = parseWith(permissionLevel, param(c, 'level'), 'permission level');
        const document = parseWith(permissionDocumentBody, await c.body(), 'permission document');
        const subjectId = param(c, 'subjectId');
        const permissions = await control.setPermissions(level, subjectId, document);
        return { status: 200, body: { permissions }, audit: { action: 'permissions.set', fields: { level, subjectId, document } } };
      },
      DELETE: async (c) => {
        const level = parseWith(permissionLevel, param(c, 'level'), 'permission level');
        const subjectId = param(c, 'subjectId');
        if (!(await control.deletePermissions(level, subjectId))) throw permissionsNotFound(level, subjectId);
        return { status: 200, body: { deleted: true }, audit: { action: 'permissions.delete', fields: { level, subjectId } } };
      },
    }),
    route('/toolsets', {
      GET: async (c) => {
        parseWith(noQuery, c.query, 'query');
        return ok({ toolsets: await control.listToolsets() });
      },
    }),
    route('/toolsets/:name', {
      GET: async (c) => {
        const toolset = await control.getToolset(param(c, 'name'));
        if (toolset === undefined) throw toolsetNotFound(param(c, 'name'));
        return ok({ toolset });
      },
      PUT: async (c) => {
        const { entries } = parseWith(putToolsetBody, await c.body(), 'body');
        const toolset = await control.putToolset(param(c, 'name'), entries);
        return { status: 200, body: { toolset }, audit: { action: 'toolset.put', fields: { name: toolset.name, entries: entries.length } } };
      },
      DELETE: async (c) => {
        const name = param(c, 'name');
        if (!(await control.deleteToolset(name))) throw toolsetNotFound(name);
        return { status: 200, body: { deleted: true }, audit: { action: 'toolset.delete', fields: { name } } };
      },
    }),
    route('/explain', {
      GET: async (c) => {
        const query = parseWith(explainQuery, c.query, 'query');
        return ok({ explanation: await control.explain(query) });
      },
    }),
    route('/audit', {
      GET: async (c) => {
        const { session, chain, principal, team, org, ...query } = parseWith(auditQuery, c.query, 'query');
        await extras.flushAudit?.();
        return ok(await readAuditPage(control.store, { ...query, sessionId: session, chainId: chain, principalId: principal, teamId: team, orgId: org }));
      },
    }),
    route('/audit/verify', {
      GET: async (c) => {
        const { chain } = parseWith(auditVerifyQuery, c.query, 'query');
        if (extras.verifyAudit === undefined) throw new GatewayError('MCPGATE_ERR_ADMIN_NOT_FOUND', 'no audit log to verify here');
        await extras.flushAudit?.();
        return ok(await extras.verifyAudit(chain));
      },
    }),
    route('/sessions', {
      GET: async (c) => {
        parseWith(noQuery, c.query, 'query');
        if (c.mount.sessions === undefined) throw new GatewayError('MCPGATE_ERR_ADMIN_NOT_FOUND', 'no listener sessions here');
        return ok({ sessions: c.mount.sessions() });
      },
    }),
    route('/sessions/:sessionId/receipt/verify', {
      GET: async (c) => {
        parseWith(noQuery, c.query, 'query');
        const receipt = await storedReceipt(param(c, 'sessionId'));
        if (extras.verifyReceipt === undefined) throw new GatewayError('MCPGATE_ERR_ADMIN_NOT_FOUND', 'receipts cannot be verified here');
        return ok(await extras.verifyReceipt(receipt));
      },
    }),
    route('/sessions/:sessionId/receipt', {
      GET: async (c) => {
        parseWith(noQuery, c.query, 'query');
        // Parsed from the canonical file form, so the answer's JSON is byte for byte what `receipt verify` checks.
        return ok(JSON.parse(await storedReceipt(param(c, 'sessionId'))));
      },
    }),
    route('/status', {
      GET: async (c) => {
        parseWith(noQuery, c.query, 'query');
        if (c.mount.status === undefined) throw new GatewayError('MCPGATE_ERR_ADMIN_NOT_FOUND', 'no listener status here');
        return ok(c.mount.status());
      },
    }),
    route('/catalog/drift', {
      GET: async (c) => {
        parseWith(noQuery, c.query, 'query');
        const catalog = extras.catalog;
        if (catalog === undefined) return ok({ mode: 'off', drifts: [] });
        return ok({ mode: catalog.mode, snapshotHash: catalog.snapshotHash, drifts: catalog.drifts() });
      },
    }),
    route('/catalog/tools', {
      GET: async (c) => {
        parseWith(noQuery, c.query, 'query');
        if (extras.inventory === undefined) throw new GatewayError('MCPGATE_ERR_ADMIN_NOT_FOUND', 'no tool inventory here');
        return ok(extras.inventory(c.mount.cachedTools ?? (() => undefined)));
      },
    }),
    route('/metrics/calls', {
      GET: async (c) => {
        parseWith(noQuery, c.query, 'query');
        const history = c.mount.calls?.();
        // Off is an answer, not an error: the overview then shows the plain counters it has without metrics.
        return ok(history === undefined ? { enabled: false } : { enabled: true, ...history });
      },
    }),
    route('/catalog/approvals', {
      // The store's versions (`catalog.source: store`), newest first, without their documents; with a file, none.
      GET: async (c) => {
        const { limit } = parseWith(catalogApprovalsQuery, c.query, 'query');
        return ok({ versions: await control.store.listCatalogApprovals({ limit }) });
      },
      POST: async (c) => {
        const request = parseWith(approveToolBody, await c.body(), 'body');
        if (extras.approveTool === undefined) throw new GatewayError('MCPGATE_ERR_ADMIN_NOT_FOUND', 'catalog mode is off: nothing is approved');
        const approval = await extras.approveTool(request);
        return { status: 200, body: { approval }, audit: { action: 'catalog.approve', fields: { ...approval } } };
      },
    }),
  ];
}

/** The session has ended without a receipt, is still open, or never existed: the answer does not say which. */
function receiptNotFound(sessionId: string): GatewayError {
  return new GatewayError('MCPGATE_ERR_STORE_NOT_FOUND', `no receipt for session "${sessionId}"`, { data: { entity: 'receipt', id: sessionId } });
}

async function createTeam(control: ControlPlane, orgId: string, name: string): Promise<RouteResult> {
  const team = await control.createTeam(orgId, name);
  return { status: 201, body: { team }, audit: { action: 'team.create', fields: { teamId: team.id, orgId, name: team.name } } };
}
