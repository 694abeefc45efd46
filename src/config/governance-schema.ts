import { z } from 'zod';
import { secretValueSchema } from './credentials-schema.js';

/**
 * Governance settings (issue 7): the audit log, approved tool definitions, Cedar policies, response guards and
 * session receipts. Shapes and bounds only; behaviour lives in `src/audit`, `src/approvals`, `src/cedar`,
 * `src/guards` and `src/receipts`.
 */

function integer(schema: z.ZodNumber) {
  return z.preprocess((value) => (typeof value === 'string' && /^[0-9]{1,15}$/.test(value) ? Number(value) : value), schema);
}

const DURATION_UNIT_MS = { s: 1000, m: 60_000, h: 3_600_000, d: 86_400_000 } as const;

/** `90d`, `12h`, `30m`, `45s` to milliseconds, from 1s to `maxDays` days. */
function duration(maxDays: number) {
  return z
    .string()
    .regex(/^[1-9][0-9]{0,5}[smhd]$/, 'must be a whole number and a unit: 45s, 30m, 12h or 90d')
    .transform((text) => Number(text.slice(0, -1)) * DURATION_UNIT_MS[text.slice(-1) as keyof typeof DURATION_UNIT_MS])
    .refine((ms) => ms <= maxDays * DURATION_UNIT_MS.d, `must be at most ${maxDays}d`);
}

/**
 * Retention: audit records older than `maxAge` are pruned behind a signed checkpoint (src/audit/retention.ts);
 * session receipts older than `maxAge` are deleted (src/receipts/receipt-retention.ts). Absent: kept for ever.
 */
const retentionSchema = z.strictObject({
  /** How long a record or receipt is kept. */
  maxAge: duration(3650),
  /** How often the gateway prunes; the first run is at start. At most 7d: a timer cannot wait 25 days or more. */
  every: duration(7).prefault('1h'),
});

/** Sensitivity labels, lowest first: a session's high-water mark only rises along this order. */
export const SENSITIVITY_LABELS = ['public', 'internal', 'confidential', 'restricted'] as const;
export type SensitivityLabel = (typeof SENSITIVITY_LABELS)[number];
export const sensitivitySchema = z.enum(SENSITIVITY_LABELS);

/** The digests a call record's `resultHash` may use; `src/audit/result-hash.ts` computes them. */
export const RESULT_HASH_ALGORITHMS = ['blake3', 'sha256'] as const;
export type ResultHashAlgorithm = (typeof RESULT_HASH_ALGORITHMS)[number];

export const auditSchema = z.strictObject({
  /** Off only for benchmarks and tests; production gateways record every decision. */
  enabled: z.boolean().default(true),
  /**
   * `sync`: a call's response is sent only after its record is durable (group commit). `queue`: records become
   * durable within `flushMs` through a bounded queue that blocks callers when full and never drops one.
   */
  durability: z.enum(['sync', 'queue']).default('sync'),
  /**
   * Extra time records wait to be written together. 0 (default) writes at once when the writer is idle; records
   * arriving while a batch is being written form the next batch, so concurrency batches without adding latency.
   */
  flushMs: integer(z.number().int().min(0).max(10_000)).default(0),
  /**
   * SQLite only: how often records made durable in the audit journal are moved into the database table, by the
   * writer thread in one transaction (docs/decisions/0005). Other processes reading the file (`mcpgate audit
   * verify|export`) see records up to this late; this gateway's own readers flush first. Each move wakes the writer
   * thread and rewrites the table's last pages, so a longer interval costs less CPU per call when calls are few
   * (decision 0005, fourth revision). Durability does not depend on it: a record is durable once journaled.
   */
  ingestMs: integer(z.number().int().min(1).max(60_000)).default(1000),
  /** Queue mode: records held before `append` waits for room. */
  maxQueue: integer(z.number().int().min(1).max(1_000_000)).default(10_000),
  /**
   * Sync mode: longest a call waits for its record to become durable (the store down or stuck). Past it the call
   * is answered MCPGATE_ERR_AUDIT_UNAVAILABLE instead of its result, and the record is kept and written once the
   * store takes it again.
   */
  maxWaitMs: integer(z.number().int().min(1).max(600_000)).default(5000),
  /** Store the (redacted) arguments themselves, not only their hash. */
  captureArguments: z.boolean().default(false),
  /**
   * The digest of a call's result in its record (`src/audit/result-hash.ts`, decision 0031): `blake3` writes
   * `blake3:<hex>` (what `b3sum` prints), `sha256` writes `<hex>` (what `sha256sum` prints; FIPS-approved).
   */
  resultHash: z.enum(RESULT_HASH_ALGORITHMS).default('blake3'),
  /** This instance's chain id; default a fresh id per process start (each instance writes its own chain). */
  chainId: z.string().regex(/^[A-Za-z0-9_.:-]{1,128}$/).optional(),
  retention: retentionSchema.optional(),
  /**
   * How often the chain head is signed (src/audit/anchor-job.ts), stored and logged, so a rewritten or truncated
   * chain no longer verifies; `off` to stop. Unset: every 5m whenever the gateway has its signing key (receipts
   * or retention on).
   */
  anchorEvery: z.union([z.literal('off'), duration(7)]).optional(),
});

