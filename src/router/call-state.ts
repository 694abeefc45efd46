import type { HeldCall } from './held-calls.js';
import type { CallFacts } from '../governance/call-governor.js';
import { makeResult, type JsonObject, type JsonRpcResponse } from '../jsonrpc/message.js';
import type { ResultHead } from '../jsonrpc/serialize.js';
import type { RequestContext } from '../pipeline/request-context.js';
import { STEPS, type StepName } from '../pipeline/steps.js';
import type { UpstreamClient } from '../upstream/upstream-client.js';
import type { CatalogScope } from './catalog-scope.js';
import type { CallContext } from './client-bridge.js';
import type { MethodEntry } from './method-table.js';

/** The steps every request that reaches an upstream may run before `record`, in order. */
export const GOVERNED_STEPS: readonly StepName[] = STEPS.filter((step) => step !== 'authenticate' && step !== 'record' && step !== 'respond');

const NOTHING: readonly string[] = [];

/** What the steps of one request hand each other (the request itself is the context's). */
export class CallState {
  readonly entry: MethodEntry;
  readonly params: JsonObject;
  /** The params as sent upstream, when the gateway rewrote a name. */
  upstreamParams: JsonObject | undefined;
  /** Multi round-trip rounds before this request (from its sealed `requestState`); 0 for a first request. */
  rounds = 0;
  /** A 2026-07-28 retry's held legacy upstream call (held-calls.ts), taken from this replica's holds. */
  held: HeldCall | undefined;
  /** The answer is the gateway's own InputRequiredResult for a held call, its state already sealed. */
  asksForHeldCall = false;
  /** `authorize`: the servers and tools the caller may reach. */
  scope: CatalogScope | undefined;
  /** `ingress` of a list: the scope with the servers the `list` policies hide left out. */
  listed: CatalogScope | undefined;
  /** `resolve`: what the request names, for its policies and its record. */
  facts: CallFacts | undefined;
  /** `resolve` of logging/setLevel: its servers, then at ingress those its policies allow. */
  targets: readonly string[] = NOTHING;
  /** `admit`: the upstream session a pinned tool call was checked on. */
  checked: UpstreamClient<CallContext> | undefined;
  /** Ingress has begun: a failure from here on is the request's outcome, before it a refusal. */
  governed = false;
  startedAt = 0;
  advisory: readonly string[] = NOTHING;
  response: JsonRpcResponse | undefined;
  /** A 2026-07-28 result's shape, for the egress step to put in front of its members (modern-results.ts `deferredHead`). */
  head: ResultHead | undefined;
  bytes: number | undefined;
  hash: string | undefined;
  failed = false;
  error: unknown;

  constructor(entry: MethodEntry, params: JsonObject) {
    this.entry = entry;
    this.params = params;
  }

  fail(error: unknown): void {
    this.failed = true;
    this.error = error;
  }
}

export function respond(_step: StepName, context: RequestContext, state: CallState): JsonRpcResponse {
  return state.response ?? makeResult(context.request.id, {});
}
