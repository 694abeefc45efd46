import { z } from 'zod';

/**
 * Config fields of issue 4 §1, §2 and §4 (execution identity, per-identity HTTP pools, measured and isolated
 * stdio children), kept beside schema.ts so that the shared schema file only spreads them in.
 */

/** Same as schema.ts's `integer`: `${VAR}` interpolation yields strings, so digit strings convert. */
function integer(schema: z.ZodNumber) {
  return z.preprocess((value) => (typeof value === 'string' && /^[0-9]{1,15}$/.test(value) ? Number(value) : value), schema);
}

const ENV_NAME = /^[A-Za-z_][A-Za-z0-9_]*$/;
const envName = z.string().regex(ENV_NAME, 'environment variable names are letters, digits and _ (not starting with a digit)');

/**
 * The child's environment (DESIGN.md invariant 8): PATH and HOME, then the gateway's variables named in
 * `allow` (those that are set), then `set`. Nothing else of the gateway's environment reaches the child.
 */
export const stdioEnvSchema = z.strictObject({
  /** Names of the gateway's own variables passed through when set (e.g. LANG, TZ). */
  allow: z.array(envName).default([]),
  /** Variables given to the child; they win over PATH, HOME and allowed ones. */
  set: z.record(envName, z.string()).default({}),
});

/** Fields spread into the stdio server schema. */
export const stdioIsolationFields = {
  env: stdioEnvSchema.prefault({}),
  /** HOME given to the child; default the gateway's HOME. */
  home: z.string().min(1).optional(),
  /** `sha256:<64 hex>` of the executable (or of `measure`), checked before every spawn (issue 4 §4). */
  digest: z
    .string()
    .regex(/^sha256:[0-9a-fA-F]{64}$/, 'digest is "sha256:" followed by 64 hex digits (e.g. the output of sha256sum)')
    .optional(),
  /** The file hashed instead of the executable, for interpreted servers (`node server.js` measures server.js). */
  measure: z.string().min(1).optional(),
  /** Whether a server without `digest` may be spawned; default true in `gateway.mode: dev`, false in production. */
  allowUnmeasured: z.boolean().optional(),
};

/**
 * Limits of the one undici Pool per execution identity (issue 4 §2). Entries that share an identity share the
 * pool, which takes the limits of the first of them in config order.
 */
export const httpPoolSchema = z.strictObject({
  /**
   * Cap on connections to the origin, long-lived GET/SSE streams included (each holds one while open).
   * Unset by default: every client session's upstream session keeps a GET stream, so any fixed cap would
   * queue calls behind idle streams once that many sessions exist; concurrent calls are bounded by the
   * per-server bulkhead (`limits.maxConcurrent`) instead.
   */
  connections: integer(z.number().int().positive()).optional(),
  keepAliveTimeoutMs: integer(z.number().int().positive()).default(30_000),
  /** TCP + TLS connect time; falls back to the server's connectTimeoutMs. */
  connectTimeoutMs: integer(z.number().int().positive()).optional(),
  /**
   * Time until response headers arrive. Default 30000, raised to the server's call timeout when that is longer:
   * a server answering a POST with plain JSON sends its headers only when the tool has finished.
   */
  headersTimeoutMs: integer(z.number().int().nonnegative()).optional(),
  /** Idle time between body chunks; 0 = none, since SSE streams may idle legitimately. */
  bodyTimeoutMs: integer(z.number().int().nonnegative()).default(0),
});

/** Fields spread into the HTTP server schema. */
export const httpIsolationFields = {
  http: httpPoolSchema.prefault({}),
  /** The SPIFFE id the server is expected to present; part of its execution identity (issue 4 §1). */
  spiffeId: z.string().regex(/^spiffe:\/\/[^/\s]+(\/\S*)?$/, 'a SPIFFE id looks like spiffe://trust-domain/path').optional(),
};

export type StdioEnvConfig = z.infer<typeof stdioEnvSchema>;
export type HttpPoolConfig = z.infer<typeof httpPoolSchema>;

/** The fields of a stdio server entry {@link checkStdioIsolation} reads. */
interface StdioIsolationFields {
  readonly digest?: string | undefined;
  readonly measure?: string | undefined;
}

/** Cross-field rules of a stdio entry: `measure` names what `digest` is the digest of, so it needs one. */
export function checkStdioIsolation(name: string, server: StdioIsolationFields, ctx: z.RefinementCtx): void {
  if (server.measure !== undefined && server.digest === undefined) {
    ctx.addIssue({
      code: 'custom',
      path: ['servers', name, 'measure'],
      message: `server "${name}" sets measure without digest; add digest: "sha256:<hex of the measured file>"`,
    });
  }
}

/**
 * Whether a stdio server without a digest may be spawned: its own `allowUnmeasured`, else true only in dev mode
 * (issue 4 §4: production fails closed).
 */
export function allowsUnmeasured(server: { readonly allowUnmeasured?: boolean | undefined }, mode: 'dev' | 'production'): boolean {
  return server.allowUnmeasured ?? mode === 'dev';
}
