import { isIP } from 'node:net';
import type { CedarValueJson, Context, EntityJson, TypeAndId } from '@cedar-policy/cedar-wasm/nodejs';
import { SENSITIVITY_LABELS, type SensitivityLabel } from '../config/governance-schema.js';
import { normalizeIp } from '../util/client-ip.js';
import type { Caller } from '../model/caller.js';
import { toCedarArgs, wellFormed, type ArgsLimits, type CedarRecord } from './args.js';

/** The Cedar namespace of every entity the gateway creates; policies name types as `Mcpgate::Tool` etc. */
export const NAMESPACE = 'Mcpgate';

/**
 * The actions a policy can name (docs/audit-actions.md lists each method's). Since issue 24 every method that
 * reaches an upstream has one, so a policy scoped to every action (`action` alone) governs all of them.
 */
export const CEDAR_ACTIONS = [
  'call_tool',
  'read_resource',
  'get_prompt',
  'list',
  'complete',
  'subscribe_resource',
  'unsubscribe_resource',
  'set_log_level',
] as const;
export type CedarAction = (typeof CEDAR_ACTIONS)[number];

export type CedarPhase = 'ingress' | 'egress';

export interface CedarRequestInput {
  /** `undefined` only under `auth.mode: none` (dev mode): the principal is then `Mcpgate::Anonymous::"anonymous"`. */
  readonly caller: Caller | undefined;
  readonly action: CedarAction;
  readonly server: string;
  /**
   * The upstream's own name of the tool or prompt, or the resource URI (for `read_resource`). Ignored for
   * `list`, whose resource is the server.
   */
  readonly tool?: string;
  /** `servers.<name>.attributes` from the configuration. */
  readonly serverAttributes: Readonly<Record<string, string>>;
  /** `servers.<name>.sensitivity`. */
  readonly serverSensitivity: SensitivityLabel;
  /** The call's arguments as parsed JSON; converted by `toCedarArgs`. */
  readonly args?: unknown;
  /** The session's high-water mark before this call. */
  readonly sessionSensitivity: SensitivityLabel;
  readonly phase: CedarPhase;
  /** Egress only: what the upstream returned. */
  readonly result?: { readonly bytes: number; readonly labels: readonly string[] };
  readonly now?: Date;
  readonly argsLimits?: ArgsLimits;
  /**
   * The context keys to compute (`CedarPolicies.evaluateCall` passes those the policies read); absent: all.
   * Converting the arguments and formatting the time are most of a request's cost when no policy reads them.
   */
  readonly contextReads?: ReadonlySet<string> | undefined;
}

/** One authorization request, ready for `CedarPolicies.evaluate`. */
export interface CedarRequest {
  readonly principal: TypeAndId;
  readonly action: TypeAndId & { readonly id: CedarAction };
  readonly resource: TypeAndId;
  readonly context: Context;
  /** The principal's entity, then the resource's. */
  readonly entities: readonly EntityJson[];
  /**
   * The resource entity's attributes (the same object as in `entities`), so evaluation can add the attributes
   * policies read but this server's configuration lacks without searching the entity list.
   */
  readonly resourceAttrs: Readonly<Record<string, CedarValueJson>>;
}

/** The position of a label in SENSITIVITY_LABELS (public 0 … restricted 3), for `>=` comparisons in policies. */
export function sensitivityRank(label: SensitivityLabel): number {
  return SENSITIVITY_LABELS.indexOf(label);
}

function uid(type: string, id: string): TypeAndId {
  return { type: `${NAMESPACE}::${type}`, id };
}

/**
 * The resource's entity type for an action that names one item. The others (`list`, `set_log_level`, `complete`,
 * whose reference may be a prompt or a resource) and a missing name use the server.
 */
const ITEM_TYPE: Readonly<Partial<Record<CedarAction, { type: string; attribute: string }>>> = {
  call_tool: { type: 'Tool', attribute: 'tool' },
  get_prompt: { type: 'Prompt', attribute: 'prompt' },
  read_resource: { type: 'Resource', attribute: 'uri' },
  subscribe_resource: { type: 'Resource', attribute: 'uri' },
  unsubscribe_resource: { type: 'Resource', attribute: 'uri' },
};

/**
 * Builds the Cedar request for one decision point (entity model: src/cedar/README.md). Only the key and the
 * resource are sent as entities: the key lists every ancestor (holder, team, org) as a direct parent, and the
 * resource its server, so `principal in Mcpgate::Org::"…"` and `resource in Mcpgate::Server::"…"` hold without
 * sending (and paying wasm conversion for) the ancestors themselves.
 */
