import { once } from 'node:events';
import { createReadStream } from 'node:fs';
import { readFile } from 'node:fs/promises';
import { createInterface } from 'node:readline';
import type { Command } from 'commander';
import type { StatementVerifier } from '../audit/checkpoint.js';
import { exportAudit, parseTimeBound } from '../audit/query.js';
import { AUDIT_DECISIONS, AUDIT_KINDS } from '../audit/record.js';
import { recordFilter } from './audit-export-filters.js';
import { pruneAudit, type ChainPruneResult } from '../audit/retention.js';
import { verifyAudit, type ChainVerification } from '../audit/verify.js';
import { loadConfig } from '../config/load.js';
import type { GatewayConfig } from '../config/schema.js';
import { errorMessage } from '../errors/error-message.js';
import { statementVerifier } from '../receipts/receipt.js';
import { existingReceiptKey, receiptKeyOptions, resolveReceiptKey } from '../receipts/signing-key.js';
import { createStore } from '../store/create-store.js';
import type { AuditAnchorRow } from '../store/audit-chain-store.js';
import type { Store } from '../store/store.js';
import { printJson, runCommand, UsageError, type ControlIo } from './control-cli.js';

/** `audit export` may write more than a pipe holds: `drain` waits until stdout takes more. */
export interface AuditIo extends ControlIo {
  readonly drain?: () => Promise<void>;
}

export interface AuditVerifyOptions {
  readonly config: string;
  readonly chain?: string;
  readonly json?: boolean;
  /** SPKI PEM file of the key checkpoints and anchors must be signed with; default the gateway's own receipt key. */
  readonly publicKey?: string;
  /** The gateway's log (JSON lines): its `audit chain anchored` lines are checked as well as the stored anchors. */
  readonly anchors?: string;
}

export interface AuditPruneOptions {
  readonly config: string;
  readonly before: string;
  /** SPKI PEM file of a key rotated out: checkpoints it signed are trusted and re-signed as they move. */
  readonly previousKey?: string;
  readonly chain?: string;
  readonly json?: boolean;
}

export interface AuditExportOptions {
  readonly config: string;
  readonly since: string;
  readonly until?: string;
  readonly chain?: string;
  readonly format?: string;
  readonly key?: string;
  /** A user's or an agent's id. */
  readonly principal?: string;
  readonly team?: string;
  readonly org?: string;
  readonly session?: string;
  readonly server?: string;
  readonly tool?: string;
  readonly trace?: string;
  readonly decision?: string;
  readonly kind?: string;
}

/** Exit code of `audit verify` when a chain is broken: apart from 1 (could not check) so scripts can tell them apart. */
export const EXIT_BROKEN = 3;

/** Waits for process.stdout to drain when its buffer is full. */
export function stdoutDrained(): Promise<void> {
  return process.stdout.writableNeedDrain ? once(process.stdout, 'drain').then(() => undefined) : Promise.resolve();
}

async function withStore<T>(file: string, io: ControlIo, use: (store: Store, config: GatewayConfig) => Promise<T>): Promise<T> {
  const config = await loadConfig(file, { env: io.env });
  const store = await createStore(config.gateway.store);
  try {
    return await use(store, config);
  } finally {
    await store.close();
  }
}

/** What checkpoints and anchors are checked against: `--public-key`, else the gateway's own key as configured or stored. */
async function checkpointVerifier(options: AuditVerifyOptions, config: GatewayConfig): Promise<StatementVerifier | undefined> {
  return options.publicKey === undefined ? existingReceiptKey(receiptKeyOptions(config.gateway)) : keyFile(options.publicKey, '--public-key');
}

/** Longest log line read for anchors; an anchor line is about 400 bytes. */
const MAX_LOG_LINE = 64 * 1024;

/**
 * The `audit chain anchored` lines of a gateway log (pino JSON lines; anything else in it is skipped). A line that
 * says it is one but cannot be read (cut, or altered by a log pipeline) is reported on stderr and not used.
 */
