import { hostname, userInfo } from 'node:os';
import { resolve } from 'node:path';
import type { CatalogConfig } from '../config/governance-schema.js';
import { GatewayError } from '../errors/gateway-error.js';
import type { Store } from '../store/store.js';
import { catalogSnapshotHash, catalogText, emptyCatalog, invalid, parseCatalog, readCatalog, writeCatalog, type CatalogFile } from './catalog-file.js';

/** Approvals as read from their source. */
export interface LoadedCatalog {
  readonly catalog: CatalogFile;
  readonly snapshotHash: string;
  /** The store's version number (1, 2, …); absent for a file, which has none. */
  readonly version?: number;
}

/** No approvals at all: what a gateway in `observe` mode starts with before the first snapshot. */
export const NO_APPROVALS: LoadedCatalog = { catalog: emptyCatalog(), snapshotHash: catalogSnapshotHash(emptyCatalog()) };

/**
 * Where the approvals live (`gateway.catalog.source`): the approvals file, kept in version control and shipped to
 * every replica, or the control-plane store, which every replica reads (decision 0012).
 */
export interface CatalogSource {
  readonly kind: CatalogConfig['source'];
  /** For messages and status: the file's absolute path, or "the control-plane store". */
  readonly where: string;
  /**
   * The approvals now; `undefined` when there are none yet.
   * @throws GatewayError MCPGATE_ERR_CATALOG_INVALID for approvals that cannot be used (unreadable, a wrong hash).
   */
  read(): Promise<LoadedCatalog | undefined>;
  /** The store's newest version number, 0 when it holds none; a file has none (`undefined`). */
  version(): Promise<number | undefined>;
  /**
   * Stores `catalog` as the approvals that follow version `basedOn`. The store refuses, with STORE_CONFLICT, when
   * another writer stored a version after it meanwhile; a file is replaced whole, last writer wins.
   */
  write(catalog: CatalogFile, basedOn: number | undefined): Promise<LoadedCatalog>;
}

class FileCatalogSource implements CatalogSource {
  readonly kind = 'file';
  readonly where: string;

  constructor(file: string) {
    this.where = file;
  }

  async read(): Promise<LoadedCatalog | undefined> {
    const catalog = await readCatalog(this.where);
    return catalog === undefined ? undefined : { catalog, snapshotHash: catalogSnapshotHash(catalog) };
  }

  version(): Promise<number | undefined> {
    return Promise.resolve(undefined);
  }

  async write(catalog: CatalogFile): Promise<LoadedCatalog> {
    await writeCatalog(this.where, catalog);
    return { catalog, snapshotHash: catalogSnapshotHash(catalog) };
  }
}

class StoreCatalogSource implements CatalogSource {
  readonly kind = 'store';
  readonly where = 'the control-plane store';
  readonly #store: Store;
  readonly #actor: string;

  constructor(store: Store, actor: string) {
    this.#store = store;
    this.#actor = actor;
  }

  async read(): Promise<LoadedCatalog | undefined> {
    const record = await this.#store.getCatalogApprovals();
    if (record === undefined) return undefined;
    const origin = { storeVersion: record.version };
    // Every entry's hash is recomputed here, as for a file: a row edited behind the store's back is refused whole.
    const catalog = parseCatalog(record.document, origin);
    const snapshotHash = catalogSnapshotHash(catalog);
    if (snapshotHash !== record.snapshotHash) {
      throw invalid(origin, [`its snapshot hash ${record.snapshotHash} is not the document's (${snapshotHash}): the row was changed behind the gateway's back`]);
    }
    return { catalog, snapshotHash, version: record.version };
  }

  version(): Promise<number> {
    return this.#store.getCatalogApprovalsVersion();
  }

  async write(catalog: CatalogFile, basedOn: number | undefined): Promise<LoadedCatalog> {
    const snapshotHash = catalogSnapshotHash(catalog);
    const record = await this.#store.putCatalogApprovals({ version: (basedOn ?? 0) + 1, document: catalogText(catalog), snapshotHash, actor: this.#actor });
    return { catalog, snapshotHash, version: record.version };
  }
}

/**
 * `user@host` of this process (or `as@host`), as the store's history names a writer; self-declared, like a
 * commit's author.
 */
export function localActor(as?: string): string {
  let user = as ?? 'unknown';
  if (as === undefined) {
    try {
      user = userInfo().username;
    } catch {
      // No passwd entry (a container's arbitrary uid): the host still says where the change came from.
    }
  }
  return `${user}@${hostname()}`.slice(0, 200);
}