export function buildCedarRequest(input: CedarRequestInput, context: Context = cedarContext(input)): CedarRequest {
  const { principal, principalEntity } = principalOf(input.caller);
  const { resource, resourceEntity } = resourceOf(input);
  return {
    principal,
    action: { type: `${NAMESPACE}::Action`, id: input.action },
    resource,
    context,
    entities: [principalEntity, resourceEntity],
    resourceAttrs: resourceEntity.attrs,
  };
}

function principalOf(caller: Caller | undefined): { principal: TypeAndId; principalEntity: EntityJson } {
  if (caller === undefined) {
    const principal = uid('Anonymous', 'anonymous');
    return { principal, principalEntity: { uid: principal, attrs: { kind: 'anonymous' }, parents: [] } };
  }
  const holderType = caller.principalKind === 'agent' ? 'Agent' : 'User';
  const principal = uid('Key', caller.keyId);
  // Ids as strings, not entity references: references cost several times more to pass into wasm, and
  // membership is already expressed by the parents (`principal in Mcpgate::Team::"…"`).
  const attrs: CedarRecord = { id: caller.keyId, kind: caller.principalKind, user: caller.principalId, org: caller.orgId };
  const parents = [uid(holderType, caller.principalId), uid('Org', caller.orgId)];
  if (caller.teamId !== undefined) {
    attrs.team = caller.teamId;
    parents.push(uid('Team', caller.teamId));
  }
  return { principal, principalEntity: { uid: principal, attrs, parents } };
}

function resourceOf(input: CedarRequestInput): { resource: TypeAndId; resourceEntity: EntityJson } {
  // Configured attributes first, so the gateway's own facts (server, name, sensitivity) cannot be overridden.
  const attrs: CedarRecord = {
    ...input.serverAttributes,
    server: input.server,
    sensitivity: input.serverSensitivity,
    sensitivityRank: sensitivityRank(input.serverSensitivity),
  };
  const item = input.tool === undefined ? undefined : ITEM_TYPE[input.action];
  if (item === undefined || input.tool === undefined) {
    const resource = uid('Server', input.server);
    return { resource, resourceEntity: { uid: resource, attrs, parents: [] } };
  }
  // A resource URI can come straight from the client.
  const name = wellFormed(input.tool);
  attrs[item.attribute] = name;
  const resource = uid(item.type, `${input.server}/${name}`);
  return { resource, resourceEntity: { uid: resource, attrs, parents: [uid('Server', input.server)] } };
}

/**
 * The request's context, with only the keys in `reads` that are optional (all when undefined). Built first on its
 * own: `CedarPolicies.evaluateCall` keys its decision cache on it and builds the rest only on a miss.
 */
export function cedarContext(input: CedarRequestInput, reads: ReadonlySet<string> | undefined = input.contextReads): Context {
  const wants = (key: string): boolean => reads === undefined || reads.has(key);
  const context: Context = {
    sessionSensitivity: input.sessionSensitivity,
    sessionSensitivityRank: sensitivityRank(input.sessionSensitivity),
    phase: input.phase,
  };
  if (wants('args') || wants('argsTruncated')) {
    const args = toCedarArgs(input.args, input.argsLimits);
    context.args = args.value;
    context.argsTruncated = args.truncated;
  }
  if (wants('time') || wants('timeIso') || wants('hour')) {
    const now = input.now ?? new Date();
    if (wants('time')) context.time = Math.floor(now.getTime() / 1000);
    if (wants('timeIso')) context.timeIso = now.toISOString();
    if (wants('hour')) context.hour = now.getUTCHours();
  }
  if (input.caller !== undefined && wants('clientIp')) {
    const ip = cedarIp(input.caller.clientIp);
    if (ip !== undefined) context.clientIp = { __extn: { fn: 'ip', arg: ip } };
  }
  if (input.result !== undefined && wants('result')) {
    context.result = { bytes: Math.max(0, Math.floor(input.result.bytes)), labels: input.result.labels.map(wellFormed) };
  }
  return context;
}

/**
 * The address in a form Cedar's `ip()` accepts, or `undefined`. Cedar rejects zone ids and IPv6 forms that
 * embed an IPv4 address, and one unparsable extension value fails the whole request (every policy, every set),
 * so such an address is left out: a policy that reads `context.clientIp` then errs, which fails closed.
 */
export function cedarIp(raw: string): string | undefined {
  const ip = normalizeIp(raw);
  if (ip === undefined) return undefined;
  if (isIP(ip) === 6 && ip.includes('.')) return undefined;
  return ip;
}