async function anchorsFromLog(path: string, io: ControlIo): Promise<LoggedAnchor[]> {
  const anchors: LoggedAnchor[] = [];
  const lines = createInterface({ input: createReadStream(path, { encoding: 'utf8' }), crlfDelay: Infinity });
  let number = 0;
  try {
    for await (const line of lines) {
      number += 1;
      if (line.length > MAX_LOG_LINE || !line.includes('"audit chain anchored"')) continue;
      const anchor = anchorOf(line);
      if (anchor === undefined) io.stderr(`mcpgate audit verify: ${path}:${number}: an "audit chain anchored" line that cannot be read; not used`);
      else anchors.push(anchor);
    }
  } catch (error) {
    throw new UsageError(`--anchors ${path}: ${errorMessage(error)}`);
  }
  return anchors;
}

/** An anchor line of a log: the signed anchor, and the id of the store its gateway wrote to (absent in older logs). */
interface LoggedAnchor {
  readonly anchor: AuditAnchorRow;
  readonly storeId: string | undefined;
}

function anchorOf(line: string): LoggedAnchor | undefined {
  try {
    const value = JSON.parse(line) as { msg?: unknown; anchor?: Record<string, unknown>; storeId?: unknown };
    const anchor = value.anchor;
    if (value.msg !== 'audit chain anchored' || typeof anchor !== 'object' || anchor === null) return undefined;
    if (value.storeId !== undefined && typeof value.storeId !== 'string') return undefined;
    const { chainId, seq, hash, signedAt, keyId, signature } = anchor;
    if (typeof chainId !== 'string' || typeof seq !== 'number' || typeof hash !== 'string' || typeof signedAt !== 'string' || typeof keyId !== 'string' || typeof signature !== 'string') return undefined;
    return { anchor: { chainId, seq, hash, signedAt: new Date(signedAt), keyId, signature }, storeId: value.storeId };
  } catch {
    return undefined;
  }
}

async function keyFile(path: string, flag: string): Promise<StatementVerifier> {
  const pem = await readFile(path, 'utf8').catch((error: unknown) => {
    throw new UsageError(`${flag} ${path}: ${errorMessage(error)}`);
  });
  return statementVerifier(pem);
}

function describeChain(chain: ChainVerification): string {
  const from = chain.checkpoint === undefined ? '' : ` after checkpoint seq ${chain.checkpoint.seq} (${chain.checkpoint.prunedRecords} pruned)`;
  const anchored = chain.lastAnchorSeq === undefined ? '' : `, ${chain.anchors ?? 0} signed head(s) up to seq ${chain.lastAnchorSeq}`;
  if (chain.firstBroken === undefined) return `chain ${chain.chainId}: ${chain.records} record(s)${from}${anchored}, ok`;
  const { seq, reason, detail } = chain.firstBroken;
  return `chain ${chain.chainId}: BROKEN at seq ${seq}: ${reason} (${detail})`;
}

interface JournalPending {
  readonly root: string | undefined;
  /** [chain, records] */
  readonly pending: [string, number][];
}

/** Records of stopped gateways still in the store's audit journal, per chain (all chains, or `chain` only). */
async function journalPending(store: Store, chain: string | undefined): Promise<JournalPending> {
  const backlog = await store.auditJournalBacklog();
  return { root: backlog.root, pending: Object.entries(backlog.pending).filter(([chainId]) => chain === undefined || chainId === chain) };
}

/**
 * Not a broken chain: the records are durable in the journal, and the next gateway started on this store
 * writes them into the table. Until then what the table shows ends before them.
 */
function reportPending(io: ControlIo, command: string, journal: JournalPending): void {
  for (const [chainId, count] of journal.pending) {
    io.stderr(`mcpgate ${command}: chain ${chainId}: ${count} more record(s) of a stopped gateway are in ${journal.root ?? 'the audit journal'}, not yet in the table; the next gateway started on this store stores them`);
  }
}

/**
 * `mcpgate audit verify [--chain <id>] [--anchors <log>] [--public-key <pem>] [--json]`: 0 every chain verifies,
 * 3 one is broken, 1 it could not be checked.
 */
