import type { PermissionLevel, PermissionRecord, Toolset } from '../store/directory-store.js';
import { compileGlob } from '../util/glob.js';
import type { CidrSet } from '../util/client-ip.js';
import type { Caller } from '../model/caller.js';
import type { DecisionDenial, DefaultAccess } from './decision.js';
import { grantOf, restricts } from './grant.js';

/** What reading one level's record gave: the record (or `undefined` for none), or why it could not be read. */
export type LevelRead =
  | { readonly level: PermissionLevel; readonly subjectId: string; readonly record: PermissionRecord | undefined }
  | { readonly level: PermissionLevel; readonly subjectId: string; readonly error: string };

/** What reading one referenced toolset gave: the toolset (`undefined` for an unknown name), or the failure. */
export type ToolsetRead = { readonly toolset: Toolset | undefined } | { readonly error: string };

/** Everything `decide` depends on for one (caller, server, tool), already read from the store. */
export interface ExplainInput {
  readonly caller: Caller;
  readonly server: string;
  /** The upstream's own tool name, as `AccessDecision.allowsTool` takes it. */
  readonly tool: string;
  readonly requireKeyPermissions: boolean;
  readonly defaultAccess: DefaultAccess;
  /** Every level of `levelsOf(caller)`, in that order. */
  readonly levels: readonly LevelRead[];
  /** Every toolset the readable documents refer to. */
  readonly toolsets: ReadonlyMap<string, ToolsetRead>;
  /** The server's allowed ranges when it is `internal`; `undefined` for a public server. */
  readonly internal: CidrSet | undefined;
}

/**
 * What an explanation line is about: a level's record, `default` (`gateway.auth.defaultAccess`, shown only when
 * no level has a record) or `network` (the internal-server rule).
 */
export type ExplainSubject = PermissionLevel | 'default' | 'network';

/** How one level (or the default, or the network rule) treats the tool. */
export interface ExplainLine {
  readonly level: ExplainSubject;
  /** The record's subject id; for the default line, the setting's name; for the network line, the client IP. */
  readonly subjectId: string;
  /** `n/a` for the default and network lines, which come from configuration, not from a record. */
  readonly record: 'present' | 'absent' | 'unreadable' | 'n/a';
  readonly verdict: 'allows' | 'denies' | 'does-not-restrict';
  readonly reason: string;
}

/** Why the tool is refused: a `decide` denial, a level whose list leaves it out, or the internal-server rule. */
export type ExplainDenial = DecisionDenial['reason'] | 'not-granted' | 'ip-not-allowed';

export interface AccessExplanation {
  /** Exactly `(await engine.decide(caller)).allowsTool(server, tool)`; test/policy/explain.test.ts checks it. */
  readonly allowed: boolean;
  readonly server: string;
  readonly tool: string;
  readonly clientIp: string;
  /** Org, team (when the key has one), user or agent, key, default (when no level has a record), then network. */
  readonly lines: readonly ExplainLine[];
  /** The level whose line decided a refusal; `undefined` when allowed. */
  readonly decidingLevel: ExplainSubject | undefined;
  readonly denial: ExplainDenial | undefined;
  /** One sentence for humans. */
  readonly summary: string;
  readonly warnings: readonly string[];
}

/**
 * Why a refusal happens, in the order `PermissionEngine.decide` checks: an unreadable record first, then a key
 * without its own record under `requireKeyPermissions`, then no record at any level under `defaultAccess: deny`,
 * then `none`, then an unreadable toolset, then the
 * internal-server rule and the levels' lists (`GrantDecision.allowsTool` checks them in that order).
 */
const PRECEDENCE = ['records', 'key', 'default', 'none', 'toolsets', 'network', 'grant'] as const;
type Failure = (typeof PRECEDENCE)[number];

const DENIAL: Readonly<Record<Failure, ExplainDenial>> = {
  records: 'store-unavailable',
  key: 'key-without-permissions',
  default: 'no-document',
  none: 'none',
  toolsets: 'store-unavailable',
  network: 'ip-not-allowed',
  grant: 'not-granted',
};

interface Judged {
  readonly line: ExplainLine;
  readonly failure?: Failure;
}

/**
 * Explains, level by level, whether a caller may use one tool (issue 5 §9, `mcpgate explain`). Pure: the
 * records are read by `PermissionEngine.explain`, so this function can be checked against `decide` over any
 * grid of inputs without a store.
 */