export interface CatalogSourceOptions {
  /** Resolves a relative `file`; default the working directory. */
  readonly cwd?: string;
  /** Required for `source: store`. */
  readonly store?: Store;
  /** Who writes, in the store's history; default {@link localActor}. */
  readonly actor?: string;
}

/** Approvals in `file` (absolute). */
export function fileCatalogSource(file: string): CatalogSource {
  return new FileCatalogSource(file);
}

/** Approvals in `store`, written as `actor` (default {@link localActor}). */
export function storeCatalogSource(store: Store, actor: string = localActor()): CatalogSource {
  return new StoreCatalogSource(store, actor);
}

/** The configured source of approvals. @throws GatewayError MCPGATE_ERR_CONFIG_INVALID for `store` without a store. */
export function catalogSource(config: CatalogConfig, options: CatalogSourceOptions = {}): CatalogSource {
  if (config.source === 'file') return fileCatalogSource(resolve(options.cwd ?? process.cwd(), config.file));
  if (options.store === undefined) {
    throw new GatewayError('MCPGATE_ERR_CONFIG_INVALID', 'gateway.catalog.source "store" needs the control-plane store, which auth.mode "none" does not open');
  }
  return storeCatalogSource(options.store, options.actor);
}

/**
 * The approvals a gateway starts with, for `gateway.catalog`. `off` reads nothing. Otherwise they must be valid,
 * or the start is refused (fail closed, issue 7 "Bad input"). None at all is an empty catalog in `observe` mode and
 * an error in `pinned` mode, where it would hide every tool: far more likely a wrong path or store than an intent.
 *
 * @throws GatewayError MCPGATE_ERR_CATALOG_INVALID
 */
export async function loadGatewayCatalog(config: CatalogConfig, source: CatalogSource): Promise<LoadedCatalog> {
  if (config.mode === 'off') return NO_APPROVALS;
  const loaded = await source.read();
  if (loaded !== undefined) return loaded;
  if (config.mode === 'pinned') {
    const hint = 'with catalog.mode "pinned" every tool must be approved: run `mcpgate catalog snapshot` first';
    if (source.kind === 'file') throw invalid(source.where, [`does not exist; ${hint}`]);
    throw new GatewayError('MCPGATE_ERR_CATALOG_INVALID', `the control-plane store holds no approvals; ${hint}`, { data: { storeVersion: 0 } });
  }
  return NO_APPROVALS;
}

/** How often {@link updateCatalog} rereads and retries when another writer got in first. */
const UPDATE_ATTEMPTS = 5;

/**
 * Whether the approvals may differ from `loaded`: the store compares version numbers, one indexed read; a file
 * cannot tell, so always.
 */
export async function mayHaveChanged(source: CatalogSource, loaded: LoadedCatalog | undefined): Promise<boolean> {
  const version = await source.version();
  return version === undefined || version !== (loaded?.version ?? 0);
}

/**
 * Read, change, write: `change` gets the approvals in force (empty when there are none) and returns the next ones;
 * approvals equal to those in force are not written. When another writer stored a version meanwhile, it runs again
 * on that one, so two operators approving different tools at once both keep their approval.
 *
 * Approvals in force that cannot be used (a hand edit, a wrong hash) are refused, so nothing is built on them;
 * `replacesInvalid` is for a change that does not read them (an import of a reviewed file), and lets it replace them.
 */
export async function updateCatalog<T>(
  source: CatalogSource,
  change: (catalog: CatalogFile) => { readonly catalog: CatalogFile; readonly result: T },
  options: { readonly replacesInvalid?: boolean } = {},
): Promise<{ readonly result: T; readonly written: LoadedCatalog | undefined }> {
  for (let attempt = 1; ; attempt += 1) {
    let before: LoadedCatalog | undefined;
    let basedOn: number | undefined;
    try {
      before = await source.read();
      basedOn = before?.version;
    } catch (error) {
      if (options.replacesInvalid !== true || !GatewayError.is(error) || error.code !== 'MCPGATE_ERR_CATALOG_INVALID') throw error;
      // The version that cannot be used is the one the write replaces.
      basedOn = await source.version();
    }
    const { catalog, result } = change(before?.catalog ?? emptyCatalog());
    if (before !== undefined && catalogSnapshotHash(catalog) === before.snapshotHash) return { result, written: undefined };
    try {
      return { result, written: await source.write(catalog, basedOn) };
    } catch (error) {
      if (!GatewayError.is(error) || error.code !== 'MCPGATE_ERR_STORE_CONFLICT' || attempt >= UPDATE_ATTEMPTS) throw error;
    }
  }
}