export function runAuditVerify(options: AuditVerifyOptions, io: ControlIo): Promise<number> {
  return runCommand(io, 'audit verify', () =>
    withStore(options.config, io, async (store, config) => {
      const logged = options.anchors === undefined ? [] : await anchorsFromLog(options.anchors, io);
      // A log may hold the lines of gateways on other stores (issue 22 B10): only this store's lines are its
      // witness; lines from before lines named their store count for the chains this store holds.
      const storeId = logged.length === 0 ? undefined : await store.getStoreId();
      const own = logged.filter((line) => line.storeId === storeId).map((line) => line.anchor);
      const unattributed = logged.filter((line) => line.storeId === undefined).map((line) => line.anchor);
      const others = new Set(logged.flatMap((line) => (line.storeId === undefined || line.storeId === storeId ? [] : [line.storeId])));
      const foreign = logged.length - own.length - unattributed.length;
      const result = await verifyAudit(store, {
        ...(options.chain === undefined ? {} : { chainId: options.chain }),
        verifier: () => checkpointVerifier(options, config),
        anchors: own,
        unattributedAnchors: unattributed,
      });
      if (foreign > 0) {
        io.stderr(`mcpgate audit verify: ${options.anchors ?? ''}: ignored ${foreign} anchor line(s) of other stores (${[...others].sort().join(', ')}); this store is ${storeId ?? '?'}`);
      }
      if (result.ignoredAnchors > 0) {
        io.stderr(`mcpgate audit verify: ${options.anchors ?? ''}: ignored ${result.ignoredAnchors} anchor line(s) that name no store, of chains this store does not hold`);
      }
      const journal = await journalPending(store, options.chain);
      if (options.chain !== undefined && result.chains.length === 0 && journal.pending.length === 0) throw new UsageError(`the store holds no audit chain "${options.chain}"`);
      if (options.json === true) printJson(io, { ...result, journalPending: Object.fromEntries(journal.pending) });
      else if (result.chains.length === 0) io.stdout('no audit records');
      else for (const chain of result.chains) io.stdout(describeChain(chain));
      reportPending(io, 'audit verify', journal);
      return result.ok ? 0 : EXIT_BROKEN;
    }),
  );
}

function timeOption(value: string, flag: string, now: Date): Date {
  const date = parseTimeBound(value, now);
  if (date === undefined) {
    throw new UsageError(`${flag} "${value}" is neither an ISO 8601 date (2026-08-01, or 2026-08-01T12:00:00Z with its offset) nor a duration (90s, 15m, 24h, 7d)`);
  }
  return date;
}

/**
 * `mcpgate audit export --since <when> [--until <when>] [--chain <id>] [record filters] --format jsonl`: one
 * canonical JSON record per line on stdout. Record filters (`--key`, `--trace`, …) select records inside chains, so
 * a filtered export has gaps: it is not a contiguous chain, and the summary on stderr names the filters.
 */
export function runAuditExport(options: AuditExportOptions, io: AuditIo): Promise<number> {
  return runCommand(io, 'audit export', async () => {
    const format = options.format ?? 'jsonl';
    if (format !== 'jsonl') throw new UsageError(`--format ${format} is not supported; the one export format is jsonl`);
    const now = io.now?.() ?? new Date();
    const since = timeOption(options.since, '--since', now);
    const until = options.until === undefined ? undefined : timeOption(options.until, '--until', now);
    if (until !== undefined && until.getTime() <= since.getTime()) throw new UsageError('--until must be later than --since');
    const records = recordFilter(options);
    const filter = { since, ...(until === undefined ? {} : { until }), ...(options.chain === undefined ? {} : { chainId: options.chain }), ...records.filter };
    await withStore(options.config, io, async (store) => {
      const summary = await exportAudit(store, filter, async (line) => {
        io.stdout(line);
        await io.drain?.();
      });
      for (const row of summary.malformed) {
        io.stderr(`mcpgate audit export: chain ${row.chainId} seq ${row.seq} cannot be read as a record (${row.detail}); exported as found`);
      }
      io.stderr(`exported ${summary.records} audit record(s)${records.labels.length === 0 ? '' : ` (filtered: ${records.labels.join(', ')})`}`);
      reportPending(io, 'audit export', await journalPending(store, options.chain));
    });
  });
}

function describePrune(chain: ChainPruneResult): string {
  const where = chain.checkpoint === undefined ? 'no checkpoint' : `checkpoint seq ${chain.checkpoint.seq}`;
  const problem = chain.problem === undefined ? '' : `; ${chain.conflict === true ? '' : 'NOT PRUNED: '}${chain.problem}`;
  return `chain ${chain.chainId}: pruned ${chain.pruned} record(s), ${where}${problem}`;
}

/**
 * `mcpgate audit prune --before <when> [--chain <id>] [--json]`: what `audit.retention` does in a running
 * gateway, once: 0 done, 3 a chain could not be pruned (broken, or its checkpoint untrusted), 1 error.
 */