export function explainAccess(input: ExplainInput): AccessExplanation {
  const warnings: string[] = [];
  const judged = input.levels.map((read) => judgeLevel(read, input, warnings));
  const fallback = judgeDefault(input);
  if (fallback !== undefined) judged.push(fallback);
  judged.push(judgeNetwork(input));
  const lines = judged.map((entry) => entry.line);

  let decisive: Judged | undefined;
  for (const failure of PRECEDENCE) {
    decisive = judged.find((entry) => entry.failure === failure);
    if (decisive !== undefined) break;
  }
  const base = { server: input.server, tool: input.tool, clientIp: input.caller.clientIp, lines, warnings };
  if (decisive === undefined || decisive.failure === undefined) {
    return {
      ...base,
      allowed: true,
      decidingLevel: undefined,
      denial: undefined,
      summary:
        fallback === undefined
          ? `allowed: no level refuses tool "${input.tool}" on server "${input.server}"`
          : `allowed: ${fallback.line.reason}`,
    };
  }
  const { level, reason } = decisive.line;
  return {
    ...base,
    allowed: false,
    decidingLevel: level,
    denial: DENIAL[decisive.failure],
    summary: level === 'default' ? reason : `denied by the ${level} level: ${reason}`,
  };
}

/**
 * The `defaultAccess` line, present only when every level was read and none has a record: then, and only then,
 * the setting decides (as in `decide`).
 */
function judgeDefault(input: ExplainInput): Judged | undefined {
  if (!input.levels.every((read) => 'record' in read && read.record === undefined)) return undefined;
  const base = { level: 'default', subjectId: 'gateway.auth.defaultAccess', record: 'n/a' } as const;
  if (input.defaultAccess === 'allow') {
    return { line: { ...base, verdict: 'allows', reason: 'no document at any level: allowed by default (gateway.auth.defaultAccess is "allow")' } };
  }
  return { line: { ...base, verdict: 'denies', reason: 'no document at any level: denied by default (gateway.auth.defaultAccess is "deny")' }, failure: 'default' };
}

function judgeLevel(read: LevelRead, input: ExplainInput, warnings: string[]): Judged {
  const { level, subjectId } = read;
  if ('error' in read) {
    return { line: { level, subjectId, record: 'unreadable', verdict: 'denies', reason: `store unavailable (${read.error})` }, failure: 'records' };
  }
  const document = read.record?.document;
  if (document === undefined) {
    if (level === 'key' && input.requireKeyPermissions) {
      return { line: { level, subjectId, record: 'absent', verdict: 'denies', reason: 'requireKeyPermissions and no key record' }, failure: 'key' };
    }
    const reason = level === 'key' ? 'no record: the key inherits the other levels' : 'no record';
    return { line: { level, subjectId, record: 'absent', verdict: 'does-not-restrict', reason } };
  }
  const present = { level, subjectId, record: 'present' } as const;
  if (document.kind === 'none') return { line: { ...present, verdict: 'denies', reason: 'none' }, failure: 'none' };
  if (!restricts(document)) return { line: { ...present, verdict: 'does-not-restrict', reason: 'the allow document names no list' } };

  const toolsets = new Map<string, Toolset | undefined>();
  for (const name of document.toolsets ?? []) {
    const loaded = input.toolsets.get(name);
    if (loaded !== undefined && 'error' in loaded) {
      return { line: { ...present, verdict: 'denies', reason: `store unavailable (toolset "${name}": ${loaded.error})` }, failure: 'toolsets' };
    }
    toolsets.set(name, loaded?.toolset);
  }
  const grant = grantOf(level, document, toolsets, warnings);
  // `restricts` held, so grantOf returned a grant; the fallback only satisfies the type checker.
  const servers = grant?.servers ?? new Map<string, readonly string[] | undefined>();
  if (!servers.has(input.server)) return { line: { ...present, verdict: 'denies', reason: 'server not in list' }, failure: 'grant' };
  const globs = servers.get(input.server);
  if (globs === undefined) return { line: { ...present, verdict: 'allows', reason: 'server in list with all its tools' } };
  const match = globs.find((glob) => compileGlob(glob).test(input.tool));
  if (match !== undefined) return { line: { ...present, verdict: 'allows', reason: `tool matches glob ${match}` } };
  const reason = globs.length === 0 ? 'no tool globs for this server' : `tool does not match globs ${[...new Set(globs)].join(',')}`;
  return { line: { ...present, verdict: 'denies', reason }, failure: 'grant' };
}

function judgeNetwork(input: ExplainInput): Judged {
  const base = { level: 'network', subjectId: input.caller.clientIp, record: 'n/a' } as const;
  if (input.internal === undefined) return { line: { ...base, verdict: 'does-not-restrict', reason: 'public server' } };
  if (input.internal.has(input.caller.clientIp)) {
    return { line: { ...base, verdict: 'allows', reason: 'internal server and IP in allowedCidrs' } };
  }
  return { line: { ...base, verdict: 'denies', reason: 'internal server and IP not in allowedCidrs' }, failure: 'network' };
}
