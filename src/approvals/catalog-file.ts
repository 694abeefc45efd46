import { randomBytes } from 'node:crypto';
import { mkdir, open, readFile, rename, stat, unlink } from 'node:fs/promises';
import { dirname, resolve } from 'node:path';
import { z } from 'zod';
import { errorMessage } from '../errors/error-message.js';
import { GatewayError } from '../errors/gateway-error.js';
import type { JsonObject } from '../jsonrpc/message.js';
import { canonicalJson } from '../util/canonical-json.js';
import { sha256Hex, toolDefinition, toolDefinitionHash, type ToolDefinition } from './definition-hash.js';

/** One approved tool: its definition as the upstream sent it when approved, and that definition's hash. */
export interface ApprovedTool {
  readonly hash: string;
  readonly definition: ToolDefinition & { readonly name: string };
  readonly approvedAt: string;
}

export interface ApprovedServer {
  readonly tools: Readonly<Record<string, ApprovedTool>>;
}

/** The approvals file (`gateway.catalog.file`), keyed by configured server name, then upstream tool name. */
export interface CatalogFile {
  readonly version: 1;
  readonly servers: Readonly<Record<string, ApprovedServer>>;
}

/** Where an approvals document came from: the approvals file's path, or a version in the control-plane store. */
export type CatalogOrigin = string | { readonly storeVersion: number };

/** Far above any real catalog; stops a wrong path (a log, a disk image) from being read into memory. */
const MAX_FILE_BYTES = 64 * 1024 * 1024;
/** Issues listed in one error message; the rest are counted. */
const MAX_LISTED_ISSUES = 20;

const definitionSchema = z.strictObject({
  name: z.string().min(1),
  title: z.unknown().optional(),
  description: z.unknown().optional(),
  inputSchema: z.unknown().optional(),
  outputSchema: z.unknown().optional(),
  annotations: z.unknown().optional(),
});

const approvedToolSchema = z.strictObject({
  hash: z.string().regex(/^[0-9a-f]{64}$/, 'must be 64 lower-case hex digits (SHA-256)'),
  definition: definitionSchema,
  approvedAt: z.iso.datetime({ offset: true }),
});

const catalogSchema = z.strictObject({
  version: z.literal(1),
  servers: z.record(z.string().min(1), z.strictObject({ tools: z.record(z.string().min(1), approvedToolSchema) })),
});

export function emptyCatalog(): CatalogFile {
  return { version: 1, servers: {} };
}

/** The entry recording `tool` (the upstream's original object) as approved at `now`. */
export function approvedEntry(tool: JsonObject, now: Date): ApprovedTool {
  const definition = toolDefinition(tool);
  if (typeof definition.name !== 'string' || definition.name === '') throw new TypeError('a tool without a name cannot be approved');
  return { hash: toolDefinitionHash(tool), definition: { ...definition, name: definition.name }, approvedAt: now.toISOString() };
}

/**
 * SHA-256 hex of the canonical JSON of the whole approvals document: names the exact set of approvals a
 * session ran under (session receipts), whatever the file's formatting.
 */
export function catalogSnapshotHash(catalog: CatalogFile): string {
  return sha256Hex(canonicalJson(catalog));
}

/**
 * Parses and checks an approvals document. Every entry's hash is recomputed from its stored definition: the
 * hash is what the gateway compares live tools against, so an entry whose hash and definition disagree (a
 * hand edit, a bad merge) would make the approval mean something nobody reviewed. Such a file is refused whole.
 *
 * @throws GatewayError MCPGATE_ERR_CATALOG_INVALID naming where the document came from, and the server and tool of
 * each bad entry.
 */
export function parseCatalog(text: string, origin: CatalogOrigin): CatalogFile {
  let raw: unknown;
  try {
    raw = JSON.parse(text.startsWith('\uFEFF') ? text.slice(1) : text);
  } catch (error) {
    throw invalid(origin, [`not valid JSON: ${(error as Error).message}`]);
  }
  const parsed = catalogSchema.safeParse(raw);
  if (!parsed.success) {
    throw invalid(
      origin,
      parsed.error.issues.map((issue) => `${issue.path.map(String).join('.') || '(document)'}: ${issue.message}`),
      locate(parsed.error.issues[0]?.path),
    );
  }
  const problems: string[] = [];
  let first: { server: string; tool: string } | undefined;
  for (const [server, entry] of Object.entries(parsed.data.servers)) {
    for (const [tool, approved] of Object.entries(entry.tools)) {
      const at = `servers.${server}.tools.${tool}`;
      let problem: string | undefined;
      if (approved.definition.name !== tool) {
        problem = `${at}: definition.name is ${JSON.stringify(approved.definition.name)}, not the entry's name`;
      } else if (toolDefinitionHash(approved.definition) !== approved.hash) {
        problem = `${at}: hash does not match the stored definition of tool "${tool}" of server "${server}" (edited by hand?); ${typeof origin === 'string' ? 'restore the file, or delete this entry and' : 'import the reviewed approvals (`mcpgate catalog import <file>`), or'} run \`mcpgate catalog approve ${server} ${tool}\``;
      }
      if (problem === undefined) continue;
      problems.push(problem);
      first ??= { server, tool };
    }
  }
  if (problems.length > 0) throw invalid(origin, problems, first);
  return parsed.data as CatalogFile;
}

