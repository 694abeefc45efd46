import type { Command } from 'commander';
import type { CedarExplanation, ToolAccessExplanation } from '../control/explain.js';
import type { PermissionLevel } from '../store/directory-store.js';
import type { Store } from '../store/store.js';
import { printJson, printTable, runCommand, UsageError, withControl, type CommonOptions, type ControlIo } from './control-cli.js';

/** Exactly one of `key` and `principal`. */
export interface ExplainOptions extends CommonOptions {
  /** Key id or displayed prefix. */
  readonly key?: string;
  /** A user's or an agent's id, judged as a bearer token mapped to it would be: without a key. */
  readonly principal?: string;
  /** The exposed tool name, e.g. `notes__add_note`. */
  readonly tool: string;
  readonly server?: string;
  readonly ip?: string;
  /** The session sensitivity the Cedar policies see (default public). */
  readonly sessionSensitivity?: string;
  /** The call's arguments as JSON text, for Cedar policies that read `context.args`. */
  readonly args?: string;
}

/** Exit code of `explain` for a refused tool: distinct from 1 (the command itself failed) so scripts can tell. */
export const EXIT_DENIED = 2;

/**
 * `mcpgate explain --key <id>|--principal <id> --tool <name>`: whether that key's holder (or that principal,
 * without a key) may call the tool and which level decides (issue 5 §9), and, when `gateway.policies` is
 * configured, the Cedar decision at ingress with the ids of the determining policies (issue 7 §3). Exit 0 when
 * allowed, 2 when denied, 1 on a usage or store error.
 */
export function runExplain(options: ExplainOptions, io: ControlIo): Promise<number> {
  return runCommand(io, 'explain', () =>
    withControl({ file: options.config }, io, async (control) => {
      if ((options.key === undefined) === (options.principal === undefined)) throw new UsageError('give exactly one of --key <key-id> and --principal <id>');
      const args = options.args === undefined ? undefined : parseArgs(options.args);
      const explanation = await control.explain({
        ...(options.key === undefined ? {} : { key: options.key }),
        ...(options.principal === undefined ? {} : { principal: options.principal }),
        tool: options.tool,
        ...(options.server === undefined ? {} : { server: options.server }),
        ...(options.ip === undefined ? {} : { ip: options.ip }),
        ...(options.sessionSensitivity === undefined ? {} : { sessionSensitivity: options.sessionSensitivity }),
        ...(args === undefined ? {} : { args }),
      });
      if (options.json === true) printJson(io, explanation);
      else await printExplanation(io, control.store, explanation);
      return explanation.allowed ? 0 : EXIT_DENIED;
    }),
  );
}

async function printExplanation(io: ControlIo, store: Store, explanation: ToolAccessExplanation): Promise<void> {
  const { tool, policy } = explanation;
  const names = await subjectNames(store, explanation);
  const rename = tool.local === tool.upstream ? '' : ` (exposed locally as "${tool.local}")`;
  io.stdout(`tool     ${tool.exposed} -> server "${tool.server}", upstream tool "${tool.upstream}"${rename}`);
  if ('key' in explanation) {
    const { key } = explanation;
    io.stdout(`key      ${key.id} (${key.prefix}), ${key.principalKind} ${names.get(key.principalKind) ?? key.principalId}, ${key.status}`);
  } else {
    const { principal } = explanation;
    io.stdout(`caller   ${principal.kind} ${principal.name} (${principal.id}), without a key: no key-level document applies`);
  }
  io.stdout(`client   ${policy.clientIp}`);
  io.stdout(`config   ${tool.visible ? 'shown' : 'HIDDEN'}: ${tool.reason}`);
  io.stdout('');
  printTable(
    io,
    ['level', 'subject', 'record', 'verdict', 'reason'],
    policy.lines.map((line) => {
      const name = line.level === 'network' || line.level === 'default' ? undefined : names.get(line.level);
      return [
        line.level === policy.decidingLevel ? `${line.level} *` : line.level,
        name === undefined ? line.subjectId : `${name} (${line.subjectId})`,
        line.record,
        line.verdict,
        line.reason,
      ];
    }),
  );
  if (policy.decidingLevel !== undefined) io.stdout('(* marks the deciding level)');
  for (const warning of policy.warnings) io.stdout(`warning: ${warning}`);
  if (explanation.cedar !== undefined) printCedar(io, explanation.cedar);
  io.stdout('');
  io.stdout(`${explanation.allowed ? 'ALLOWED' : 'DENIED'}: ${explanation.summary}`);
}

