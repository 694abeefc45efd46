import type { AuditClient, AuditDecision, AuditInput, AuditKind, AuditPrincipal } from '../audit/record.js';
import { argumentsHash, isCallRecord, isDenialRecord } from '../audit/record.js';
import type { AuditLog } from '../audit/audit-log.js';
import type { CedarAction } from '../cedar/request.js';
import type { CedarPolicies } from '../cedar/policy-loader.js';
import { policyDeniedError, type PolicyOutcome } from '../cedar/policy-evaluator.js';
import type { ServerConfig } from '../config/schema.js';
import { guardsSchema, type SensitivityLabel } from '../config/governance-schema.js';
import { GatewayError } from '../errors/gateway-error.js';
import { guardError, guardResult, guardResultBytes, guardUpstreamError } from '../guards/response-guard.js';
import { raise } from '../guards/sensitivity.js';
import { makeResult, type JsonRpcResponse } from '../jsonrpc/message.js';
import { materialized, rawResult, resultBytesOf, type ResultHead } from '../jsonrpc/serialize.js';
import type { Logger } from '../observability/logger.js';
import type { Caller } from '../model/caller.js';
import { evidenceOf, type UpstreamEvidence } from './evidence.js';
import { errorMessage } from '../errors/error-message.js';
import { isTraceId } from '../util/trace-id.js';
import { publishPolicyDecision } from '../pipeline/events.js';

/** For the router: a request's `traceparent` to the record's `traceId` (undefined unless a valid version-00 one). */
export { traceIdOf } from '../util/trace-id.js';

const MAX_COUNTED_SESSIONS = 100_000;

const DEFAULT_GUARDS = guardsSchema.parse({});

/** The record kind of each action's requests (docs/audit-actions.md). */
const RECORD_KINDS: Readonly<Record<Exclude<CedarAction, 'list'>, AuditKind>> = {
  call_tool: 'call',
  get_prompt: 'call',
  read_resource: 'call',
  complete: 'completion',
  subscribe_resource: 'subscription',
  unsubscribe_resource: 'subscription',
  set_log_level: 'log-level',
};

/**
 * One governed request after routing: a tool call, a prompt fetch, a resource read, a completion, a
 * subscription change, or a log level (issue 24: every method that reaches an upstream).
 */
export interface CallFacts {
  /** Undefined for a 2026-07-28 request, which has no session. */
  readonly sessionId: string | undefined;
  /** The session's sensitivity before this call (issue 7 §4). */
  readonly sessionSensitivity: SensitivityLabel;
  readonly caller: Caller | undefined;
  readonly action: Exclude<CedarAction, 'list'>;
  /**
   * The server the name belongs to. For a refused name the caller may not use, the server its prefix names (for
   * the record, never contacted); undefined when the name names no configured server.
   */
  readonly server: string | undefined;
  /** The upstream's own tool or prompt name, the resource URI, or the name the client asked for when unresolved. */
  readonly name: string;
  /** The name (or URI) exactly as the client sent it: recorded as `exposed` beside `server` and `tool`. */
  readonly exposed: string;
  readonly args: unknown;
  /**
   * The client's self-reported `clientInfo` (issue 25 §12): from the request's `_meta` in 2026-07-28, from
   * `initialize` in a legacy session ({@link clientOf} reads either). Recorded as `clientName`/`clientVersion`,
   * redacted and cut to 256 characters each; undefined or empty members are left out.
   */
  readonly client?: AuditClient | undefined;
  /** The W3C trace id of the request's `traceparent` ({@link traceIdOf}); recorded as `traceId`. */
  readonly traceId?: string | undefined;
}

/** Who asks for a list, for the `list` policies and their records. */
export type ListFacts = Pick<CallFacts, 'sessionId' | 'sessionSensitivity' | 'caller' | 'client' | 'traceId'>;

/**
 * The `name` and `version` of a `clientInfo` object (a 2026-07-28 request's `_meta`
 * `io.modelcontextprotocol/clientInfo`, or a legacy session's `initialize`), as {@link CallFacts.client}. Members
 * that are not strings are left out; undefined when neither is a string. Not bounded here: the audit log cuts them.
 */