export function runAuditPrune(options: AuditPruneOptions, io: ControlIo): Promise<number> {
  return runCommand(io, 'audit prune', async () => {
    const now = io.now?.() ?? new Date();
    const before = timeOption(options.before, '--before', now);
    if (before.getTime() > now.getTime()) throw new UsageError('--before must not be in the future');
    return withStore(options.config, io, async (store, config) => {
      const { signer } = await resolveReceiptKey(receiptKeyOptions(config.gateway));
      const previousKeys = options.previousKey === undefined ? [] : [await keyFile(options.previousKey, '--previous-key')];
      const result = await pruneAudit(store, { before, signer, previousKeys, ...(options.chain === undefined ? {} : { chainId: options.chain }) });
      if (options.json === true) printJson(io, result);
      else if (result.chains.length === 0) io.stdout('no audit records');
      else for (const chain of result.chains) io.stdout(describePrune(chain));
      return result.chains.some((chain) => chain.problem !== undefined && chain.conflict !== true) ? EXIT_BROKEN : 0;
    });
  });
}

/** Adds `audit verify|prune|export`; each sets `process.exitCode`. */
export function registerAuditCommand(program: Command, io: AuditIo, defaultConfig: string): void {
  const audit = program.command('audit').description('the tamper-evident audit log: verify its hash chains, prune old records, export records');
  audit
    .command('verify')
    .description('recompute every hash chain from its first record and report the first broken link (exit 0 ok, 3 broken, 1 error)')
    .option('--chain <id>', 'verify this chain only')
    .option('-c, --config <file>', 'configuration file', defaultConfig)
    .option('--json', 'machine-readable output')
    .option('--public-key <pem>', 'SPKI PEM file of the key checkpoints and anchors must be signed with (default: the gateway\'s receipt key)')
    .option('--anchors <log>', 'the gateway\'s log: check the chains against its "audit chain anchored" lines as well')
    .action(async (options: AuditVerifyOptions) => {
      process.exitCode = await runAuditVerify(options, io);
    });
  audit
    .command('prune')
    .description('delete records older than --before behind a signed checkpoint, after verifying them (exit 0 ok, 3 a chain not pruned, 1 error)')
    .requiredOption('--before <when>', 'ISO 8601 date or date-time with offset, or a duration back from now (90d)')
    .option('--chain <id>', 'prune this chain only')
    .option('--previous-key <pem>', 'SPKI PEM file of a receipt key rotated out: trust the checkpoints it signed and re-sign them as they move')
    .option('-c, --config <file>', 'configuration file', defaultConfig)
    .option('--json', 'machine-readable output')
    .action(async (options: AuditPruneOptions) => {
      process.exitCode = await runAuditPrune(options, io);
    });
  audit
    .command('export')
    .description(
      'write audit records as JSON Lines on stdout, one canonical record per line with its chain links; the record filters ' +
        '(--key … --kind) combine with AND and leave gaps: a filtered export is not a contiguous chain, so chain checks ' +
        '(receipt verify --audit) need an unfiltered one',
    )
    .requiredOption('--since <when>', 'ISO 8601 date or date-time with offset, or a duration back from now (24h, 7d)')
    .option('--until <when>', 'end (exclusive), same forms as --since')
    .option('--chain <id>', 'one chain only')
    .option('--key <id>', 'records of this API key only')
    .option('--principal <id>', 'records of this user or agent only (its id)')
    .option('--team <id>', 'records of this team only')
    .option('--org <id>', 'records of this organization only')
    .option('--session <id>', 'records of this session only')
    .option('--server <name>', 'records of this upstream server only')
    .option('--tool <name>', 'records of this tool only (the upstream\'s own name)')
    .option('--trace <trace id>', 'records of this W3C trace only (32 lowercase hex)')
    .option('--decision <decision>', `records with this decision only (${AUDIT_DECISIONS.join(', ')})`)
    .option('--kind <kind>', `records of this kind only (${AUDIT_KINDS.join(', ')})`)
    .option('--format <format>', 'output format (jsonl only)', 'jsonl')
    .option('-c, --config <file>', 'configuration file', defaultConfig)
    .action(async (options: AuditExportOptions) => {
      process.exitCode = await runAuditExport(options, io);
    });
}