function parseArgs(text: string): unknown {
  let args: unknown;
  try {
    args = JSON.parse(text);
  } catch {
    throw new UsageError(`--args is not JSON: ${text}`);
  }
  if (typeof args !== 'object' || args === null || Array.isArray(args)) throw new UsageError('--args must be a JSON object');
  return args;
}

/** The Cedar decision at ingress: its verdict, the policies that decided it, and each set's state. */
function printCedar(io: ControlIo, cedar: CedarExplanation): void {
  io.stdout('');
  const verdict = cedar.decision === 'allow' ? 'allows' : 'DENIES';
  io.stdout(`cedar    ${verdict} (ingress, session sensitivity ${cedar.sessionSensitivity}, policy hash ${cedar.policyHash.slice(0, 16)})`);
  for (const id of cedar.determining) io.stdout(`  denied by     ${id}`);
  for (const id of cedar.advisoryDenies) io.stdout(`  advisory deny ${id} (recorded, not enforced)`);
  for (const error of cedar.errors) io.stdout(`  ${error}`);
  printTable(
    io,
    ['set', 'mode', 'policies', 'loaded', 'state'],
    cedar.sets.map((set) => [set.id, set.mode, String(set.policyCount), set.loadedAt, set.lastError === undefined ? 'ok' : `reload failed: ${set.lastError}`]),
  );
}

/** Display names of the caller's org, team and principal; ids alone are hard to read in a table. */
async function subjectNames(store: Store, { caller }: ToolAccessExplanation): Promise<Map<PermissionLevel, string>> {
  const names = new Map<PermissionLevel, string>();
  const [org, team, principal] = await Promise.all([
    store.getOrg(caller.orgId),
    caller.teamId === undefined ? undefined : store.getTeam(caller.teamId),
    store.getPrincipal(caller.principalId),
  ]);
  if (org !== undefined) names.set('org', org.name);
  if (team !== undefined) names.set('team', team.name);
  if (principal !== undefined) names.set(principal.kind, principal.name);
  return names;
}

/** Adds `explain`; it sets `process.exitCode` (0 allowed, 2 denied, 1 error). */
export function registerExplainCommand(program: Command, io: ControlIo, defaultConfig: string): void {
  program
    .command('explain')
    .description('explain whether a key, or a principal without one, may call a tool: each level\'s verdict, the deciding one and the Cedar policy decision (exit 0 allowed, 2 denied)')
    .option('--key <key-id>', 'key id (or its displayed prefix, mcpg_xxxxxxxx); this or --principal')
    .option('--principal <id>', 'a user\'s or an agent\'s id, judged as a bearer token mapped to it is: without a key, so no key-level document applies')
    .requiredOption('--tool <name>', 'the tool name as clients see it, e.g. notes__add_note')
    .option('--server <server>', 'the server, for unprefixed names in gateway.prefix conditional/never modes')
    .option('--ip <address>', 'the client IP to judge internal servers by', '127.0.0.1')
    .option('--session-sensitivity <label>', 'the session sensitivity Cedar policies see: public, internal, confidential or restricted', 'public')
    .option('--args <json>', 'the call arguments (a JSON object) Cedar policies see')
    .option('-c, --config <file>', 'configuration file', defaultConfig)
    .option('--json', 'machine-readable output')
    .action(async (options: ExplainOptions) => {
      process.exitCode = await runExplain(options, io);
    });
}