/**
 * Reads the approvals file; `undefined` when it does not exist.
 * @throws GatewayError MCPGATE_ERR_CATALOG_INVALID when it cannot be read or is invalid ({@link parseCatalog}).
 */
export async function readCatalog(file: string): Promise<CatalogFile | undefined> {
  let text: string;
  try {
    const info = await stat(file);
    if (!info.isFile()) throw invalid(file, ['not a regular file']);
    if (info.size > MAX_FILE_BYTES) throw invalid(file, [`larger than ${MAX_FILE_BYTES} bytes`]);
    text = await readFile(file, 'utf8');
  } catch (error) {
    if (GatewayError.is(error)) throw error;
    if ((error as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
    throw invalid(file, [`cannot be read: ${(error as Error).message}`]);
  }
  return parseCatalog(text, file);
}

/**
 * Writes the approvals file atomically: a temporary file beside it, flushed, then renamed over it, so that a
 * crash or a concurrent gateway start never sees half a file. Keys are sorted, so that files kept in version
 * control diff cleanly.
 */
export async function writeCatalog(file: string, catalog: CatalogFile): Promise<void> {
  const text = catalogText(catalog);
  try {
    await mkdir(dirname(resolve(file)), { recursive: true });
    const temporary = `${file}.${process.pid}.${randomBytes(6).toString('hex')}.tmp`;
    const handle = await open(temporary, 'wx', 0o644);
    try {
      try {
        // The umask may have narrowed the mode given to open(); approvals are not secret and the gateway may run as another user.
        await handle.chmod(0o644);
        await handle.writeFile(text, 'utf8');
        await handle.sync();
      } finally {
        await handle.close();
      }
      await rename(temporary, file);
    } catch (error) {
      await unlink(temporary).catch(() => undefined);
      throw error;
    }
  } catch (error) {
    // A read-only mount or a full disk is the operator's to fix: one line naming the file, not a stack trace.
    throw new GatewayError('MCPGATE_ERR_CATALOG_WRITE', `approvals file ${file} cannot be written: ${errorMessage(error)}`, { cause: error, data: { file } });
  }
}

/**
 * The approvals as they are written, to a file or to the store: keys sorted and indented, so that files kept in
 * version control diff cleanly and `mcpgate catalog export` gives back what was imported.
 */
export function catalogText(catalog: CatalogFile): string {
  return `${JSON.stringify(sortKeys(catalog), null, 2)}\n`;
}

function sortKeys(value: unknown): unknown {
  if (Array.isArray(value)) return value.map(sortKeys);
  if (value === null || typeof value !== 'object') return value;
  const sorted: Record<string, unknown> = {};
  for (const key of Object.keys(value).sort()) {
    // defineProperty, not assignment: a "__proto__" key from an upstream schema must stay a plain key.
    Object.defineProperty(sorted, key, { value: sortKeys((value as Record<string, unknown>)[key]), enumerable: true, writable: true, configurable: true });
  }
  return sorted;
}

function locate(path: readonly PropertyKey[] | undefined): { server: string; tool: string | undefined } | undefined {
  if (path?.[0] !== 'servers' || typeof path[1] !== 'string') return undefined;
  return { server: path[1], tool: path[2] === 'tools' && typeof path[3] === 'string' ? path[3] : undefined };
}

/** The error for an approvals document that cannot be used, naming where it came from. */
export function invalid(origin: CatalogOrigin, problems: readonly string[], where?: { server: string; tool: string | undefined }): GatewayError {
  const listed = problems.slice(0, MAX_LISTED_ISSUES).map((problem) => `  ${problem}`);
  if (problems.length > MAX_LISTED_ISSUES) listed.push(`  … and ${problems.length - MAX_LISTED_ISSUES} more`);
  const [title, source] =
    typeof origin === 'string' ? [`approvals file ${origin}`, { file: origin }] : [`approvals version ${origin.storeVersion} in the control-plane store`, { storeVersion: origin.storeVersion }];
  return new GatewayError('MCPGATE_ERR_CATALOG_INVALID', [`${title} is invalid:`, ...listed].join('\n'), {
    data: { ...source, ...(where === undefined ? {} : { server: where.server }), ...(where?.tool === undefined ? {} : { tool: where.tool }) },
  });
}
