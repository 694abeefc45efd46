import { channel } from 'node:diagnostics_channel';

/**
 * Facts the core publishes that the request and step channels (tracing.ts) do not show (issue 26): refusals,
 * breaker and policy outcomes, child and store failures, audit batches. Each is a plain `diagnostics_channel`
 * named `mcpgate:<fact>`; metrics subscribe in observability/metrics/, and the core never learns who listens.
 * Every helper returns before allocating anything when nobody subscribes, so an unobserved gateway pays one
 * property read per fact. This file imports nothing but types, so every layer may publish here (eslint.config.js).
 */

/** Channel names, for subscribers. */
export const EVENT_CHANNELS = {
  authFailure: 'mcpgate:authn:failure',
  policyDecision: 'mcpgate:policy:decision',
  breakerOpened: 'mcpgate:upstream:breaker-opened',
  pinMismatch: 'mcpgate:upstream:pin-mismatch',
  spawnFailure: 'mcpgate:upstream:spawn-failure',
  drift: 'mcpgate:catalog:drift',
  auditBatch: 'mcpgate:audit:batch-durable',
  auditWriteFailure: 'mcpgate:audit:write-failure',
  storeFailure: 'mcpgate:store:failure',
} as const;

export type EventName = keyof typeof EVENT_CHANNELS;

/** A request refused by authentication; `reason` is one of authn's bounded AuthFailureReason values. */
export interface AuthFailureEvent {
  readonly reason: string;
}

/** One Cedar decision (governance), as the evaluator reported it: set ids are the part of `set:policy` before the colon. */
export interface PolicyDecisionEvent {
  readonly phase: 'ingress' | 'egress';
  readonly decision: 'allow' | 'deny';
  readonly determining: readonly string[];
  readonly advisoryDenies: readonly string[];
}

export interface BreakerOpenedEvent {
  readonly server: string;
  /** `caller`: one principal's breaker for the server (decision 0016), `server`: the server's own. */
  readonly scope: 'server' | 'caller';
}

export interface ServerEvent {
  readonly server: string;
}

export interface SpawnFailureEvent {
  readonly server: string;
  /** The stable error code the start failed with (digest mismatch, unmeasured, could not start). */
  readonly code: string;
}

export interface DriftEvent {
  readonly server: string;
  readonly kind: 'changed' | 'unapproved';
  readonly quarantined: boolean;
}

export interface AuditBatchEvent {
  readonly records: number;
  /** From the batch's first record to its commit: how long the oldest record in it waited to be durable. */
  readonly seconds: number;
}

export interface FailureEvent {
  /** A stable error code (MCPGATE_ERR_*) or, for what has none, a fixed word. */
  readonly code: string;
}

const authFailure = channel(EVENT_CHANNELS.authFailure);
const policyDecision = channel(EVENT_CHANNELS.policyDecision);
const breakerOpened = channel(EVENT_CHANNELS.breakerOpened);
const pinMismatch = channel(EVENT_CHANNELS.pinMismatch);
const spawnFailure = channel(EVENT_CHANNELS.spawnFailure);
const drift = channel(EVENT_CHANNELS.drift);
const auditBatch = channel(EVENT_CHANNELS.auditBatch);
const auditWriteFailure = channel(EVENT_CHANNELS.auditWriteFailure);
const storeFailure = channel(EVENT_CHANNELS.storeFailure);

export function publishAuthFailure(reason: string): void {
  if (!authFailure.hasSubscribers) return;
  authFailure.publish({ reason } satisfies AuthFailureEvent);
}

/** `outcome` is the evaluator's own object (cached decisions included), handed on as it is. */
export function publishPolicyDecision(phase: PolicyDecisionEvent['phase'], outcome: Omit<PolicyDecisionEvent, 'phase'>): void {
  if (!policyDecision.hasSubscribers) return;
  policyDecision.publish({ phase, decision: outcome.decision, determining: outcome.determining, advisoryDenies: outcome.advisoryDenies } satisfies PolicyDecisionEvent);
}

export function publishBreakerOpened(server: string, scope: BreakerOpenedEvent['scope']): void {
  if (!breakerOpened.hasSubscribers) return;
  breakerOpened.publish({ server, scope } satisfies BreakerOpenedEvent);
}

export function publishPinMismatch(server: string): void {
  if (!pinMismatch.hasSubscribers) return;
  pinMismatch.publish({ server } satisfies ServerEvent);
}

export function publishSpawnFailure(server: string, code: string): void {
  if (!spawnFailure.hasSubscribers) return;
  spawnFailure.publish({ server, code } satisfies SpawnFailureEvent);
}

export function publishDrift(server: string, kind: DriftEvent['kind'], quarantined: boolean): void {
  if (!drift.hasSubscribers) return;
  drift.publish({ server, kind, quarantined } satisfies DriftEvent);
}

export function publishAuditBatch(records: number, seconds: number): void {
  if (!auditBatch.hasSubscribers) return;
  auditBatch.publish({ records, seconds } satisfies AuditBatchEvent);
}

export function publishAuditWriteFailure(code: string): void {
  if (!auditWriteFailure.hasSubscribers) return;
  auditWriteFailure.publish({ code } satisfies FailureEvent);
}

export function publishStoreFailure(code: string): void {
  if (!storeFailure.hasSubscribers) return;
  storeFailure.publish({ code } satisfies FailureEvent);
}
