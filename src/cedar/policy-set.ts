import { readFile, stat } from 'node:fs/promises';
import { isAbsolute, resolve } from 'node:path';
import {
  policySetTextToParts,
  policyToJson,
  type ActionConstraint,
  type DetailedError,
  type EntityUidJson,
  type PolicyJson,
} from '@cedar-policy/cedar-wasm/nodejs';
import type { PolicySetConfig } from '../config/governance-schema.js';
import { errorMessage } from '../errors/error-message.js';
import { GatewayError } from '../errors/gateway-error.js';
import { CEDAR_ACTIONS, NAMESPACE, type CedarAction } from './request.js';

/** A policy file larger than this is refused: it is read and parsed again on every change. */
export const MAX_POLICY_FILE_BYTES = 1024 * 1024;

const ACTION_TYPE = `${NAMESPACE}::Action`;

export interface PolicyFileText {
  /** As written in the configuration: it names the file in errors and in policy ids. */
  readonly file: string;
  readonly path: string;
  readonly text: string;
}

export interface ParsedPolicy {
  /** `@id("…")` when the policy has one, else `<file>#<n>`, n counting the file's policies from 0 in order. */
  readonly id: string;
  readonly text: string;
  readonly effect: 'permit' | 'forbid';
  /** The actions whose requests the policy's scope can match. */
  readonly actions: readonly CedarAction[];
  readonly reads: PolicyReads;
}

export interface PolicyReads {
  /** Keys of `context` read, or `all`. */
  readonly context: readonly string[] | 'all';
  readonly principal: readonly string[];
  /** Attributes read or tested with `has`. */
  readonly resource: readonly string[];
  /** Attributes read with `.` (`resource.zone`, `resource["zone"]`): these get a "" default. */
  readonly resourceDot: readonly string[];
}

export interface ParsedSet {
  readonly config: PolicySetConfig;
  readonly files: readonly PolicyFileText[];
  readonly policies: readonly ParsedPolicy[];
  readonly warnings: readonly string[];
}

/** Reads every file of a set. Throws MCPGATE_ERR_POLICY_INVALID naming the file that cannot be read. */
export async function readPolicySet(config: PolicySetConfig, baseDir: string): Promise<PolicyFileText[]> {
  return Promise.all(
    config.files.map(async (file) => {
      const path = isAbsolute(file) ? file : resolve(baseDir, file);
      try {
        const info = await stat(path);
        if (!info.isFile()) throw new Error('not a regular file');
        if (info.size > MAX_POLICY_FILE_BYTES) throw new Error(`larger than ${MAX_POLICY_FILE_BYTES} bytes`);
        return { file, path, text: await readFile(path, 'utf8') };
      } catch (error) {
        const reason = errorMessage(error);
        throw policyError(`policy set "${config.id}": cannot read policy file "${file}": ${reason}`, { set: config.id, file });
      }
    }),
  );
}

/**
 * Parses a set's files with Cedar. Files are parsed one by one so that an error's position is in its own file.
 * Throws MCPGATE_ERR_POLICY_INVALID with the file, line and column of Cedar's first error.
 */
export function parsePolicySet(config: PolicySetConfig, files: readonly PolicyFileText[]): ParsedSet {
  const policies: ParsedPolicy[] = [];
  const warnings: string[] = [];
  const seen = new Map<string, string>();
  for (const file of files) {
    for (const policy of parseFile(config, file)) {
      const previous = seen.get(policy.id);
      if (previous !== undefined) {
        throw policyError(`policy set "${config.id}": two policies have the id "${policy.id}" (in "${previous}" and "${file.file}")`, {
          set: config.id,
          file: file.file,
        });
      }
      seen.set(policy.id, file.file);
      policies.push(policy);
      if (policy.effect === 'permit') {
        warnings.push(`policy "${config.id}:${policy.id}" is a permit, which has no effect: every set allows by default, only forbid rules deny`);
      } else if (policy.actions.length === 0) {
        warnings.push(`policy "${config.id}:${policy.id}" never applies: its action scope names no gateway action (${CEDAR_ACTIONS.join(', ')})`);
      }
    }
  }
  return { config, files, policies, warnings };
}

function parseFile(config: PolicySetConfig, file: PolicyFileText): ParsedPolicy[] {
  const where = { set: config.id, file: file.file };
  const parts = policySetTextToParts(file.text);
  if (parts.type === 'failure') throw syntaxError(config, file, parts.errors);
  const [template] = parts.policy_templates;
  if (template !== undefined) {
    const at = locate(file.text, Buffer.byteLength(file.text.slice(0, Math.max(0, file.text.indexOf(template)))));
    throw policyError(`${prefix(config, file, at)}: templates (policies with ?principal or ?resource slots) are not supported`, { ...where, ...at });
  }
  return inSourceOrder(parts.policies).map((text, index) => {
    const json = policyToJson(text);
    if (json.type === 'failure') throw syntaxError(config, file, json.errors);
    return {
      id: json.json.annotations?.id ?? `${file.file}#${index}`,
      text,
      effect: json.json.effect,
      actions: actionsOf(json.json.action),
      reads: readsOf(json.json),
    };
  });
}

