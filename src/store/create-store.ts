import { GatewayError } from '../errors/gateway-error.js';
import { PostgresStore } from './postgres/postgres-store.js';
import { DEFAULT_SQLITE_PATH, SqliteStore } from './sqlite/sqlite-store.js';
import type { Store } from './store.js';

export interface CreateStoreOptions {
  /** Apply pending migrations before returning (default true: DESIGN.md §4, "applied at start"). */
  readonly migrate?: boolean;
  /** The SQLite file used when no URL is given. */
  readonly defaultSqlitePath?: string;
  readonly busyTimeoutMs?: number;
  readonly poolMax?: number;
}

/**
 * Whether `serve` opens the control-plane store: with API keys always (the embedded SQLite one by default), and
 * with `auth.mode: none` only when `gateway.store` names one. `mcpgate check` asks the same to know which keys
 * `serve` will resolve.
 */
export function opensControlStore(gateway: { readonly auth: { readonly mode: string }; readonly store?: string | undefined }): boolean {
  return gateway.auth.mode !== 'none' || gateway.store !== undefined;
}

/** Where a store URL points. `sqlite:rel/path`, `sqlite:///abs/path`, `sqlite::memory:` or a bare path. */
export function resolveStoreUrl(url: string | undefined, defaultSqlitePath = DEFAULT_SQLITE_PATH): { kind: 'sqlite'; path: string } | { kind: 'postgres'; url: string } {
  if (url === undefined || url === '') return { kind: 'sqlite', path: defaultSqlitePath };
  if (/^postgres(ql)?:\/\//.test(url)) return { kind: 'postgres', url };
  if (url.startsWith('sqlite:')) {
    const rest = url.slice('sqlite:'.length);
    const path = rest.startsWith('//') ? rest.slice(2) : rest;
    if (path === '') throw new GatewayError('MCPGATE_ERR_CONFIG_INVALID', 'store: "sqlite:" needs a file path');
    return { kind: 'sqlite', path };
  }
  if (/^[a-z][a-z0-9+.-]*:\/\//i.test(url)) {
    throw new GatewayError('MCPGATE_ERR_CONFIG_INVALID', 'store: only sqlite: paths and postgres:// URLs are supported');
  }
  return { kind: 'sqlite', path: url };
}

/** Builds the configured store (SQLite when no URL is given) and, unless told not to, migrates it. */
export async function createStore(url: string | undefined, options: CreateStoreOptions = {}): Promise<Store> {
  const target = resolveStoreUrl(url, options.defaultSqlitePath);
  const store =
    target.kind === 'postgres'
      ? new PostgresStore({ connectionString: target.url, ...(options.poolMax === undefined ? {} : { max: options.poolMax }) })
      : new SqliteStore({ path: target.path, ...(options.busyTimeoutMs === undefined ? {} : { busyTimeoutMs: options.busyTimeoutMs }) });
  if (options.migrate === false) return store;
  try {
    await store.migrate();
  } catch (error) {
    await store.close().catch(() => undefined);
    throw error;
  }
  return store;
}