export function clientOf(clientInfo: unknown): AuditClient | undefined {
  if (typeof clientInfo !== 'object' || clientInfo === null || Array.isArray(clientInfo)) return undefined;
  const { name, version } = clientInfo as { readonly name?: unknown; readonly version?: unknown };
  const ownName = typeof name === 'string' ? name : undefined;
  const ownVersion = typeof version === 'string' ? version : undefined;
  if (ownName === undefined && ownVersion === undefined) return undefined;
  // A client sends the same name and version with every request: the last one made is reused.
  if (lastClient !== undefined && lastClient.name === ownName && lastClient.version === ownVersion) return lastClient;
  lastClient = Object.freeze({ ...(ownName === undefined ? {} : { name: ownName }), ...(ownVersion === undefined ? {} : { version: ownVersion }) });
  return lastClient;
}

let lastClient: AuditClient | undefined;

/** How a governed request ended, for its one terminal audit record. */
export type CallEnd =
  | { readonly kind: 'answered'; readonly response: JsonRpcResponse; readonly resultBytes?: number; readonly resultHash?: string }
  | { readonly kind: 'failed'; readonly error: unknown; readonly cancelled: boolean }
  | { readonly kind: 'refused'; readonly error: GatewayError; readonly decision: 'deny' | 'refused' };

export interface CallGovernorOptions {
  readonly audit: AuditLog | undefined;
  /**
   * Count calls and denials per session without an audit log (receipts on, audit off), by the audit log's
   * rules, for the session's receipt. With an audit log its session spans hold the counts.
   */
  readonly countSessions?: boolean;
  readonly policies: CedarPolicies | undefined;
  readonly servers: Readonly<Record<string, ServerConfig>>;
  readonly logger: Logger;
}

/**
 * The decisions around one call that are not "may this principal use this tool" (issue 7): Cedar policies at
 * ingress and egress, response guards, the session's sensitivity, and the one terminal audit record every
 * call gets, whatever happens to it (DESIGN.md invariant 7). In `sync` audit durability the caller awaits
 * `record` before answering, so no answer outlives its record.
 */
export class CallGovernor {
  readonly #audit: AuditLog | undefined;
  readonly #policies: CedarPolicies | undefined;
  readonly #servers: Readonly<Record<string, ServerConfig>>;
  readonly #evidence = new Map<string, UpstreamEvidence>();
  readonly #logger: Logger;
  readonly #counts: Map<string, { calls: number; denials: number }> | undefined;

  constructor(options: CallGovernorOptions) {
    this.#audit = options.audit;
    this.#counts = options.countSessions === true && options.audit === undefined ? new Map() : undefined;
    this.#policies = options.policies;
    this.#servers = options.servers;
    this.#logger = options.logger;
    for (const [name, server] of Object.entries(options.servers)) this.#evidence.set(name, evidenceOf(server));
  }