/**
 * `policySetTextToParts` returns policies sorted by their generated ids (`policy0`, `policy1`, `policy10`,
 * `policy2`, …: string order), and those ids count the policies in source order. Undoing that sort makes
 * `<file>#<n>` ids follow the file, so they only change when the file's own policies move.
 */
function inSourceOrder(sorted: readonly string[]): string[] {
  const ids = sorted.map((_, index) => `policy${index}`).sort();
  const ordered: string[] = new Array<string>(sorted.length);
  ids.forEach((id, position) => {
    ordered[Number(id.slice('policy'.length))] = sorted[position] ?? '';
  });
  return ordered;
}

function entityOf(uid: EntityUidJson): { type: string; id: string } {
  return '__entity' in uid ? uid.__entity : uid;
}

function actionsOf(constraint: ActionConstraint): CedarAction[] {
  if (constraint.op === 'All') return [...CEDAR_ACTIONS];
  // No action groups exist in the gateway's model, so `action in X` matches exactly the actions listed.
  const uids: EntityUidJson[] =
    constraint.op === '==' ? ('entity' in constraint ? [constraint.entity] : []) : 'entities' in constraint ? constraint.entities : [constraint.entity];
  const names = new Set(uids.map(entityOf).filter((uid) => uid.type === ACTION_TYPE).map((uid) => uid.id));
  return CEDAR_ACTIONS.filter((action) => names.has(action));
}

/**
 * What a policy's conditions read: attributes of `principal` and `resource`, keys of `context` (or all of it,
 * when the policy uses `context` other than through `.`/`has`). Evaluation sends Cedar only what some policy
 * reads, because converting values into wasm is most of the cost of a decision. Entities are compared by uid,
 * so a bare `principal` or `resource` (in `==`, `in`, `is`) needs no attributes. A misreading can only add
 * values (harmless) or leave one out, which makes the policy err and so deny: never a wrong allow.
 */
export function readsOf(policy: PolicyJson): PolicyReads {
  const context = new Set<string>();
  const principal = new Set<string>();
  const resource = new Set<string>();
  const resourceDot = new Set<string>();
  let wholeContext = false;
  const record = (variable: unknown, attr: string, dot: boolean): boolean => {
    if (variable === 'context') context.add(attr);
    else if (variable === 'principal') principal.add(attr);
    else if (variable === 'resource') {
      resource.add(attr);
      if (dot) resourceDot.add(attr);
    } else return false;
    return true;
  };
  const visit = (node: unknown): void => {
    if (Array.isArray(node)) {
      for (const item of node) visit(item);
      return;
    }
    if (typeof node !== 'object' || node === null) return;
    const fields = node as { Var?: unknown; '.'?: { left?: unknown; attr?: unknown }; has?: { left?: unknown; attr?: unknown } };
    if (fields.Var === 'context') wholeContext = true;
    const dot = fields['.'];
    if (dot !== undefined && typeof dot.attr === 'string' && record(variableOf(dot.left), dot.attr, true)) return;
    const has = fields.has;
    // `has a.b.c` is one node whose attr is the path; its first step is the variable's attribute.
    const first = Array.isArray(has?.attr) ? (has.attr as unknown[])[0] : has?.attr;
    if (has !== undefined && typeof first === 'string' && record(variableOf(has.left), first, false)) return;
    for (const value of Object.values(node)) visit(value);
  };
  visit(policy.conditions);
  return { context: wholeContext ? 'all' : [...context], principal: [...principal], resource: [...resource], resourceDot: [...resourceDot] };
}

function variableOf(node: unknown): unknown {
  return typeof node === 'object' && node !== null ? (node as { Var?: unknown }).Var : undefined;
}

interface Location {
  readonly line: number;
  readonly column: number;
}

/** Cedar reports UTF-8 byte offsets; lines and columns are 1-based and count characters. */
function locate(text: string, byteOffset: number): Location {
  const before = Buffer.from(text, 'utf8').subarray(0, byteOffset).toString('utf8');
  const lines = before.split('\n');
  return { line: lines.length, column: [...(lines.at(-1) ?? '')].length + 1 };
}

function prefix(config: PolicySetConfig, file: PolicyFileText, at: Location | undefined): string {
  const position = at === undefined ? '' : `:${at.line}:${at.column}`;
  return `policy set "${config.id}": ${file.file}${position}`;
}

function syntaxError(config: PolicySetConfig, file: PolicyFileText, errors: readonly DetailedError[]): GatewayError {
  const first = errors[0];
  const offset = first?.sourceLocations?.[0]?.start;
  const at = offset === undefined ? undefined : locate(file.text, offset);
  const label = first?.sourceLocations?.[0]?.label;
  const help = first?.help;
  const detail = [first?.message ?? 'invalid policy', label ?? undefined, help ?? undefined].filter((part) => part !== undefined).join('; ');
  return policyError(`${prefix(config, file, at)}: ${detail}`, { set: config.id, file: file.file, ...at });
}

function policyError(message: string, data: Record<string, unknown>): GatewayError {
  return new GatewayError('MCPGATE_ERR_POLICY_INVALID', message, { data });
}
