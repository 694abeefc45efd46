import type { CedarAction } from '../cedar/request.js';
import type { ClientRequestMethod } from '../jsonrpc/mcp-methods.js';
import type { StepName } from '../pipeline/steps.js';

/**
 * How the gateway handles one client method (issue 24 §2): the action its Cedar decision names (and through it
 * its audit record's kind, governance/call-governor.ts), how it is handled, and which pipeline steps it runs (in
 * pipeline/steps.ts order; the rest are skipped). Every method that reaches an upstream is authorized, goes through Cedar ingress and gets exactly
 * one audit record. The actions and kinds are listed for users in docs/audit-actions.md.
 */
export interface MethodEntry {
  /** The Cedar action; undefined for a method the gateway answers alone. */
  readonly action: CedarAction | undefined;
  /**
   * How the steps are implemented: `single` routes to one server by name or URI (calls, reads, subscriptions,
   * completions), `list` merges every permitted server's list, `fanout` sends to every permitted server
   * (logging/setLevel), `local` is answered by the gateway itself.
   */
  readonly family: 'single' | 'list' | 'fanout' | 'local';
  readonly steps: ReadonlySet<StepName>;
}

const steps = (...names: StepName[]): ReadonlySet<StepName> => new Set<StepName>(['authenticate', ...names, 'respond']);

/** A call whose result the client reads: guarded and checked by egress policies. */
const READ = steps('authorize', 'resolve', 'limit', 'ingress', 'upstream', 'egress', 'record');
/** A call whose result carries nothing to scan (an empty acknowledgement). */
const ACKNOWLEDGED = steps('authorize', 'resolve', 'limit', 'ingress', 'upstream', 'record');
/**
 * A list: its scope is the decision's, so there is nothing to resolve, and its items are the gateway's merged,
 * filtered view, not an upstream's result to scan.
 */
const LIST = steps('authorize', 'ingress', 'upstream', 'record');

export const METHODS: ReadonlyMap<string, MethodEntry> = new Map<ClientRequestMethod, MethodEntry>([
  // Only tool calls are checked against approved definitions (issue 7 §2).
  ['tools/call', { action: 'call_tool', family: 'single', steps: steps('authorize', 'resolve', 'limit', 'admit', 'ingress', 'upstream', 'egress', 'record') }],
  ['prompts/get', { action: 'get_prompt', family: 'single', steps: READ }],
  ['resources/read', { action: 'read_resource', family: 'single', steps: READ }],
  ['completion/complete', { action: 'complete', family: 'single', steps: READ }],
  ['resources/subscribe', { action: 'subscribe_resource', family: 'single', steps: ACKNOWLEDGED }],
  ['resources/unsubscribe', { action: 'unsubscribe_resource', family: 'single', steps: ACKNOWLEDGED }],
  ['logging/setLevel', { action: 'set_log_level', family: 'fanout', steps: ACKNOWLEDGED }],
  ['tools/list', { action: 'list', family: 'list', steps: LIST }],
  ['prompts/list', { action: 'list', family: 'list', steps: LIST }],
  ['resources/list', { action: 'list', family: 'list', steps: LIST }],
  ['resources/templates/list', { action: 'list', family: 'list', steps: LIST }],
  ['ping', { action: undefined, family: 'local', steps: steps() }],
]);

/** What 2026-07-28 removed (changelog §major 2, 4, 5): a modern request for one is method-not-found. */
const REMOVED_IN_MODERN: ReadonlySet<string> = new Set<ClientRequestMethod>(['ping', 'logging/setLevel', 'resources/subscribe', 'resources/unsubscribe']);

/** The methods the 2026-07-28 era adds, which the router answers itself. */
export const MODERN_ONLY: ReadonlySet<string> = new Set<ClientRequestMethod>(['server/discover', 'subscriptions/listen']);

/** Whether the gateway serves `method` to a 2026-07-28 client; anything else is HTTP 404 with -32601. */
export function servesModern(method: string): boolean {
  return MODERN_ONLY.has(method) || (METHODS.has(method) && !REMOVED_IN_MODERN.has(method));
}