export const catalogSchema = z.strictObject({
  /**
   * `off`: definitions are not checked. `observe`: drift is recorded, nothing is hidden. `pinned`: a tool whose
   * definition differs from its approved hash, or that was never approved, is hidden and refused.
   */
  mode: z.enum(['off', 'observe', 'pinned']).default('off'),
  /**
   * Where approvals live. `file`: the approvals file, kept in version control and shipped to every replica.
   * `store`: the control-plane store, which every replica reads (decision 0012).
   */
  source: z.enum(['file', 'store']).default('file'),
  /** The approvals file written by `mcpgate catalog snapshot|approve` (`source: file`); relative to the working directory. */
  file: z.string().min(1).default('./mcpgate.catalog.json'),
  /** How often a gateway looks for new approvals in the store (`source: store`): one indexed read. */
  pollEvery: duration(1).prefault('2s'),
});

export const policySetSchema = z.strictObject({
  /** Names the set in decisions, logs and `mcpgate explain`. */
  id: z.string().regex(/^[A-Za-z0-9_.-]{1,64}$/),
  /** Cedar policy files, loaded together as one set and reloaded atomically when any changes. */
  files: z.array(z.string().min(1)).min(1),
  /** `advisory`: a deny is recorded as would-have-denied and the call proceeds. */
  mode: z.enum(['enforce', 'advisory']).default('enforce'),
});

export const receiptsSchema = z.strictObject({
  enabled: z.boolean().default(true),
  /** Ed25519 private key (PKCS#8 PEM), inline or `{ file }`; unset: generated on first start and kept beside the store. */
  signingKey: secretValueSchema.optional(),
  /**
   * Receipts older than `maxAge` are deleted from the store (`GET …/receipt` then answers 404); a client's saved
   * copy still verifies. Absent: kept for ever.
   */
  retention: retentionSchema.optional(),
});

/** Gateway-level governance keys, spread into the gateway schema. */
export const governanceGatewayFields = {
  audit: auditSchema.prefault({}),
  catalog: catalogSchema.prefault({}),
  policies: z.array(policySetSchema).default([]),
  receipts: receiptsSchema.prefault({}),
};

export const guardsSchema = z.strictObject({
  /** Largest result accepted from this server; larger is an error unless `truncate` is set. Default 2 MiB. */
  maxResultBytes: integer(z.number().int().positive().max(256 * 1024 * 1024)).default(2 * 1024 * 1024),
  /** Cut text content to fit instead of failing, marking the result as truncated. */
  truncate: z.boolean().default(false),
  /** What a credential-looking value in a result does: nothing, replaced, or the whole result refused. */
  secretScan: z.enum(['off', 'redact', 'block']).default('redact'),
});

/** Per-server governance keys, spread into every server schema. */
export const governanceServerFields = {
  guards: guardsSchema.prefault({}),
  /** The label of data this server returns; reading it raises the session's sensitivity to at least this. */
  sensitivity: sensitivitySchema.default('public'),
  /** Free attributes given to Cedar as the resource's attributes (strings only), e.g. `{ zone: external }`. */
  attributes: z.record(z.string().regex(/^[A-Za-z_][A-Za-z0-9_]{0,63}$/), z.string()).default({}),
};

export type AuditConfig = z.infer<typeof auditSchema>;
export type CatalogConfig = z.infer<typeof catalogSchema>;
export type PolicySetConfig = z.infer<typeof policySetSchema>;
export type ReceiptsConfig = z.infer<typeof receiptsSchema>;
export type GuardsConfig = z.infer<typeof guardsSchema>;