  /**
   * Ingress: refuses every call while the audit log is late (decision 0009), then the policies. Throws
   * AUDIT_UNAVAILABLE or the deny error of an enforce set; returns the ids of advisory sets that would have denied,
   * for the record.
   */
  ingress(facts: CallFacts & { readonly server: string }): readonly string[] {
    // A call that reached the upstream now would have its answer withheld after maxWaitMs anyway (its record
    // cannot become durable), and the upstream's side effect would stand: refuse it before it leaves.
    if (this.#audit?.late === true) throw auditLateError(this.#audit.chainId);
    const outcome = this.#evaluate(facts, 'ingress', undefined);
    if (outcome === undefined) return [];
    if (outcome.decision === 'deny') throw policyDeniedError(outcome, 'ingress');
    return outcome.advisoryDenies;
  }

  /**
   * Egress: the response guards of the server (size, secrets), then egress policies over the guarded result.
   * An upstream's JSON-RPC error goes through the same guards (no policy: it carries no result to decide on).
   * Returns the response to send, with its size and (with an audit log, else '') hash for the record; throws a
   * guard or policy error. `head`: members the gateway puts in front of the result's own (a 2026-07-28 answer's
   * shape, router/modern-results.ts), which the guards count but do not scan (response-guard.ts `guardResult`);
   * the size the policies see, the hash and the bytes sent include them.
   */
  egress(facts: CallFacts & { readonly server: string }, response: JsonRpcResponse, head?: ResultHead): { response: JsonRpcResponse; bytes: number; hash: string; advisory: readonly string[] } {
    // A server the governor was not built with still gets the default guards: nothing leaves unscanned.
    const guards = this.#servers[facts.server]?.guards ?? DEFAULT_GUARDS;
    if ('error' in response) {
      // An upstream's error is scanned like its result (issue 22): the message and data are its text too.
      const guardedError = guardUpstreamError(response.error, guards, facts.server);
      if (!guardedError.ok) throw guardError(guardedError);
      const sent = guardedError.error === response.error ? response : { ...response, error: guardedError.error };
      return { response: sent, bytes: 0, hash: '', advisory: [] };
    }
    const kept = resultBytesOf(response.result);
    if (kept !== undefined) {
      const checked = guardResultBytes(kept, guards, facts.server);
      if (checked !== undefined) {
        if (!checked.ok) throw guardError(checked);
        const outcome = this.#evaluate(facts, 'egress', { bytes: checked.bytes, labels: [] });
        if (outcome?.decision === 'deny') throw policyDeniedError(outcome, 'egress');
        // What goes out is these bytes, and the record's hash is of them.
        const hash = this.#audit === undefined ? '' : this.#audit.resultHasher.bytes(kept.head, kept.bytes);
        return { response, bytes: checked.bytes, hash, advisory: outcome?.advisoryDenies ?? [] };
      }
    }
    const guarded = guardResult(kept === undefined ? response.result : materialized(response.result), guards, facts.server, head);
    if (!guarded.ok) throw guardError(guarded);
    const { text, bytes, labels } = guarded;
    const outcome = this.#evaluate(facts, 'egress', { bytes, labels });
    if (outcome?.decision === 'deny') throw policyDeniedError(outcome, 'egress');
    // The guarded text is what goes out as is: the transport splices it in instead of serialising again. Its hash
    // is for the audit record only: without an audit log it is not computed.
    const hash = this.#audit === undefined ? '' : this.#audit.resultHasher.text(text);
    return { response: makeResult(response.id, rawResult(text)), bytes, hash, advisory: outcome?.advisoryDenies ?? [] };
  }

  /**
   * The servers of `servers` whose items a `<kind>/list` request may show under the policies' `list` action
   * (issue 7 §3; the resource is the server). A forbid of an enforce set hides the server and writes one `list`
   * record decided `deny`; a forbid of an advisory set hides nothing and writes one decided `advisory-deny`. In
   * `sync` durability this resolves once those records are durable, so no list outlives its records. Returns
   * `servers` itself when nothing is hidden.
   */
  async listable(facts: ListFacts, servers: readonly string[]): Promise<readonly string[]> {
    const policies = this.#policies;
    if (policies === undefined) return servers;
    let shown: string[] | undefined;
    const records: Promise<void>[] = [];
    servers.forEach((server, index) => {
      const outcome = this.#decide(policies, { ...facts, action: 'list', server, name: undefined, args: undefined }, 'ingress', undefined);
      if (outcome.decision === 'deny') {
        shown ??= servers.slice(0, index);
        records.push(this.#recordList(facts, server, 'deny', errorReason(policyDeniedError(outcome, 'ingress'))));
        return;
      }
      shown?.push(server);
      if (outcome.advisoryDenies.length > 0) records.push(this.#recordList(facts, server, 'advisory-deny', advisoryReason(outcome.advisoryDenies)));
    });
    await Promise.all(records);
    return shown ?? servers;
  }

  /**
   * A list's ingress before its policies (issue 24): refused at once while the audit log is late, as calls are,
   * since the list's record could not become durable in time either (decision 0009).
   */
  listIngress(): void {
    if (this.#audit?.late === true) throw auditLateError(this.#audit.chainId);
  }

  /**
   * The one record of a list request (issue 24): kind `list`, with the method as `exposed`; decided `allow` when it
   * was answered, `refused` when {@link listIngress} refused it. Servers hidden by policy have their own records
   * from {@link listable}. A refusal's record resolves once it has its place in the chain, as a call's does.
   */
  async recordListed(facts: ListFacts, method: string, refused?: GatewayError): Promise<void> {
    if (this.#audit === undefined) return;
    const subject = { ...this.#subject(facts, undefined), exposed: method };
    if (refused === undefined) {
      await this.#audit.append({ kind: 'list', decision: 'allow', ...subject });
      return;
    }
    await this.#audit.append({ kind: 'list', decision: 'refused', reason: errorReason(refused), ...subject }, { placed: true });
  }

  async #recordList(facts: ListFacts, server: string, decision: 'deny' | 'advisory-deny', reason: string): Promise<void> {
    if (this.#audit === undefined) return;
    await this.#audit.append({ kind: 'list', decision, reason, ...this.#subject(facts, server) });
  }

  /**
   * Who asked (and with which client, in which trace), in which session, of which server (with its evidence): the
   * fields every record of a request has.
   */
  #subject(facts: ListFacts, server: string | undefined): Pick<AuditInput, 'principal' | 'sessionId' | 'client' | 'traceId' | 'server' | 'evidence'> {
    return {
      principal: facts.caller === undefined ? {} : principalFields(facts.caller),
      sessionId: facts.sessionId,
      ...(facts.client === undefined ? {} : { client: facts.client }),
      // Checked again here: a value that is not a trace id (not from traceIdOf) must cost the record its trace id only.
      ...(isTraceId(facts.traceId) ? { traceId: facts.traceId } : {}),
      ...(server === undefined ? {} : { server, evidence: this.#evidence.get(server) }),
    };
  }

  /** The session's sensitivity after a successful call to `server` (never lower than before). */
  raisedSensitivity(current: SensitivityLabel, server: string): SensitivityLabel {
    const label = this.#servers[server]?.sensitivity;
    return label === undefined ? current : raise(current, label);
  }

  /**
   * Writes the call's one terminal record and, in `sync` durability, resolves only once it is durable. An audit
   * failure is the call's failure: an answer whose record could be lost is never sent. The one exception is the
   * refusal of {@link ingress} while the audit log is late: its record could not become durable in time either,
   * and waiting would change nothing but how long the client waits for the same error, so it resolves once the
   * record has its place in the chain.
   */
  async record(facts: CallFacts, end: CallEnd, latencyMs: number, advisory: readonly string[]): Promise<void> {
    if (this.#audit === undefined) {
      if (this.#counts !== undefined && facts.sessionId !== undefined) this.#count(facts.sessionId, recordKind(facts, end), describe(end, advisory).decision);
      return;
    }
    const { decision, reason } = describe(end, advisory);
    const input: AuditInput = {
      kind: recordKind(facts, end),
      decision,
      ...(reason === undefined ? {} : { reason }),
      ...this.#subject(facts, facts.server),
      // Allowed or refused, a record names the server, the upstream's name and the client's (issue 22 B9); a name
      // that names no server has only the client's: there is no upstream name to give.
      ...(facts.server === undefined ? {} : { tool: facts.name }),
      exposed: facts.exposed,
      argsHash: argumentsHash(facts.args ?? null),
      args: facts.args ?? null,
      latencyMs: Math.round(latencyMs * 1000) / 1000,
      ...(end.kind === 'answered' && end.resultHash !== undefined && end.resultHash !== ''
        ? { resultHash: end.resultHash, resultBytes: end.resultBytes ?? 0 }
        : {}),
    };
    await this.#audit.append(input, end.kind === 'failed' && codeOf(end.error) === 'MCPGATE_ERR_AUDIT_UNAVAILABLE' ? { placed: true } : undefined);
  }

  /** Calls and denials of a session so far when counting without an audit log (`countSessions`); undefined otherwise. */
  sessionCounts(sessionId: string): { readonly calls: number; readonly denials: number } | undefined {
    return this.#counts === undefined ? undefined : (this.#counts.get(sessionId) ?? { calls: 0, denials: 0 });
  }

  forgetSession(sessionId: string): void {
    this.#counts?.delete(sessionId);
  }

  #count(sessionId: string, kind: AuditKind, decision: AuditDecision): void {
    const counts = this.#counts;
    if (counts === undefined) return;
    let entry = counts.get(sessionId);
    if (entry === undefined) {
      // Bounded like the audit log's spans: sessions whose receipt never came are not kept forever.
      if (counts.size >= MAX_COUNTED_SESSIONS) {
        const oldest = counts.keys().next().value;
        if (oldest !== undefined) counts.delete(oldest);
      }
      entry = { calls: 0, denials: 0 };
      counts.set(sessionId, entry);
    }
    const record = { kind, decision };
    if (isCallRecord(record)) entry.calls += 1;
    if (isDenialRecord(record)) entry.denials += 1;
  }

  #evaluate(facts: CallFacts & { readonly server: string }, phase: 'ingress' | 'egress', result: { bytes: number; labels: string[] } | undefined): PolicyOutcome | undefined {
    const policies = this.#policies;
    return policies === undefined ? undefined : this.#decide(policies, facts, phase, result);
  }

  #decide(
    policies: CedarPolicies,
    facts: Omit<CallFacts, 'action' | 'name' | 'exposed'> & { readonly action: CedarAction; readonly server: string; readonly name: string | undefined },
    phase: 'ingress' | 'egress',
    result: { bytes: number; labels: string[] } | undefined,
  ): PolicyOutcome {
    const server = this.#servers[facts.server];
    const outcome = policies.evaluateCall({
      caller: facts.caller,
      action: facts.action,
      server: facts.server,
      tool: facts.name,
      serverAttributes: server?.attributes ?? {},
      serverSensitivity: server?.sensitivity ?? 'public',
      args: facts.args,
      sessionSensitivity: facts.sessionSensitivity,
      phase,
      ...(result === undefined ? {} : { result }),
    });
    if (outcome.errors.length > 0) this.#logger.warn({ server: facts.server, tool: facts.name, action: facts.action, phase, errors: outcome.errors }, 'policy evaluation errors');
    publishPolicyDecision(phase, outcome);
    return outcome;
  }
}

/** The principal as audit records and session receipts name it. */
export function principalFields(caller: Caller): AuditPrincipal & { readonly keyId: string } {
  return {
    keyId: caller.keyId,
    orgId: caller.orgId,
    ...(caller.teamId === undefined ? {} : { teamId: caller.teamId }),
    ...(caller.principalKind === 'agent' ? { agentId: caller.principalId } : { userId: caller.principalId }),
  };
}

function auditLateError(chainId: string): GatewayError {
  return new GatewayError(
    'MCPGATE_ERR_AUDIT_UNAVAILABLE',
    'the audit store has not taken records for audit.maxWaitMs: calls are refused before they reach an upstream until it does',
    { data: { chainId } },
  );
}

/** A record's reason for a refusal: the stable code, then the message. */
function errorReason(error: GatewayError): string {
  return `${error.code}: ${error.message}`;
}

/** A record's reason when only advisory sets would have denied: which ones. */
function advisoryReason(sets: readonly string[]): string {
  return `advisory deny by ${sets.join(', ')}`;
}

function codeOf(error: unknown): string | undefined {
  return GatewayError.is(error) ? error.code : undefined;
}

function recordKind(facts: CallFacts, end: CallEnd): AuditKind {
  return reasonIsPin(end) ? 'pin-mismatch' : RECORD_KINDS[facts.action];
}

function reasonIsPin(end: CallEnd): boolean {
  const code = end.kind === 'answered' ? undefined : codeOf(end.error);
  return code === 'MCPGATE_ERR_UPSTREAM_TLS_PIN' || code === 'MCPGATE_ERR_UPSTREAM_DIGEST_MISMATCH';
}

function describe(end: CallEnd, advisory: readonly string[]): { decision: AuditDecision; reason: string | undefined } {
  const advised = advisory.length > 0 ? advisoryReason(advisory) : undefined;
  switch (end.kind) {
    case 'refused':
      return { decision: end.decision, reason: errorReason(end.error) };
    case 'answered': {
      if ('error' in end.response) return { decision: 'error', reason: `upstream error ${end.response.error.code}: ${end.response.error.message}` };
      return { decision: advised === undefined ? 'allow' : 'advisory-deny', reason: advised };
    }
    case 'failed': {
      const code = codeOf(end.error);
      if (end.cancelled || code === 'MCPGATE_ERR_CANCELLED') return { decision: 'cancelled', reason: code };
      if (code === 'MCPGATE_ERR_UPSTREAM_TIMEOUT') return { decision: 'timeout', reason: code };
      if (code === 'MCPGATE_ERR_POLICY_DENIED' || code === 'MCPGATE_ERR_RESULT_SECRET') {
        return { decision: 'deny', reason: errorReason(end.error as GatewayError) };
      }
      // Refused at ingress while the audit log was late: the gateway's own refusal, not an upstream's error.
      if (code === 'MCPGATE_ERR_AUDIT_UNAVAILABLE') return { decision: 'refused', reason: errorReason(end.error as GatewayError) };
      const message = errorMessage(end.error);
      return { decision: 'error', reason: code === undefined ? message : `${code}: ${message}` };
    }
  }
}
